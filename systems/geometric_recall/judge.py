"""Geometric recall's own verdicts, built on ``compare.model_selection``: is d_min(N) a log or a power law?

The paper reports that the smallest dimension with learned embeddings fits a + b log2 N and that of
frozen random embeddings a power law in N; these are the forms each model is judged against.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from recallkit.compare.model_selection import points_with_model, select_d_min

# paper-reported: learned embeddings need a + b log2 N, frozen random subject embeddings a power of N
PREDICTED_FORMS = {"learned": "log", "frozen-subjects": "power"}


def d_min_report_dict(result: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """The input of ``reports.figures.dmin_plot``: ``{"learned": {"points", "selection"},
    "frozen": {"points", "selection"}}`` from an ``runners.run_d_min_experiment`` result
    (model "frozen-subjects" is shown as "frozen"), each selection with its verdict."""
    selections = select_d_min(result, **kwargs)
    out: dict[str, Any] = {}
    for model, selection in selections.items():
        key = "frozen" if model == "frozen-subjects" else model
        out[key] = {"points": [p for p in result["points"] if p.get("model", "model") == model], "selection": selection}
    return out



def select_d_min_experiment(points: Iterable[Mapping[str, Any]], experiment: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`d_min_report_dict` for the boundary points of a min-size experiment (search layer output),
    with the paper-reported forms (learned: log, frozen-subjects: power)."""
    return d_min_report_dict({"points": points_with_model(points, experiment), "predicted": PREDICTED_FORMS}, **kwargs)


def judge_search(entry: dict, experiment: Any, sweep: Any) -> None:
    """The registry's search-judge hook: a min-size search over d is judged log against power."""
    if experiment.kind == "min_size":
        entry["dmin"] = select_d_min_experiment(sweep.points, experiment)

"""Token retrieval under random non-orthogonal embeddings (Vural, Bietti, Soltanolkotabi, Wu, ICLR 2026).

See README.md in this folder for the model, what the paper states and what is derived here. This module is the
system's plug-in (its hooks, recallkit.hookspecs): registration only, nothing heavy; the judge (torch) is imported
when a hook that needs it is called.
"""
from pathlib import Path
from typing import Any, Callable, Mapping

from recallkit.registry import (PageKind, ReportOption, ReportStep, SystemInfo, Task, hookimpl, load_object,
                                plan_systems)

NAME = "token_retrieval"
JUDGE = f"{__name__}.judge"


@hookimpl
def recallkit_system() -> SystemInfo:
    return SystemInfo(
        name=NAME, title="Token retrieval: attention-only and attention-MLP, three-step GD and Adam",
        root=Path(__file__).resolve().parent,
        # tr_centring beside Fig 2: the mean-bias-free variant and its pack's phase diagram after the plain model's
        report=("tr_fig1a_capacity", "tr_fig2_attention_only", "tr_centring", "tr_fig3_attention_mlp",
                "tr_fig3_attention_mlp_rank2", "tr_fig4_mlp_width_rank2", "tr_fig5_adam", "tr_fig6_adam"))


@hookimpl
def recallkit_tasks() -> tuple[Task, ...]:
    return (Task(NAME, config=f"{__name__}.config:TokenRetrievalConfig", problem=f"{__name__}.task:TokenRetrieval",
                 trainers=("three_step", "two_step_then_fit", "adam", "adamw"), run_metrics=("attention_mass",)),)


def probes_wanted(settings: Any) -> bool:
    """The ``token_retrieval.probes`` report option (``--probes``): as given, else on in the main job only."""
    given = (getattr(settings, "system_options", None) or {}).get(NAME, {}).get("probes")
    return not settings.experiments if given is None else bool(given)


def diagnostics_apply(plans: list, settings: Any) -> bool:
    """The term probes and the gradient-access check run when the probes option is on, in the main job or in a
    report that has an experiment of this system (a report of associative-memory experiments alone trains no
    token-retrieval probes, even with --probes)."""
    return probes_wanted(settings) and (not settings.experiments or NAME in plan_systems(plans))


@hookimpl
def recallkit_report_steps() -> tuple[ReportStep, ...]:
    return (ReportStep("term_probes", f"{__name__}.steps:term_probe_entry", diagnostics_apply),
            ReportStep("gradient_access", f"{__name__}.steps:gradient_access_entry", diagnostics_apply))


@hookimpl
def recallkit_report_options() -> tuple[ReportOption, ...]:
    return (ReportOption("probes", bool, None, "run the term probes and the gradient-access check (default: in the "
                                               "main job, not in a report of named experiments)"),)


@hookimpl
def recallkit_prediction_source() -> str:
    return f"{__name__}.predictions:PREDICTION_SOURCE"


@hookimpl
def recallkit_finite_size(pack: str, term: str | None, row: Mapping[str, Any], measured: Mapping[str, Any]) -> Any:
    return load_object(f"{JUDGE}:finite_size_factor")(pack, term, row, measured)


@hookimpl
def recallkit_all_terms(pack: str, finite_size: Mapping[str, Any], targets: Mapping[int, float]) -> dict | None:
    return load_object(f"{JUDGE}:all_terms_prediction")(pack, finite_size, targets)


@hookimpl
def recallkit_probe(source: str, pack: str | None, preset: str, store: Any, code_version: str, statistic: str,
                    method: str, delta: float | None, alpha: float | None, log: Callable[[str], None] | None) -> dict:
    return load_object(f"{JUDGE}:run_probe")(source, pack, preset, store=store, code_version=code_version,
                                             statistic=statistic, method=method, delta=delta, alpha=alpha, log=log)


@hookimpl
def recallkit_probe_table(doc: dict) -> str:
    return load_object(f"{JUDGE}:format_table")(doc)


@hookimpl
def recallkit_page_kinds() -> tuple[PageKind, ...]:
    return (PageKind("term_probes", pages=f"{__name__}.pages:probe_pages", rows=f"{__name__}.pages:summary_rows",
                     compared="each term's fitted exponent against the pack's, per variable (TOST)", own_intro=True),
            PageKind("gradient_access", pages=f"{__name__}.pages:gradient_access_pages",
                     rows=f"{__name__}.pages:gradient_access_rows",
                     compared="the d each decoder of the noisy first gradient needs against the gradient-access "
                              "lower bound's d (DERIVATION.md §7.4)"))

"""Geometric-recall report pages, drawn from real quick-preset results (tests/systems/geometric_recall/geometric_results.json,
written by `recallkit report geometric_construction geometric_probes geometric_zero_shot geometric_multi_hop`)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.text import Text

from recallkit.systems.geometric_recall import pages as geometric
from recallkit.reports.style import VERDICT_COLOURS, wrap_title
from recallkit.theory.errors import InputError

DATA = Path(__file__).parent / "geometric_results.json"


@pytest.fixture(scope="module")
def results() -> dict:
    return json.loads(DATA.read_text())


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def table_cells(fig) -> list[list[str]]:
    """Body rows of the first matplotlib table on the figure, as text."""
    table = next(ax.tables[0] for ax in fig.axes if ax.tables)
    cells = table.get_celld()
    n_rows = max(r for r, _ in cells)
    n_cols = max(c for _, c in cells) + 1
    return [[cells[(r, c)].get_text().get_text() for c in range(n_cols)] for r in range(1, n_rows + 1)]


def assert_text_inside(fig, slack: float = 2.0) -> None:
    """Everything drawn (axes with their labels, figure texts, legends, titles) lies inside the page."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    width, height = fig.bbox.width, fig.bbox.height
    artists = [(ax.get_tightbbox(renderer), f"axes {ax.get_title()!r}") for ax in fig.axes]
    texts_ = list(fig.texts) + [t for t in (getattr(fig, "_suptitle", None), getattr(fig, "_supxlabel", None)) if t]
    artists += [(t.get_window_extent(renderer), repr(t.get_text()[:60])) for t in texts_ if t.get_text().strip()]
    artists += [(leg.get_window_extent(renderer), "figure legend") for leg in fig.legends]
    for box, what in artists:
        if box is None:
            continue
        assert box.x0 >= -slack and box.x1 <= width + slack, f"runs off the page sideways: {what}"
        assert box.y0 >= -slack and box.y1 <= height + slack, f"runs off the page: {what}"


def test_construction_figure_one_panel_per_R_with_bound_and_verdict(results):
    result = results["construction"]
    fig = geometric.construction_figure(result)
    panels = [ax for ax in fig.axes if ax.get_title().startswith("R = ")]
    assert [ax.get_title() for ax in panels] == ["R = 1", "R = 2", "R = 4"]
    # the dashed bound line carries the points' counting_bound_d, in N order
    bound = next(line for line in panels[2].get_lines() if line.get_linestyle() == "--")
    expected = sorted({(p["N"], p["counting_bound_d"]) for p in result["points"] if p["R"] == 4})
    assert np.allclose(bound.get_xdata(), [n for n, _ in expected])
    assert np.allclose(bound.get_ydata(), [b for _, b in expected])
    assert any(t.startswith("verdict: consistent. 100% at the predicted k") for t in texts(fig))
    assert not any(line.get_label().startswith("trained d_min") for ax in fig.axes for line in ax.get_lines())
    assert any("so no trained d_min is drawn" in t for t in texts(fig))
    assert_text_inside(fig)


def test_construction_figure_draws_trained_d_min_at_matching_cells(results):
    trained = [{"model": "learned", "N": 64, "R": 2, "d": 20, "seed": 0},
               {"model": "learned", "N": 64, "R": 2, "d": 24, "seed": 1},
               {"model": "frozen-subjects", "N": 128, "R": 4, "d": 90, "seed": 0},
               {"model": "learned", "N": 3, "R": 9, "d": 5, "seed": 0}]  # no such construction cell: not drawn
    fig = geometric.construction_figure(results["construction"], trained)
    r2 = next(ax for ax in fig.axes if ax.get_title() == "R = 2")
    learned = next(line for line in r2.get_lines() if line.get_label() == "trained d_min, learned subjects")
    assert list(learned.get_xdata()) == [64] and list(learned.get_ydata()) == [22.0]  # median of the seeds
    r4 = next(ax for ax in fig.axes if ax.get_title() == "R = 4")
    assert any(line.get_label() == "trained d_min, frozen random embeddings" for line in r4.get_lines())
    assert "trained d_min, frozen random embeddings" in texts(fig)  # in the shared legend


def test_trained_dmin_points_maps_kinds_to_models_and_drops_censored():
    dmin = {"learned": {"points": [{"N": 64, "R": 2, "d": 9}, {"N": 128, "R": 2, "d": None, "censored": True}]},
            "frozen": {"points": [{"N": 64, "R": 2, "d": 30}]}}
    pts = geometric.trained_dmin_points(dmin)
    assert [(p["model"], p["d"]) for p in pts] == [("learned", 9), ("frozen", 30)]
    tagged = {"frozen": {"points": [{"N": 64, "R": 2, "d": 30, "model": "frozen-subjects"}]}}
    assert [p["model"] for p in geometric.trained_dmin_points(tagged)] == ["frozen-subjects"]  # a point's own model wins
    assert geometric.trained_dmin_points(None) == []


def test_probe_figure_table_holds_the_means_over_seeds(results):
    result = results["probes"]
    fig = geometric.probe_figure(result, title="probes")
    rows = {r[0]: r for r in table_cells(fig)}
    for model, name in (("learned", "learned subjects"), ("frozen-subjects", "frozen random E_s only"),
                        ("construction", "construction (no training)")):
        mine = [r["probe_test_accuracy"] for r in result["rows"] if r["model"] == model]
        assert rows[name][3] == f"{np.mean(mine):.3f}"
        assert rows[name][1] == str(len(mine))
    assert any(t.startswith(f"verdict: {result['verdict']}.") for t in texts(fig))
    assert_text_inside(fig)


def test_zero_shot_figure_table_and_curves(results):
    result = results["zero_shot"]
    fig = geometric.zero_shot_figure(result, title="zero-shot")
    cells = table_cells(fig)
    # a result from before the plain-sum init: only the inits it holds, smart first
    smart = "smart (pinv of readouts)"
    assert [(r[0], r[1]) for r in cells] == [("learned subjects", smart), ("learned subjects", "random"),
                                            ("frozen random E_s only", smart), ("frozen random E_s only", "random")]
    smart_learned = np.mean([r["smart"]["accuracy_no_training"] for r in result["rows"] if r["model"] == "learned"])
    assert cells[0][3] == f"{smart_learned:.3f}"
    curve_axes = [ax for ax in fig.axes if ax.get_lines()]
    assert len(curve_axes) == 1 and len(curve_axes[0].get_lines()) == 4
    verdict_box = next(t for t in fig.findobj(Text) if t.get_text().startswith("verdict: inconsistent"))
    assert verdict_box.get_bbox_patch().get_facecolor()[:3] == pytest.approx(
        tuple(int(VERDICT_COLOURS["inconsistent"][i:i + 2], 16) / 255 for i in (1, 3, 5)))
    assert_text_inside(fig)


def test_multi_hop_figure_medians_and_censored(results):
    result = copy.deepcopy(results["multi_hop"])
    fig = geometric.multi_hop_figure(result, title="multi-hop")
    ax_d = fig.axes[0]
    no_cot = next(line for line in ax_d.get_lines() if line.get_label().startswith("no CoT"))
    expected = [np.median([r["d_min_no_cot"] for r in result["rows"] if r["hops"] == k]) for k in (1, 2, 3)]
    assert list(no_cot.get_ydata()) == expected
    assert not any("censored" in t for t in texts(fig))
    assert_text_inside(fig)
    result["rows"][-1]["d_min_no_cot"] = None  # a d_min that no grid value reached
    fig = geometric.multi_hop_figure(result, title="multi-hop")
    assert any(t.startswith("censored: no d <= 32") for t in texts(fig))


@pytest.mark.parametrize("kind, drop, match", [
    ("construction", "points", "construction: missing field 'points'"),
    ("probes", "rows", "probes: missing field 'rows'"),
    ("zero_shot", "rows", "zero_shot: missing field 'rows'"),
    ("multi_hop", "rows", "multi_hop: missing field 'rows'"),
])
def test_missing_field_is_named(results, kind, drop, match):
    bad = {k: v for k, v in results[kind].items() if k != drop}
    builder = {"construction": geometric.construction_figure, "probes": geometric.probe_figure,
               "zero_shot": geometric.zero_shot_figure, "multi_hop": geometric.multi_hop_figure}[kind]
    with pytest.raises(InputError, match=match):
        builder(bad)


def test_geometric_rows_and_kind(results):
    rows = geometric.geometric_rows({"name": "geo_zs", "kind": "geometric", "geometric": results["zero_shot"]})
    assert len(rows) == 1
    assert rows[0]["verdict"] == "inconsistent" and rows[0]["verdict_reason"] == results["zero_shot"]["verdict_reason"]
    assert rows[0]["experiment"] == "geo_zs" and "smart init" in rows[0]["line"]
    assert geometric.geometric_rows({"name": "x", "geometric": {"kind": "nonsense"}}) == []
    with pytest.raises(InputError, match="geometric.kind: expected one of"):
        geometric.geometric_kind({"kind": "nonsense"})
    assert geometric.geometric_kind({"experiment": "geometric_multi_hop"}) == "multi_hop"


def test_wrap_title_wraps_and_cuts():
    long = "3. Token retrieval, attention-MLP with m ~ d^2: fits along " + "N=V*log(V), L=V**0.25, m=d**2 " * 8
    wrapped = wrap_title(long, 10.0, 14)
    lines = wrapped.split("\n")
    assert len(lines) == 2 and lines[-1].endswith("...")
    assert all(len(line) <= int(10.0 * 72 / (0.56 * 14)) for line in lines)
    assert wrap_title("short", 10.0) == "short"


def test_long_title_stays_on_the_page(results):
    fig = geometric.multi_hop_figure(results["multi_hop"], title="9. " + "a very long experiment title " * 12)
    assert_text_inside(fig)


def test_pipeline_adapter_makes_geometric_entries(results):
    from recallkit.systems.geometric_recall.steps import geometric_summary_entry

    stored = dict(results["construction"], device="cpu", threads=1)  # as the pipeline caches it in the store
    spec = {"name": "geometric_construction", "kind": "construction", "description": "a long paragraph " * 20,
            "pack": None}
    entry = geometric_summary_entry(spec, stored, "geo-b97")
    assert entry["kind"] == "geometric" and entry["title"] == "Geometric recall: explicit construction"
    assert entry["geometric"]["verdict"] == "consistent"
    assert any(n.startswith("ran on device cpu, threads 1; wall time") for n in entry["notes"])

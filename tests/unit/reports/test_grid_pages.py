"""A grid experiment's section (``kind = "grid"``): its metric over (base, size) as a heatmap, and one summary row
saying it has no fitted checks. A grid draws a picture; it tests no prediction, so it is neither a check nor an
inconclusive one."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from recallkit.reports.layout import experiment_pages
from recallkit.reports.summary_rows import overview_rows, summary_entries
from recallkit.reports.text_pages import title_page

LINE = "linear"


def grid_entry(metric: str = "loss", **extra) -> dict:
    """A grid entry as the report job writes it: the runs' cells (two seeds a cell, as ProbeRun.to_dict writes
    them), the experiment's base and size, no fits."""
    cells = [{"line": LINE, "N": n, "d": d, "seed": seed, "config_hash": f"{n}-{d}-{seed}",
              metric: 1.0 / (d * (seed + 1)) + n / 100, "param_count": d * d}
             for n in (8, 16, 32) for d in (4, 8) for seed in (0, 1)]
    return {"name": "tiny_grid", "title": "Tiny grid", "kind": "grid", "base": "N", "size": "d", "metric": metric,
            "lines": [{"name": LINE, "heatmap": cells, "boundary_points": []}], "fits": [], **extra}


def colour_bar_label(fig) -> str:
    labels = [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert len(labels) == 1
    return labels[0]


@pytest.mark.parametrize("metric, direction", [("loss", "lower"), ("train_accuracy", "higher")])
def test_grid_heatmap_page_names_its_metric_direction_and_seed_mean(metric, direction):
    pages = [p for p in experiment_pages(grid_entry(metric), 1) if "heatmap" in p.stem]
    assert len(pages) == 1 and metric in pages[0].label
    fig = pages[0].build()
    try:
        label = colour_bar_label(fig)
        assert metric in label and f"{direction} is better" in label and "mean over seeds" in label
        ax = next(a for a in fig.axes if a.get_label() != "<colorbar>")
        assert "N" in ax.get_xlabel() and "d" in ax.get_ylabel()
        assert "parameter count" not in ax.get_ylabel()
    finally:
        plt.close(fig)


def test_a_stated_direction_is_the_one_shown():
    (page,) = [p for p in experiment_pages(grid_entry("score", direction="lower"), 1) if "heatmap" in p.stem]
    fig = page.build()
    try:
        assert "lower is better" in colour_bar_label(fig)
    finally:
        plt.close(fig)


def test_grid_entry_has_one_row_saying_it_has_no_fitted_checks():
    entry = grid_entry()
    rows = summary_entries({"experiments": [entry]})
    assert len(rows) == 1
    (row,) = rows
    assert row["kind"] == "grid" and row["experiment"] == "tiny_grid"
    assert row["verdict"] not in ("consistent", "inconsistent", "inconclusive")
    assert "no fitted checks" in row["verdict_reason"] and "loss" in row["line"]
    (overview,) = overview_rows({"experiments": [entry]}, rows)
    assert overview["checks"] == 0 and overview["inconclusive"] == 0
    assert "parameter count" not in overview["compared"] and "loss" in overview["compared"]


def test_grid_section_has_the_heatmap_and_no_fit_pages():
    stems = [p.stem for p in experiment_pages(grid_entry(), 1)]
    assert [s for s in stems if "heatmap" in s] == ["01-tiny-grid-heatmap-linear"]
    assert not [s for s in stems if "-fits" in s or s.endswith("-capacity")]


def test_title_page_counts_no_check_for_a_grid():
    entry = grid_entry()
    rows = [dict(r, check=k) for k, r in enumerate(summary_entries({"experiments": [entry]}), start=1)]
    fig = title_page({"experiments": [entry], "title": "t"}, rows)
    try:
        texts = [t.get_text() for t in fig.texts]
        assert any(t.startswith("1 experiment, 0 checks: ") for t in texts), texts
    finally:
        plt.close(fig)


def test_paper_heatmap_of_a_grid_names_the_metric_and_its_direction(tmp_path):
    import pypdf
    from recallkit.reports.paper import paper_figures

    (heatmap,) = [p for p in paper_figures(grid_entry(), tmp_path, "pdf") if "heatmap" in p.name]
    text = " ".join(pypdf.PdfReader(heatmap).pages[0].extract_text().split())
    assert "loss, mean over seeds (lower is better)" in text, text


def test_grid_boundary_legend_names_the_grids_metric():
    entry = grid_entry("train_accuracy")
    entry["lines"][0]["boundary_points"] = [
        {"line": LINE, "threshold": 0.5, "seed": seed, "N": n, "d": 8, "censored": n == 32}
        for n in (8, 16, 32) for seed in (0, 1)]
    (page,) = [p for p in experiment_pages(entry, 1) if "heatmap" in p.stem]
    fig = page.build()
    try:
        texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        assert any("train_accuracy >= 0.5" in t for t in texts), texts
        assert any("reached the train_accuracy threshold" in t for t in texts), texts
        assert not any("accuracy >=" in t and "train_accuracy" not in t for t in texts), texts
    finally:
        plt.close(fig)

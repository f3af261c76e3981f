"""A law experiment's section (``kind = "law"``): one page with the fit of log(metric) against log(base) per line
(each seed's points, the fitted line, the predicted slope's line and a residual panel under it), its y axis naming
the metric, and one summary row per line with the law, the variable, the slope, its interval, the predicted slope
and the verdict. The fits are compare's own (``fit_law_points``) on points whose law is known."""
from __future__ import annotations

import numpy as np
import matplotlib.pyplot as plt
import pypdf
import pytest

from recallkit.compare.assertions import fit_law_points
from recallkit.empirics.records import BoundaryPoint
from recallkit.reports.law_pages import law_fit_page
from recallkit.reports.layout import experiment_pages
from recallkit.reports.pdf import build_report
from recallkit.reports.summary_rows import overview_rows, summary_entries, validate_summary

LINES = {"n = p^2": -1.0, "n = 4096": -0.5}  # the measured slope along each line; both are predicted -1


def law_entry() -> dict:
    """A law entry as the report job writes it: test_error = 3 p^slope with 3% noise, three seeds, five p."""
    rng = np.random.default_rng(0)
    points = [BoundaryPoint(experiment="toy_law", line=line, scaling=line.replace(" ", ""), threshold=None, seed=seed,
                            base="p", base_value=p, size="", values={"p": p}, param_count=p, metric="test_error",
                            metric_value=3 * p ** slope * (1 + 0.03 * rng.normal()), variable="p")
              for line, slope in LINES.items() for p in (4, 8, 16, 32, 64) for seed in range(3)]
    predictions = {line: {"kind": "law", "law": "test_error", "slope": -1.0, "slope_exact": "-1", "log_power": "0",
                          "dominant": "width"} for line in LINES}
    fits = fit_law_points(points, predictions, experiment="toy_law", base="p", law="test_error", direction="lower",
                          delta=0.15)
    return {"name": "toy_law", "title": "Toy law", "kind": "law", "metric": "test_error",
            "law": {"name": "test_error", "metric": "test_error", "direction": "lower", "variable": "p"},
            "predictions": predictions, "fits": [f.to_dict() for f in fits],
            "lines": [{"name": line, "heatmap": [{"line": line, "p": p.base_value, "seed": p.seed,
                                                  "test_error": p.metric_value} for p in points if p.line == line],
                       "boundary_points": [p.to_dict() for p in points if p.line == line]} for line in LINES]}


def test_a_law_entry_is_a_valid_summary_kind():
    validate_summary({"experiments": [law_entry()]})


def test_law_rows_name_the_law_variable_slope_interval_prediction_and_verdict():
    entry = law_entry()
    rows = summary_entries({"experiments": [entry]})
    assert [r["line"] for r in rows] == list(LINES)
    for row, fit in zip(rows, entry["fits"]):
        assert (row["kind"], row["law"], row["variable"], row["metric"], row["direction"]) == (
            "law", "test_error", "p", "test_error", "lower")
        assert row["slope"] == fit["slope"] and row["slope_ci"] == fit["slope_ci"]
        assert row["predicted_slope"] == -1.0 and row["verdict"] == fit["verdict"]
    assert [r["verdict"] for r in rows] == ["consistent", "inconsistent"]
    (overview,) = overview_rows({"experiments": [entry]}, rows)
    assert overview["checks"] == 2 and overview["consistent"] == 1 and overview["inconsistent"] == 1
    assert "test_error" in overview["compared"] and "parameter count" not in overview["compared"]


def test_law_section_has_one_law_page_and_no_parameter_count_fits_or_heatmaps():
    stems = [p.stem for p in experiment_pages(law_entry(), 1)]
    assert [s for s in stems if s.endswith("-law")] == ["01-toy-law-law"]
    assert not [s for s in stems if "-fits" in s or "heatmap" in s or s.endswith("-lines")]


def _law_figure():
    (page,) = [p for p in experiment_pages(law_entry(), 1) if p.stem.endswith("-law")]
    return page.build()


def test_law_page_draws_each_line_with_its_seeds_fit_prediction_and_residuals():
    fig = _law_figure()
    try:
        fits_axes = [ax for ax in fig.axes if ax.get_label().startswith("fit ")]
        residual_axes = [ax for ax in fig.axes if ax.get_label().startswith("residuals ")]
        assert [ax.get_label() for ax in fits_axes] == [f"fit {line}" for line in LINES]
        assert [ax.get_label() for ax in residual_axes] == [f"residuals {line}" for line in LINES]
        # the first column names the metric and which way is better (the others share its axis's meaning)
        assert fits_axes[0].get_ylabel() == "test_error\n(lower is better)"
        for ax in fits_axes:
            assert "parameter count" not in ax.get_ylabel()
            assert len(ax.collections) >= 3  # one scatter per seed (and the band)
            labels = [line.get_label() for line in ax.get_lines()]
            assert any(label.startswith("fitted line") for label in labels)
            assert any(label.startswith("predicted slope") for label in labels)
        assert "residual" in residual_axes[0].get_ylabel()
        for ax, line in zip(residual_axes, LINES):
            assert ax.get_xlabel() == "p"
            # 15 points, each one residual from the fitted line: they sum to zero (OLS with an intercept)
            ys = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections])
            assert ys.size == 15 and abs(ys.sum()) < 1e-9
    finally:
        plt.close(fig)


def test_law_report_builds_with_the_law_page(tmp_path, monkeypatch):
    monkeypatch.setenv("RECALLKIT_CACHE", "off")
    entry = law_entry()
    build_report({"title": "law", "experiments": [entry]}, tmp_path, jobs=1)
    assert (tmp_path / "figures" / "01-toy-law-law.pdf").is_file()
    summary = (tmp_path / "summary.json").read_text()
    assert "page_errors" not in summary
    # the summary of verdicts names each line's law and the variable its metric is fitted against
    table = " ".join(pypdf.PdfReader(tmp_path / "figures" / "00-summary-1.pdf").pages[0].extract_text().split())
    assert table.count("law test_error: test_error against p") == 2, table
    law_page = " ".join(pypdf.PdfReader(tmp_path / "figures" / "01-toy-law-law.pdf").pages[0].extract_text().split())
    assert "test_error (lower is better)" in law_page and "parameter count" not in law_page


@pytest.mark.parametrize("kind", ["min_size", "max_capacity"])
def test_search_kinds_keep_their_rows(kind):
    from tests.unit.reports.test_reports_figures import synthetic_line

    _, _, fits = synthetic_line()
    rows = summary_entries({"experiments": [{"name": "x", "kind": kind, "fits": fits}]})
    # every row has the schema's fields (compare.schema.CheckRow); a search's rows name no law
    assert rows and all(r["law"] is None and r["variable"] is None and r["kind"] is None for r in rows)


def test_paper_figures_of_a_law_entry_are_one_law_fit_per_line(tmp_path):
    from recallkit.reports.paper import paper_figures

    made = paper_figures(law_entry(), tmp_path, "pdf")
    names = [path.name for path in made]
    assert names == ["toy-law-law-n-p-2.pdf", "toy-law-law-n-4096.pdf"], names
    text = " ".join(pypdf.PdfReader(made[0]).pages[0].extract_text().split())
    assert "test_error (lower is better)" in text and "parameter count" not in text


def test_a_line_without_a_fit_still_gets_its_points_and_reason():
    entry = law_entry()
    unfitted = dict(entry["fits"][0], line="one p", slope=None, intercept=None, slope_ci=None, confidence_band=None,
                    points=entry["fits"][0]["points"][:3], verdict="inconclusive",
                    verdict_reason="too few distinct p values to fit a slope")
    fig = law_fit_page([unfitted], title="t")
    try:
        (ax,) = [a for a in fig.axes if a.get_label() == "fit one p"]
        (res,) = [a for a in fig.axes if a.get_label() == "residuals one p"]
        assert sum(len(c.get_offsets()) for c in ax.collections) == 3 and not res.collections
        assert any("too few distinct p values" in t.get_text() for t in fig.texts)
    finally:
        plt.close(fig)

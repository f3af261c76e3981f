"""Comparative claims in the report: one summary row per judged claim (kind "claim", counted with the other
checks and seen by --fail-on), none for a claim not run in the preset, and a claims page in the section."""
from __future__ import annotations

import json

import numpy as np
import pytest

from recallkit.compare.assertions import fit_arrays
from recallkit.compare.claims import judge_claims
from recallkit.fail_on import verdicts_matching
from recallkit.reports.pdf import build_report, overview_rows, summary_entries
from recallkit.reports.tables import claim_cells
from tests.unit.reports.test_reports_figures import synthetic_line

LINE = "N=V*log(V), L=V**0.5"


def two_line_fits(experiment: str = "exp_claims", threshold: float = 0.1) -> list:
    """Fits of two lines over V = 64..1024, three seeds each: 'flat' (slope 1.0) and 'steep' (slope 1.5)."""
    rng = np.random.default_rng(11)
    x = np.repeat(np.log([64, 128, 256, 512, 1024]), 3)
    fits = []
    for label, slope in (("flat", 1.0), ("steep", 1.5)):
        result = fit_arrays(x, slope * x + 0.05 * rng.standard_normal(x.size), np.tile([0, 1, 2], 5), slope,
                            x_name="log V", label=experiment, n_bootstrap=1)
        result.line, result.threshold = label, threshold
        fits.append(result)
    return fits


def _claims() -> list[dict]:
    fits = two_line_fits()
    claims = [
        {"id": "flatter", "text": "flat needs a flatter count", "relation": "slope <", "a": {"line": "flat"},
         "b": {"line": "steep"}, "provenance": "paper-reported: Fig 4(c)"},
        {"id": "higher", "text": "flat sits higher (false)", "relation": "level >", "a": {"line": "flat"},
         "b": {"line": "steep"}, "provenance": "paper-reported: Fig 2(c)"},
        {"id": "unrun", "text": "a line this preset does not run", "relation": "slope >", "a": {"line": "long"},
         "b": {"line": "steep"}, "provenance": "paper-reported: Fig 6"},
    ]
    return [r.to_dict() for r in judge_claims(fits, claims, experiment="exp_claims", preset="quick")]


def _summary() -> dict:
    _, _, fits = synthetic_line(line=LINE, experiment="exp_claims")
    return {"schema": "recallkit.summary/1", "title": "claims (synthetic)",
            "provenance": {"code_version": "0.1.0", "date": "2026-11-30T09:00:00Z", "preset": "quick"},
            "experiments": [{"name": "exp_claims", "kind": "min_size", "fits": fits, "claims": _claims()}]}


def test_claims_are_rows_of_the_summary_and_count_for_fail_on():
    summary = _summary()
    claims = summary["experiments"][0]["claims"]
    assert [(c["id"], c["verdict"]) for c in claims] == [
        ("flatter", "consistent"), ("higher", "inconsistent"), ("unrun", "not run")]
    assert claims[2]["reason"].startswith("not run in this preset: side A: line 'long'")
    rows = summary_entries(summary)
    fit_rows, claim_rows = rows[:3], rows[3:]
    assert all(r.get("kind") != "claim" for r in fit_rows)
    assert [(r["kind"], r["claim_id"], r["verdict"]) for r in claim_rows] == [
        ("claim", "flatter", "consistent"), ("claim", "higher", "inconsistent")]
    assert claim_rows[0]["line"] == "claim flatter: slope(A) < slope(B)" and claim_rows[0]["interval"][0] is None
    assert claim_rows[1]["verdict_reason"] == claims[1]["reason"]
    (overview,) = overview_rows(summary, rows)
    assert overview["checks"] == 5 and overview["inconsistent"] == 1 + 1  # a fit and a claim
    assert overview["compared"].endswith("; 2 comparative claims between fitted lines")
    line = verdicts_matching(rows, ("inconsistent",))
    assert line is not None and "exp_claims [claim higher: level(A) > level(B), threshold 0.1]: inconsistent" in line


def test_claims_page_is_drawn_in_the_section(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    path = build_report(_summary(), tmp_path, png=True, jobs=1)
    assert path.is_file()
    page = tmp_path / "figures" / "01-exp-claims-claims.png"
    assert page.is_file() and (tmp_path / "figures" / "01-exp-claims-claims.pdf").is_file()
    doc = json.loads((tmp_path / "summary.json").read_text())
    rows = [e for e in doc["entries"] if e.get("kind") == "claim"]
    assert [e["check"] for e in rows] == [4, 5]
    assert [c["id"] for c in doc["experiments"][0]["claims"]] == ["flatter", "higher", "unrun"]


def test_claim_cells_show_the_open_interval_and_the_other_experiment():
    claim = _claims()[0]
    cells = claim_cells(dict(claim, check=4))
    assert cells[0] == "4" and cells[6] == "(-inf, " + f"{claim['interval'][1]:.2f}]" and cells[8] == "consistent"
    other = dict(claim, b=dict(claim["b"], experiment="tr_fig5_adam"))
    assert claim_cells(other)[3] == "steep (in tr_fig5_adam)"


def test_an_experiment_with_claims_and_two_fitted_lines_gets_the_lines_together_page(tmp_path, monkeypatch):
    """The claims compare lines, so their section draws the lines on common axes (one panel per threshold) with
    the claims under each panel; an experiment with one fitted line (above) has no such page."""
    from recallkit.reports import figures

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    _, _, flat = synthetic_line(line="flat", true_slope=1.0, experiment="exp_claims")
    _, _, steep = synthetic_line(line="steep", true_slope=1.5, experiment="exp_claims", rng_seed=1)
    claims = _claims()
    for c in claims:  # the synthetic fits carry thresholds 0.1-0.15 like the claims' 0.1
        assert c["threshold"] in (0.1, None)
    summary = _summary()
    summary["experiments"][0]["fits"] = flat + steep
    build_report(summary, tmp_path, png=True, jobs=1)
    assert (tmp_path / "figures" / "01-exp-claims-lines.png").is_file()
    fig = figures.lines_plot(flat + steep, claims, title="t")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_text()]  # (a censored point's arrow: "")
    assert len(fig.axes) == len({f["threshold"] for f in flat})  # one panel per threshold
    below = "\n".join(t.get_text() for t in fig.texts)
    assert "(1) claim flatter, slope(A) < slope(B): A - B = " in below  # under the panel of its threshold, 0.1
    assert "(1) claim higher, level(A) > level(B)" in below and "inconsistent" in below
    assert not texts  # nothing drawn over the data: each line's slope in each panel is in the caption
    assert below.count("flat: slope ") == below.count("steep: slope ") == len(fig.axes)
    single = tmp_path / "single"
    build_report(_summary(), single, png=True, jobs=1)
    assert not (single / "figures" / "01-exp-claims-lines.png").exists()


def test_fail_on_counts_checks_not_a_grids_heatmap_row():
    """A grid experiment's summary row (verdict 'no check') was counted in the '--fail-on: ... of N checks' total."""
    rows = [{"experiment": "e", "line": "a", "threshold": 0.1, "verdict": "inconsistent"},
            {"experiment": "e", "line": "b", "threshold": 0.1, "verdict": "consistent"},
            {"experiment": "grid", "line": "heatmap of loss over (N, d)", "threshold": None, "verdict": "no check"}]
    line = verdicts_matching(rows, ("inconsistent",))
    assert line is not None and line.startswith("fail-on: 1 inconsistent of 2 checks: ")

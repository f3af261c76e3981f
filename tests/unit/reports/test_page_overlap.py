"""Every page kind the report draws is checked for text on text, a legend or text box over plotted data, text off
the page and text leaving its table cell (``reports.overlap``, tolerance ``TOLERANCE_PX`` = 1 px at 100 dpi).

The pages are those of the committed fixture ``tests/fixtures/report/summary.json`` (a measured tr_fig2 quick run
and one entry of every other kind; see its README.md), found by enumeration: every page ``reports.layout`` makes
of it is checked, and the fixture must hold every base kind and every page kind a system registered, so a new page
kind fails here until the fixture has an entry of it. Marked slow: every page of a main-job report, when
``RECALLKIT_CHECK_REPORT`` names its folder (or its summary.json).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure
from matplotlib.table import table as mpl_table

from recallkit.reports.layout import report_pages
from recallkit.reports.overlap import TOLERANCE_PX, find_overlaps
from recallkit.reports.summary_rows import BASE_KINDS, page_kinds, summary_entries

FIXTURE = Path(__file__).parents[2] / "fixtures" / "report" / "summary.json"


def _pages(summary: dict):
    rows = [dict(r, check=k) for k, r in enumerate(summary_entries(summary), start=1)]
    return report_pages(summary, rows)


SUMMARY = json.loads(FIXTURE.read_text())
PAGES = {page.stem: page for page in _pages(SUMMARY)}


def page_kind(stem: str) -> str:
    """A page's kind: its stem without the section number and experiment name (``01-tr-fig2-fits-n-v`` -> fits)."""
    for exp in SUMMARY["experiments"]:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", exp["name"]).strip("-").lower()
        stem = re.sub(rf"^\d\d-{re.escape(slug)}-", "", stem)
    return re.sub(r"^\d\d-", "", re.sub(r"-\d+$", "", stem)).split("-n-")[0].split("-linear")[0]


def _check(page) -> list[str]:
    fig = page.build()
    try:
        return [str(o) for o in find_overlaps(fig)]
    finally:
        plt.close(fig)


@pytest.mark.parametrize("stem", sorted(PAGES))
def test_no_page_has_overlapping_or_escaping_text(stem):
    found = _check(PAGES[stem])
    assert not found, f"{stem} ({page_kind(stem)}), tolerance {TOLERANCE_PX} px:\n" + "\n".join(found)


def test_the_fixture_holds_every_kind_the_report_draws():
    kinds = {e.get("kind") for e in SUMMARY["experiments"]} | {k for e in SUMMARY["experiments"]
                                                                 for k in e.get("page_kinds") or []}
    missing = (set(BASE_KINDS) - {"capacity"} | set(page_kinds())) - kinds
    assert not missing, f"add an entry of these kinds to {FIXTURE} (make_summary.py): {sorted(missing)}"
    assert {"title", "contents", "summary", "phase", "bounds", "terms", "lines", "heatmap", "fits", "claims", "capacity",
            "law", "appendix", "diagnostics"} <= {page_kind(s) for s in PAGES}


# ----------------------------------------------------------------------------- the check can fail

def _figure() -> tuple[Figure, object]:
    fig = Figure(figsize=(6, 4), dpi=100)
    ax = fig.add_axes((0.1, 0.1, 0.6, 0.8))
    ax.plot([0, 1], [0, 1], marker="o", label="data")
    return fig, ax


def test_the_check_passes_a_clean_figure():
    fig, ax = _figure()
    ax.set_title("a title")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))
    assert find_overlaps(fig) == []


@pytest.mark.parametrize("spoil, kind", [
    (lambda fig, ax: ax.legend(loc="center"), "box-data"),
    (lambda fig, ax: ax.text(0.5, 0.5, "boxed", transform=ax.transAxes, bbox={"facecolor": "w"}), "box-data"),
    (lambda fig, ax: (fig.text(0.1, 0.95, "one text"), fig.text(0.12, 0.95, "other text")), "text-text"),
    (lambda fig, ax: fig.text(0.9, 0.5, "runs off the right edge"), "off-page"),
    (lambda fig, ax: mpl_table(ax, cellText=[["a long text in a narrow cell"]], colWidths=[0.1]).auto_set_font_size(False),
     "cell-overflow"),
    (lambda fig, ax: (ax.plot([0, 5], [0, 5], clip_on=False), ax.set_xlim(0, 1)), "unclipped"),
])
def test_the_check_finds_each_kind_of_fault(spoil, kind):
    fig, ax = _figure()
    spoil(fig, ax)
    assert kind in {o.kind for o in find_overlaps(fig)}


def test_the_tolerance_allows_a_pixel():
    fig = Figure(figsize=(4, 2), dpi=100)
    fig.text(0.1, 0.5, "left", va="bottom")
    fig.text(0.1, 0.5, "below", va="top")  # the two boxes meet at one edge
    assert find_overlaps(fig) == []


# ----------------------------------------------------------------------------- a main job's report

@pytest.mark.slow
def test_every_page_of_the_main_jobs_report_passes():
    where = os.environ.get("RECALLKIT_CHECK_REPORT")
    if not where:
        pytest.skip("set RECALLKIT_CHECK_REPORT to a report folder (recallkit report --out) or its summary.json")
    path = Path(where) / "summary.json" if Path(where).is_dir() else Path(where)
    summary = json.loads(path.read_text())
    summary["experiments"] = [{k: v for k, v in e.items()} for e in summary["experiments"]]
    summary.pop("entries", None)
    failed = {page.stem: found for page in _pages(summary) if (found := _check(page))}
    assert not failed, "\n".join(f"{stem}:\n  " + "\n  ".join(found) for stem, found in failed.items())


def test_figures_export_every_data_figure_kind_of_an_experiment_with_claims(tmp_path):
    """``recallkit figures`` left out the lines-together figure, the one the comparative claims are about."""
    from recallkit.reports.paper import paper_figures

    summary = json.loads(FIXTURE.read_text())
    entry = next(e for e in summary["experiments"] if e.get("claims") and e.get("kind") == "min_size")
    stems = [p.stem.removeprefix(p.stem.split("-")[0]) for p in paper_figures(entry, tmp_path, "png")]
    assert any(s.endswith("-lines") for s in stems), stems
    assert any("-fit-" in s for s in stems) and any("-heatmap-" in s for s in stems), stems
    for path in tmp_path.glob("*-lines.png"):
        assert path.read_bytes().startswith(b"\x89PNG")

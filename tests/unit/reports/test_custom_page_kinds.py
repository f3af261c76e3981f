"""A runner's entry whose kind a system registered (its own page kind) is drawn and listed by that kind alone: its
fits are its own quantity (here a test error against a width), so the report adds no generic fit page, heatmap
fit or summary row for them (each check once, and no axis saying "parameter count"). Built end to end with
``build_report`` and read back from the PDF pages and summary.json."""
from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pypdf
import pytest

from recallkit.reports.pdf import build_report
from tests.unit.reports.test_reports_figures import synthetic_line

LINE = "width sweep"


def toy_pages(entry, head, experiments):
    def draw():
        fig, ax = plt.subplots()
        ax.plot([f["slope"] for f in entry["fits"]], "o")
        ax.set_ylabel("test error against width")
        ax.set_title(f"{head}: the toy kind's own page")
        return fig
    return [("toy-own", draw, "the toy kind's own fit")]


def toy_rows(entry):
    return [{"experiment": entry["name"], "line": f.get("line"), "threshold": f.get("threshold"), "x": "log width",
             "slope": f.get("slope"), "verdict": f.get("verdict"), "verdict_reason": f.get("verdict_reason")}
            for f in entry["fits"]]


@pytest.fixture
def toy_kind(register_page_kind):
    register_page_kind("toy_pages_system", "toy_own", pages=f"{__name__}:toy_pages", rows=f"{__name__}:toy_rows")


def _pdf_text(path) -> str:
    return " ".join(" ".join(page.extract_text().split()) for page in pypdf.PdfReader(path).pages)


def test_a_runner_entry_of_a_registered_kind_gets_only_its_own_pages_and_rows(toy_kind, tmp_path, monkeypatch):
    monkeypatch.setenv("RECALLKIT_CACHE", "off")
    cells, points, fits = synthetic_line(line=LINE, experiment="toy_runner")
    entry = {"name": "toy_runner", "title": "Toy runner", "kind": "toy_own", "fits": fits,
             "lines": [{"name": LINE, "heatmap": cells, "boundary_points": points}]}
    out = tmp_path / "out"
    build_report({"title": "custom kinds", "experiments": [entry]}, out, jobs=1)
    summary = json.loads((out / "summary.json").read_text())
    assert [r["x"] for r in summary["entries"]] == ["log width"] * len(fits)  # each check once, the kind's own
    stems = sorted(p.stem for p in (out / "figures").glob("01-*.pdf"))
    assert "01-toy-runner-toy-own" in stems
    assert not [s for s in stems if "-fits" in s or s.endswith("-capacity") or s.endswith("-lines")]
    assert "parameter count" not in _pdf_text(out / "recallkit-report.pdf")

"""A law experiment in ``recallkit report``, through the installed command: its section has one page of
log(metric) against log(base) per line (its y axis the metric, never a parameter count) and no heatmap, and its
summary rows carry the law, the variable, the slope, its interval, the prediction and the verdict.

The task is the toy system of tests/unit/empirics/test_law_experiment.py (stored test_error = 3 / p with 2% seeded
noise, a closed-form trainer: 40 runs in well under a second), registered through the ``recallkit.systems``
entry-point group from a temporary folder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pypdf
import pytest

from tests.unit.empirics.test_law_experiment import LAW_EXPERIMENT, write_toy

pytestmark = pytest.mark.integration

# a second line on the boundary between the law's two terms: its reason carries the warning
SECOND_LINE = '[[lines]]\nscaling = "n=p**(1/2)"\nlabel = "n = sqrt p"\n'


def test_report_of_a_law_experiment_has_its_law_page_and_rows(tmp_path):
    recallkit = shutil.which("recallkit")
    assert recallkit is not None, "the recallkit console script is not installed"
    root = write_toy(tmp_path)
    info = root / "law_toy_system-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: law-toy-system\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[recallkit.systems]\nlaw_toy = law_toy_system:SYSTEM\n")
    (root / "law.toml").write_text(LAW_EXPERIMENT.format(pack="law_toy_pack.toml", extra="", lines=SECOND_LINE),
                                   encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    env.update(PYTHONPATH=str(root), MPLBACKEND="Agg", SOURCE_DATE_EPOCH="0", RECALLKIT_CACHE="off")
    done = subprocess.run([recallkit, "report", "law.toml", "--store", "s.db", "--out", "out", "--no-probes",
                           "--workers", "1", "--jobs", "1"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    summary = json.loads((root / "out" / "summary.json").read_text())
    assert not summary.get("failures") and not summary.get("page_errors")
    rows = summary["entries"]
    assert [r["line"] for r in rows] == ["n = p^2", "n = sqrt p"]
    for row in rows:
        assert (row["kind"], row["law"], row["variable"], row["metric"]) == ("law", "test_error", "p", "test_error")
        assert row["slope"] == pytest.approx(-1.0, abs=0.05) and row["predicted_slope"] == -1.0
        assert len(row["slope_ci"]) == 2 and row["verdict"] == "consistent"
    assert "warning: the line lies within 0.05 of the boundary" in rows[1]["verdict_reason"]
    figures = root / "out" / "figures"
    assert not list(figures.glob("01-*heatmap*")) and not list(figures.glob("01-*-fits*"))
    text = " ".join(pypdf.PdfReader(figures / "01-law-toy-width-law.pdf").pages[0].extract_text().split())
    assert "test_error (lower is better)" in text and "parameter count" not in text
    assert "(1) n = p^2" in text and "(2) n = sqrt p" in text and "vs -1.00 ± 0.15" in text  # tested && its margin

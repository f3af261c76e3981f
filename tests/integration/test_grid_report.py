"""A grid experiment in ``recallkit report``, through the installed command: its section draws the metric's
heatmap (base x size, seed means, the metric and which way is better on the colour bar) and the summary has one
row saying it has no fitted checks. A tiny linear-memory grid (eight runs of 32 steps) keeps it to seconds."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pypdf
import pytest

from tests.experiment_texts import linear_memory_grid

pytestmark = pytest.mark.integration

GRID = linear_memory_grid("tiny_loss_grid", "linear memory: loss over an (N, d) grid", metric="loss")


def test_report_of_a_grid_draws_its_metric_and_says_it_has_no_fitted_checks(tmp_path):
    recallkit = shutil.which("recallkit")
    assert recallkit is not None, "the recallkit console script is not installed"
    path = tmp_path / "tiny_loss_grid.toml"
    path.write_text(GRID)
    out = tmp_path / "out"
    env = {**os.environ, "MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0", "RECALLKIT_CACHE": "off"}
    done = subprocess.run([recallkit, "report", str(path), "--store", str(tmp_path / "s.db"), "--out", str(out),
                           "--no-probes", "--workers", "1", "--jobs", "1"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert not summary.get("failures") and not summary.get("page_errors")
    (entry,) = summary["experiments"]
    assert entry["kind"] == "grid" and entry["metric"] == "loss"
    assert len(entry["lines"][0]["heatmap"]) == 8  # 2 N x 2 d x 2 seeds
    (row,) = summary["entries"]
    assert row["kind"] == "grid" and row["verdict"] == "no check" and "no fitted checks" in row["verdict_reason"]
    assert row["line"] == "heatmap of loss over (N, d), mean over seeds"
    (heatmap,) = (out / "figures").glob("01-tiny-loss-grid-heatmap-*.pdf")
    text = " ".join(pypdf.PdfReader(heatmap).pages[0].extract_text().split())
    assert "loss, mean over seeds (lower is better)" in text
    assert "number of facts N" in text and "embedding dimension d" in text
    assert not list((out / "figures").glob("01-tiny-loss-grid-fits*"))

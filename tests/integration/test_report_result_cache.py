"""The main job with the shared cache on (fits, packs' phase diagrams, steps, math path beside the pages): an
unchanged report gives the same bytes, and after a stored metric changes it gives what a report without any cache
gives, never the cached one."""
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.experiment_texts import TINY_LINEAR_MEMORY

pytestmark = pytest.mark.integration


def _report(folder: Path, out: str, cache: str) -> dict:
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1764493200", "MPLBACKEND": "Agg", "RECALLKIT_CACHE": cache}
    cmd = [sys.executable, "-m", "recallkit.cli", "report", str(folder / "tiny_linear_memory.toml"), "--no-probes",
           "--out", str(folder / out), "--store", str(folder / "store.db")]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((folder / out / "summary.json").read_text())
    summary.pop("run_wall_time_s")
    return summary


@pytest.mark.slow  # four real reports (about 27 s); by default the fit cache's and the steps' cache's own tests guard
def test_a_cached_report_is_the_report_and_follows_the_store(tmp_path):
    (tmp_path / "tiny_linear_memory.toml").write_text(TINY_LINEAR_MEMORY)
    cache = str(tmp_path / "cache")
    first = _report(tmp_path, "a", cache)
    again = _report(tmp_path, "a", cache)
    assert list((tmp_path / "cache" / "fits").glob("*.json"))
    assert again == first
    pdf = (tmp_path / "a" / "recallkit-report.pdf").read_bytes()
    assert _report(tmp_path, "b", cache) == first
    assert (tmp_path / "b" / "recallkit-report.pdf").read_bytes() == pdf

    answer = next(p["config_hash"] for p in first["experiments"][0]["lines"][0]["boundary_points"]
                  if p.get("config_hash") and not p["censored"])
    with sqlite3.connect(tmp_path / "store.db") as db:  # the run that answered one point no longer reaches it
        (text,) = db.execute("SELECT metrics_json FROM runs WHERE config_hash = ?", (answer,)).fetchone()
        db.execute("UPDATE runs SET metrics_json = ?, accuracy = 0.0 WHERE config_hash = ?",
                   (json.dumps({**json.loads(text), "accuracy": 0.0}), answer))
    changed = _report(tmp_path, "a", cache)
    assert changed != first
    assert changed == _report(tmp_path, "c", "off")

"""Resume: a sweep SIGKILLed half-way and restarted ends with exactly the numbers of an uninterrupted run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recallkit.empirics.store import ResultStore

pytestmark = pytest.mark.integration

TINY = """
name = "tiny_resume"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
kind = "min_size"
thresholds = [0.1, 0.2]
[[lines]]
scaling = "N=V*log(V), L=V**0.5"
[[lines]]
scaling = "N=V**1.5, L=V**0.5"
[fixed]
eta = 1.0
gamma = 1e7
n_eval = 1024
[search]
min = 2
max = 256
start = "V/2"
[presets.quick]
V = [32, 64, 128]
seeds = [0, 1]
[presets.paper]
V = [32]
seeds = [0]
"""

COMPARED = ("accuracy", "train_accuracy", "loss", "attention_mass", "param_count")


def sweep_command(toml: Path, db: Path) -> list[str]:
    return [sys.executable, "-m", "recallkit.cli", "sweep", str(toml), "--store", str(db), "--no-progress",
            "--threads", "1"]


def results_json(toml: Path, db: Path) -> dict:
    out = subprocess.run([sys.executable, "-m", "recallkit.cli", "results", str(toml), "--store", str(db), "--json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def stored_metrics(db: Path) -> dict[str, dict]:
    with ResultStore(db, readonly=True) as store:
        return {r["config_hash"]: {k: r["metrics"].get(k) for k in COMPARED} for r in store.rows()}


def test_sigkill_half_way_then_resume_gives_identical_numbers(tmp_path):
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY)
    full_db, killed_db = tmp_path / "full.db", tmp_path / "killed.db"

    done = subprocess.run(sweep_command(toml, full_db), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reference = stored_metrics(full_db)
    total = len(reference)
    assert total > 40 and f"reused 0 / computed {total}" in done.stdout

    proc = subprocess.Popen(sweep_command(toml, killed_db), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rows_at_kill = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if killed_db.exists():
            try:
                with ResultStore(killed_db, readonly=True) as reader:
                    rows_at_kill = reader.count()
            except Exception:  # the writer may be creating the schema right now
                rows_at_kill = 0
            if rows_at_kill >= total // 3:
                break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be killed"
    with ResultStore(killed_db, readonly=True) as reader:
        survived = reader.count()
    assert 0 < survived < total

    resumed = subprocess.run(sweep_command(toml, killed_db), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert f"reused {survived} / computed {total - survived}" in resumed.stdout

    assert stored_metrics(killed_db) == reference  # exactly equal floats, config by config
    assert results_json(toml, killed_db)["boundary_points"] == results_json(toml, full_db)["boundary_points"]


def test_a_configs_result_does_not_depend_on_its_batch():
    """What makes resume exact: the engine gives a config the same numbers alone or in any batch."""
    from recallkit.empirics.engine import run_configs

    base = {"task": "token_retrieval", "model": "attention-only", "trainer": "three_step", "V": 64, "N": 266,
            "L": 8, "eta": 1.0, "gamma": 1e7, "n_eval": 512}
    configs = [dict(base, d=16, seed=s) for s in range(4)] + [dict(base, d=24, seed=0)]
    batched = run_configs(configs, progress=False)
    assert len(batched) == len(configs)
    for cfg, together in zip(configs, batched):
        alone = run_configs([cfg], progress=False)[0]
        assert {k: alone[k] for k in COMPARED} == {k: together[k] for k in COMPARED}
    reordered = run_configs(configs[::-1][:3], progress=False)
    assert len(reordered) == 3
    for cfg, got in zip(configs[::-1][:3], reordered):
        assert {k: got[k] for k in COMPARED} == {k: batched[configs.index(cfg)][k] for k in COMPARED}

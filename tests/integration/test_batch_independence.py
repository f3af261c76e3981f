"""A stored row does not depend on its batch partners: every row a whole quick preset stores equals, bit for
bit on one CPU thread, the same config trained alone (``recallkit train`` with the same seed and defaults).
Covers Adam(W) with per-model early stop, the case where one model stopping must not move the others, and
the sweep runs with ``--workers 2``: splitting a round over two processes must not move a number either."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from recallkit.empirics.engine import run_config
from recallkit.empirics.store import ResultStore

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The whole quick preset of the anchor's linear memory (AdamW, per-model early stop), as sweep stores it."""
    path = tmp_path_factory.mktemp("batch") / "s.db"
    sweep = subprocess.run([RECALLKIT, "sweep", "assoc_memory_linear", "--store", str(path), "--workers", "2"],
                           capture_output=True, text=True, timeout=600)
    assert sweep.returncode == 0, sweep.stderr
    assert "local (2 processes)" in sweep.stdout + sweep.stderr
    return path


def test_every_row_of_a_quick_preset_equals_the_config_trained_alone(store):
    with ResultStore(store, readonly=True) as results:
        rows = results.rows()
    assert len(rows) >= 40
    assert any(row["metrics"]["batched_models"] > 1 for row in rows)  # rows really were trained in batches
    assert len({row["metrics"]["steps_run"] for row in rows}) > 1  # and early stop really fired at different steps
    for row in rows:
        assert row["threads"] == 1
        alone = run_config(row["config"])
        for key in ("accuracy", "train_accuracy", "loss", "steps_run"):
            assert alone[key] == row["metrics"][key], (row["config"], key, alone[key], row["metrics"][key])


def test_train_command_gives_the_stored_numbers(store):
    """The same config through `recallkit train` (default one thread) and through a sweep's batch."""
    with ResultStore(store, readonly=True) as results:
        row = next(r for r in results.rows() if r["config"]["seed"] == 1 and r["metrics"]["batched_models"] > 1)
    config = row["config"]
    args = [RECALLKIT, "train", config["task"], "--model", config["model"], "--trainer", config["trainer"],
            "--seed", str(config["seed"]), "--json"]
    args += [a for k, v in config.items() if k not in ("task", "model", "trainer", "seed") for a in ("--set", f"{k}={v}")]
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout)
    assert out["config_hash"] == row["config_hash"]
    assert (out["accuracy"], out["steps_run"], out["loss"]) == (row["metrics"]["accuracy"], row["metrics"]["steps_run"],
                                                               row["metrics"]["loss"])

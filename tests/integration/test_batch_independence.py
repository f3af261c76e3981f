"""A stored row does not depend on its batch partners, on the worker that trained it, or on a kill and resume:
every row a shipped quick preset stores equals, bit for bit on one CPU thread, the same config trained alone
(``recallkit train`` with the same seed and defaults).

MKL chooses kernels by CPU vendor and operand alignment; recallkit pins its code path when imported
(``empirics.numerics``). What remains CPU-dependent is torch's own vectorised code, chosen by the CPU's
capability; each capability is a fixed code path, so the checks below are run under the paths this machine
can force (``ATEN_CPU_CAPABILITY``), which covers the CPUs CI may land on (AVX2 and AVX-512, Intel and AMD).

Default run: the anchor's linear memory (AdamW, per-model early stop; --workers 2, on this CPU's path and
on AVX2 forced), and small batches of the other trainers (three_step, two_step_then_fit, minibatch Adam).
Marked slow: the portable path; the whole quick presets of tr_fig7_adam (minibatch Adam), the MLP memory
(autograd), tr_fig2_attention_only (three_step) and tr_fig1a_capacity (two_step_then_fit), each over two
workers; and a two-worker sweep killed and resumed."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from recallkit.empirics.engine import run_config, run_configs
from recallkit.empirics.numerics import MKL_ENV, cpu_vendor, pinned_branch
from recallkit.empirics.store import ResultStore

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")
COMPARED = ("accuracy", "train_accuracy", "loss", "steps_run")

# Trains every stored row alone, in a fresh process with the environment under test, and prints the rows
# whose numbers differ. A subprocess, so that a forced code path applies to the alone runs too.
ALONE = """
import json, sys, torch
from recallkit.empirics.engine import run_config
from recallkit.empirics.store import ResultStore
torch.set_num_threads(1)
with ResultStore(sys.argv[1], readonly=True) as store:
    rows = store.rows()
differ = []
for row in rows:
    alone = run_config(row["config"])
    for key in sys.argv[2].split(","):
        if alone.get(key) != row["metrics"].get(key):
            differ.append([row["config"], key, alone.get(key), row["metrics"].get(key)])
print(json.dumps({"rows": len(rows), "differ": differ, "path": rows[0]["metrics"].get("math_path")}))
"""


def forced_capabilities() -> list:
    """The torch code paths other CPUs take, forced on this one: AVX2 (every x86 CI machine has it; AMD
    Zen 2/3 and older Intel stop there) in the default run where this CPU has AVX-512; the portable path,
    which no x86 CI machine takes, only in the slow run."""
    import torch

    own = torch.backends.cpu.get_cpu_capability()
    forced = [] if own in ("AVX2", "DEFAULT") else ["AVX2"]
    if own != "DEFAULT":
        forced.append(pytest.param("DEFAULT", marks=pytest.mark.slow))
    return forced


def environment(capability: str | None) -> dict:
    env = dict(os.environ)
    env.pop(MKL_ENV, None)  # recallkit pins it itself: check that it does
    if capability is not None:
        env["ATEN_CPU_CAPABILITY"] = capability.lower()
    return env


def sweep(name: str, store, workers: int = 2, capability: str | None = None, timeout: int = 600) -> None:
    done = subprocess.run([RECALLKIT, "sweep", name, "--store", str(store), "--workers", str(workers),
                           "--no-progress"], capture_output=True, text=True, timeout=timeout,
                          env=environment(capability))
    assert done.returncode == 0, done.stderr
    if workers > 1:
        assert f"local ({workers} processes)" in done.stdout + done.stderr


def differing_rows(store, capability: str | None = None, keys=COMPARED, timeout: int = 600) -> dict:
    out = subprocess.run([sys.executable, "-c", ALONE, str(store), ",".join(keys)], capture_output=True, text=True,
                         timeout=timeout, env=environment(capability))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def stored_rows(store) -> list[dict]:
    with ResultStore(store, readonly=True) as results:
        return results.rows()


@pytest.fixture(scope="module")
def linear_store(tmp_path_factory):
    """The whole quick preset of the anchor's linear memory (AdamW, per-model early stop), as sweep stores it."""
    path = tmp_path_factory.mktemp("batch") / "s.db"
    sweep("assoc_memory_linear", path)
    return path


@pytest.mark.slow  # 20 s: batch independence stays checked by default on each forced code path (test_forced_code_paths_...)
def test_every_row_of_a_quick_preset_equals_the_config_trained_alone(linear_store):
    rows = stored_rows(linear_store)
    assert len(rows) >= 40
    assert any(row["metrics"]["batched_models"] > 1 for row in rows)  # rows really were trained in batches
    assert len({row["metrics"]["steps_run"] for row in rows}) > 1  # and early stop really fired at different steps
    for row in rows:
        assert row["threads"] == 1
        alone = run_config(row["config"])
        for key in COMPARED:
            assert alone[key] == row["metrics"][key], (row["config"], key, alone[key], row["metrics"][key])


def test_every_row_records_its_code_path(linear_store):
    import torch

    paths = {row["metrics"]["math_path"] for row in stored_rows(linear_store)}
    assert paths == {f"cpu {torch.backends.cpu.get_cpu_capability()} {cpu_vendor()}, {MKL_ENV}={pinned_branch()}"}


@pytest.mark.parametrize("capability", forced_capabilities())
def test_forced_code_paths_keep_rows_batch_independent(tmp_path, capability):
    """The same check under the code paths other CPUs take (e.g. AVX2 on an AVX-512 machine)."""
    store = tmp_path / "forced.db"
    sweep("assoc_memory_linear", store, capability=capability)
    checked = differing_rows(store, capability)
    assert checked["rows"] >= 40 and checked["path"].startswith(f"cpu {capability} {cpu_vendor()},"), checked["path"]
    assert checked["differ"] == []


@pytest.mark.slow
def test_adam_on_minibatches_over_two_workers(tmp_path):
    store = tmp_path / "fig7.db"
    sweep("tr_fig7_adam", store)
    rows = stored_rows(store)
    assert {row["config"]["trainer"] for row in rows} == {"adam"} and all("batch_size" in r["config"] for r in rows)
    checked = differing_rows(store)
    assert checked["rows"] == len(rows) >= 20
    assert checked["differ"] == []


# one small cell of each remaining trainer, as its shipped experiment configures it
SMALL_BATCHES = {
    "three_step": {"L": 8, "N": 266, "V": 64, "d": 16, "eta": 0.001, "gamma": 3301624.2424242427,
                   "model": "attention-only", "n_eval": 4096, "task": "token_retrieval", "trainer": "three_step"},
    "two_step_then_fit": {"L": 4, "N": 181, "V": 32, "d": 8, "eta": 0.001, "features": "relu_centred",
                          "fit_lr": 0.1, "fit_steps": 400, "kappa": 1.0, "m": 64, "model": "attention-mlp",
                          "n_eval": 2048, "task": "token_retrieval", "trainer": "two_step_then_fit"},
    # minibatch Adam, each model drawing its own minibatches
    "adam": {"L": 32, "N": 110, "V": 32, "batch_size": 6, "d": 5, "epochs": 16, "lr": 0.1, "model": "attention-only",
             "n_eval": 4096, "task": "token_retrieval", "trainer": "adam"},
}


@pytest.mark.parametrize("trainer", sorted(SMALL_BATCHES))
def test_each_model_of_a_batch_equals_it_trained_alone(trainer):
    configs = [dict(SMALL_BATCHES[trainer], seed=seed) for seed in range(5 if trainer != "adam" else 3)]
    batched = run_configs(configs, progress=False)
    assert {row["batched_models"] for row in batched} == {len(configs)}
    for config, row in zip(configs, batched):
        alone = run_config(config)
        keys = COMPARED + tuple(k for k in ("gamma_used", "attention_mass") if k in row)
        assert {k: alone[k] for k in keys} == {k: row[k] for k in keys}, config


def test_train_command_gives_the_stored_numbers(linear_store):
    """The same config through `recallkit train` (default one thread) and through a sweep's batch."""
    row = next(r for r in stored_rows(linear_store) if r["config"]["seed"] == 1 and r["metrics"]["batched_models"] > 1)
    config = row["config"]
    args = [RECALLKIT, "train", config["task"], "--model", config["model"], "--trainer", config["trainer"],
            "--seed", str(config["seed"]), "--json"]
    args += [a for k, v in config.items() if k not in ("task", "model", "trainer", "seed") for a in ("--set", f"{k}={v}")]
    out = json.loads(subprocess.run(args, capture_output=True, text=True, check=True, timeout=120,
                                    env=environment(None)).stdout)
    assert out["config_hash"] == row["config_hash"]
    assert (out["accuracy"], out["steps_run"], out["loss"]) == (row["metrics"]["accuracy"], row["metrics"]["steps_run"],
                                                               row["metrics"]["loss"])
    assert out["math_path"] == row["metrics"]["math_path"]


@pytest.mark.slow
@pytest.mark.parametrize("name,extra", [("assoc_memory_mlp", ()), ("tr_fig2_attention_only", ("attention_mass",)),
                                        ("tr_fig1a_capacity", ("gamma_used",))])
def test_whole_quick_preset_over_two_workers(tmp_path, name, extra):
    store = tmp_path / f"{name}.db"
    sweep(name, store, timeout=3600)
    checked = differing_rows(store, keys=COMPARED + extra, timeout=7200)
    assert checked["rows"] >= 20
    assert checked["differ"] == []


@pytest.mark.slow
def test_killed_then_resumed_sweep_over_two_workers(tmp_path):
    """SIGKILL a two-worker sweep of the MLP memory once it has stored some rows, resume it, and every row of
    the finished store still equals its config trained alone."""
    store = tmp_path / "killed.db"
    proc = subprocess.Popen([RECALLKIT, "sweep", "assoc_memory_mlp", "--store", str(store), "--workers", "2",
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=environment(None), start_new_session=True)
    deadline = time.monotonic() + 600
    stored = 0
    while time.monotonic() < deadline and proc.poll() is None and stored < 10:
        time.sleep(0.5)
        if store.exists():
            try:
                stored = len(stored_rows(store))
            except Exception:  # the store may be mid-creation
                stored = 0
    assert proc.poll() is None, "the sweep finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    sweep("assoc_memory_mlp", store, timeout=3600)
    checked = differing_rows(store, timeout=3600)
    assert checked["rows"] > stored
    assert checked["differ"] == []

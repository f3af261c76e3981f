"""`recallkit train` end to end in a subprocess, checked against the float64 numpy reference."""
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

# one BLAS/OpenMP thread per process: two oversubscribe this shared 2-core machine (about 4x slower)
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def reference_in_subprocess(**sizes) -> dict:
    """The float64 numpy reference (empirics.reference), seed 0, eta 1, gamma 1e7, in a 1-thread process."""
    code = (
        "import json, sys; from recallkit.systems.token_retrieval.reference import ReferenceTokenRetrieval as R; "
        "r = R(0, **json.loads(sys.argv[1])).three_step(eta=1.0, gamma=1e7); "
        "print(json.dumps({k: v for k, v in r.items() if isinstance(v, float)}))"
    )
    out = subprocess.run([sys.executable, "-c", code, json.dumps(sizes)], capture_output=True, text=True, env=ONE_THREAD, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def recallkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recallkit.cli", *args], capture_output=True, text=True, env=ONE_THREAD, timeout=300)


def recallkit_in_process(capsys, monkeypatch, *args: str) -> tuple[int, str, str]:
    """The real entry point (error handling included) without a subprocess's import time."""
    import torch

    from recallkit.cli import main

    monkeypatch.setattr(sys, "argv", ["recallkit", *args])
    threads = torch.get_num_threads()
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    finally:
        torch.set_num_threads(threads)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_done_when_command_matches_the_independent_reference():
    """The issue's done-when run: V=512 d=512 L=23 N=3194 gamma=1e7 eta=1, three steps, attention-only."""
    sizes = dict(V=512, d=512, L=23, N=3194)
    out = recallkit(
        "train", "token_retrieval", "--model", "attention-only", "--trainer", "three_step",
        *[x for k, v in sizes.items() for x in ("--set", f"{k}={v}")],
        "--set", "gamma=1e7", "--set", "eta=1", "--threads", "1", "--json",
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)  # exactly one JSON document on stdout
    for key in ("accuracy", "train_accuracy", "param_count", "attention_mass", "threads", "device", "config_hash"):
        assert key in result
    assert result["param_count"] == 512 * 512 and result["threads"] == 1
    ref = reference_in_subprocess(n_eval=result["config"]["n_eval"], **sizes)
    # same draws, float32 autograd vs float64 hand-written gradients: at most a few of the 4096
    # fresh samples may flip their argmax
    assert result["accuracy"] == pytest.approx(ref["accuracy"], abs=3 / 4096)
    assert result["train_accuracy"] == pytest.approx(ref["train_accuracy"], abs=3 / 3194)
    assert result["attention_mass"] == pytest.approx(ref["attention_mass"], abs=1e-4)
    assert result["accuracy"] > 0.02  # well above chance (1/512): the three steps learned something


def test_bad_flags_give_one_line_errors_and_exit_2(capsys, monkeypatch):
    code, _, err = recallkit_in_process(capsys, monkeypatch, "train", "token_retrieval", "--model", "attention-only", "--trainer", "three_step",
                                        "--set", "V=64", "--set", "d=-4", "--set", "L=4", "--set", "N=10", "--set", "eta=1", "--set", "gamma=1")
    assert code == 2
    assert err.strip() == "error: recallkit train: d: expected a positive integer <= 16384, got -4"
    code, _, err = recallkit_in_process(capsys, monkeypatch, "train", "assoc_memory", "--model", "linear", "--trainer", "adamw", "--set", "N")
    assert code == 2 and err.strip() == "error: --set 'N': expected key=value, e.g. --set V=512"
    code, _, err = recallkit_in_process(capsys, monkeypatch, "train", "assoc_memory", "--model", "linear", "--trainer", "adamw", "--set", "N=8",
                                        "--set", "d=4", "--set", "lr=0.1", "--set", "steps=2", "--device", "tpu")
    assert code == 2 and "--device: expected one of auto, cpu, cuda" in err


def test_memorisation_run_reaches_full_accuracy_and_stops_early(capsys, monkeypatch):
    code, out, err = recallkit_in_process(capsys, monkeypatch, "train", "assoc_memory", "--model", "linear", "--trainer", "adamw", "--set", "N=16",
                                          "--set", "d=8", "--set", "lr=0.3", "--set", "steps=200", "--set", "early_stop=0.99", "--threads", "1", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["accuracy"] == 1.0 and result["steps_run"] < 200 and result["param_count"] == 64


def test_set_none_is_the_name_for_a_name_valued_option_and_unset_for_a_number(capsys, monkeypatch):
    """``--set centring=none`` is the centring named "none" (it failed: "expected one of none, labels, got None");
    ``--set early_stop=none`` still leaves a number unset."""
    tiny = ["--set", "V=32", "--set", "d=8", "--set", "L=4", "--set", "N=120", "--set", "gamma=1e7", "--set", "eta=1"]
    code, out, err = recallkit_in_process(capsys, monkeypatch, "train", "token_retrieval", "--model", "attention-only",
                                          "--trainer", "three_step", *tiny, "--set", "centring=none", "--json")
    assert code == 0, err
    assert json.loads(out)["config"].get("centring", "none") == "none"
    code, out, err = recallkit_in_process(capsys, monkeypatch, "train", "assoc_memory", "--model", "linear",
                                          "--trainer", "adamw", "--set", "d=4", "--set", "N=8", "--set", "lr=0.1",
                                          "--set", "steps=4", "--set", "early_stop=none", "--json")
    assert code == 0, err
    assert json.loads(out)["config"].get("early_stop") is None


def test_train_prints_a_tasks_own_metrics_beside_the_built_in_ones(monkeypatch):
    """rf_ridge's runs store test_error (its Task's run_metrics); ``recallkit train`` printed only the built-in
    names, so its one metric showed with --json alone."""
    from typer.testing import CliRunner

    from recallkit import registry
    from recallkit.cli import app

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "examples" / "rf_ridge"))
    import recallkit_rf_ridge

    added = "rf_ridge" not in [system.name for system in registry.systems()]
    if added:
        registry.register(recallkit_rf_ridge)
    try:
        done = CliRunner().invoke(app, ["train", "rf_ridge", "--model", "random_features", "--trainer", "ridge",
                                        "--set", "p=32", "--set", "n=64", "--set", "ridge=1e-6"])
    finally:
        if added:
            registry.unregister("rf_ridge")
    assert done.exit_code == 0, done.output
    assert re.search(r"^  test_error\s+\d", done.output, re.M), done.output

"""`recallkit probe` end to end in a subprocess: one JSON document, a readable table, rows reused from the
store on the second run, one-line errors for bad flags."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

GRID_TOML = """
name = "probe_cli_test"
[schedule]
kappa = 1.0
eta = 1e-3
[packs.token_retrieval_attn.presets.tiny]
base = { V = 64, N = 600, d = 16, L = 8 }
vary = { d = [8, 16, 32], L = [4, 8, 16] }
seeds = [0, 1]
n_test = 32
"""


def recallkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recallkit.cli", *args], capture_output=True, text=True,
                          env=ONE_THREAD, timeout=300)


def test_probe_json_table_and_store_reuse(tmp_path):
    grid = tmp_path / "probe.toml"
    grid.write_text(GRID_TOML)
    store = tmp_path / "store.db"
    common = [str(grid), "--pack", "token_retrieval_attn", "--preset", "tiny", "--store", str(store)]
    first = recallkit("probe", *common, "--json")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)                       # exactly one JSON document on stdout
    assert doc["rows"] == {"reused": 0, "computed": 10}
    assert "probe 1/10" in first.stderr                  # progress goes to stderr
    entries = {(e["term"], e["variable"]): e for e in doc["table"]}
    assert set(v for _, v in entries) == {"d", "L"}
    # one thread, fixed seeds: the same verdicts every run (2 seeds on a 3-point grid mostly cannot decide; noise_self
    # without its coincidences is narrow enough in L to read the finite-L drift against the asymptotic -1)
    verdicts = {key: e["verdict"] for key, e in entries.items()}
    assert verdicts == {**{key: "inconclusive" for key in entries}, ("noise_self", "L"): "inconsistent",
                        ("localisation", "L"): "inconsistent"}, verdicts
    assert entries[("noise_self", "L")]["drift_corrected"]["verdict"] == "consistent"
    for entry in doc["table"]:
        assert entry["fitted_exponent"] is not None and entry["ci"][0] < entry["fitted_exponent"] < entry["ci"][1]
        assert entry["verdict_reason"] and entry["drift_corrected"]["verdict"]
    assert entries[("grad_noise", "d")]["predicted_exponent"] == -1.0
    assert doc["threads"] == [1] and doc["devices"] == ["cpu"]

    second = recallkit("probe", *common)
    assert second.returncode == 0, second.stderr
    assert "reused 10 / computed 0" in second.stderr
    lines = second.stdout.splitlines()
    assert lines[0].startswith("probe_cli_test: pack token_retrieval_attn, preset tiny")
    header = next(line for line in lines if line.startswith("term "))
    for column in ("predicted", "fitted", "95% CI (HC3)", "verdict", "drift-corrected"):
        assert column in header
    grad_noise_d = next(line for line in lines if line.split()[:2] == ["grad_noise", "d"])
    assert f"{entries[('grad_noise', 'd')]['fitted_exponent']:+.3f}" in grad_noise_d


@pytest.mark.parametrize("args, match", [
    (["--preset", "nope"], "--preset: expected one of"),
    (["--statistic", "median"], "--statistic: expected one of spread, max_wrong"),
    (["--delta", "-1"], "--delta: expected a positive number"),
])
def test_bad_flags_are_one_line_errors(tmp_path, capsys, monkeypatch, args, match):
    # in process (the real entry point, its error handling included) to spare a subprocess's import time
    import torch

    from recallkit.cli import main

    grid = tmp_path / "probe.toml"
    grid.write_text(GRID_TOML)
    argv = ["recallkit", "probe", str(grid), "--pack", "token_retrieval_attn", "--no-store",
            *(args if args[0] == "--preset" else ["--preset", "tiny", *args])]
    monkeypatch.setattr(sys, "argv", argv)
    threads = torch.get_num_threads()
    try:
        with pytest.raises(SystemExit) as exit_info:
            main()
    finally:
        torch.set_num_threads(threads)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and match in err
    assert len(err.strip().splitlines()) == 1

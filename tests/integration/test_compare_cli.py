"""`recallkit fit`: table and --json output, flags passed through, one-line errors (no training here:
sweep_and_fit is replaced by a function that fits synthetic boundary points)."""
import importlib
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from recallkit.compare.assertions import ExperimentFits, fit_boundary_points
from recallkit.cli import app


def _capacity_points():
    rng = np.random.default_rng(0)
    return [{"line": "m=d", "threshold": 0.99, "seed": seed, "d": d,
             "N": d * d / (0.5 * math.log(d * d)) * math.exp(rng.normal(0, 0.03)), "param_count": d * d,
             "censored": False} for seed in range(3) for d in (8, 11, 16, 23)] + [
        {"line": "m=d", "threshold": 0.99, "seed": 0, "d": 32, "N": 4096, "param_count": 1024, "censored": True,
         "censor_reason": "still reached 0.99 at N=4096 (search.max)"}]


@pytest.fixture
def calls(monkeypatch):
    assertions = importlib.import_module("recallkit.assertions")  # the module the CLI will import (sys.modules)

    seen = []

    def fake_fit_experiment(experiment, **options):
        seen.append((experiment, options))
        fits = fit_boundary_points(_capacity_points(), {"m=d": {"slope": 1.0, "log_power": "1"}}, experiment="anchor",
                                   kind="max_capacity", base="d", delta=options["delta"] or 0.25,
                                   alpha=options["alpha"] or 0.05)
        return ExperimentFits("anchor", experiment, options["preset"], "max_capacity", "s.sqlite", fits,
                              {"m=d": {"slope": 1.0}}, {"reused": 12, "computed": 0, "missing": 0})

    monkeypatch.setattr(assertions, "sweep_and_fit", fake_fit_experiment)
    return seen


def test_fit_json_is_one_document(calls):
    result = CliRunner().invoke(app, ["fit", "x.toml", "--json", "--no-run", "--delta", "0.2"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (fit,) = doc["fits"]
    assert fit["verdict"] == "consistent" and fit["delta"] == 0.2
    assert fit["C"] is not None and fit["C_ci"][0] < fit["C"] < fit["C_ci"][1]
    assert len(fit["censored"]) == 1 and fit["n_points"] == 12
    assert calls[0][0] == "x.toml"
    assert calls[0][1]["run"] is False and calls[0][1]["preset"] == "quick" and calls[0][1]["delta"] == 0.2


def test_fit_table_shows_slope_intervals_prediction_c_and_reason(calls):
    result = CliRunner().invoke(app, ["fit", "x.toml", "--no-run", "--preset", "paper", "--threshold", "0.99"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for column in ("slope", "95% CI (HC3)", "95% CI (bootstrap)", "tested prediction", "C 95% CI", "verdict"):
        assert column in out
    row = next(line for line in out.splitlines() if line.startswith("m=d"))
    assert "12 (+1 cens.)" in row and "1.000 +- 0.25" in row and "consistent" in row
    assert re.search(r"\[1\] m=d, threshold 0.99: consistent: TOST p = ", out)
    assert calls[0][1]["preset"] == "paper" and calls[0][1]["thresholds"] == [0.99]


def test_fit_missing_file_is_a_one_line_error():
    out = subprocess.run([sys.executable, "-m", "recallkit.cli", "fit", "no/such/experiment.toml", "--no-run"],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().startswith("error: ") and len(out.stderr.strip().splitlines()) == 1
    assert "no/such/experiment.toml" in out.stderr



@pytest.mark.parametrize("flag, value", [("--delta", "-1"), ("--alpha", "0.7")])
def test_bad_levels_name_the_flag(flag, value):
    out = subprocess.run([sys.executable, "-m", "recallkit.cli", "fit", "x.toml", "--no-run", flag, value],
                         capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag}: expected")


def test_fit_prints_and_returns_the_experiments_comparative_claims(tmp_path):
    """Through the installed command: the claims of the experiment file are judged on the fits just made and
    shown after the table (--json: under "claims"); on an empty store every side has no fit, so no claim is
    decided."""
    import shutil

    from recallkit.empirics.store import ResultStore

    recallkit_bin = shutil.which("recallkit")
    assert recallkit_bin, "the recallkit command is not on PATH (install the package)"
    store = tmp_path / "empty.db"
    with ResultStore(store):
        pass
    args = [recallkit_bin, "fit", "tr_fig1a_capacity", "--no-run", "--store", str(store)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "comparative claims" in out.stdout
    assert re.search(r"claim 'fig1a-rise-L05' of tr_fig1a_capacity: .* verdict 'inconclusive'", out.stdout)
    assert re.search(r"claim 'fig1a-rise-L025' .* verdict 'inconclusive'", out.stdout)
    assert "has no fit" in out.stdout  # the empty store's reason, not a verdict
    doc = json.loads(subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=300).stdout)
    assert [(c["id"], c["threshold"], c["verdict"]) for c in doc["claims"]] == [
        ("fig1a-rise-L05", 0.25, "inconclusive"), ("fig1a-rise-L05", 0.5, "inconclusive"),
        ("fig1a-rise-L025", 0.25, "inconclusive"), ("fig1a-rise-L025", 0.5, "inconclusive")]
    not_run = subprocess.run(args + ["--json", "--preset", "gpu"], capture_output=True, text=True, timeout=300)
    assert not_run.returncode == 0, not_run.stderr
    # every verdict names the preset that decided it, with the base values and seeds it ran
    # (a line's own base values where the preset gives them)
    assert doc["fits"] and {f["decided_by"] for f in doc["fits"]} == {
        "the quick preset (V = 32 .. 256, 4 values; 2 seeds)", "the quick preset (V = 32 .. 128, 3 values; 2 seeds)"}
    assert re.search(r"^\[1\] .*: inconclusive by the quick preset \(V = 32 \.\. ", out.stdout, re.M)
    assert {f["decided_by"].split(" (")[0] for f in json.loads(not_run.stdout)["fits"]} == {"the gpu preset"}
    assert all(c["provenance"].startswith("paper-reported: Fig 1(a)") for c in doc["claims"])


def test_fit_fail_on_counts_the_claims(calls, monkeypatch):
    """A claim's verdict is a check for --fail-on, as in the report; a claim not run in the preset is none."""
    from recallkit.compare.claims import judge_claims
    from tests.unit.reports.test_reports_claims import two_line_fits

    fit_run = importlib.import_module("recallkit.cli_fit_run")
    fits = two_line_fits(experiment="anchor", threshold=0.99)
    claims = [{"id": "wrong-way", "text": "flat is steeper (false)", "relation": "slope >", "a": {"line": "flat"},
               "b": {"line": "steep"}, "provenance": "paper-reported: Fig 0"},
              {"id": "unrun", "text": "a line not run", "relation": "slope >", "a": {"line": "long"},
               "b": {"line": "steep"}, "provenance": "paper-reported: Fig 0"}]
    judged = judge_claims(fits, claims, experiment="anchor", preset="quick")
    assert [c.verdict for c in judged] == ["inconsistent", "not run"]
    monkeypatch.setattr(fit_run, "judge_claims", lambda fitted, **kw: judged)
    result = CliRunner().invoke(app, ["fit", "x.toml", "--no-run", "--fail-on", "inconsistent"])
    assert result.exit_code == 1, result.output
    assert "fail-on: 1 inconsistent of 2 checks: anchor [claim wrong-way: slope(A) > slope(B), threshold 0.99]" in result.stderr
    assert "claim 'wrong-way' of anchor" in result.stdout
    ok = CliRunner().invoke(app, ["fit", "x.toml", "--no-run", "--fail-on", "inconclusive"])
    assert ok.exit_code == 0, ok.output

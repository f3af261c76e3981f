"""The example system outside recallkit (examples/rf_ridge): once its package is installed, the installed
``recallkit`` command finds it through the entry point group and judges both terms of its law consistent with their
derived exponent, -3/2 each (its README). Skipped where the package is not installed (the default test run; .ci/run
installs it after that run)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

__all__: list[str] = []

RECALLKIT = shutil.which("recallkit")
pytestmark = pytest.mark.skipif(importlib.util.find_spec("recallkit_rf_ridge") is None or RECALLKIT is None,
                                reason="the example package is not installed (pip install ./examples/rf_ridge)")


@pytest.mark.parametrize("experiment, base", [("rf_ridge_width", "p"), ("rf_ridge_samples", "n")])
def test_each_term_of_the_law_is_consistent(tmp_path, experiment, base):
    result = subprocess.run([RECALLKIT, "fit", experiment, "--store", str(tmp_path / "store.db"), "--json",
                             "--fail-on", "inconclusive,inconsistent"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    fits = json.loads(result.stdout)["fits"]
    assert len(fits) == 1
    fit = fits[0]
    assert (fit["x"], fit["y"], fit["verdict"]) == (f"log {base}", "log(test_error)", "consistent")
    assert fit["predicted_slope"] == -1.5
    assert -1.7 < fit["slope_ci_tost"][0] < fit["slope"] < fit["slope_ci_tost"][1] < -1.3  # inside -3/2 +- delta


def test_the_example_follows_the_layering_rules():
    import recallkit_rf_ridge
    from recallkit.layering import check_layering

    assert check_layering(Path(recallkit_rf_ridge.__file__).parent, "recallkit_rf_ridge") == []


def test_a_misspelt_trainer_is_one_line_listing_every_trainer_with_the_systems_own(tmp_path):
    result = subprocess.run([RECALLKIT, "train", "rf_ridge", "--model", "random_features", "--trainer", "rigde",
                             "--set", "p=8", "--set", "n=64"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == ["error: recallkit train: trainer: expected one of three_step, "
                                                  "two_step_then_fit, adam, adamw, ridge, got 'rigde'"]


def test_the_closed_form_trainer_takes_no_steps(tmp_path):
    result = subprocess.run([RECALLKIT, "train", "rf_ridge", "--model", "random_features", "--trainer", "ridge",
                             "--set", "p=32", "--set", "n=1024", "--json"], capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run = json.loads(result.stdout)
    assert run["steps_run"] == 0 and "steps" not in run["config"]
    # the target's power beyond the 32nd feature, sum_{j > 32} j^(-5/2) = 0.0036, times 1 + p / (n - p - 1)
    assert 0.0030 < run["test_error"] < 0.0045

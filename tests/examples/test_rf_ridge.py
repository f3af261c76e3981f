"""The example system outside recallkit (examples/rf_ridge): once its package is installed, the installed
``recallkit`` command finds it through the entry point group and judges both terms of its law consistent with their
derived exponent, -3/2 each (its README). Skipped where the package is not installed (the default test run; .ci/run
installs it after that run)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess

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

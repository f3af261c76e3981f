"""`recallkit theory bounds PACK` through the installed command: the gap of each region's upper bound to the strongest
lower bound over a class, with that class named; wrong usage is one line and exit 2."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest

RECALLKIT = shutil.which("recallkit")
pytestmark = pytest.mark.skipif(RECALLKIT is None, reason="the recallkit command is not installed")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([RECALLKIT, "theory", *args], capture_output=True, text=True, timeout=240)


def test_bounds_prints_the_gap_table_of_the_hand_check():
    result = _run("bounds", "token_retrieval_attn")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # DERIVATION.md §7.3: the strongest lower bound is counting (every estimator, V log V bits) where a >= 1 + c and
    # the gradient-access bound V^2 L log V / N (§7.4, estimators of the noisy first gradient) where a <= 1 + c
    for line in ("mean_bias  V^(4 - 2*a) * log(V)^(2)  counting", "gap V^(3 - 2*a) * log(V)^(1)",
                 "mean_bias  V^(4 - 2*a) * log(V)^(2)  first_gradient_access", "gap V^(-a - c + 2) * log(V)^(1)",
                 "grad_noise  V^(c + 1) * log(V)^(1)  counting", "gap V^(c)",
                 "grad_noise_positions  V^(-a + 2*c + 2) * log(V)^(1)  first_gradient_access",
                 "noise_self  V^(-2*a + 4*c + 2) * log(V)^(2)  first_gradient_access", "gap V^(-a + 3*c) * log(V)^(1)"):
        assert line in out, (line, out)
    assert "every estimator" in out and "through Gaussian noise of the sampling-noise level" in out
    # the oracle correlation readout is named as one estimator, not as a lower bound
    assert "not lower bounds" in out and "first_gradient_positions" in out
    assert "lower bound first_gradient" not in out


def test_bounds_json_is_one_document_with_the_gap_per_region():
    result = _run("bounds", "token_retrieval_attn", "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    gaps = {row["region"]: row for row in document["regions"]}
    assert set(gaps) == {"mean_bias", "grad_noise", "grad_noise_positions", "noise_self"}
    (piece,) = gaps["grad_noise"]["strongest"]
    assert piece["name"] == "counting" and piece["gap_exponent"] == "c" and piece["gap_log_power"] == "0"
    assert "every estimator" in piece["class"]


@pytest.mark.parametrize("args, named", [
    (("bounds", "no_such_pack"), "no_such_pack"),
    (("bounds", "token_retrieval_attn", "--axes", "q"), "--axes"),
])
def test_wrong_usage_is_one_line_and_exit_2(args, named):
    result = _run(*args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert named in lines[0]

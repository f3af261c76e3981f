"""The assertion API on plain arrays and boundary points; failure messages carry the numbers."""
import math
import re

import numpy as np
import pytest

from recallkit.compare.assertions import assert_slope, describe_fit, fit_boundary_points
from recallkit.theory.errors import InputError


def _arrays(slope=2.0, n_seeds=3, noise=0.05, rng_seed=0):
    rng = np.random.default_rng(rng_seed)
    x = np.tile(np.log(2.0 ** np.arange(6, 12)), n_seeds)
    seeds = np.repeat(np.arange(n_seeds), 6)
    return x, 0.5 + slope * x + rng.normal(0, noise, x.size), seeds


def test_assert_slope_passes_on_true_prediction_and_returns_the_fit():
    result = assert_slope(_arrays(), 2.0)
    assert result.verdict.verdict == "consistent"
    assert abs(result.slope - 2.0) < 0.05


def test_wrong_prediction_fails_with_a_useful_message():
    x, y, seeds = _arrays(slope=2.0)
    with pytest.raises(AssertionError) as info:
        assert_slope((x, y, seeds), 1.0, label="linear memory")
    message = str(info.value)
    assert "expected verdict 'consistent'" in message and "verdict 'inconsistent'" in message
    fitted = float(re.search(r"fitted slope of \S+ on \S+: ([0-9.]+)", message).group(1))
    assert abs(fitted - 2.0) < 0.05
    assert re.search(r"95% CI \[[0-9.]+, [0-9.]+\]", message)
    assert re.search(r"90% CI \(TOST\) \[[0-9.]+, [0-9.]+\]", message)
    assert re.search(r"bootstrap 95% CI over seeds \[[0-9.]+, [0-9.]+\]", message)
    assert "tested prediction 1.000, delta 0.25, band [0.750, 1.250]" in message
    assert "above the band" in message and "linear memory" in message


def test_expect_inconclusive_and_lists_of_verdicts():
    x, y, seeds = _arrays(noise=1.5, n_seeds=1)  # 6 noisy points: too wide to decide
    result = assert_slope((x, y), 2.0, expect="inconclusive")
    assert "as many points" in result.verdict.reason
    assert_slope((x, y), 2.0, expect=("consistent", "inconclusive"))  # a list: any of its verdicts passes
    with pytest.raises(AssertionError, match="inconclusive"):
        assert_slope((x, y), 2.0, expect=("consistent", "inconsistent"))
    with pytest.raises(AssertionError, match="expected verdict 'consistent'"):
        assert_slope((x, y), 2.0)
    with pytest.raises(InputError, match="expect: expected one of"):
        assert_slope((x, y), 2.0, expect="passes")


def test_assert_slope_on_boundary_points_with_capacity_constant():
    rng = np.random.default_rng(1)
    points = []
    for seed in range(3):
        for d in (8, 11, 16, 23, 32, 45):
            n_found = d * d / (2.0 * math.log(d * d)) * math.exp(rng.normal(0, 0.05))
            points.append({"line": "linear", "threshold": 0.99, "seed": seed, "d": d, "N": n_found,
                           "param_count": d * d, "censored": False})
    result = assert_slope(points, 1.0, x="log(N ln N)", capacity=True, label="assoc")
    text = describe_fit(result)
    assert "C = " in text and result.constant is not None
    assert result.constant.C_ci[0] < result.constant.C < result.constant.C_ci[1]


def test_fit_boundary_points_groups_by_line_and_threshold():
    points = []
    for line, exponent in (("L~V^0.5", 1.0), ("L~V", 1.5)):
        for threshold in (0.1, 0.15):
            for seed in range(2):
                for V in (64, 128, 256, 512):
                    d = round(3 * V ** (exponent / 2) * (1 + 0.02 * seed + threshold))
                    points.append({"line": line, "threshold": threshold, "seed": seed, "V": V, "d": d,
                                   "param_count": d * d, "censored": False})
    fits = fit_boundary_points(points, {"L~V^0.5": {"slope": 1.0, "log_power": "0"}, "L~V": 1.5},
                               experiment="tr", thresholds=[0.1])
    assert [(f.line, f.threshold) for f in fits] == [("L~V^0.5", 0.1), ("L~V", 0.1)]
    assert all(f.verdict.verdict == "consistent" for f in fits), [describe_fit(f) for f in fits]
    missing = fit_boundary_points(points, {"L~V": 1.5}, thresholds=[0.1])
    assert missing[0].verdict.verdict == "inconclusive" and "no predicted slope" in missing[0].verdict.reason


def test_capacity_prediction_log_power_is_absorbed_by_x():
    # theory gives d^2 ~ N log N as slope 1, log power 1 on log N; on x = log(N ln N) that is slope 1 exactly.
    points = [{"line": "l", "threshold": 0.99, "seed": s, "d": d, "N": d * d / math.log(d * d) * (1 + 0.01 * s),
               "param_count": d * d, "censored": False} for s in range(3) for d in (8, 16, 32, 64)]
    (fit,) = fit_boundary_points(points, {"l": {"slope": 1.0, "log_power": 1}}, kind="max_capacity", base="d")
    assert fit.x == "log(N ln N)" and fit.constant is not None
    assert fit.verdict.compared_slope == 1.0


def test_capacity_fit_needs_three_distinct_d_not_three_distinct_x():
    # At one d, the found N differs by seed, so x takes several values; that is not a slope.
    points = [{"line": "l", "threshold": 0.99, "seed": s, "d": 16, "N": 40 + 3 * s, "param_count": 256,
               "censored": False} for s in range(4)]
    points += [{"line": "l", "threshold": 0.99, "seed": s, "d": d, "N": 4096, "param_count": d * d,
                "censored": True, "censor_reason": "still reached 0.99 at N=4096 (search.max)"}
               for s in range(4) for d in (23, 32)]
    (fit,) = fit_boundary_points(points, {"l": 1.0}, kind="max_capacity", base="d")
    assert fit.verdict.verdict == "inconclusive" and fit.fit is None
    assert "only 1 distinct d value(s)" in fit.verdict.reason and "8 censored" in fit.verdict.reason

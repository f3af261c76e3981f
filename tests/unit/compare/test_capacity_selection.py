"""Capacity N_max(d), log against power: it must pick the form that generated the data."""
import json

import numpy as np
import pytest

from recallkit.compare.model_selection import select_capacity_by_group, select_capacity_form
from recallkit.theory.errors import InputError


def _grid(d_values, n_seeds=2):
    d = np.repeat(np.asarray(d_values, dtype=float), n_seeds)
    return d, np.tile(np.arange(n_seeds), len(d_values))


def _on_quarter_grid(log2_n):
    return 2 ** (np.round(np.asarray(log2_n) * 4) / 4)  # what a search on a 2^(1/4) grid returns


def test_exponential_capacity_is_log_and_recovers_b():
    d, seeds = _grid(range(3, 9))
    rng = np.random.default_rng(0)
    n = _on_quarter_grid(1.5 + 1.0 * d + rng.normal(0, 0.15, len(d)))
    result = select_capacity_form(d, n, seeds, predicted="log", min_delta_aic=6)
    assert result["preferred"] == "log" and result["verdict"] == "consistent", result["preferred_reason"]
    assert result["delta_aic"] >= 6 and result["cv_ratio"] > 1 and result["bootstrap_fraction_log"] > 0.9
    lo, hi = result["log"]["b_ci"]
    assert lo < 1.0 < hi
    json.dumps(result)


def test_power_capacity_is_power_and_recovers_the_exponent():
    d, seeds = _grid([6, 8, 11, 16, 23, 32])
    rng = np.random.default_rng(1)
    n = _on_quarter_grid(0.3 + 1.6 * np.log2(d) + rng.normal(0, 0.1, len(d)))
    result = select_capacity_form(d, n, seeds, predicted="log", min_delta_aic=6)
    assert result["preferred"] == "power" and result["verdict"] == "inconsistent"
    lo, hi = result["power"]["b_ci"]
    assert lo < 1.6 < hi
    p_lo, p_hi = result["power"]["p_ci"]
    assert p_lo < 1 / 1.6 < p_hi  # d ~ N^p with p = 1/b


def test_the_measurements_that_motivated_the_capacity_view():
    # One seed each (1000 Adam steps): learned d = 3..8 and frozen E_s and U d = 6..32.
    learned = select_capacity_form([3, 4, 5, 6, 7, 8], 2 ** np.array([4.5, 5.5, 6.5, 7.5, 8.25, 9.25]), predicted="log",
                                   min_delta_aic=6)
    frozen = select_capacity_form([6, 8, 11, 16, 23, 32], 2 ** np.array([4.5, 5.25, 6.0, 7.0, 7.75, 8.5]),
                                  predicted="power", min_delta_aic=6)
    assert learned["verdict"] == "consistent" and learned["delta_aic"] == pytest.approx(12.64, abs=0.01)
    assert frozen["verdict"] == "consistent" and frozen["delta_aic"] == pytest.approx(-22.99, abs=0.01)
    assert frozen["power"]["p"] == pytest.approx(0.603, abs=0.001)


def test_a_weak_difference_is_inconclusive_under_a_strict_threshold():
    d = [3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    n = 2 ** np.array([4.25, 4.0, 5.25, 5.5, 6.5, 6.5, 7.75, 7.5, 8.5, 8.5])
    assert select_capacity_form(d, n, [0, 1] * 5, min_delta_aic=6)["preferred"] == "inconclusive"


def test_bad_input_is_one_line():
    with pytest.raises(InputError, match="3 distinct d"):
        select_capacity_form([4, 4, 8, 8], [16, 17, 60, 64])
    with pytest.raises(InputError, match="predicted: expected one of"):
        select_capacity_form([4, 6, 8], [16, 40, 100], predicted="exp")


def test_by_group_lists_censored_points_and_flags_unfittable_groups():
    points = [{"d": d, "N": 2 ** (1 + d), "R": 4, "seed": 0, "censored": False} for d in (3, 4, 5, 6)]
    points += [{"d": 7, "N": 16384, "R": 4, "seed": 0, "censored": True}]
    points += [{"d": d, "N": 2 ** d, "R": 16, "seed": 0, "censored": False} for d in (8, 9)]
    out = select_capacity_by_group(points, predicted="log")
    four, sixteen = out["groups"]
    assert four["R"] == 4 and four["n_points"] == 4 and len(four["censored"]) == 1
    assert sixteen["preferred"] == "inconclusive" and "3 distinct d" in sixteen["error"]

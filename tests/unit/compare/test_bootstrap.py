"""compare.bootstrap: the one seed-resampling loop behind every bootstrap interval in compare.

The draws must stay the ones each caller made before the loop was shared (one integers call for all
resamples, or one rng.choice per resample in model selection), so that every reported interval and
bootstrap fraction stays the same number.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from recallkit.compare.bootstrap import bootstrap_over_units, draw_resamples, unit_counts
from recallkit.compare.fits import fit_slope
from recallkit.compare.model_selection import _compare, select_log_or_power


@pytest.mark.parametrize("n_units", [2, 3, 5, 7, 12])
@pytest.mark.parametrize("rng_seed", [0, 1, 123])
def test_one_call_draws_are_the_per_resample_choice_draws(n_units, rng_seed):
    units = np.arange(100, 100 + n_units)
    rng = np.random.default_rng(rng_seed)
    one_at_a_time = np.stack([rng.choice(units, size=n_units, replace=True) for _ in range(500)])
    assert np.array_equal(units[draw_resamples(n_units, 500, rng_seed)], one_at_a_time)


def test_unit_counts_count_each_draw():
    draws = np.array([[0, 0, 2], [1, 2, 2]])
    assert unit_counts(draws, 3).tolist() == [[2.0, 0.0, 1.0], [0.0, 1.0, 2.0]]


def test_degenerate_resamples_are_skipped_and_counted_in_every_mode():
    draws = draw_resamples(3, 300, 4)
    # a resample that never drew unit 0 is degenerate
    expected = [float(row.sum()) for row in draws if 0 in row]
    one = bootstrap_over_units(3, 300, 4, lambda units: float(units.sum()) if 0 in units else None)
    assert one.values == expected and one.n_degenerate == 300 - len(expected) > 0
    once = bootstrap_over_units(3, 300, 4, lambda units: float(units.sum()) if 0 in units else None,
                                each_multiset_once=True)
    assert once.values == expected and once.n_degenerate == one.n_degenerate

    def pooled_sums(counts):
        return np.where(counts[:, 0] > 0, counts @ np.arange(3.0), math.nan)

    pooled = bootstrap_over_units(3, 300, 4, pooled_sums, pooled=True)
    assert pooled.values.tolist() == expected and pooled.n_degenerate == one.n_degenerate


def test_each_multiset_is_refitted_once_with_its_units_sorted():
    calls = []

    def refit(units):
        calls.append(tuple(units.tolist()))
        return len(calls)

    resampled = bootstrap_over_units(3, 1000, 0, refit, each_multiset_once=True)
    assert len(calls) == len(set(calls)) == 10  # the multisets of 3 draws from 3 units
    assert all(list(c) == sorted(c) for c in calls)
    assert len(resampled.values) == 1000 and resampled.n_degenerate == 0
    with pytest.raises(ValueError, match="at most one"):
        bootstrap_over_units(3, 10, 0, refit, each_multiset_once=True, pooled=True)


def test_fit_slope_bootstrap_interval_is_the_one_of_the_inline_loop():
    rng = np.random.default_rng(11)
    seeds = np.repeat(np.arange(4), 6)
    x = np.tile(np.array([1.0, 1.0, 2.0, 3.0, 4.0, 5.0]), 4)
    x[seeds == 3] = 2.0  # seed 3 alone has one x: resamples of seed 3 only are degenerate
    y = 0.5 + 1.3 * x + 0.2 * rng.standard_normal(x.size)
    fit = fit_slope(x, y, seeds, n_bootstrap=3000, bootstrap_seed=9)

    draws = np.random.default_rng(9).integers(0, 4, size=(3000, 4))
    slopes, degenerate = [], 0
    for row in draws:
        idx = np.concatenate([np.flatnonzero(seeds == s) for s in row])
        xs, ys = x[idx], y[idx]
        if np.ptp(xs) == 0:
            degenerate += 1
            continue
        slopes.append(np.polyfit(xs, ys, 1)[0])
    lo, hi = np.quantile(slopes, [0.025, 0.975])
    assert fit.bootstrap.n_degenerate == degenerate > 0
    assert fit.slope_ci_bootstrap == pytest.approx((lo, hi), rel=1e-9)


def test_model_selection_bootstrap_fraction_is_the_one_of_the_per_resample_loop():
    rng = np.random.default_rng(2)
    n = np.tile(2.0 ** np.arange(4, 10), 3).astype(float)
    seeds = np.repeat(np.arange(3), 6)
    n[seeds == 1], n[seeds == 2] = 64.0, 128.0  # without seed 0 a resample has 2 distinct N and is skipped
    d = 3 + 2 * np.log2(n) + 0.5 * rng.standard_normal(n.size)
    result = select_log_or_power(n, d, seeds.tolist(), n_bootstrap=150, bootstrap_seed=5)

    reference_rng = np.random.default_rng(5)
    wins = total = 0
    for _ in range(150):
        chosen = reference_rng.choice(np.unique(seeds), size=3, replace=True)
        idx = np.concatenate([np.flatnonzero(seeds == s) for s in chosen])
        if len(np.unique(n[idx])) < 3:
            continue
        wins += _compare(n[idx], d[idx])[2] > 0
        total += 1
    assert 0 < wins < total < 150
    assert result["bootstrap_fraction_log"] == wins / total

"""empirics.curves: the isotonic fit, the interpolated crossing and the common-seed mean curve."""
import itertools
import math

import pytest

from recallkit.empirics.curves import crossing, curve_boundary, isotonic_increasing, mean_curve


def _brute_isotonic(values):
    """Best non-decreasing fit by searching level sets (small inputs): every PAVA block is a run's mean."""
    n = len(values)
    best, best_err = None, math.inf
    for cuts in itertools.product([0, 1], repeat=n - 1):
        blocks, start = [], 0
        for i, cut in enumerate(cuts, 1):
            if cut:
                blocks.append(values[start:i])
                start = i
        blocks.append(values[start:])
        fitted = [sum(b) / len(b) for b in blocks for _ in b]
        if all(a <= b + 1e-12 for a, b in zip(fitted, fitted[1:])):
            err = sum((f - v) ** 2 for f, v in zip(fitted, values))
            if err < best_err:
                best, best_err = fitted, err
    return best


@pytest.mark.parametrize("values", [[0.1, 0.3, 0.2, 0.4], [0.5, 0.1, 0.1, 0.9, 0.2], [0.0, 0.0, 0.0], [0.3, 0.2, 0.1]])
def test_isotonic_is_the_least_squares_non_decreasing_fit(values):
    assert isotonic_increasing(values) == pytest.approx(_brute_isotonic(values))


def test_crossing_interpolates_in_log_size_and_log_count():
    found = crossing([4, 16], [0.0, 0.2], 0.1, [16, 256])
    assert found.status == "ok" and found.size == pytest.approx(8.0) and found.param_count == pytest.approx(64.0)
    assert found.bracket == (4, 16)
    assert crossing([4, 16], [0.3, 0.4], 0.1).status == "below"
    assert crossing([4, 16], [0.0, 0.05], 0.1).status == "above"


def test_mean_curve_uses_only_sizes_every_seed_has_and_allows_repeated_seeds():
    per_seed = {0: {4: 0.0, 8: 0.2, 16: 0.4}, 1: {4: 0.1, 8: 0.4}}
    sizes, means, seeds = mean_curve(per_seed)
    assert sizes == [4, 8] and means == pytest.approx([0.05, 0.3]) and seeds == [0, 1]
    sizes, means, _ = mean_curve(per_seed, [1, 1, 0])
    assert means == pytest.approx([(0.1 + 0.1 + 0.0) / 3, (0.4 + 0.4 + 0.2) / 3])


def test_a_dip_in_one_seed_is_pooled_not_followed():
    per_seed = {0: {4: 0.02, 8: 0.12, 11: 0.08, 16: 0.2}, 1: {4: 0.04, 8: 0.10, 11: 0.10, 16: 0.22}}
    found = curve_boundary(per_seed, 0.1)
    # means 0.03, 0.11, 0.09, 0.21 -> isotonic 0.03, 0.10, 0.10, 0.21: reaches 0.1 between 4 and 8
    assert found.status == "ok" and 4 < found.size <= 8

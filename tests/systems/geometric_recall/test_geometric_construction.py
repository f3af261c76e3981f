"""The geometric-recall construction: 100% with no training at the predicted k, clear failure far below."""
import math

import numpy as np
import pytest

from recallkit.systems.geometric_recall.runners import (
    build_construction, counting_lower_bound_d, predicted_construction_k, run_construction_experiment,
    smallest_working_k,
)
from recallkit.theory.errors import InputError


@pytest.mark.parametrize("n,r", [(16, 1), (64, 2), (256, 4)])
def test_full_accuracy_at_predicted_k(n, r):
    k = predicted_construction_k(n, "random", 0.01)
    model = build_construction(n, r, k, seed=0)
    assert model.d == r * k + r
    assert model.accuracy() == 1.0


@pytest.mark.parametrize("n,r", [(64, 2), (256, 4)])
def test_fails_clearly_far_below_log2_n(n, r):
    k = math.ceil(math.log2(n)) - 2  # at most 2**k distinct codes for n attributes
    assert build_construction(n, r, k, seed=0).accuracy() <= 2**k / n


def test_binary_codes_work_exactly_at_log2_n_and_not_one_bit_less():
    for n in (16, 64, 256):
        k = math.ceil(math.log2(n))
        assert build_construction(n, 3, k, codes="binary").accuracy() == 1.0
        assert build_construction(n, 3, k - 1, codes="binary").accuracy() < 1.0
        assert smallest_working_k(n, 3, codes="binary") == k


def test_gate_is_what_selects_the_relation():
    # Without the gain the other blocks' crosstalk is not outvoted: accuracy drops at R = 4.
    n, r, k = 256, 4, 22
    assert build_construction(n, r, k, gain=0.0).accuracy() < 0.9
    assert build_construction(n, r, k).accuracy() == 1.0


def test_smallest_k_grows_with_n_and_sits_above_counting_bound():
    ks = [smallest_working_k(n, 2, seed=0) for n in (16, 64, 256, 1024)]
    assert ks == sorted(ks) and ks[-1] > ks[0]
    for n, k in zip((16, 64, 256, 1024), ks):
        assert 2 * k >= counting_lower_bound_d(n, 2)


def test_experiment_dict_and_bad_input():
    out = run_construction_experiment([16, 32], [1, 2], [0], codes=["random"])
    assert out["verdict"] == "consistent" and len(out["points"]) == 4
    with pytest.raises(InputError, match="k: expected a positive integer"):
        build_construction(16, 1, 0)
    with pytest.raises(InputError, match="codes"):
        build_construction(16, 1, 4, codes="gray")

"""A capacity experiment's regressor follows its pack: log(N ln N) where the pack predicts params ~ N log N, log N
otherwise. It was log(N ln N) whatever the pack said, so a pack predicting params ~ N was tested with a log power of
-1 over the fitted range (the CLI said "log power -1", the figure "log power 0")."""
from __future__ import annotations

import math

import pytest

from recallkit.compare.assertions import fit_boundary_points, regressor_for
from recallkit.empirics.records import BoundaryPoint


def _points(params):
    return [BoundaryPoint(experiment="e", line="l", scaling=None, threshold=0.99, seed=seed, base="d", base_value=d,
                          size="N", values={"d": d, "N": n}, param_count=params(n) * (1 + 0.01 * seed), largest=True)
            for seed in (0, 1) for d, n in ((8, 40), (16, 150), (32, 600), (64, 2400), (128, 9600))]


@pytest.mark.parametrize("log_power, x", [("1", "log(N ln N)"), ("0", "log N"), ("2", "log N")])
def test_the_regressor_is_the_packs_form(log_power, x):
    assert regressor_for("max_capacity", "d", {"l": {"slope": 1.0, "log_power": log_power}})[0] == x
    assert regressor_for("max_capacity", "d")[0] == "log(N ln N)"  # no prediction: the capacity line
    assert regressor_for("min_size", "V", {"l": {"slope": 1.0, "log_power": "0"}}) == ("log V", False)


def test_a_pack_predicting_n_parameters_is_tested_at_slope_one_on_log_n():
    (fit,) = fit_boundary_points(_points(lambda n: 3.0 * n), {"l": {"slope": 1.0, "log_power": "0"}},
                                 kind="max_capacity", base="d")
    doc = fit.to_dict()
    assert doc["x"] == "log N" and doc["predicted_slope_tested"] == 1.0 and doc["verdict"] == "consistent"
    assert "log power" not in doc["verdict_reason"]
    assert doc["C"] == pytest.approx(3.0 * math.exp(0.005), rel=0.02)  # params = C N


def test_a_pack_predicting_n_log_n_parameters_keeps_the_capacity_line():
    (fit,) = fit_boundary_points(_points(lambda n: 2.0 * n * math.log(n)), {"l": {"slope": 1.0, "log_power": "1"}},
                                 kind="max_capacity", base="d")
    doc = fit.to_dict()
    assert doc["x"] == "log(N ln N)" and doc["predicted_slope_tested"] == 1.0 and doc["verdict"] == "consistent"
    assert doc["C"] == pytest.approx(2.0 * math.exp(0.005), rel=0.02)  # params = C N ln N

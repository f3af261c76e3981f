"""compare fits the search's typed records as it fits their dicts, and its two point fits share one options type."""
from __future__ import annotations

import json
import math

import pytest

from recallkit.compare.assertions import fit_boundary_points
from recallkit.compare.results import FitOptions, fit_curve_points, fit_points
from recallkit.empirics.records import BoundaryPoint


def _record(seed: int, V: int, d: int, censored: bool = False) -> BoundaryPoint:
    return BoundaryPoint(
        experiment="e", line="L", scaling="L", threshold=0.1, seed=seed, base="V", base_value=V, size="d",
        values={"V": V, "N": int(V * math.log(V)), "d": d}, param_count=d * d, metric_value=0.2,
        config_hash=f"h{seed}{V}", censored=censored, censor_reason="no d reached 0.1" if censored else None,
        non_monotone=False)


def _records() -> list[BoundaryPoint]:
    points = [_record(s, V, int(4 * V ** 0.5) + s) for s in range(3) for V in (64, 128, 256, 512)]
    return points + [_record(0, 1024, 2048, censored=True)]


def test_records_and_their_dicts_give_the_same_fits_and_verdicts():
    records = _records()
    from_records = [f.to_dict() for f in fit_boundary_points(records, {"L": 1.0}, experiment="e", n_bootstrap=200)]
    from_dicts = [f.to_dict() for f in fit_boundary_points([p.to_dict() for p in records], {"L": 1.0},
                                                           experiment="e", n_bootstrap=200)]
    assert json.dumps(from_records) == json.dumps(from_dicts)
    (fit,) = from_records
    assert fit["verdict"] == "consistent" and fit["n_points"] == 12
    assert fit["censored"] == [{"line": "L", "threshold": 0.1, "seed": 0, "V": 1024, "N": int(1024 * math.log(1024)),
                                "d": 2048, "param_count": 2048 * 2048, "censor_reason": "no d reached 0.1",
                                "x": math.log(1024), "y": math.log(2048 * 2048)}]


def test_the_point_fits_take_one_options_object_or_the_same_keyword_arguments():
    options = FitOptions(predicted_slope=1.0, experiment="e", line="L", threshold=0.1, n_bootstrap=200)
    by_options = fit_points(_records(), options).to_dict()
    by_keywords = fit_points(_records(), predicted_slope=1.0, experiment="e", line="L", threshold=0.1,
                             n_bootstrap=200).to_dict()
    assert json.dumps(by_options) == json.dumps(by_keywords) and by_options["line"] == "L"
    # keywords given beside an options object override it
    assert fit_points(_records(), options, line="other").line == "other"
    with pytest.raises(TypeError, match="predicted_slope"):
        fit_points(_records(), x="log V")
    few = fit_curve_points([], options)
    assert few.verdict.verdict == "inconclusive" and few.line == "L"

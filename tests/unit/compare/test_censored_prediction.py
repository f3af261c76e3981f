"""A check with a censored point is tested against the all-terms slope over every base value of the grid (a prediction
is frozen before the runs, so it cannot follow their gaps); the unreached base values are named, the slope over the
reached ones is kept beside for the reader, and each censored bound is set against the form's d there."""
from __future__ import annotations

import math

import numpy as np
import pytest

from recallkit.compare.assertions import _all_terms_over_fitted_bases
from recallkit.empirics.records import BoundaryPoint

FORM_D = {64: 98.9, 128: 242.2, 256: 713.8, 512: 2100.8, 1024: 9886.3}  # a form's d per V, steep at the top


def _form(d_of: dict) -> dict:
    """What the system's all-terms hook gives: d and the parameter count (d^2, attention-only) per V."""
    return {"d": d_of, "param_count": {V: d * d for V, d in d_of.items()}}


def _point(V: int, d: float, censored: bool = False, sizes=(8, 64, 8192)) -> BoundaryPoint:
    return BoundaryPoint(experiment="e", line="l", scaling=None, threshold=0.15, seed=None, base="V", base_value=V,
                         size="d", values={"V": V, "d": d}, param_count=d * d, censored=censored,
                         curve={"sizes": list(sizes)})


def _slope(pairs):
    return float(np.polyfit(np.log([V for V, _ in pairs]), 2 * np.log([d for _, d in pairs]), 1)[0])


def test_the_prediction_keeps_the_base_values_without_a_boundary_and_weighs_the_bound():
    every_slope = _slope(FORM_D.items())
    group = [_point(V, FORM_D[V] * 1.1) for V in (64, 128, 256, 512)] + [_point(1024, 8192, censored=True)]
    extra: dict = {}
    tested = _all_terms_over_fitted_bases(_form(FORM_D), group, "V", every_slope, extra)
    assert tested == every_slope  # the top V's steep rise stays in the tested slope
    reached = extra["predicted_slope_all_terms_reached_bases"]
    assert reached == pytest.approx(_slope([(V, FORM_D[V]) for V in (64, 128, 256, 512)]))
    assert reached < every_slope - 0.2  # what dropping it would have tested instead
    assert extra["unreached"] == [1024]
    (bound,) = extra["censored_against_all_terms"]
    assert bound == {"base": "V", "base_value": 1024, "size": "d", "bound": 8192, "past": True,
                     "predicted": FORM_D[1024], "agrees": True}


def test_a_bound_the_form_puts_on_the_other_side_is_against_it_and_nothing_censored_changes_nothing():
    form = {**FORM_D, 1024: 5000.0}  # the form says d = 5000, the runs did not reach the level by 8192
    group = [_point(V, FORM_D[V]) for V in (64, 128, 256, 512)] + [_point(1024, 8192, censored=True)]
    extra: dict = {}
    _all_terms_over_fitted_bases(_form(form), group, "V", 3.0, extra)
    assert extra["censored_against_all_terms"][0]["agrees"] is False
    # a curve that had already reached the level at its smallest size bounds the boundary from above
    low = [_point(V, FORM_D[V]) for V in (128, 256, 512, 1024)] + [_point(64, 8, censored=True)]
    extra = {}
    _all_terms_over_fitted_bases(_form(FORM_D), low, "V", 3.0, extra)
    assert extra["censored_against_all_terms"][0]["past"] is False
    assert extra["censored_against_all_terms"][0]["agrees"] is False  # the form's 98.9 is not below d = 8
    untouched: dict = {}
    full = [_point(V, d) for V, d in FORM_D.items()]
    assert _all_terms_over_fitted_bases(_form(FORM_D), full, "V", 3.28, untouched) == 3.28 and untouched == {}
    # a form out of reach at a V (d = inf) is the form's own gap, not the runs': the tested slope is the form's
    unreachable = {**FORM_D, 512: math.inf}
    extra = {}
    assert _all_terms_over_fitted_bases(_form(unreachable), group, "V", 3.0, extra) == 3.0
    assert extra["predicted_slope_all_terms_reached_bases"] == pytest.approx(
        _slope([(V, FORM_D[V]) for V in (64, 128, 256)]))

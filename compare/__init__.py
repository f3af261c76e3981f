"""compare stage of recallkit: exponent fits with confidence intervals, verdicts, assertions.

Public API (imported lazily, so that ``import recallkit.compare`` - which pytest does for the plugin in
every run - costs nothing until a name is used)::

    compare.fit_slope(x, y, seeds=None, *, alpha=0.05, n_bootstrap=2000, bootstrap_seed=0) -> SlopeFit
    compare.fit_constant(x, y, seeds=None, *, fixed_slope=1.0, alpha=0.05, ...) -> ConstantFit
    compare.fit_points(points, options=None, *, predicted_slope, x="log V", ...) -> FitResult
        (points: the search's BoundaryPoint records or dicts; options: a FitOptions, or its fields as keywords)
    compare.fit_boundary_points(points, predictions, *, kind, base, delta, alpha, ...) -> list[FitResult]
    compare.fit_experiment(path, *, store=None, preset="quick", ...) -> ExperimentFits  (stored results only)
    compare.decide(fit, predicted_slope, *, delta=0.25, alpha=0.05, log_power=0.0) -> Verdict
    compare.assert_slope(points_or_arrays, predicted, expect="consistent", ...) -> FitResult

compare fits and judges; it never trains. The convenience that runs a sweep first and then asserts is
orchestration: ``recallkit.assert_scaling`` / ``recallkit.sweep_and_fit``.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "fit_slope": "recallkit.compare.fits", "fit_constant": "recallkit.compare.fits", "fit_points": "recallkit.compare.results",
    "finite_range_slope": "recallkit.compare.fits", "FitResult": "recallkit.compare.results",
    "FitOptions": "recallkit.compare.results", "SlopeFit": "recallkit.compare.fits",
    "ConstantFit": "recallkit.compare.fits", "DEFAULT_ALPHA": "recallkit.compare.fits",
    "Verdict": "recallkit.compare.verdicts", "decide": "recallkit.compare.verdicts", "decide_numbers": "recallkit.compare.verdicts",
    "DEFAULT_DELTA": "recallkit.compare.verdicts",
    "assert_slope": "recallkit.compare.assertions",
    "fit_arrays": "recallkit.compare.assertions", "fit_boundary_points": "recallkit.compare.assertions",
    "fit_experiment": "recallkit.compare.assertions", "describe_fit": "recallkit.compare.assertions",
    "ExperimentFits": "recallkit.compare.assertions",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'compare' has no attribute {name!r}")

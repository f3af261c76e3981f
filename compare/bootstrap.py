"""The bootstrap over seeds that every resampled interval in compare rests on.

A resample draws ``n_units`` units (seeds, or points where there is a single seed) with replacement;
``n_resamples`` of them come from one ``numpy.random.default_rng(rng_seed).integers(0, n_units,
size=(n_resamples, n_units))`` call, resample r being row r. With numpy's PCG64 generator that is the
same stream as one ``rng.choice(units, size=n_units)`` call per resample (the bounded draws take their
32-bit words from one continuous buffer), so callers that drew one resample at a time give the same
resamples; tests/unit/compare/test_bootstrap.py holds numpy to that.

The callers differ in how they refit a resample, and :func:`bootstrap_over_units` takes that as its
``refit`` argument and a mode:

* one resample at a time (the default): ``refit`` gets the indices of the units drawn, in the order drawn;
* ``each_multiset_once``: the indices sorted, and one call per distinct multiset (the resamples that drew
  the same units share its result), for refits that are costly and blind to order (curve crossings);
* ``pooled``: every resample at once, as counts (how often each unit was drawn), for refits that are
  functions of per-unit sums, where one matrix product pools all resamples (OLS slopes, means).

A refit says that a resample is degenerate (it cannot be fitted: too few distinct x, a curve that does not
cross) by returning None (NaN in the pooled mode); such resamples are skipped and counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["Resampled", "bootstrap_over_units", "draw_resamples", "unit_counts"]


@dataclass(frozen=True)
class Resampled:
    """The statistic of every usable resample, in the order drawn, and how many resamples were degenerate."""

    values: Sequence[Any]  # a float array in the pooled mode, else a list of what refit returned
    n_degenerate: int


def draw_resamples(n_units: int, n_resamples: int, rng_seed: int) -> np.ndarray:
    """The units each resample draws (n_resamples x n_units indices into the units)."""
    rng = np.random.default_rng(rng_seed)
    return rng.integers(0, n_units, size=(n_resamples, n_units))


def unit_counts(draws: np.ndarray, n_units: int) -> np.ndarray:
    """How often each unit appears in each resample (n_resamples x n_units floats)."""
    n_resamples = draws.shape[0]
    counts = np.zeros((n_resamples, n_units))
    np.add.at(counts, (np.repeat(np.arange(n_resamples), n_units), draws.ravel()), 1.0)
    return counts


def _refit_each_multiset_once(draws: np.ndarray, refit: Callable[[np.ndarray], Any]) -> list[Any]:
    # With 6 seeds there are at most 462 distinct multisets among thousands of resamples.
    distinct, which = np.unique(np.sort(draws, axis=1), axis=0, return_inverse=True)
    fitted = [refit(units) for units in distinct]
    return [fitted[i] for i in np.asarray(which).reshape(-1).tolist()]


def bootstrap_over_units(
    n_units: int,
    n_resamples: int,
    rng_seed: int,
    refit: Callable[[np.ndarray], Any],
    *,
    each_multiset_once: bool = False,
    pooled: bool = False,
) -> Resampled:
    """Draw ``n_resamples`` resamples of ``n_units`` units (see :func:`draw_resamples`) and refit each.

    ``refit`` gets one resample's unit indices and returns its statistic, or None for a degenerate resample.
    ``each_multiset_once``: it gets them sorted, once per distinct multiset. ``pooled``: it gets the
    counts of every resample (:func:`unit_counts`) and returns one float per resample, NaN for a
    degenerate one; the values are then a float array."""
    if each_multiset_once and pooled:
        raise ValueError("bootstrap_over_units: each_multiset_once and pooled: expected at most one of them")
    draws = draw_resamples(n_units, n_resamples, rng_seed)
    if pooled:
        statistics = np.asarray(refit(unit_counts(draws, n_units)), dtype=float)
        usable = ~np.isnan(statistics)
        return Resampled(statistics[usable], int((~usable).sum()))
    if each_multiset_once:
        fitted = _refit_each_multiset_once(draws, refit)
    else:
        fitted = [refit(units) for units in draws]
    values = [value for value in fitted if value is not None]
    return Resampled(values, len(fitted) - len(values))

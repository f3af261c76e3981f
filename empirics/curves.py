"""Boundary sizes from seed-averaged accuracy curves (no torch; used by the search and by compare).

A curve is the metric of one (line, base value) at a set of sizes, for a set of seeds that were all
trained at every one of those sizes (common seeds). Its boundary for a threshold t is read off as:

1. average the metric over the common seeds at each size;
2. fit a non-decreasing function of log(size) to those means (isotonic regression, pool adjacent
   violators, equal weights): accuracy that falls as the model grows is noise, and the fit pools it
   instead of letting one unlucky seed move the answer;
3. the boundary is where the fit first reaches t, interpolated linearly in log(size) (and the parameter
   count at it linearly in log(parameter count)) between the last size below t and the first at or above.

Because every seed contributes to every size, the seeds can be resampled as whole curves (compare's
bootstrap), which is what makes an interval on the boundary honest. Per-seed integer bisection, by
contrast, puts each seed's answer on its own grid at its own noise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

__all__ = ["Crossing", "crossing", "curve_boundary", "isotonic_increasing", "mean_curve"]


def isotonic_increasing(values: Sequence[float], weights: Sequence[float] | None = None) -> list[float]:
    """The non-decreasing sequence closest to ``values`` in weighted least squares (pool adjacent violators)."""
    weights = [1.0] * len(values) if weights is None else [float(w) for w in weights]
    blocks: list[list[float]] = []  # [mean, weight, count]
    for value, weight in zip(values, weights):
        blocks.append([float(value), weight, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean2, w2, n2 = blocks.pop()
            mean1, w1, n1 = blocks.pop()
            total = w1 + w2
            blocks.append([(mean1 * w1 + mean2 * w2) / total, total, n1 + n2])
    out: list[float] = []
    for mean, _, count in blocks:
        out.extend([mean] * count)
    return out


@dataclass(frozen=True)
class Crossing:
    """Where a fitted curve reaches a threshold: ``size`` and ``param_count`` (interpolated, floats), or
    None with ``status`` ``"below"`` (already reached at the smallest size) or ``"above"`` (never reached)."""

    status: str  # "ok" | "below" | "above"
    size: float | None
    param_count: float | None
    bracket: tuple[int, int] | None  # the two sizes interpolated between


def crossing(sizes: Sequence[int], fitted: Sequence[float], threshold: float,
             param_counts: Sequence[float] | None = None) -> Crossing:
    """Where the non-decreasing ``fitted`` (at increasing ``sizes``) first reaches ``threshold``."""
    param_counts = list(sizes) if param_counts is None else list(param_counts)
    for i, value in enumerate(fitted):
        if value >= threshold:
            if i == 0:
                return Crossing("below", None, None, None)
            lo, hi = fitted[i - 1], value
            share = (threshold - lo) / (hi - lo)
            size = math.exp(math.log(sizes[i - 1]) + share * (math.log(sizes[i]) - math.log(sizes[i - 1])))
            count = math.exp(math.log(param_counts[i - 1])
                             + share * (math.log(param_counts[i]) - math.log(param_counts[i - 1])))
            return Crossing("ok", size, count, (int(sizes[i - 1]), int(sizes[i])))
    return Crossing("above", None, None, None)


def mean_curve(per_seed: Mapping[int, Mapping[int, float]], seeds: Sequence[int] | None = None
               ) -> tuple[list[int], list[float], list[int]]:
    """(sizes, mean metric, seeds used): the sizes at which every one of ``seeds`` (default: all seeds
    present) has a finite value, in increasing order, and the mean over those seeds at each."""
    seeds = sorted(per_seed) if seeds is None else list(seeds)
    if not seeds:
        return [], [], []
    common = None
    for seed in set(seeds):
        have = {s for s, v in per_seed.get(seed, {}).items() if isinstance(v, (int, float)) and math.isfinite(v)}
        common = have if common is None else common & have
    sizes = sorted(common or ())
    means = [sum(per_seed[seed][s] for seed in seeds) / len(seeds) for s in sizes]
    return sizes, means, list(seeds)


def curve_boundary(per_seed: Mapping[int, Mapping[int, float]], threshold: float,
                   param_counts: Mapping[int, float] | None = None, seeds: Sequence[int] | None = None) -> Crossing:
    """The boundary of one curve for one threshold: mean over ``seeds`` (resampled seeds may repeat),
    isotonic fit in log size, first crossing interpolated in log size."""
    sizes, means, _ = mean_curve(per_seed, seeds)
    if not sizes:
        return Crossing("above", None, None, None)
    fitted = isotonic_increasing(means)
    counts = None if param_counts is None else [param_counts[s] for s in sizes]
    return crossing(sizes, fitted, threshold, counts)

"""Per-seed boundary points (of the bisection and the grid) and the monotonicity check over every probe.

A point is built from the driver's records (the probe's config and metrics); the check reads every probe the
sweep keyed, whichever strategy asked for it, and reports crossings that go the wrong way along the size axis:
they are reported, never smoothed away.
"""
from __future__ import annotations

import dataclasses

from recallkit.empirics.records import SIZE_SYMBOLS, BoundaryPoint, Violation
from recallkit.empirics.search_types import Prober

__all__ = ["mark_non_monotone", "monotonicity_violations", "seed_point"]


def seed_point(driver: Prober, li: int, b: int, seed: int, t: float, size: int | None, censored: bool,
               reason: str | None) -> BoundaryPoint:
    """The boundary point of one seed: the answer's config values and metric, or no size when unknown."""
    exp = driver.exp
    line = exp.lines[li]
    values = {exp.base: b}
    found: dict = {"param_count": None}
    if size is not None:
        h = driver.key(li, b, size, seed)
        config = driver.config_of[h]
        values.update((name, config[name]) for name in SIZE_SYMBOLS if name in config)
        entry = driver.cache.get(h)
        metrics = entry if isinstance(entry, dict) else {}
        found = {"param_count": metrics.get("param_count"), "metric_value": metrics.get(exp.metric_of(li)),
                 "config_hash": h}
    else:
        values[exp.size] = None
    return BoundaryPoint(experiment=exp.name, line=line.label, scaling=line.theory_scaling, threshold=t, seed=seed,
                         base=exp.base, base_value=b, size=exp.size, values=values, metric=exp.metric,
                         censored=censored, censor_reason=reason, largest=exp.kind == "max_capacity", **found)


def mark_non_monotone(points: list[BoundaryPoint], violations: list[Violation]) -> list[BoundaryPoint]:
    """The per-seed points, each flagged when its (line, base value, seed, threshold) has a violation."""
    flagged = {(v.line, v.base_value, v.seed, v.threshold) for v in violations}
    return [dataclasses.replace(p, non_monotone=(p.line, p.base_value, p.seed, p.threshold) in flagged)
            for p in points]


def monotonicity_violations(driver: Prober) -> list[Violation]:
    """Threshold crossings that go the wrong way along the size axis (reported, never hidden)."""
    exp = driver.exp
    out = []
    groups: dict[tuple[int, int, int], dict[int, float]] = {}
    for li, b, s, seed in driver.hash_of:
        value = driver.metric(li, b, s, seed)
        if isinstance(value, float):
            groups.setdefault((li, b, seed), {})[s] = value
    for (li, b, seed), values in sorted(groups.items()):
        for t in exp.thresholds:
            reached = sorted(s for s, v in values.items() if exp.reaches(v, t))
            missed = sorted(s for s, v in values.items() if not exp.reaches(v, t))
            if exp.kind == "max_capacity":
                bad = [(r, m) for m in missed[:1] for r in reached if r > m]
            else:
                bad = [(r, m) for r in reached[:1] for m in missed if m > r]
            if bad:
                largest = exp.kind == "max_capacity"
                out.append(Violation(
                    line=exp.lines[li].label, base=exp.base, base_value=b, seed=seed, threshold=t, size=exp.size,
                    reached_at=[r for r, _ in bad] if largest else bad[0][0],
                    missed_at=bad[0][1] if largest else [m for _, m in bad],
                    values={k: values[k] for k in sorted(values)}, largest=largest))
    return out

"""Per-seed boundary points (of the bisection and the grid) and the monotonicity check over every probe.

A point is built from the driver's records (the probe's config and metrics); the check reads every probe the
sweep keyed, whichever strategy asked for it, and reports crossings that go the wrong way along the size axis:
they are reported, never smoothed away.
"""
from __future__ import annotations

from typing import Any

from recallkit.empirics.search_types import Prober

__all__ = ["mark_non_monotone", "monotonicity_violations", "seed_point"]


def seed_point(driver: Prober, li: int, b: int, seed: int, t: float, size: int | None, censored: bool,
               reason: str | None) -> dict:
    """The boundary point of one seed: the answer's config values and metric, or no size when unknown."""
    exp = driver.exp
    line = exp.lines[li]
    point: dict[str, Any] = {
        "experiment": exp.name, "line": line.label, "scaling": line.theory_scaling, "threshold": t, "seed": seed,
        exp.base: b,
    }
    if size is not None:
        h = driver.key(li, b, size, seed)
        config = driver.config_of[h]
        for name in ("V", "N", "R", "L", "d", "m"):
            if name in config:
                point[name] = config[name]
        entry = driver.cache.get(h)
        metrics = entry if isinstance(entry, dict) else {}
        point["param_count"] = metrics.get("param_count")
        point[exp.metric] = metrics.get(exp.metric_of(li))
        point["config_hash"] = h
    else:
        point[exp.size] = None
        point["param_count"] = None
    point["censored"] = censored
    point["censor_reason"] = reason
    return point


def mark_non_monotone(driver: Prober, points: list[dict], violations: list[dict]) -> None:
    """Flag each per-seed point whose (line, base value, seed, threshold) has a violation."""
    exp = driver.exp
    flagged = {(v["line"], v[exp.base], v["seed"], v["threshold"]) for v in violations}
    for p in points:
        p["non_monotone"] = (p["line"], p[exp.base], p["seed"], p["threshold"]) in flagged


def monotonicity_violations(driver: Prober) -> list[dict]:
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
            reached = sorted(s for s, v in values.items() if v >= t)
            missed = sorted(s for s, v in values.items() if v < t)
            if exp.kind == "max_capacity":
                bad = [(r, m) for m in missed[:1] for r in reached if r > m]
            else:
                bad = [(r, m) for r in reached[:1] for m in missed if m > r]
            if bad:
                out.append({
                    "line": exp.lines[li].label, exp.base: b, "seed": seed, "threshold": t,
                    "reached_at": [r for r, _ in bad] if exp.kind == "max_capacity" else bad[0][0],
                    "missed_at": bad[0][1] if exp.kind == "max_capacity" else [m for _, m in bad],
                    exp.size + "_values": {str(k): values[k] for k in sorted(values)},
                })
    return out

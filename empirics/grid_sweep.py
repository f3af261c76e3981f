"""The grid strategy (``kind = "grid"``): every (line, base value, size, seed) of the preset's product in
one round, for heatmaps; each seed's boundary point is then read off the grid (the smallest size that
reaches the threshold, or for ``max_capacity`` the largest).

The point sweep of a law experiment (``kind = "law"``) is the same product without a size: every (line, base
value, seed) is one run, stored and reused like a grid cell, and each run is one point of the law's check (its
metric against the base, ``BoundaryPoint.variable``); a run that failed, is missing from the store or whose
metric is not positive (no logarithm) is a censored point with the reason."""
from __future__ import annotations

import math
import sys

from recallkit.empirics.records import SIZE_SYMBOLS, BoundaryPoint, Violation
from recallkit.empirics.search_points import mark_non_monotone, seed_point
from recallkit.empirics.search_types import Failure, Prober


__all__ = ["GridSweep"]


class GridSweep:
    """The full product in one executor call (the engine batches whatever shares a shape)."""

    def __init__(self, driver: Prober):
        self.driver = driver
        self.exp = driver.exp

    def search(self) -> None:
        exp, driver = self.exp, self.driver
        wanted: dict[str, dict] = {}
        for li in range(len(exp.lines)):
            for b in exp.values_of(li):
                for s in self._sizes():
                    for seed in exp.seeds:
                        h = driver.key(li, b, s, seed)
                        wanted[h] = driver.config_of[h]
        bar = None
        if driver.progress and wanted:
            from tqdm import tqdm  # only with a progress bar: a replay must not pay tqdm's import

            # the product is one executor call (one batch per shape): the bar says how many models it trains
            bar = tqdm(total=len(wanted), desc=exp.name, unit="model", file=sys.stderr, leave=False)
        try:
            driver.execute(wanted)
        finally:
            if bar is not None:
                bar.update(len(wanted))
                bar.close()

    def _sizes(self) -> list[int]:
        # a law's run has no size: 0 stands for it in the driver's keys (build_config leaves it out)
        return [0] if self.exp.kind == "law" else self.exp.sizes

    def points(self, violations: list[Violation]) -> list[BoundaryPoint]:
        exp = self.exp
        if exp.kind == "law":
            return [self._law_point(li, b, seed) for li in range(len(exp.lines)) for b in exp.values_of(li)
                    for seed in exp.seeds]
        points = [self._point(li, b, seed, t) for li in range(len(exp.lines)) for b in exp.values_of(li)
                  for seed in exp.seeds for t in exp.thresholds]
        return mark_non_monotone(points, violations)

    def budget_runs(self) -> list[dict]:
        return []  # a grid has no answer whose neighbour a larger budget could move

    def _point(self, li: int, b: int, seed: int, t: float) -> BoundaryPoint:
        exp, driver = self.exp, self.driver
        known = driver.known(li, b, seed)
        failed = [s for s, v in known.items() if isinstance(v, Failure)]
        if failed:
            return seed_point(driver, li, b, seed, t, None, True,
                              f"{known[failed[0]].message} at {exp.size}={failed[0]}")
        reached = sorted(s for s, v in known.items() if exp.reaches(v, t))
        if not reached:
            return seed_point(driver, li, b, seed, t, max(known), True, f"no {exp.size} in the grid reached {t}")
        size = reached[0] if exp.kind != "max_capacity" else reached[-1]
        censored = size == min(exp.sizes)
        return seed_point(driver, li, b, seed, t, size, censored,
                          f"already reached {t} at the smallest grid {exp.size}={size}" if censored else None)

    def _law_point(self, li: int, b: int, seed: int) -> BoundaryPoint:
        """One run of a law experiment as a point of its line's check: the base value, the other variables of its
        config, and the metric (censored, with the reason, when there is no positive value to take the log of)."""
        exp, driver = self.exp, self.driver
        line, metric = exp.lines[li], exp.metric_of(li)
        h = driver.key(li, b, 0, seed)
        config = driver.config_of[h]
        values = {exp.base: b}
        values.update((name, config[name]) for name in (*SIZE_SYMBOLS, *exp.variables)
                      if name in config and name != exp.base)
        value = driver.metric(li, b, 0, seed)
        entry = driver.cache.get(h)
        measured = entry if isinstance(entry, dict) else {}
        reason = None
        if value is None or isinstance(value, Failure):
            reason = value.message if value is not None else "not run"
        elif not (math.isfinite(value) and value > 0):
            reason = f"{metric} = {value:g} is not positive; log({metric}) is undefined"
        return BoundaryPoint(experiment=exp.name, line=line.label, scaling=line.theory_scaling, threshold=None,
                             seed=seed, base=exp.base, base_value=b, size=exp.size, values=values,
                             param_count=measured.get("param_count"), metric=metric,
                             metric_value=value if isinstance(value, float) else None,
                             config_hash=h if measured else None, censored=reason is not None,
                             censor_reason=reason, variable=exp.base)

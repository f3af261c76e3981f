"""The grid strategy (``kind = "grid"``): every (line, base value, size, seed) of the preset's product in
one round, for heatmaps; each seed's boundary point is then read off the grid (the smallest size that
reaches the threshold, or for ``max_capacity`` the largest)."""
from __future__ import annotations


from recallkit.empirics.records import BoundaryPoint, Violation
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
                for s in exp.sizes:
                    for seed in exp.seeds:
                        h = driver.key(li, b, s, seed)
                        wanted[h] = driver.config_of[h]
        driver.execute(wanted)

    def points(self, violations: list[Violation]) -> list[BoundaryPoint]:
        exp = self.exp
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
        reached = sorted(s for s, v in known.items() if v >= t)
        if not reached:
            return seed_point(driver, li, b, seed, t, max(known), True, f"no {exp.size} in the grid reached {t}")
        size = reached[0] if exp.kind != "max_capacity" else reached[-1]
        censored = size == min(exp.sizes)
        return seed_point(driver, li, b, seed, t, size, censored,
                          f"already reached {t} at the smallest grid {exp.size}={size}" if censored else None)

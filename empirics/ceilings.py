"""What a curve search reads off the driver's records: each seed's curve at one (line, base value), and the
instance's ceiling that relative thresholds are fractions of.

The ceiling of an instance at base value b is the highest seed-mean metric at the ceiling size
(``search.ceiling``) over the lines of the same instance: the same config apart from the searched size, the
sizes tied to it (such as m = d**k) and the seed, so that lines that differ only in width share one ceiling.
"""
from __future__ import annotations

import json

from recallkit.empirics.curves import mean_curve
from recallkit.empirics.search_sizes import SizeLattice
from recallkit.empirics.search_types import Prober


__all__ = ["InstanceCeilings", "SeedCurves"]

PerSeed = dict[int, dict[int, float]]  # seed -> {size: metric}


class SeedCurves:
    """Per-seed curves of one (line, base value), from every probe the driver has a result for."""

    def __init__(self, driver: Prober, sizes: SizeLattice):
        self.driver = driver
        self.sizes = sizes

    def data(self, li: int, b: int) -> tuple[PerSeed, dict[int, float], set[int]]:
        """(per seed {size: metric}, {size: param_count}, sizes probed for any seed, failures included)."""
        driver = self.driver
        per_seed: PerSeed = {}
        counts: dict[int, float] = {}
        probed: set[int] = set()
        for seed in driver.exp.seeds:
            values = {}
            for size, value in driver.known(li, b, seed).items():
                probed.add(size)
                if isinstance(value, float):
                    values[size] = value
                    entry = driver.cache.get(driver.hash_of[(li, b, size, seed)])
                    if isinstance(entry, dict) and entry.get("param_count"):
                        counts[size] = float(entry["param_count"])
            per_seed[seed] = values
        return per_seed, counts, probed

    def in_range(self, per_seed: PerSeed, li: int) -> tuple[list[int], list[float]]:
        """The seed-mean curve at the sizes every seed has, inside [search.min, search.max] (a ceiling size
        above search.max is used for the ceiling only)."""
        sizes, means, _ = mean_curve(per_seed, self.driver.exp.seeds)
        search = self.sizes.search(li)
        keep = [i for i, size in enumerate(sizes) if search.min <= size <= search.max]
        return [sizes[i] for i in keep], [means[i] for i in keep]


class InstanceCeilings:
    """The instance ceilings of one experiment, and the absolute value of every threshold at them."""

    def __init__(self, driver: Prober, sizes: SizeLattice, curves: SeedCurves):
        self.driver = driver
        self.exp = driver.exp
        self.sizes = sizes
        self.curves = curves
        self._keys: dict[tuple[int, int], str] = {}  # a pure function of (line, base value), asked per round

    def key(self, li: int, b: int) -> str:
        """What makes two lines the same instance at base value b: their configs apart from the searched size,
        the sizes tied to it (e.g. m = d**k) and the seed."""
        if (li, b) not in self._keys:
            exp, search = self.exp, self.sizes.search(li)
            config = exp.build_config(exp.lines[li], b, search.min, exp.seeds[0])
            other = exp.build_config(exp.lines[li], b, search.min + 1, exp.seeds[0])
            tied = {k for k in config if config[k] != other.get(k)}
            self._keys[(li, b)] = json.dumps({k: v for k, v in config.items() if k not in tied and k != "seed"},
                                             sort_keys=True, default=str)
        return self._keys[(li, b)]

    def ceiling(self, li: int, b: int) -> dict | None:
        """The instance's ceiling at base value b: the highest seed-mean metric at the ceiling size of any line
        of the same instance, with that line's per-seed values. None while no such ceiling has a result for
        every seed."""
        exp = self.exp
        key = self.key(li, b)
        best = None
        for lj in range(len(exp.lines)):
            if lj != li and self.key(lj, b) != key:
                continue
            size = self.sizes.search(lj).ceiling_size(exp.base, b)
            per_seed, _, _ = self.curves.data(lj, b)
            sizes, means, _ = mean_curve(per_seed, exp.seeds)
            if size not in sizes:
                continue
            mean = means[sizes.index(size)]
            if best is None or mean > best["mean"]:
                best = {"line": exp.lines[lj].label, exp.size: size, "mean": mean,
                        "per_seed": [per_seed[seed][size] for seed in exp.seeds]}
        return best

    def targets(self, li: int, b: int) -> list[tuple[float, bool, float | None]]:
        """(threshold as written, relative?, absolute value or None when the ceiling is unknown)."""
        ceiling = self.ceiling(li, b)
        out = []
        for value, relative in self.exp.threshold_targets():
            if relative:
                out.append((value, True, None if ceiling is None else value * ceiling["mean"]))
            else:
                out.append((value, False, value))
        return out

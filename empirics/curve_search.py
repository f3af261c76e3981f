"""The curve strategy (``search.method = "curve"``, min_size only): one curve per (line, base value).

Every seed is trained at the same sizes, the metric is averaged over the seeds, a non-decreasing fit in
log(size) is taken (:mod:`~recallkit.empirics.curves`) and each threshold's boundary is interpolated in log
size. The first round probes ``search.points`` sizes spaced by ``search.ratio`` around the guess, plus, when the
experiment has relative thresholds, the instance's ceiling size (``search.ceiling``); later rounds widen by
``expand`` (up to the line's ceiling size, or its ``search.reach``, and ``search.max``) where a threshold is not bracketed and bisect in
log size where a bracket is wider than ``resolution``. Thresholds may be fractions of the instance's ceiling
(:mod:`~recallkit.empirics.ceilings`). The points carry the per-seed curves, so compare can bootstrap the seeds.
A curve waits for the previous base value's curve of its line: its answer calibrates this one's guess.
"""
from __future__ import annotations

import math
import sys
from typing import Any

from recallkit.empirics.ceilings import InstanceCeilings, SeedCurves
from recallkit.empirics.curves import crossing, isotonic_increasing, mean_curve
from recallkit.empirics.records import BoundaryPoint, Violation
from recallkit.empirics.search_sizes import SizeLattice
from recallkit.empirics.search_types import Prober


__all__ = ["CurveSearch"]

CurveKey = tuple[int, int]  # (line index, base index)


class CurveSearch:
    """Seed-mean curves, searched round by round until every threshold of every curve is settled."""

    def __init__(self, driver: Prober):
        self.driver = driver
        self.exp = exp = driver.exp
        self.sizes = SizeLattice(exp)
        self.curves = SeedCurves(driver, self.sizes)
        self.ceilings = InstanceCeilings(driver, self.sizes, self.curves)
        self.keys: list[CurveKey] = [(li, bi) for li in range(len(exp.lines)) for bi in range(len(exp.values_of(li)))]
        self.guesses: dict[CurveKey, int] = {}
        self.done: set[CurveKey] = set()
        self.answers: dict[CurveKey, float | None] = {}

    # ------------------------------------------------------------------ the strategy
    def search(self) -> None:
        bar = None
        rounds = 0
        try:
            while len(self.done) < len(self.keys):
                wanted: dict[str, dict] = {}
                for li, bi in self.keys:
                    if (li, bi) in self.done or (bi > 0 and (li, bi - 1) not in self.done):
                        continue  # the previous base value calibrates this one's guess
                    self._propose(li, bi, wanted)
                if wanted:
                    self.driver.execute(wanted)
                rounds += 1
                # made once a round has run (a round the budget refuses leaves one line, the refusal, on stderr)
                bar = bar or self._bar()
                if bar is not None:
                    bar.update(len(self.done) - bar.n)
                    bar.set_postfix_str(f"round {rounds}: {len(wanted)} models", refresh=True)
        finally:
            if bar is not None:
                bar.update(len(self.done) - bar.n)
                bar.refresh()
                bar.close()

    def _bar(self):
        """The curves settled, on stderr, when the driver shows progress."""
        if not self.driver.progress:
            return None
        from tqdm import tqdm  # imported only with a progress bar: a replay must not pay tqdm's import

        return tqdm(total=len(self.keys), desc=self.exp.name, unit="curve", file=sys.stderr, leave=False)

    def points(self, violations: list[Violation]) -> list[BoundaryPoint]:
        # a curve point's non_monotone is its own seed-mean curve's; the per-seed violations stay in the result
        points = []
        for li, bi in self.keys:
            points.extend(self._curve_points(li, bi))
        return points

    def budget_runs(self) -> list[dict]:
        return []  # the budget check is the bisection's

    # ------------------------------------------------------------------ rounds
    def _propose(self, li: int, bi: int, wanted: dict[str, dict]) -> None:
        """Put the curve's next sizes (every seed) into ``wanted``, or settle it and keep its answer."""
        driver, exp = self.driver, self.exp
        if (li, bi) not in self.guesses:
            self.guesses[(li, bi)] = self._guess(li, bi)
        b = exp.values_of(li)[bi]
        step = self._step(li, bi, self.guesses[(li, bi)])
        if not step:
            self.done.add((li, bi))
            self.answers[(li, bi)] = self._answer(li, b)
            return
        for size in step:
            for seed in exp.seeds:
                h = driver.key(li, b, size, seed)
                if h not in driver.cache:
                    wanted[h] = driver.config_of[h]

    def _guess(self, li: int, bi: int) -> int:
        """The first curve's: ``search.start`` (or the log-midpoint); later ones: the previous answer moved along
        the plan's exponents (x = 0.5 without them)."""
        exp, search = self.exp, self.sizes.search(li)
        b = exp.values_of(li)[bi]
        if bi == 0:
            guess = search.start.evaluate({exp.base: b}) if search.start is not None else math.sqrt(search.min * search.max)
            return self.sizes.clamp(round(guess), li)
        previous = [(exp.values_of(li)[k], self.answers.get((li, k))) for k in range(bi)]
        previous = [(bv, a) for bv, a in previous if a]
        if not previous:
            return self.sizes.clamp(round(math.sqrt(search.min * search.max)), li)
        x, y = self.driver.plan.search_exponents.get(exp.lines[li].label) or (0.5, 0.0)
        b_prev, a_prev = previous[-1]
        guess = a_prev * (b / b_prev) ** x
        if y and b > 1 and b_prev > 1:
            guess *= (math.log(b) / math.log(b_prev)) ** y
        return self.sizes.clamp(round(guess), li)

    def _answer(self, li: int, b: int) -> float | None:
        """The mean in log size of the boundaries found (the next base value's guess is calibrated on it). Those
        found past the ceiling size (``search.reach``) count only where no other was found: such a threshold sits
        near the line's cap, where the curve is flat, and moving the next first round out to it would leave the
        thresholds the ceiling size brackets with fewer sizes around them."""
        per_seed, _, _ = self.curves.data(li, b)
        sizes, means = self.curves.in_range(per_seed, li)
        if not sizes:
            return None
        fitted = isotonic_increasing(means)
        found = [crossing(sizes, fitted, t).size for _, _, t in self.ceilings.targets(li, b) if t is not None]
        found = [f for f in found if f]
        ceiling = self.sizes.search(li).ceiling_size(self.exp.base, b)
        found = [f for f in found if f <= ceiling] or found
        return math.exp(sum(math.log(f) for f in found) / len(found)) if found else None

    def _step(self, li: int, bi: int, guess: int) -> list[int]:
        """The next sizes to probe (for every seed) on the curve of (line, base index); [] when done."""
        exp, search = self.exp, self.sizes.search(li)
        b = exp.values_of(li)[bi]
        per_seed, _, probed = self.curves.data(li, b)
        # the line's own ceiling size is the largest size a curve search needs (below: "above"), or its reach
        cap = search.reach_size(exp.base, b)
        if not probed:
            return self._first_sizes(li, b, guess, cap)
        sizes, means = self.curves.in_range(per_seed, li)
        if not sizes:
            return []
        fitted = isotonic_increasing(means)
        proposals: set[int] = set()
        for _, _, target in self.ceilings.targets(li, b):
            if target is not None:
                self._propose_for(li, sizes, fitted, target, cap, proposals)
        return sorted(p for p in proposals if p not in probed)

    def _first_sizes(self, li: int, b: int, guess: int, cap: int) -> list[int]:
        """``search.points`` sizes spaced by ``search.ratio`` around the guess (none above the cap), and the
        ceiling size where a threshold is relative to it."""
        exp, search = self.exp, self.sizes.search(li)
        half = (search.points - 1) / 2
        sizes = {min(self.sizes.clamp(round(guess * search.ratio ** (j - half)), li), cap) for j in range(search.points)}
        if exp.relative_thresholds:  # the instance's ceiling is measured only for thresholds relative to it
            sizes.add(search.ceiling_size(exp.base, b))
        return sorted(sizes)

    def _propose_for(self, li: int, sizes: list[int], fitted: list[float], target: float, cap: int,
                     proposals: set[int]) -> None:
        """One threshold's next size: outward where the fit does not cross it, the midpoint of a wide bracket."""
        search = self.sizes.search(li)
        found = crossing(sizes, fitted, target)
        if found.status == "below":
            bottom = min(sizes)
            if bottom > search.min:
                proposals.add(self.sizes.clamp(math.floor(bottom / search.expand), li))
        elif found.status == "above":
            # a threshold the curve does not reach by the line's own ceiling size (or its reach) is censored
            # there (it may be another line's ceiling that sets the target)
            top = max(sizes, default=search.min)
            if top < cap:
                proposals.add(min(self.sizes.clamp(math.ceil(top * search.expand), li), cap))
        else:
            lo, hi = found.bracket
            if hi - lo > 1 and hi > lo * (1 + search.resolution):
                mid = min(max(round(math.sqrt(lo * hi)), lo + 1), hi - 1)
                if search.min <= mid <= search.max:
                    proposals.add(mid)

    # ------------------------------------------------------------------ points
    def _curve_points(self, li: int, bi: int) -> list[BoundaryPoint]:
        """One point per threshold of the curve of (line, base index), each carrying the whole curve."""
        exp, driver = self.exp, self.driver
        b = exp.values_of(li)[bi]
        per_seed, counts, probed = self.curves.data(li, b)
        all_sizes, _, _ = mean_curve(per_seed, exp.seeds)
        sizes, means = self.curves.in_range(per_seed, li)
        search = self.sizes.search(li)
        shared = {
            "b": b, "sizes": sizes, "counts": counts, "means": means, "search": search,
            "fitted": isotonic_increasing(means) if sizes else [],
            "ceiling": search.ceiling_size(exp.base, b), "instance_ceiling": self.ceilings.ceiling(li, b),
            "config": driver.config_of[driver.key(li, b, sizes[0] if sizes else search.min, exp.seeds[0])],
        }
        failed = sorted(s for s in probed if s not in all_sizes)
        shared["curve"] = {
            "sizes": sizes, "param_counts": [counts.get(s) for s in sizes], "seeds": list(exp.seeds),
            "metric": [[per_seed[seed][s] for s in sizes] for seed in exp.seeds], "mean": means,
            "fitted": shared["fitted"], "failed_sizes": failed}
        return [self._point(li, target, shared) for target in self.ceilings.targets(li, b)]

    def _point(self, li: int, target_of: tuple[float, bool, float | None], shared: dict[str, Any]) -> BoundaryPoint:
        """The point of one threshold on a curve: its crossing, or censored with the bound and the reason."""
        exp = self.exp
        line, b, sizes, config = exp.lines[li], shared["b"], shared["sizes"], shared["config"]
        written, relative, target = target_of
        values: dict[str, Any] = {exp.base: b}
        values.update((name, config[name]) for name in ("N", "R", "L") if name in config)
        found = None
        if target is not None and sizes:
            found = crossing(sizes, shared["fitted"], target, [shared["counts"][s] for s in sizes])
        answer: dict[str, Any]
        if found is not None and found.status == "ok":
            values[exp.size] = found.size
            if "m" in config:
                values["m"] = found.param_count / found.size if exp.size == "d" else config["m"]
            answer = {"param_count": found.param_count, "bracket": tuple(found.bracket),
                      "config_hash": self.driver.key(li, b, found.bracket[1], exp.seeds[0]),
                      "censored": False, "censor_reason": None}
        else:
            bound, reason = self._censor(found, target, shared)
            values[exp.size] = bound
            answer = {"param_count": shared["counts"].get(bound) if bound is not None else None,
                      "censored": True, "censor_reason": reason}
        means = shared["means"]
        return BoundaryPoint(
            experiment=exp.name, line=line.label, scaling=line.theory_scaling, threshold=written, seed=None,
            base=exp.base, base_value=b, size=exp.size, values=values, metric=exp.metric, relative=relative,
            threshold_value=target, n_seeds=len(exp.seeds),
            ceiling=shared["instance_ceiling"] or {exp.size: shared["ceiling"], "mean": None, "per_seed": None},
            curve=shared["curve"], non_monotone=any(b2 < a2 for a2, b2 in zip(means, means[1:])), **answer)

    def _censor(self, found, target: float | None, shared: dict[str, Any]) -> tuple[int | None, str]:
        """(bound, reason) of a censored point: it carries the bound it is censored at where there is one (as
        the bisection's do): the largest size run when the curve never reached the target, the smallest when it
        already had; None when nothing is known."""
        exp, sizes, search = self.exp, shared["sizes"], shared["search"]
        bound = None
        if found is not None and found.status in ("above", "below") and sizes:
            bound = max(sizes) if found.status == "above" else sizes[0]
        if target is None:
            reason = f"the ceiling at {exp.size}={shared['ceiling']} is unknown (failed or not run)"
        elif found is None:
            reason = "no size has a result for every seed"
        elif found.status == "below":
            reason = f"the seed-mean curve already reached {target:.4g} at {exp.size}={sizes[0]}"
        else:
            reach = search.reach_size(exp.base, shared["b"])
            reach_note = f", its reach {reach}" if reach > shared["ceiling"] else ""
            reason = (f"the seed-mean curve did not reach {target:.4g} by {exp.size}="
                      f"{max(sizes, default=search.max)} (the line's ceiling size "
                      f"{shared['ceiling']}{reach_note}, search.max {search.max})")
        return bound, reason

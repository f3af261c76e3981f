"""The bisection strategy (``search.method = "bisect"``, the default): per seed, the integer boundary of each
cell (line, base value, seed, threshold).

1. First guess. At the first base value: ``search.start`` (or the log-midpoint of the bounds). At later base
   values: the previous base value's answer (median over seeds) moved along the predicted boundary
   ``size ~ base**x (log base)**y`` (the plan's exponents, else the slope of the last two answers, else x = 1
   for capacity and 0.5 for min size); only the constant is calibrated from data.
2. Bracket: probe guess/bracket and guess*bracket together; widen by ``expand`` until the threshold is
   crossed or a search bound is hit (then the point is censored, with the reason).
3. Bisect in log(size) until hi - lo <= 1 or hi <= lo*(1+resolution); on a ``search.grid`` over the grid index,
   so it ends with the answer and its failed neighbour one grid step apart.
Every active cell's next probes go into one round; a cell waits until every seed of the previous base value
has its answer, which calibrates its guess.
"""
from __future__ import annotations

import math
import statistics
import sys

from recallkit.empirics.budget_check import BudgetCheck
from recallkit.empirics.records import BoundaryPoint, Violation
from recallkit.empirics.search_points import mark_non_monotone, seed_point
from recallkit.empirics.search_sizes import SizeLattice
from recallkit.empirics.search_types import Cell, CellKey, CellResult, Failure, Prober
from recallkit.theory.errors import RecallkitError


__all__ = ["BisectionSearch"]

class BisectionSearch:
    """Per-seed bisection of every cell, with the training-budget check afterwards where there is one."""

    def __init__(self, driver: Prober, budget: BudgetCheck | None = None):
        self.driver = driver
        self.exp = driver.exp
        self.sizes = SizeLattice(driver.exp)
        self.budget = budget
        exp = self.exp
        self.cells = [Cell(li, bi, seed, t) for li in range(len(exp.lines)) for bi in range(len(exp.values_of(li)))
                      for seed in exp.seeds for t in exp.thresholds]
        self.by_key: dict[CellKey, Cell] = {(c.line_index, c.base_index, c.seed, c.threshold): c for c in self.cells}

    # ------------------------------------------------------------------ the strategy
    def search(self) -> None:
        bar = None
        if self.driver.progress:
            # imported only with a progress bar: a replay must not pay tqdm's import
            from tqdm import tqdm

            bar = tqdm(total=len(self.cells), desc=self.exp.name, unit="cell", file=sys.stderr, leave=False)
        try:
            self._bisect_all(bar)
        finally:
            if bar is not None:
                bar.close()
        if self.budget is not None:
            self.budget.run(self.cells)

    def points(self, violations: list[Violation]) -> list[BoundaryPoint]:
        points = []
        for c in self.cells:
            r = c.result
            points.append(seed_point(self.driver, c.line_index, r.base_value, c.seed, c.threshold, r.size,
                                     r.censored, r.censor_reason))
        points = mark_non_monotone(points, violations)
        if self.budget is not None:
            points = self.budget.annotate(points)
        return points

    def budget_runs(self) -> list[dict]:
        return self.budget.runs() if self.budget is not None else []

    # ------------------------------------------------------------------ rounds
    def _bisect_all(self, bar) -> None:
        """Round after round until every cell has its result."""
        while True:
            wanted: dict[str, dict] = {}
            active = 0
            for cell in self.cells:
                if cell.result is None and self._ready(cell):
                    active += self._propose(cell, wanted, bar)
            if not wanted:
                if all(c.result is not None for c in self.cells):
                    return
                if active == 0 and not any(c.result is None and self._ready(c) for c in self.cells):
                    raise RecallkitError("search made no progress (bug)")
                continue
            self.driver.execute(wanted)

    def _ready(self, cell: Cell) -> bool:
        """Whether every seed of the previous base value has its answer (it calibrates this cell's guess)."""
        return cell.base_index == 0 or all(
            self.by_key[(cell.line_index, cell.base_index - 1, seed, cell.threshold)].result is not None
            for seed in self.exp.seeds)

    def _propose(self, cell: Cell, wanted: dict[str, dict], bar) -> int:
        """Put the cell's next probes into ``wanted`` (1: it is active), or settle its result (0)."""
        driver = self.driver
        b = self.exp.values_of(cell.line_index)[cell.base_index]
        if cell.guess is None:
            cell.guess = self._first_guess(cell)
        step = self._step(cell, driver.known(cell.line_index, b, cell.seed))
        if isinstance(step, CellResult):
            cell.result = step
            if bar is not None:
                bar.update(1)
            return 0
        cell.rounds += 1
        for size in step:
            seen = (cell.line_index, b, size, cell.seed) in driver.hash_of
            h = driver.key(cell.line_index, b, size, cell.seed)
            if h in driver.cache:
                if seen:
                    raise RecallkitError(f"search proposed an already-probed point {size} (bug)")
                continue  # another line's probe of the same config (lines that differ in metric only)
            wanted[h] = driver.config_of[h]
        return 1

    # ------------------------------------------------------------------ one cell
    def _first_guess(self, cell: Cell) -> int:
        exp, li = self.exp, cell.line_index
        search = self.sizes.search(li)
        base_values = exp.values_of(li)
        b = base_values[cell.base_index]
        if cell.base_index == 0:
            if search.start is not None:
                guess = search.start.evaluate({exp.base: b})
            else:
                guess = math.sqrt(search.min * search.max)
            return self.sizes.clamp(round(guess), li)
        previous = []  # (base value, median answer over seeds) for earlier base values, nearest last
        for k in range(cell.base_index):
            answers = [self.by_key[(li, k, seed, cell.threshold)].result.size for seed in exp.seeds]
            answers = [a for a in answers if a is not None]
            if answers:
                previous.append((base_values[k], statistics.median(answers)))
        if not previous:
            return self.sizes.clamp(round(search.max if exp.kind == "min_size" else search.min), li)
        b_prev, a_prev = previous[-1]
        exponents = self.driver.plan.search_exponents.get(exp.lines[li].label)
        if exponents is None and len(previous) >= 2:
            (b0, a0), (b1, a1) = previous[-2], previous[-1]
            slope = math.log(a1 / a0) / math.log(b1 / b0) if a0 > 0 and a1 > 0 and b1 != b0 else 0.0
            exponents = (slope, 0.0)
        if exponents is None:
            exponents = (1.0 if exp.kind == "max_capacity" else 0.5, 0.0)
        x, y = exponents
        guess = a_prev * (b / b_prev) ** x
        if y and b > 1 and b_prev > 1:
            guess *= (math.log(b) / math.log(b_prev)) ** y
        return self.sizes.clamp(round(guess), li)

    def _done(self, cell: Cell, size: int | None, censored: bool = False, reason: str | None = None) -> CellResult:
        b = self.exp.values_of(cell.line_index)[cell.base_index]
        return CellResult(cell.line_index, b, cell.seed, cell.threshold, size, censored, reason, cell.rounds)

    def _step(self, cell: Cell, known: dict[int, float | Failure]) -> list[int] | CellResult:
        """Next sizes to probe for this cell, or its result."""
        li = cell.line_index
        if not known:
            g, search = cell.guess, self.sizes.search(li)
            return sorted({self.sizes.below(g / search.bracket, li), self.sizes.above(g * search.bracket, li)})
        failures = {s: v for s, v in known.items() if isinstance(v, Failure)}
        values = {s: v for s, v in known.items() if not isinstance(v, Failure)}
        reached = sorted(s for s, v in values.items() if self.exp.reaches(v, cell.threshold))
        missed = sorted(s for s, v in values.items() if not self.exp.reaches(v, cell.threshold))
        if self.exp.kind == "min_size":
            found = self._min_size_bracket(cell, known, failures, reached, missed)
        else:
            found = self._capacity_bracket(cell, known, failures, reached, missed)
        if not isinstance(found, tuple):
            return found
        return self._bisect(cell, *found, failures)

    def _min_size_bracket(self, cell: Cell, known, failures, reached, missed):
        """(lo, hi, answer) once the smallest size reaching the threshold is bracketed; else the next probe
        outward, or the censored result at a bound or a failed probe."""
        exp, li, t = self.exp, cell.line_index, cell.threshold
        size_min, size_max = self.sizes.bounds(li)
        hi = reached[0] if reached else None
        lo = max((s for s in missed if hi is None or s < hi), default=None)
        if hi is None:  # nothing reached yet: widen upwards, unless the top is the search's largest size
            top = max(known)
            bound = (size_max, f"no {exp.size} <= {size_max} ({self.sizes.max_name(li)}) reached {t}")
            return self._widen(cell, top, failures, True, None, bound if top >= size_max else None)
        if lo is None:  # reached at the smallest size probed: widen downwards, unless that is search.min
            bound = (hi, f"already reached {t} at {exp.size}={size_min} (search.min)")
            return self._widen(cell, min(known), failures, False, hi, bound if hi <= size_min else None)
        return lo, hi, hi

    def _capacity_bracket(self, cell: Cell, known, failures, reached, missed):
        """As :meth:`_min_size_bracket` for ``max_capacity``: the largest size that still reaches the threshold."""
        exp, li, t = self.exp, cell.line_index, cell.threshold
        size_min, size_max = self.sizes.bounds(li)
        lo = reached[-1] if reached else None
        hi = min((s for s in missed if lo is None or s > lo), default=None)
        if lo is None:  # nothing reached yet: widen downwards, unless the bottom is search.min
            bottom = min(known)
            bound = (size_min, f"no {exp.size} >= {size_min} (search.min) reached {t}")
            return self._widen(cell, bottom, failures, False, None, bound if bottom <= size_min else None)
        if hi is None:  # still reached at the largest size probed: widen upwards, unless that is the largest
            bound = (lo, f"still reached {t} at {exp.size}={size_max} ({self.sizes.max_name(li)})")
            return self._widen(cell, max(known), failures, True, lo, bound if lo >= size_max else None)
        return lo, hi, lo

    def _widen(self, cell: Cell, edge: int, failures, up: bool, answer: int | None,
               bound: tuple[int, str] | None) -> list[int] | CellResult:
        """The next probe beyond the probed range's ``edge`` (above it when ``up``), or the censored result: the
        edge's probe failed (``answer`` is what is known), or a search bound was hit (``bound``: answer, why)."""
        if edge in failures:
            return self._done(cell, answer, True, f"probe at {self.exp.size}={edge} failed: {failures[edge].message}")
        if bound is not None:
            return self._done(cell, bound[0], True, bound[1])
        return [self.sizes.expanded(edge, up=up, li=cell.line_index)]

    def _bisect(self, cell: Cell, lo: int, hi: int, answer: int, failures) -> list[int] | CellResult:
        """The midpoint in log size (on a grid: in grid index) of a bracket, or the answer once it is tight."""
        li = cell.line_index
        search, grid = self.sizes.search(li), self.sizes.grid(li)
        if hi - lo <= 1 or hi <= lo * (1 + search.resolution):
            return self._done(cell, answer)
        if grid is not None:
            i_lo, i_hi = grid.index(lo), grid.index(hi)
            if i_hi - i_lo <= 1:
                return self._done(cell, answer)
            mid = grid[(i_lo + i_hi) // 2]
        else:
            mid = min(max(round(math.sqrt(lo * hi)), lo + 1), hi - 1)
        if mid in failures:
            return self._done(cell, None, True, f"probe at {self.exp.size}={mid} failed: {failures[mid].message}")
        return [mid]

"""Theory-guided search for boundary points, and the sweep driver that trains its runs.

For each cell (line, base value, seed, threshold) of a ``min_size`` experiment the search finds the
smallest size (d) whose metric reaches the threshold; for ``max_capacity`` the largest size (N)
that still reaches it. A ``grid`` experiment trains the full (base, size) product for heatmaps.

How one cell is searched:
1. First guess. At the first base value: ``search.start`` (or the log-midpoint of the bounds).
   At later base values: the previous base value's answer (median over seeds) moved along the
   predicted boundary ``size ~ base**x (log base)**y``; the exponents come from ``theory.predict``
   when the experiment's pack can predict the line, else from the last two answers, else x = 1
   (capacity) / 0.5 (min size). Only the unknown constant is calibrated from data.
2. Bracket: probe guess/bracket and guess*bracket together; widen by ``expand`` until the
   threshold is crossed or a search bound is hit (then the point is censored, with the reason).
3. Bisect in log(size) on the integer grid until hi - lo <= 1 or hi <= lo*(1+resolution). With
   ``search.grid`` every probe is a size round(grid**k) and the bisection runs over k, so it ends with
   the answer and its failed neighbour one grid step apart.
4. Training-budget check (``search.budget_factor``): at each line's largest base value, the failed
   neighbour of the answer is probed once more with ``budget_key`` (steps) times ``budget_factor``.
   If it then reaches the threshold, the answer would move by at least one search step with the larger
   budget, and the point is flagged (``budget_flagged``); its record is the point's ``budget_check``.

``search.method = "curve"`` (min_size only) searches one curve per (line, base value) instead: every
seed is trained at the same sizes, the metric is averaged over the seeds, a non-decreasing fit in
log(size) is taken (``empirics.curves``) and each threshold's boundary is interpolated in log size. The
first round probes ``search.points`` sizes spaced by ``search.ratio`` around the guess, plus, when the
experiment has relative thresholds, the instance's ceiling size (``search.ceiling``); later rounds widen by ``expand`` (up to the line's ceiling size
and ``search.max``) where a threshold is not bracketed and bisect in log size where a bracket is wider than ``resolution``. Thresholds may also be
fractions of the instance's ceiling (``relative_thresholds``): the highest seed-mean metric at the ceiling
size over the lines of the same instance (same config apart from the searched size and the sizes tied to it,
such as m = d**k), so that lines that differ only in width share one ceiling. Its boundary
points carry the per-seed curves, so compare can bootstrap the seeds.

A cell's state is a function of the runs it has seen, nothing else, so a run is a deterministic
sequence of rounds. Each round batches every cell's next probe into one executor call (seeds share
shapes, so the engine trains them together); thresholds are nested and share runs. Resume and
:func:`boundary_points` simply replay the rounds against the store, training only what is missing.
Monotonicity along the size axis is checked and violations are reported, never smoothed away.
"""
from __future__ import annotations

import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from recallkit.empirics.config import planned_config
from recallkit.empirics.experiment import Experiment, Line
from recallkit.empirics.plan import Plan, plan_of
from recallkit.theory.errors import InputError, RecallkitError


@dataclass(frozen=True)
class Failure:
    """A run that raised; kept in memory only (not stored), so a rerun retries it."""

    message: str


MISSING = Failure("not in the results store (run 'recallkit sweep' for this experiment and preset)")


@dataclass
class CellResult:
    line_index: int
    base_value: int
    seed: int
    threshold: float
    size: int | None           # the answer (for censored points: the bound that was hit, or None)
    censored: bool
    censor_reason: str | None
    rounds: int


@dataclass
class SweepResult:
    experiment: Experiment
    points: list[dict]
    violations: list[dict]
    runs: list[dict]  # every run of the search (one trained model per line, base, size, seed), with its metrics
    reused: int
    computed: int
    failed: int
    missing: int
    wall_time_s: float
    executor: str
    code_versions: dict[str, int] = field(default_factory=dict)
    budget_runs: list[dict] = field(default_factory=list)  # the training-budget checks' runs (larger budget)

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment.name, "preset": self.experiment.preset, "kind": self.experiment.kind,
            "reused": self.reused, "computed": self.computed, "failed": self.failed, "missing": self.missing,
            "wall_time_s": round(self.wall_time_s, 3), "executor": self.executor,
            "code_versions": self.code_versions,
            "boundary_points": self.points, "monotonicity_violations": self.violations, "runs": self.runs,
            "budget_runs": self.budget_runs,
        }

    def summary_line(self) -> str:
        return f"reused {self.reused} / computed {self.computed}"


def predicted_exponents(experiment: Experiment | Plan, line: Line) -> tuple[float, float] | None:
    """(x, y) with searched size ~ base**x (log base)**y on ``line``, from the plan's theory pack, or None
    when the pack is missing or cannot predict this line (the search then calibrates from data alone)."""
    try:
        return plan_of(experiment).search_exponents.get(line.label)
    except RecallkitError:
        return None


class _Cell:
    __slots__ = ("line_index", "base_index", "seed", "threshold", "result", "rounds", "guess")

    def __init__(self, line_index: int, base_index: int, seed: int, threshold: float):
        self.line_index, self.base_index, self.seed, self.threshold = line_index, base_index, seed, threshold
        self.result: CellResult | None = None
        self.rounds = 0
        self.guess: int | None = None


class SweepDriver:
    """Runs (or, with ``executor=None``, replays from the store) one experiment's search."""

    def __init__(self, experiment: Experiment | Plan, store, executor=None, progress: bool = False,
                 log: TextIO | None = sys.stderr, code_version: str | None = None):
        self.plan = plan_of(experiment)
        self.exp = self.plan.experiment
        self.store = store
        self.executor = executor
        self.progress = progress
        self.log = log
        self.cache: dict[str, dict | Failure] = {}
        self.hash_of: dict[tuple[int, int, int, int], str] = {}   # (line, base, size, seed) -> hash
        self.sizes_of: dict[tuple[int, int, int], dict[int, str]] = {}  # (line, base, seed) -> {size: hash}
        self.config_of: dict[str, dict] = {}
        self.reused = self.computed = self.failed = self.missing = 0
        self._grids: dict[int | None, list[int] | None] = {}
        self.budget: dict[tuple[int, int, int, float], dict] = {}  # (line, base, seed, threshold) -> check
        if code_version is None:
            from recallkit.empirics.provenance import code_version as _cv

            code_version = _cv()
        self.code_version = code_version

    # ------------------------------------------------------------------ runs
    def _key(self, line_index: int, base_value: int, size: int, seed: int) -> str:
        key = (line_index, base_value, size, seed)
        if key not in self.hash_of:
            line = self.exp.lines[line_index]
            try:  # validated once here; the executors and the engine read the parsed form it carries
                config = self.exp.planned_config(line, base_value, size, seed)
                h = config.parsed.digest
            except InputError as exc:  # e.g. an lr expression that is fine at the corners but not here
                raise InputError(f"{self.exp.path}: line {line.label!r} at {self.exp.base}={base_value}, "
                                 f"{self.exp.size}={size}: {exc} (runs stored so far are kept)") from None
            self.hash_of[key] = h
            self.sizes_of.setdefault((line_index, base_value, seed), {})[size] = h
            self.config_of[h] = config
        return self.hash_of[key]

    def _metric(self, line_index: int, base_value: int, size: int, seed: int) -> float | Failure | None:
        """The probe's metric if known, a Failure, or None if not yet probed."""
        h = self.hash_of.get((line_index, base_value, size, seed))
        if h is None or h not in self.cache:
            return None
        entry = self.cache[h]
        if isinstance(entry, Failure):
            return entry
        metric = self.exp.metric_of(line_index)
        value = entry.get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            return Failure(f"metric {metric!r} missing or NaN in the run's metrics")
        return float(value)

    def _known(self, line_index: int, base_value: int, seed: int) -> dict[int, float | Failure]:
        sizes = self.sizes_of.get((line_index, base_value, seed), {})
        return {s: self._metric(line_index, base_value, s, seed) for s, h in sizes.items() if h in self.cache}

    def _execute(self, wanted: dict[str, dict]) -> None:
        found = self.store.get(wanted)
        for h, row in found.items():
            self.cache[h] = row["metrics"]
        if found:
            self.reused += len(found)
            self.store.link(self.exp.name, found)
        missing = [h for h in wanted if h not in found]
        if not missing:
            return
        if self.executor is None:
            for h in missing:
                self.cache[h] = MISSING
            self.missing += len(missing)
            return
        configs = [wanted[h] for h in missing]
        try:
            metrics = self.executor.run(configs)
            outcomes = list(zip(missing, configs, metrics, strict=True))
        except InputError:
            raise  # a bad flag or config (e.g. --device cuda without CUDA) is the user's to fix, not a probe failure
        except Exception as exc:  # one bad config must not take the batch with it: retry one by one
            self._say(f"batch of {len(configs)} failed ({type(exc).__name__}: {exc}); retrying one by one")
            outcomes = []
            for h, cfg in zip(missing, configs):
                try:
                    outcomes.append((h, cfg, self.executor.run([cfg])[0]))
                except InputError:
                    raise
                except Exception as single:
                    message = f"{type(single).__name__}: {single}".splitlines()[0]
                    self._say(f"probe failed: {cfg}: {message}")
                    self.cache[h] = Failure(message)
                    self.failed += 1
        if outcomes:
            hashes, cfgs, mets = zip(*outcomes)
            self.store.add(self.exp.name, cfgs, hashes, mets, self.code_version, _torch_version())
            for h, m in zip(hashes, mets):
                self.cache[h] = m
            self.computed += len(outcomes)

    def _say(self, message: str) -> None:
        if self.log is not None:
            print(f"[{self.exp.name}] {message}", file=self.log, flush=True)

    # ------------------------------------------------------------------ search
    def _first_guess(self, cell: _Cell, cells_by_key: dict) -> int:
        exp, search, li = self.exp, self._search(cell.line_index), cell.line_index
        base_values = exp.values_of(cell.line_index)
        b = base_values[cell.base_index]
        if cell.base_index == 0:
            if search.start is not None:
                guess = search.start.evaluate({exp.base: b})
            else:
                guess = math.sqrt(search.min * search.max)
            return self._clamp(round(guess), li)
        previous = []  # (base value, median answer over seeds) for earlier base values, nearest last
        for k in range(cell.base_index):
            answers = [cells_by_key[(cell.line_index, k, seed, cell.threshold)].result.size for seed in exp.seeds]
            answers = [a for a in answers if a is not None]
            if answers:
                previous.append((base_values[k], statistics.median(answers)))
        if not previous:
            return self._clamp(round(search.max if exp.kind == "min_size" else search.min), li)
        b_prev, a_prev = previous[-1]
        exponents = self.plan.search_exponents.get(exp.lines[cell.line_index].label)
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
        return self._clamp(round(guess), li)

    def _grid_of(self, line_index: int | None) -> list[int] | None:
        """The constant-ratio grid of sizes a line's bisection probes (None: every integer)."""
        if line_index not in self._grids:
            self._grids[line_index] = self._search(line_index).grid_sizes()
        return self._grids[line_index]

    def _clamp(self, size: float, line_index: int | None = None) -> int:
        """The size inside the line's search bounds (on its grid: the grid size nearest in log)."""
        grid = self._grid_of(line_index)
        if grid is not None:
            size = max(size, 1e-9)
            return min(grid, key=lambda g: (abs(math.log(g / size)), g))
        search = self._search(line_index)
        return int(min(max(size, search.min), search.max))

    def _search(self, line_index: int | None):
        """The search settings of a line (its own ``search`` overrides merged in), else the experiment's."""
        if line_index is None:
            return self.exp.search
        return self.exp.lines[line_index].search or self.exp.search

    def _max_name(self, line_index: int) -> str:
        """How a censoring reason names the upper search bound: the line's own cap when it has a lower one."""
        own = self.exp.lines[line_index].search
        return "the line's search.max cap" if own is not None and own.max < self.exp.search.max else "search.max"

    def _below(self, size: float, li: int | None = None) -> int:
        """The largest probe-able size <= size (the smallest one if none)."""
        grid = self._grid_of(li)
        if grid is not None:
            return max((g for g in grid if g <= size), default=grid[0])
        return self._clamp(math.floor(size), li)

    def _above(self, size: float, li: int | None = None) -> int:
        """The smallest probe-able size >= size (the largest one if none)."""
        grid = self._grid_of(li)
        if grid is not None:
            return min((g for g in grid if g >= size), default=grid[-1])
        return self._clamp(math.ceil(size), li)

    def _expanded(self, size: int, up: bool, li: int | None = None) -> int:
        """The next size to probe when a bracket missed: ``expand`` times further (on the grid: that many
        grid steps, at least one, so no grid size is skipped by rounding)."""
        search, grid = self._search(li), self._grid_of(li)
        if grid is not None:
            steps = max(1, round(math.log(search.expand) / math.log(search.grid)))
            index = grid.index(size) + (steps if up else -steps)
            return grid[min(max(index, 0), len(grid) - 1)]
        return self._above(size * search.expand, li) if up else self._below(size / search.expand, li)

    def _bounds(self, li: int | None = None) -> tuple[int, int]:
        grid = self._grid_of(li)
        if grid is not None:
            return grid[0], grid[-1]
        search = self._search(li)
        return search.min, search.max

    def _step(self, cell: _Cell, known: dict[int, float | Failure]) -> list[int] | CellResult:
        """Next sizes to probe for this cell, or its result."""
        exp, search, t = self.exp, self._search(cell.line_index), cell.threshold
        li, grid = cell.line_index, self._grid_of(cell.line_index)
        failures = {s: v for s, v in known.items() if isinstance(v, Failure)}
        values = {s: v for s, v in known.items() if not isinstance(v, Failure)}
        b = exp.values_of(cell.line_index)[cell.base_index]
        size_min, size_max = self._bounds(li)

        def done(size, censored=False, reason=None):
            return CellResult(cell.line_index, b, cell.seed, t, size, censored, reason, cell.rounds)

        if not known:
            g = cell.guess
            sizes = {self._below(g / search.bracket, li), self._above(g * search.bracket, li)}
            return sorted(sizes)
        reached = sorted(s for s, v in values.items() if v >= t)
        missed = sorted(s for s, v in values.items() if v < t)
        if exp.kind == "min_size":
            hi = reached[0] if reached else None
            lo = max((s for s in missed if hi is None or s < hi), default=None)
            if hi is None:
                top = max(known)
                if top in failures:
                    return done(None, True, f"probe at {exp.size}={top} failed: {failures[top].message}")
                if top >= size_max:
                    return done(size_max, True, f"no {exp.size} <= {size_max} ({self._max_name(li)}) reached {t}")
                return [self._expanded(top, up=True, li=li)]
            if lo is None:
                bottom = min(known)
                if bottom in failures:
                    return done(hi, True, f"probe at {exp.size}={bottom} failed: {failures[bottom].message}")
                if hi <= size_min:
                    return done(hi, True, f"already reached {t} at {exp.size}={size_min} (search.min)")
                return [self._expanded(bottom, up=False, li=li)]
            answer = hi
        else:  # max_capacity: the largest size that still reaches t
            lo = reached[-1] if reached else None
            hi = min((s for s in missed if lo is None or s > lo), default=None)
            if lo is None:
                bottom = min(known)
                if bottom in failures:
                    return done(None, True, f"probe at {exp.size}={bottom} failed: {failures[bottom].message}")
                if bottom <= size_min:
                    return done(size_min, True, f"no {exp.size} >= {size_min} (search.min) reached {t}")
                return [self._expanded(bottom, up=False, li=li)]
            if hi is None:
                top = max(known)
                if top in failures:
                    return done(lo, True, f"probe at {exp.size}={top} failed: {failures[top].message}")
                if lo >= size_max:
                    return done(lo, True, f"still reached {t} at {exp.size}={size_max} ({self._max_name(li)})")
                return [self._expanded(top, up=True, li=li)]
            answer = lo
        if hi - lo <= 1 or hi <= lo * (1 + search.resolution):
            return done(answer)
        if grid is not None:
            i_lo, i_hi = grid.index(lo), grid.index(hi)
            if i_hi - i_lo <= 1:
                return done(answer)
            mid = grid[(i_lo + i_hi) // 2]
        else:
            mid = min(max(round(math.sqrt(lo * hi)), lo + 1), hi - 1)
        if mid in failures:
            return done(None, True, f"probe at {exp.size}={mid} failed: {failures[mid].message}")
        return [mid]

    def run(self) -> SweepResult:
        started = time.perf_counter()
        exp = self.exp
        curves = None
        if exp.kind == "grid":
            self._run_grid()
            cells = []
        elif exp.search.method == "curve" or any(line.search and line.search.method == "curve" for line in exp.lines):
            curves = self._run_curves()
            cells = []
        else:
            cells = self._run_search()
            if exp.search.budget_factor is not None:
                self._run_budget_checks(cells)
        violations = self._violations()
        points = self._curve_points(curves) if curves is not None else self._points(cells, violations)
        result = SweepResult(
            experiment=exp, points=points, violations=violations, runs=self._run_rows(),
            reused=self.reused, computed=self.computed, failed=self.failed, missing=self.missing,
            wall_time_s=time.perf_counter() - started,
            executor=self.executor.describe() if self.executor is not None else "replay",
            budget_runs=[dict(check) for check in self.budget.values() if check.get("config_hash")],
        )
        return result

    def _run_budget_checks(self, cells: list[_Cell]) -> None:
        """Probe each answer's failed neighbour at the line's largest base value with the larger budget."""
        exp, search = self.exp, self.exp.search
        key, factor = search.budget_key, search.budget_factor
        wanted: dict[str, dict] = {}
        for cell in cells:
            r = cell.result
            values = exp.values_of(cell.line_index)
            if r is None or cell.base_index != len(values) - 1:
                continue
            where = (cell.line_index, r.base_value, cell.seed, cell.threshold)
            check: dict[str, Any] = {"line": exp.lines[cell.line_index].label, exp.base: r.base_value,
                                     "seed": cell.seed, "threshold": cell.threshold, "key": key, "factor": factor}
            self.budget[where] = check
            if r.censored or r.size is None:
                check["skipped"] = "the point is censored"
                continue
            known = {s: v for s, v in self._known(cell.line_index, r.base_value, cell.seed).items()
                     if isinstance(v, float)}
            missed = [s for s, v in known.items() if v < cell.threshold]
            if exp.kind == "max_capacity":
                neighbour = min((s for s in missed if s > r.size), default=None)
            else:
                neighbour = max((s for s in missed if s < r.size), default=None)
            if neighbour is None:
                check["skipped"] = f"no failed {exp.size} next to the answer was probed"
                continue
            config = dict(self.config_of[self._key(cell.line_index, r.base_value, neighbour, cell.seed)])
            scaled = config[key] * factor
            config[key] = int(math.floor(scaled + 1e-9)) if isinstance(config[key], int) else scaled
            config = planned_config(config)
            h = config.parsed.digest
            self.config_of[h] = config
            check.update({exp.size: neighbour, "answer": r.size, "value": config[key], "config_hash": h})
            if h not in self.cache:
                wanted[h] = config
        if wanted:
            self._execute(wanted)
        for check in self.budget.values():
            h = check.get("config_hash")
            if h is None:
                continue
            entry = self.cache.get(h)
            if isinstance(entry, Failure) or not isinstance(entry, dict):
                check["error"] = entry.message if isinstance(entry, Failure) else "not run"
                continue
            check[exp.metric] = entry.get(exp.metric_of(check["line"]))
            check["reached"] = bool(isinstance(check[exp.metric], (int, float)) and check[exp.metric] >= check["threshold"])

    def _run_grid(self) -> None:
        exp = self.exp
        wanted: dict[str, dict] = {}
        for li in range(len(exp.lines)):
            for b in exp.values_of(li):
                for s in exp.sizes:
                    for seed in exp.seeds:
                        h = self._key(li, b, s, seed)
                        wanted[h] = self.config_of[h]
        self._execute(wanted)

    def _run_search(self) -> list[_Cell]:
        exp = self.exp
        cells = [_Cell(li, bi, seed, t) for li in range(len(exp.lines)) for bi in range(len(exp.values_of(li)))
                 for seed in exp.seeds for t in exp.thresholds]
        by_key = {(c.line_index, c.base_index, c.seed, c.threshold): c for c in cells}
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=len(cells), desc=exp.name, unit="cell", file=sys.stderr, leave=False)
        try:
            while True:
                wanted: dict[str, dict] = {}
                active = 0
                for cell in cells:
                    if cell.result is not None:
                        continue
                    if cell.base_index > 0 and any(
                        by_key[(cell.line_index, cell.base_index - 1, seed, cell.threshold)].result is None
                        for seed in exp.seeds
                    ):
                        continue  # wait for the previous base value: it calibrates this one's guess
                    b = exp.values_of(cell.line_index)[cell.base_index]
                    if cell.guess is None:
                        cell.guess = self._first_guess(cell, by_key)
                    step = self._step(cell, self._known(cell.line_index, b, cell.seed))
                    if isinstance(step, CellResult):
                        cell.result = step
                        if bar is not None:
                            bar.update(1)
                        continue
                    active += 1
                    cell.rounds += 1
                    for size in step:
                        seen = (cell.line_index, b, size, cell.seed) in self.hash_of
                        h = self._key(cell.line_index, b, size, cell.seed)
                        if h in self.cache:
                            if seen:
                                raise RecallkitError(f"search proposed an already-probed point {size} (bug)")
                            continue  # another line's probe of the same config (lines that differ in metric only)
                        wanted[h] = self.config_of[h]
                if not wanted:
                    if all(c.result is not None for c in cells):
                        return cells
                    if active == 0 and not any(c.result is None and self._ready(c, by_key) for c in cells):
                        raise RecallkitError("search made no progress (bug)")
                    continue
                self._execute(wanted)
        finally:
            if bar is not None:
                bar.close()

    # ------------------------------------------------------------------ curve search
    def _curve_data(self, li: int, b: int) -> tuple[dict[int, dict[int, float]], dict[int, float], set[int]]:
        """(per seed {size: metric}, {size: param_count}, sizes probed for any seed, failures included)."""
        per_seed: dict[int, dict[int, float]] = {}
        counts: dict[int, float] = {}
        probed: set[int] = set()
        for seed in self.exp.seeds:
            values = {}
            for size, value in self._known(li, b, seed).items():
                probed.add(size)
                if isinstance(value, float):
                    values[size] = value
                    h = self.hash_of[(li, b, size, seed)]
                    entry = self.cache.get(h)
                    if isinstance(entry, dict) and entry.get("param_count"):
                        counts[size] = float(entry["param_count"])
            per_seed[seed] = values
        return per_seed, counts, probed

    def _in_range(self, per_seed, li: int) -> tuple[list[int], list[float]]:
        """The seed-mean curve at the sizes every seed has, inside [search.min, search.max] (a ceiling size
        above search.max is used for the ceiling only)."""
        from recallkit.empirics.curves import mean_curve

        sizes, means, _ = mean_curve(per_seed, self.exp.seeds)
        search = self._search(li)
        keep = [i for i, size in enumerate(sizes) if search.min <= size <= search.max]
        return [sizes[i] for i in keep], [means[i] for i in keep]

    def _instance_key(self, li: int, b: int) -> str:
        """What makes two lines the same instance at base value b: their configs apart from the searched size,
        the sizes tied to it (e.g. m = d**k) and the seed."""
        import json

        search = self._search(li)
        config = self.exp.build_config(self.exp.lines[li], b, search.min, self.exp.seeds[0])
        other = self.exp.build_config(self.exp.lines[li], b, search.min + 1, self.exp.seeds[0])
        tied = {k for k in config if config[k] != other.get(k)}
        return json.dumps({k: v for k, v in config.items() if k not in tied and k != "seed"}, sort_keys=True, default=str)

    def _instance_ceiling(self, li: int, b: int) -> dict | None:
        """The instance's ceiling at base value b: the highest seed-mean metric at the ceiling size of any line
        of the same instance (same V, N, L and options; the lines differ only in how m follows d), with that
        line's per-seed values. None while no such ceiling has a result for every seed."""
        from recallkit.empirics.curves import mean_curve

        key = self._instance_key(li, b)
        best = None
        for lj in range(len(self.exp.lines)):
            if lj != li and self._instance_key(lj, b) != key:
                continue
            size = self._search(lj).ceiling_size(self.exp.base, b)
            per_seed, _, _ = self._curve_data(lj, b)
            sizes, means, _ = mean_curve(per_seed, self.exp.seeds)
            if size not in sizes:
                continue
            mean = means[sizes.index(size)]
            if best is None or mean > best["mean"]:
                best = {"line": self.exp.lines[lj].label, self.exp.size: size, "mean": mean,
                        "per_seed": [per_seed[seed][size] for seed in self.exp.seeds]}
        return best

    def _curve_targets(self, per_seed, b: int, li: int) -> list[tuple[float, bool, float | None]]:
        """(threshold as written, relative?, absolute value or None when the ceiling is unknown)."""
        ceiling = self._instance_ceiling(li, b)
        out = []
        for value, relative in self.exp.threshold_targets():
            if relative:
                out.append((value, True, None if ceiling is None else value * ceiling["mean"]))
            else:
                out.append((value, False, value))
        return out

    def _curve_step(self, li: int, bi: int, guess: int) -> list[int]:
        """The next sizes to probe (for every seed) on the curve of (line, base index); [] when done."""
        from recallkit.empirics.curves import crossing, isotonic_increasing

        exp, search = self.exp, self._search(li)
        b = exp.values_of(li)[bi]
        per_seed, _, probed = self._curve_data(li, b)
        # the line's own ceiling size is the largest size a curve search needs (below: "above")
        cap = min(search.max, max(search.ceiling_size(exp.base, b), search.min))
        if not probed:
            half = (search.points - 1) / 2
            sizes = {min(self._clamp(round(guess * search.ratio ** (j - half)), li), cap) for j in range(search.points)}
            if exp.relative_thresholds:  # the instance's ceiling is measured only for thresholds relative to it
                sizes.add(search.ceiling_size(exp.base, b))
            return sorted(sizes)
        sizes, means = self._in_range(per_seed, li)
        if not sizes:
            return []
        fitted = isotonic_increasing(means)
        searchable = sizes
        proposals: set[int] = set()
        for _, _, target in self._curve_targets(per_seed, b, li):
            if target is None:
                continue
            found = crossing(sizes, fitted, target)
            if found.status == "below":
                bottom = min(sizes)
                if bottom > search.min:
                    proposals.add(self._clamp(math.floor(bottom / search.expand), li))
            elif found.status == "above":
                # a threshold the curve does not reach by the line's own ceiling size is censored there (it may be
                # another line's ceiling that sets the target)
                top = max(searchable, default=search.min)
                if top < cap:
                    proposals.add(min(self._clamp(math.ceil(top * search.expand), li), cap))
            else:
                lo, hi = found.bracket
                if hi - lo > 1 and hi > lo * (1 + search.resolution):
                    mid = min(max(round(math.sqrt(lo * hi)), lo + 1), hi - 1)
                    if search.min <= mid <= search.max:
                        proposals.add(mid)
        return sorted(p for p in proposals if p not in probed)

    def _curve_guess(self, li: int, bi: int, answers: dict[tuple[int, int], float | None]) -> int:
        exp, search = self.exp, self._search(li)
        b = exp.values_of(li)[bi]
        if bi == 0:
            guess = search.start.evaluate({exp.base: b}) if search.start is not None else math.sqrt(search.min * search.max)
            return self._clamp(round(guess), li)
        previous = [(exp.values_of(li)[k], answers.get((li, k))) for k in range(bi)]
        previous = [(bv, a) for bv, a in previous if a]
        if not previous:
            return self._clamp(round(math.sqrt(search.min * search.max)), li)
        x, y = self.plan.search_exponents.get(exp.lines[li].label) or (0.5, 0.0)
        b_prev, a_prev = previous[-1]
        guess = a_prev * (b / b_prev) ** x
        if y and b > 1 and b_prev > 1:
            guess *= (math.log(b) / math.log(b_prev)) ** y
        return self._clamp(round(guess), li)

    def _curve_answer(self, li: int, b: int) -> float | None:
        """The mean in log size of the boundaries found (the next base value's guess is calibrated on it)."""
        from recallkit.empirics.curves import crossing, isotonic_increasing

        per_seed, _, _ = self._curve_data(li, b)
        sizes, means = self._in_range(per_seed, li)
        if not sizes:
            return None
        fitted = isotonic_increasing(means)
        found = [crossing(sizes, fitted, t).size for _, _, t in self._curve_targets(per_seed, b, li) if t is not None]
        found = [f for f in found if f]
        return math.exp(sum(math.log(f) for f in found) / len(found)) if found else None

    def _run_curves(self) -> list[tuple[int, int]]:
        exp = self.exp
        keys = [(li, bi) for li in range(len(exp.lines)) for bi in range(len(exp.values_of(li)))]
        guesses: dict[tuple[int, int], int] = {}
        done: set[tuple[int, int]] = set()
        answers: dict[tuple[int, int], float | None] = {}
        while len(done) < len(keys):
            wanted: dict[str, dict] = {}
            for li, bi in keys:
                if (li, bi) in done or (bi > 0 and (li, bi - 1) not in done):
                    continue  # the previous base value calibrates this one's guess
                if (li, bi) not in guesses:
                    guesses[(li, bi)] = self._curve_guess(li, bi, answers)
                b = exp.values_of(li)[bi]
                step = self._curve_step(li, bi, guesses[(li, bi)])
                if not step:
                    done.add((li, bi))
                    answers[(li, bi)] = self._curve_answer(li, b)
                    continue
                for size in step:
                    for seed in exp.seeds:
                        h = self._key(li, b, size, seed)
                        if h not in self.cache:
                            wanted[h] = self.config_of[h]
            if wanted:
                self._execute(wanted)
        return keys

    def _curve_points(self, keys: list[tuple[int, int]]) -> list[dict]:
        from recallkit.empirics.curves import crossing, isotonic_increasing, mean_curve

        exp = self.exp
        points = []
        for li, bi in keys:
            b = exp.values_of(li)[bi]
            line = exp.lines[li]
            per_seed, counts, probed = self._curve_data(li, b)
            all_sizes, all_means, _ = mean_curve(per_seed, exp.seeds)
            sizes, means = self._in_range(per_seed, li)
            fitted = isotonic_increasing(means) if sizes else []
            search = self._search(li)
            ceiling = search.ceiling_size(exp.base, b)
            instance_ceiling = self._instance_ceiling(li, b)
            config = self.config_of[self._key(li, b, sizes[0] if sizes else search.min, exp.seeds[0])]
            failed = sorted(s for s in probed if s not in all_sizes)
            curve = {"sizes": sizes, "param_counts": [counts.get(s) for s in sizes], "seeds": list(exp.seeds),
                     "metric": [[per_seed[seed][s] for s in sizes] for seed in exp.seeds], "mean": means,
                     "fitted": fitted, "failed_sizes": failed}
            for written, relative, target in self._curve_targets(per_seed, b, li):
                point: dict[str, Any] = {
                    "experiment": exp.name, "line": line.label, "scaling": line.theory_scaling, "threshold": written,
                    "threshold_relative": relative, "threshold_value": target, "seed": "mean",
                    "n_seeds": len(exp.seeds), exp.base: b, "method": "curve",
                }
                for name in ("N", "R", "L"):
                    if name in config:
                        point[name] = config[name]
                found = None
                if target is not None and sizes:
                    found = crossing(sizes, fitted, target, [counts[s] for s in sizes])
                if found is not None and found.status == "ok":
                    point[exp.size] = found.size
                    point["param_count"] = found.param_count
                    if "m" in config:
                        point["m"] = found.param_count / found.size if exp.size == "d" else config["m"]
                    point["bracket"] = list(found.bracket)
                    point["config_hash"] = self._key(li, b, found.bracket[1], exp.seeds[0])
                    point["censored"], point["censor_reason"] = False, None
                else:
                    # a censored point carries the bound it is censored at where there is one (as the bisection's
                    # do): the largest size run when the curve never reached the target, the smallest when it
                    # already had; None when nothing is known
                    bound = None
                    if found is not None and found.status in ("above", "below") and sizes:
                        bound = max(sizes) if found.status == "above" else sizes[0]
                    point[exp.size] = bound
                    point["param_count"] = counts.get(bound) if bound is not None else None
                    if target is None:
                        reason = f"the ceiling at {exp.size}={ceiling} is unknown (failed or not run)"
                    elif found is None:
                        reason = "no size has a result for every seed"
                    elif found.status == "below":
                        reason = f"the seed-mean curve already reached {target:.4g} at {exp.size}={sizes[0]}"
                    else:
                        reason = (f"the seed-mean curve did not reach {target:.4g} by {exp.size}="
                                  f"{max(sizes, default=search.max)} (the line's ceiling size "
                                  f"{search.ceiling_size(exp.base, b)}, search.max {search.max})")
                    point["censored"], point["censor_reason"] = True, reason
                point["ceiling"] = instance_ceiling or {exp.size: ceiling, "mean": None, "per_seed": None}
                point["curve"] = curve
                point["non_monotone"] = any(b2 < a2 for a2, b2 in zip(means, means[1:]))
                points.append(point)
        return points

    def _ready(self, cell: _Cell, by_key: dict) -> bool:
        return cell.base_index == 0 or all(
            by_key[(cell.line_index, cell.base_index - 1, seed, cell.threshold)].result is not None
            for seed in self.exp.seeds)

    # ------------------------------------------------------------------ outputs
    def _point(self, li: int, b: int, seed: int, t: float, size: int | None, censored: bool,
               reason: str | None) -> dict:
        exp = self.exp
        line = exp.lines[li]
        point: dict[str, Any] = {
            "experiment": exp.name, "line": line.label, "scaling": line.theory_scaling, "threshold": t, "seed": seed,
            exp.base: b,
        }
        if size is not None:
            h = self._key(li, b, size, seed)
            config = self.config_of[h]
            for name in ("V", "N", "R", "L", "d", "m"):
                if name in config:
                    point[name] = config[name]
            entry = self.cache.get(h)
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

    def _points(self, cells: list[_Cell], violations: list[dict]) -> list[dict]:
        exp = self.exp
        points = []
        if exp.kind == "grid":
            for li in range(len(exp.lines)):
                for b in exp.values_of(li):
                    for seed in exp.seeds:
                        for t in exp.thresholds:
                            points.append(self._grid_point(li, b, seed, t))
        else:
            for c in cells:
                r = c.result
                points.append(self._point(c.line_index, r.base_value, c.seed, c.threshold, r.size, r.censored,
                                          r.censor_reason))
        flagged = {(v["line"], v[exp.base], v["seed"], v["threshold"]) for v in violations}
        by_label = {line.label: i for i, line in enumerate(exp.lines)}
        for p in points:
            p["non_monotone"] = (p["line"], p[exp.base], p["seed"], p["threshold"]) in flagged
            check = self.budget.get((by_label[p["line"]], p[exp.base], p["seed"], p["threshold"]))
            if check is not None:
                p["budget_check"] = dict(check)
                p["budget_flagged"] = bool(check.get("reached"))
        return points

    def _grid_point(self, li: int, b: int, seed: int, t: float) -> dict:
        exp = self.exp
        known = self._known(li, b, seed)
        failed = [s for s, v in known.items() if isinstance(v, Failure)]
        if failed:
            return self._point(li, b, seed, t, None, True, f"{known[failed[0]].message} at {exp.size}={failed[0]}")
        reached = sorted(s for s, v in known.items() if v >= t)
        if not reached:
            return self._point(li, b, seed, t, max(known), True, f"no {exp.size} in the grid reached {t}")
        size = reached[0] if exp.kind != "max_capacity" else reached[-1]
        censored = size == min(exp.sizes)
        return self._point(li, b, seed, t, size, censored,
                           f"already reached {t} at the smallest grid {exp.size}={size}" if censored else None)

    def _violations(self) -> list[dict]:
        """Threshold crossings that go the wrong way along the size axis (reported, never hidden)."""
        exp = self.exp
        out = []
        groups: dict[tuple[int, int, int], dict[int, float]] = {}
        for (li, b, s, seed), h in self.hash_of.items():
            value = self._metric(li, b, s, seed)
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

    def _run_rows(self) -> list[dict]:
        exp = self.exp
        rows = []
        for (li, b, s, seed), h in self.hash_of.items():
            entry = self.cache.get(h)
            if entry is None:
                continue
            row = {"line": exp.lines[li].label, exp.base: b, exp.size: s, "seed": seed, "config_hash": h}
            if isinstance(entry, Failure):
                row["error"] = entry.message
            else:
                row[exp.metric] = entry.get(exp.metric_of(li))
                for key in ("train_accuracy", "param_count", "attention_mass", "wall_time_s"):
                    if key in entry:
                        row[key] = entry[key]
            rows.append(row)
        rows.sort(key=lambda r: (r["line"], r[exp.base], r["seed"], r[exp.size]))
        return rows


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", None)


def run_sweep(experiment: Experiment | Plan, store, executor, progress: bool = False,
              log: TextIO | None = sys.stderr) -> SweepResult:
    """Train what the experiment's search needs (reusing the store) and return its boundary points."""
    return SweepDriver(experiment, store, executor, progress=progress, log=log).run()


def replay(experiment: Experiment | Plan, store) -> SweepResult:
    """The sweep's result as the store holds it, training nothing; missing runs censor their cells."""
    return SweepDriver(experiment, store, executor=None, log=None, code_version="replay").run()


def boundary_points(experiment: Experiment | Plan, store) -> list[dict]:
    """The contract of docs/ARCHITECTURE.md: one dict per (line, threshold, seed, base value)."""
    return replay(experiment, store).points


def grid_points(experiment: Experiment | Plan, store) -> list[dict]:
    """Every stored run of a (line, base, size, seed) for heatmaps, with its metrics."""
    return replay(experiment, store).runs

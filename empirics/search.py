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
3. Bisect in log(size) on the integer grid until hi - lo <= 1 or hi <= lo*(1+resolution).

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

from recallkit.empirics.experiment import Experiment, Line
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

    def to_dict(self) -> dict:
        return {
            "experiment": self.experiment.name, "preset": self.experiment.preset, "kind": self.experiment.kind,
            "reused": self.reused, "computed": self.computed, "failed": self.failed, "missing": self.missing,
            "wall_time_s": round(self.wall_time_s, 3), "executor": self.executor,
            "code_versions": self.code_versions,
            "boundary_points": self.points, "monotonicity_violations": self.violations, "runs": self.runs,
        }

    def summary_line(self) -> str:
        return f"reused {self.reused} / computed {self.computed}"


def _config_hash(config: dict) -> str:
    from recallkit.empirics.config import config_hash

    return config_hash(config)


def predicted_exponents(experiment: Experiment, line: Line) -> tuple[float, float] | None:
    """(x, y) with searched size ~ base**x (log base)**y on ``line``, from the theory pack, or None.

    ``theory.predict`` solves the pack's success condition for its size variable as a power of its
    base (``size_exponent_float``, ``size_log_power_float``). When the experiment searches the
    pack's base at fixed size (capacity: N at each d, pack stated as d ~ N**x (log N)**y) the
    relation is inverted to leading order: N ~ d**(1/x) (log d)**(-y/x). None when the pack is
    missing or cannot predict this line; the search then calibrates from data alone.
    """
    if experiment.pack is None:
        return None
    try:
        from recallkit import theory

        prediction = theory.predict(theory.load_pack(experiment.pack), line.theory_scaling).to_dict()
        x = float(prediction["size_exponent_float"])
        y = float(prediction["size_log_power_float"])
        pack_base, pack_size = prediction["base"], prediction["size"]
    except Exception:  # no such pack, a line the pack cannot predict: use the data-driven fallback
        return None
    if not (math.isfinite(x) and math.isfinite(y)):
        return None
    if (pack_base, pack_size) == (experiment.base, experiment.size):
        return x, y
    if (pack_base, pack_size) == (experiment.size, experiment.base) and x > 0:
        return 1 / x, -y / x
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

    def __init__(self, experiment: Experiment, store, executor=None, progress: bool = False,
                 log: TextIO | None = sys.stderr, code_version: str | None = None):
        self.exp = experiment
        self.store = store
        self.executor = executor
        self.progress = progress
        self.log = log
        self.cache: dict[str, dict | Failure] = {}
        self.hash_of: dict[tuple[int, int, int, int], str] = {}   # (line, base, size, seed) -> hash
        self.sizes_of: dict[tuple[int, int, int], dict[int, str]] = {}  # (line, base, seed) -> {size: hash}
        self.config_of: dict[str, dict] = {}
        self.reused = self.computed = self.failed = self.missing = 0
        self._predicted: dict[int, tuple[float, float] | None] = {}
        if code_version is None:
            from recallkit.empirics.provenance import code_version as _cv

            code_version = _cv()
        self.code_version = code_version

    # ------------------------------------------------------------------ runs
    def _key(self, line_index: int, base_value: int, size: int, seed: int) -> str:
        key = (line_index, base_value, size, seed)
        if key not in self.hash_of:
            line = self.exp.lines[line_index]
            config = self.exp.build_config(line, base_value, size, seed)
            try:
                h = _config_hash(config)
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
        value = entry.get(self.exp.metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            return Failure(f"metric {self.exp.metric!r} missing or NaN in the run's metrics")
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
    def _search(self, line_index: int):
        """The line's search settings (the experiment's, with the line's own cap on the size)."""
        return self.exp.search_for(self.exp.lines[line_index])

    def _first_guess(self, cell: _Cell, cells_by_key: dict) -> int:
        exp, search = self.exp, self._search(cell.line_index)
        base_values = exp.base_values
        b = base_values[cell.base_index]
        li = cell.line_index
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
        if cell.line_index not in self._predicted:
            self._predicted[cell.line_index] = predicted_exponents(exp, exp.lines[cell.line_index])
        exponents = self._predicted[cell.line_index]
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

    def _clamp(self, size: float, line_index: int) -> int:
        search = self._search(line_index)
        return int(min(max(size, search.min), search.max))

    def _step(self, cell: _Cell, known: dict[int, float | Failure]) -> list[int] | CellResult:
        """Next sizes to probe for this cell, or its result."""
        exp, search, t = self.exp, self._search(cell.line_index), cell.threshold
        li = cell.line_index
        bound = "the line's search.max cap" if search.capped else "search.max"
        failures = {s: v for s, v in known.items() if isinstance(v, Failure)}
        values = {s: v for s, v in known.items() if not isinstance(v, Failure)}
        b = exp.base_values[cell.base_index]

        def done(size, censored=False, reason=None):
            return CellResult(cell.line_index, b, cell.seed, t, size, censored, reason, cell.rounds)

        if not known:
            g = cell.guess
            sizes = {self._clamp(math.floor(g / search.bracket), li), self._clamp(math.ceil(g * search.bracket), li)}
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
                if top >= search.max:
                    return done(search.max, True, f"no {exp.size} <= {search.max} ({bound}) reached {t}")
                return [self._clamp(math.ceil(top * search.expand), li)]
            if lo is None:
                bottom = min(known)
                if bottom in failures:
                    return done(hi, True, f"probe at {exp.size}={bottom} failed: {failures[bottom].message}")
                if hi <= search.min:
                    return done(hi, True, f"already reached {t} at {exp.size}={search.min} (search.min)")
                return [self._clamp(math.floor(bottom / search.expand), li)]
            answer = hi
        else:  # max_capacity: the largest size that still reaches t
            lo = reached[-1] if reached else None
            hi = min((s for s in missed if lo is None or s > lo), default=None)
            if lo is None:
                bottom = min(known)
                if bottom in failures:
                    return done(None, True, f"probe at {exp.size}={bottom} failed: {failures[bottom].message}")
                if bottom <= search.min:
                    return done(search.min, True, f"no {exp.size} >= {search.min} (search.min) reached {t}")
                return [self._clamp(math.floor(bottom / search.expand), li)]
            if hi is None:
                top = max(known)
                if top in failures:
                    return done(lo, True, f"probe at {exp.size}={top} failed: {failures[top].message}")
                if lo >= search.max:
                    return done(lo, True, f"still reached {t} at {exp.size}={search.max} ({bound})")
                return [self._clamp(math.ceil(top * search.expand), li)]
            answer = lo
        if hi - lo <= 1 or hi <= lo * (1 + search.resolution):
            return done(answer)
        mid = min(max(round(math.sqrt(lo * hi)), lo + 1), hi - 1)
        if mid in failures:
            return done(None, True, f"probe at {exp.size}={mid} failed: {failures[mid].message}")
        return [mid]

    def run(self) -> SweepResult:
        started = time.perf_counter()
        exp = self.exp
        if exp.kind == "grid":
            self._run_grid()
            cells = []
        else:
            cells = self._run_search()
        violations = self._violations()
        points = self._points(cells, violations)
        result = SweepResult(
            experiment=exp, points=points, violations=violations, runs=self._run_rows(),
            reused=self.reused, computed=self.computed, failed=self.failed, missing=self.missing,
            wall_time_s=time.perf_counter() - started,
            executor=self.executor.describe() if self.executor is not None else "replay",
        )
        return result

    def _run_grid(self) -> None:
        exp = self.exp
        wanted: dict[str, dict] = {}
        for li in range(len(exp.lines)):
            for b in exp.base_values:
                for s in exp.sizes:
                    for seed in exp.seeds:
                        h = self._key(li, b, s, seed)
                        wanted[h] = self.config_of[h]
        self._execute(wanted)

    def _run_search(self) -> list[_Cell]:
        exp = self.exp
        cells = [_Cell(li, bi, seed, t) for li in range(len(exp.lines)) for bi in range(len(exp.base_values))
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
                    b = exp.base_values[cell.base_index]
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
                        h = self._key(cell.line_index, b, size, cell.seed)
                        if h in self.cache:
                            raise RecallkitError(f"search proposed an already-probed point {size} (bug)")
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
            point[exp.metric] = metrics.get(exp.metric)
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
                for b in exp.base_values:
                    for seed in exp.seeds:
                        for t in exp.thresholds:
                            points.append(self._grid_point(li, b, seed, t))
        else:
            for c in cells:
                r = c.result
                points.append(self._point(c.line_index, r.base_value, c.seed, c.threshold, r.size, r.censored,
                                          r.censor_reason))
        flagged = {(v["line"], v[exp.base], v["seed"], v["threshold"]) for v in violations}
        for p in points:
            p["non_monotone"] = (p["line"], p[exp.base], p["seed"], p["threshold"]) in flagged
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
                row[exp.metric] = entry.get(exp.metric)
                for key in ("train_accuracy", "param_count", "attention_mass", "wall_time_s"):
                    if key in entry:
                        row[key] = entry[key]
            rows.append(row)
        rows.sort(key=lambda r: (r["line"], r[exp.base], r["seed"], r[exp.size]))
        return rows


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", None)


def run_sweep(experiment: Experiment, store, executor, progress: bool = False,
              log: TextIO | None = sys.stderr) -> SweepResult:
    """Train what the experiment's search needs (reusing the store) and return its boundary points."""
    return SweepDriver(experiment, store, executor, progress=progress, log=log).run()


def replay(experiment: Experiment, store) -> SweepResult:
    """The sweep's result as the store holds it, training nothing; missing runs censor their cells."""
    return SweepDriver(experiment, store, executor=None, log=None, code_version="replay").run()


def boundary_points(experiment: Experiment, store) -> list[dict]:
    """The contract of docs/ARCHITECTURE.md: one dict per (line, threshold, seed, base value)."""
    return replay(experiment, store).points


def grid_points(experiment: Experiment, store) -> list[dict]:
    """Every stored run of a (line, base, size, seed) for heatmaps, with its metrics."""
    return replay(experiment, store).runs

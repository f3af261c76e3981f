"""The sweep driver: the one place that turns probes into results. A search strategy
(:mod:`~recallkit.empirics.bisection`, :mod:`~recallkit.empirics.curve_search`,
:mod:`~recallkit.empirics.grid_sweep`) decides which (line, base value, size, seed) to probe; the driver
keys each probe by its run config's store hash, takes what the store already holds, trains the rest in one
executor call per round (or, replaying, marks them missing), keeps failures in memory only, and writes the
sweep's run rows.
"""
from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from recallkit import registry
from recallkit.empirics.bisection import BisectionSearch
from recallkit.empirics.budget_check import BudgetCheck
from recallkit.empirics.curve_search import CurveSearch
from recallkit.empirics.experiment import Experiment
from recallkit.empirics.grid_sweep import GridSweep
from recallkit.empirics.plan import Plan, plan_of
from recallkit.empirics.provenance import code_version as current_code_version
from recallkit.empirics.records import ProbeRun
from recallkit.empirics.search_points import monotonicity_violations
from recallkit.empirics.search_types import MISSING, Failure, SearchStrategy, SweepResult
from recallkit.theory.errors import InputError

__all__ = ["SweepDriver", "row_metrics"]

# Every run row keeps these (when the run has them), around the metrics its task declares, in this order:
# the order rows have always had, so a printed row reads as before (summary files sort their keys anyway).
_ROW_METRICS_FIRST = ("train_accuracy", "param_count")
_ROW_METRICS_LAST = ("wall_time_s",)


def row_metrics(task: str) -> tuple[str, ...]:
    """The metrics a run row of ``task`` copies from its run, beside the line's metric, in row order."""
    try:
        spec = registry.task(task)
    except registry.RegistryError:
        spec = None  # validated configs name registered tasks; a row of another keeps the generic metrics
    declared = spec.run_metrics if spec is not None else ()
    return _ROW_METRICS_FIRST + tuple(declared) + _ROW_METRICS_LAST


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
        if code_version is None:
            code_version = current_code_version()
        self.code_version = code_version

    # ------------------------------------------------------------------ probes
    def key(self, line_index: int, base_value: int, size: int, seed: int) -> str:
        """The store hash of a probe's run config (built and validated on first use, then remembered)."""
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

    def metric(self, line_index: int, base_value: int, size: int, seed: int) -> float | Failure | None:
        """The probe's metric if known, a Failure, or None if not yet probed."""
        h = self.hash_of.get((line_index, base_value, size, seed))
        if h is None or h not in self.cache:
            return None
        entry = self.cache[h]
        if isinstance(entry, Failure):
            return entry
        metric = self.exp.metric_of(line_index)
        value = entry.get(metric)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return Failure(f"metric {metric!r} missing or not finite in the run's metrics")
        return float(value)

    def known(self, line_index: int, base_value: int, seed: int) -> dict[int, float | Failure]:
        """Every size probed so far for one (line, base value, seed), with its metric or failure."""
        sizes = self.sizes_of.get((line_index, base_value, seed), {})
        return {s: self.metric(line_index, base_value, s, seed) for s, h in sizes.items() if h in self.cache}

    # ------------------------------------------------------------------ one round
    def execute(self, wanted: dict[str, dict]) -> None:
        """One round: reuse what the store holds, train the rest in one executor call (replaying: mark them
        missing), and remember every outcome by hash."""
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
        outcomes = self._train(missing, [wanted[h] for h in missing])
        if outcomes:
            hashes, cfgs, mets = zip(*outcomes)
            # as stored: a non-finite metric is null with its reason, as a replay of the store reads it
            stored = self.store.add(self.exp.name, cfgs, hashes, mets, self.code_version, _torch_version())
            for h, m in zip(hashes, stored):
                self.cache[h] = m
            self.computed += len(outcomes)

    def _train(self, hashes: list[str], configs: list[dict]) -> list[tuple[str, dict, dict]]:
        """(hash, config, metrics) of every config that trained; the batch at once, else one by one."""
        try:
            metrics = self.executor.run(configs)
            return list(zip(hashes, configs, metrics, strict=True))
        except InputError:
            raise  # a bad flag or config (e.g. --device cuda without CUDA) is the user's to fix, not a probe failure
        except Exception as exc:  # one bad config must not take the batch with it: retry one by one
            self.say(f"batch of {len(configs)} failed ({type(exc).__name__}: {exc}); retrying one by one")
        outcomes = []
        for h, cfg in zip(hashes, configs):
            try:
                outcomes.append((h, cfg, self.executor.run([cfg])[0]))
            except InputError:
                raise
            except Exception as single:
                message = f"{type(single).__name__}: {single}".splitlines()[0]
                self.say(f"probe failed: {cfg}: {message}")
                self.cache[h] = Failure(message)
                self.failed += 1
        return outcomes

    def say(self, message: str) -> None:
        if self.log is not None:
            print(f"[{self.exp.name}] {message}", file=self.log, flush=True)

    # ------------------------------------------------------------------ the sweep
    def strategy(self) -> SearchStrategy:
        """The experiment's search: the grid product, seed-mean curves (when any line asks for them), else
        per-seed bisection, with the training-budget check where the experiment sets one."""
        exp = self.exp
        if exp.kind in ("grid", "law"):  # a law's runs are the grid's product without a size
            return GridSweep(self)
        if exp.search.method == "curve" or any(line.search and line.search.method == "curve" for line in exp.lines):
            return CurveSearch(self)
        return BisectionSearch(self, BudgetCheck(self) if exp.search.budget_factor is not None else None)

    def run(self) -> SweepResult:
        started = time.perf_counter()
        strategy = self.strategy()
        strategy.search()
        violations = monotonicity_violations(self)
        # the points before the run rows: building a point may key a config another line already ran (lines
        # that differ in metric only), and the rows list every keyed probe that has a result
        points = strategy.points(violations)
        return SweepResult(
            experiment=self.exp, points=points, violations=violations, runs=self.run_rows(),
            reused=self.reused, computed=self.computed, failed=self.failed, missing=self.missing,
            wall_time_s=time.perf_counter() - started,
            executor=self.executor.describe() if self.executor is not None else "replay",
            budget_runs=strategy.budget_runs(),
        )

    def run_rows(self) -> list[ProbeRun]:
        """Every probe with a result: where it is, its hash, and its metrics (or its error)."""
        exp = self.exp
        rows = []
        kept: dict[str, tuple[str, ...]] = {}  # per task: the registry is asked once per sweep, not per row
        for (li, b, s, seed), h in self.hash_of.items():
            entry = self.cache.get(h)
            if entry is None:
                continue
            where = {"line": exp.lines[li].label, "base": exp.base, "base_value": b, "size": exp.size,
                     "size_value": s, "seed": seed, "config_hash": h, "metric": exp.metric}
            if isinstance(entry, Failure):
                rows.append(ProbeRun(**where, error=entry.message))
                continue
            task = self.config_of[h]["task"]
            if task not in kept:
                kept[task] = row_metrics(task)
            rows.append(ProbeRun(**where, metric_value=entry.get(exp.metric_of(li)),
                                 metrics={key: entry[key] for key in kept[task] if key in entry}))
        rows.sort(key=lambda r: (r.line, r.base_value, r.seed, r.size_value))
        return rows


def _torch_version() -> str | None:
    # read from sys.modules, never imported: a replay or a fake executor must not pay torch's import
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", None)

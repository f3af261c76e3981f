"""Theory-guided search for boundary points: the entry points (run_sweep, replay) over the driver and its strategies.

For each cell (line, base value, seed, threshold) of a ``min_size`` experiment the search finds the
smallest size (d) whose metric reaches the threshold; for ``max_capacity`` the largest size (N)
that still reaches it. A ``grid`` experiment trains the full (base, size) product for heatmaps; a ``law``
experiment trains every (line, base value, seed) once, each run one point of its line's law check
(``empirics.grid_sweep``: the grid's product without a size).

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

Where each piece lives (this module is the entry point and keeps every name callers import from it):
``empirics.sweep_driver`` (the driver: probes keyed by store hash, one executor call per round, failures,
run rows), ``empirics.bisection`` (per-seed bisection), ``empirics.budget_check`` (the training-budget check),
``empirics.curve_search`` and ``empirics.ceilings`` (seed-mean curves and instance ceilings),
``empirics.grid_sweep`` (the grid product), ``empirics.search_sizes`` (bounds and grids of probe-able sizes),
``empirics.search_points`` (per-seed points, monotonicity check), ``empirics.search_types`` (the shared
types and the :class:`SearchStrategy` interface) and ``empirics.records`` (the records a sweep returns:
boundary points, violations, probe runs; written as dicts only where JSON is: ``SweepResult.to_dict``, the
report's summary entry, :func:`boundary_points`).
"""
from __future__ import annotations

import sys
from typing import TextIO

from recallkit.empirics.experiment import Experiment
from recallkit.empirics.plan import Plan
from recallkit.empirics.search_types import MISSING, CellResult, Failure, SearchStrategy, SweepResult
from recallkit.empirics.sweep_driver import SweepDriver

__all__ = ["MISSING", "CellResult", "Failure", "SearchStrategy", "SweepDriver", "SweepResult", "boundary_points",
           "grid_points", "replay", "run_sweep"]


def run_sweep(experiment: Experiment | Plan, store, executor, progress: bool = False,
              log: TextIO | None = sys.stderr) -> SweepResult:
    """Train what the experiment's search needs (reusing the store) and return its boundary points."""
    return SweepDriver(experiment, store, executor, progress=progress, log=log).run()


def replay(experiment: Experiment | Plan, store) -> SweepResult:
    """The sweep's result as the store holds it, training nothing; missing runs censor their cells."""
    return SweepDriver(experiment, store, executor=None, log=None, code_version="replay").run()


def boundary_points(experiment: Experiment | Plan, store) -> list[dict]:
    """The contract of docs/ARCHITECTURE.md: one dict per (line, threshold, seed, base value), as summary.json
    writes it (``replay(...).points`` holds the typed records)."""
    return [p.to_dict() for p in replay(experiment, store).points]


def grid_points(experiment: Experiment | Plan, store) -> list[dict]:
    """Every stored run of a (line, base, size, seed) for heatmaps, with its metrics, one dict each."""
    return [r.to_dict() for r in replay(experiment, store).runs]

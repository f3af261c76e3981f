"""Experiment files: one declarative TOML file per reproduced figure or table.

Schema (every key below is checked; an unknown key is an error; each section is a table of fields, ``_TOP``,
``_LINE``, ``_SEARCH``, ``_VERDICT``, ``_PRESET``, ``_CLAIM``, checked by ``theory.schema.validate``)::

    name = "my_fig2"                       # identifier, used as the experiment name in the store
    description = "Fig 2 of ..."           # free text
    pack = "my_pack"                       # theory pack used for the predicted boundary and the verdict: a name,
                                           # or a path to a .toml file (relative: from this file's folder)
    task = "my_task"                       # a registered task (recallkit.registry)
    model = "attention-only"               # empirics model
    trainer = "three_step"                 # empirics trainer
    kind = "min_size"                      # min_size | max_capacity | grid | law (below)
    base = "V"                             # grid variable (default V; d for max_capacity)
    size = "d"                             # searched variable (default d; N for max_capacity)
    metric = "accuracy"                    # metric compared with the thresholds (default accuracy)
    direction = "higher"                   # optional, min_size and max_capacity: higher (the default) | lower is
                                           # better for the metric; it says which way a threshold is reached
    thresholds = [0.1, 0.125, 0.15]        # a size "reaches" t when metric >= t, numbers in (0, 1] (may be [] when
                                           # relative_thresholds are given); with direction = "lower" when
                                           # metric <= t, any positive numbers (the smallest d whose loss is at
                                           # most 0.05); search.method = "bisect" only
    relative_thresholds = [0.5]            # search.method = "curve" only: t = this fraction of each
                                           # (line, base) instance's ceiling (stored, reported); direction =
                                           # "higher" only (the ceiling is the metric's best, its highest value)

    [[lines]]                              # one or more lines through the scaling plane
    scaling = "N=V*log(V), L=V**0.5"       # assignments, evaluated in order, in base, size and earlier names
                                           # ("" when the config needs none, e.g. the linear memory); a name
                                           # is a size symbol or a variable the pack declares (n = V**2),
                                           # which [fixed] may also set; the task's config must take it
    theory_scaling = "m=d"                 # optional: the line as the theory pack states it (default: scaling);
                                           # a constant it gives a declared variable reaches the runs too (below)
    label = "N~V log V, L~V^0.5"           # optional, for tables and plots (default: the scaling)
    model = "..."                          # optional per-line override of model / trainer / task
    fixed = { eta = 0.5 }                  # optional per-line overrides of [fixed]
    search = { ceiling = "2*V**0.5" }      # optional per-line overrides of [search] (after the preset's)
    metric = "accuracy_epoch_8"            # optional per-line metric (default: the experiment's); lines that
                                           # differ only in it share their runs (e.g. per-epoch accuracies)
    reference_note = "..."                 # optional: this line's fit is drawn against the pack's slope for
                                           # reference, with no verdict, for this reason (e.g. the pack
                                           # states its prediction for small L only)
    primary = "0.1"                        # optional: this line's primary check (a threshold, or "0.5 x
                                           # ceiling"), named before freezing; the report counts them apart

    [fixed]                                # fixed parameters: numbers or expressions in V N d L m R
    eta = 1.0
    gamma = "1e7"
    features = "relu_centred"              # name-valued options (features) are kept as strings
    batch_size = "floor(N/16)"

    [search]                               # bounds and resolution of the search over `size`
    min = 8                                # smallest size probed
    max = 2048                             # largest size probed; not reaching by then = censored
    start = "4*V**0.5"                     # optional first guess at the first base value (expression in base)
    resolution = 0.0                       # stop when hi <= lo*(1+resolution) (always when hi-lo <= 1)
    bracket = 1.5                          # first bracket = [guess/bracket, guess*bracket]
    expand = 2.0                           # factor by which a bracket that missed is widened
    grid = "2**(1/4)"                      # optional: probe only sizes round(grid**k) (a constant-ratio grid);
                                           # the bisection ends when the answer's grid neighbour is probed
    budget_factor = 3                      # optional training-budget check: at each line's largest base
    budget_key = "steps"                   # value, re-probe the boundary's failed neighbour with
                                           # budget_key x budget_factor; the point is flagged if it then
                                           # reaches the threshold (the answer moves by a search step)
    method = "bisect"                      # bisect: per seed, integer bisection (below); curve: one
                                           # seed-averaged accuracy curve per (line, base) on sizes shared
                                           # by all seeds, isotonic fit, crossing interpolated in log size
    points = 5                             # curve: sizes of the first round, log-spaced around the guess
    ratio = 1.4142                         # curve: spacing of those sizes
    ceiling = "4*V"                        # curve: the size (expression in the base) at which each
                                           # instance's ceiling (its accuracy at large size) is measured;
                                           # a curve runs no further than this size by default
    reach = "8*V"                          # curve, optional: how far (expression in the base, at most max)
                                           # a curve goes for a threshold it has not reached by the ceiling
                                           # size; default the ceiling size (such a point is censored there);
                                           # a positive size at every base value of the preset

    [verdict]                              # handed to compare
    delta = 0.25                           # equivalence margin on the slope
    alpha = 0.05
    reference_only = false                 # true: the pack's slope is drawn for reference, no verdict
                                           # (e.g. Adam runs judged against a three-step-GD theory)
    reference_note = "..."                 # optional: why (shown in the fit's reason)

    [[claims]]                             # optional: comparative claims between two fitted lines
    id = "fig4c-width"                     # identifier, unique in the file
    text = "m ~ d^3 needs a steeper count than m ~ d^2"   # the claim in words
    relation = "slope >"                   # slope < | slope > | level < | level > (level: the fitted log
                                           # parameter count at matched base values, the middle of the
                                           # common fitted range)
    a = { line = "N=V**1.5, m=d**3", threshold = 0.25, relative = true }   # side A: a line label of this
                                           # file; optional threshold (default: the other side's, or every
                                           # threshold both sides share), relative = true for a fraction of
                                           # the ceiling, experiment = "other_exp" for a line of another file
    b = { line = "N=V**1.5, m=d**2" }      # side B, the same keys
    alpha = 0.05                           # optional: level of the one-sided test (default verdict.alpha)
    provenance = "paper-reported: Fig 4(c)"   # required: where the claim comes from

    [presets.quick]                        # presets override the above; `quick` and `paper` are expected
    V = [128, 256, 512, 1024]              # values of the base variable (key = the base's name), or a
                                           # table of them per line label: V = { "line a" = [...], ... }
    seeds = [0, 1]
    sizes = [16, 32, 64]                   # kind = "grid" only: the size values of the heatmap
    lines = ["N~V log V, L~V^0.5"]         # optional: run only these lines (by label)
    thresholds = [...]                     # optional
    fixed = { eval_samples = 2048 }        # merged over [fixed]
    search = { resolution = 0.1 }          # merged over [search]

A law experiment (``kind = "law"``) measures the metric of one of the pack's ``[[laws]]`` along each line and
fits log(metric) against log(base), one check per line, judged against the law's exponent of the metric along
the line (``empirics.plan.law_prediction``; docs/ARCHITECTURE.md, "Law experiments")::

    kind = "law"
    pack = "my_pack"                       # a pack with [[laws]]
    law = "test_error"                     # required: a [[laws]] name of the pack
    base = "p"                             # required: the variable each line moves (a size symbol or a variable
                                           # the pack declares), the x of each fit
    metric = "test_error"                  # optional: default the law's metric; one the task's runs store
    direction = "lower"                    # optional: lower | higher is better (default: higher for accuracy
                                           # and train_accuracy, else lower); every term of the law must fall
                                           # (lower) or rise (higher) with the base along each line, or stay
                                           # constant (_check_law_direction)

    [[lines]]
    scaling = "n=16*p**2"                  # the law's other variables: constants or expressions in the base

    [presets.quick]
    p = [16, 32, 64, 128]                  # the base's values
    seeds = [0, 1, 2, 3]

One value, given once: a variable the pack declares (``[[variables]]``, such as a law's exponent ``alpha``) that a
line's ``theory_scaling`` sets to a constant (``theory_scaling = "n=16*p**2, alpha=1/2"``) and its ``scaling``
leaves out is set in the line's runs too, where the task's config has that key; a constant that ``[fixed]`` (the
preset's, the line's) or the ``scaling`` gives a declared variable is added to the ``theory_scaling`` where that
does not set it. A variable that the runs and the ``theory_scaling`` give different values is one error naming the
file, the line and both values (``_link_theory``).

Each (line, base value, seed) is one run, stored and reused like a grid cell. A law experiment takes no
``size``, ``thresholds``, ``relative_thresholds`` or ``[search]``, the other kinds take no ``law``, and a grid
takes no ``direction``; each is a one-line error naming the file and the field.

Expressions are parsed by recallkit's one whitelist parser, ``theory.expr`` (numbers, declared
symbols, ``+ - * / **``, parentheses, and ``log sqrt exp floor ceil Min Max min max``), and evaluated
in floats by walking the parsed tree; nothing in the file is ever executed.
Integer-valued parameters (sizes, batch size, epochs, steps) are floored after evaluation.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from recallkit import registry
from recallkit.empirics.config import (MAX_D, MAX_L, MAX_M, MAX_N, MAX_R, MAX_V, check_memory, planned_config,
                                       task_spec)
from recallkit.empirics.overrides import FieldSettings, apply_settings
from recallkit.empirics.records import threshold_text
from recallkit.theory.errors import InputError
from recallkit.theory.expr import compile_numeric
from recallkit.theory.pack import load_pack
from recallkit.theory.scaling import parse_scaling, power_text, reduce_term, split_assignments
from recallkit.theory.sizes import SIZE_SYMBOLS  # re-exported: callers read it here
from recallkit.theory.schema import (
    REQUIRED, Field, Rule, Section, boolean, check_keys, check_value, converts, integer, loads_toml, number, options,
    satisfies, text, validate,
)
from recallkit.theory.schema import table as table_rule

PACK_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")  # a registered pack's name, as theory.pack reads one

__all__ = ["presets_in", "shipped_experiments", "Claim", "claim_from_dict", "CLAIM_RELATIONS", "ClaimSide", "DEFAULT_MAX_RUNS", "Experiment",
           "DIRECTIONS", "experiment_from_dict", "experiment_with_settings", "HIGHER_IS_BETTER", "INTEGER_PARAMS", "KINDS", "Line", "load_experiment", "max_runs_allowed",
           "parse_claims", "read_experiment_file", "resolve_experiment", "RUN_METRICS", "SafeExpression", "SEARCH_METHODS",
           "SearchSettings", "SIZE_LIMITS", "SIZE_SYMBOLS", "STRING_PARAMS"]


KINDS = ("min_size", "max_capacity", "grid", "law")
# kind = "law": which way the law's metric is better, higher for these, else lower; min_size and max_capacity: which
# way a size reaches a threshold (Experiment.reaches), higher unless the file says lower
DIRECTIONS = ("lower", "higher")
HIGHER_IS_BETTER = ("accuracy", "train_accuracy")
# What every stored run holds (empirics.engine), beside the metrics its task declares (registry.Task.run_metrics)
RUN_METRICS = ("accuracy", "train_accuracy", "loss", "eval_loss", "param_count", "trainable_params", "steps_run")
# Symbols an expression may name: the sizes of the shipped systems' tasks (V N d L m R).
# Parameters that are counts; expressions for them are floored to integers.
INTEGER_PARAMS = {
    "V", "N", "d", "L", "m", "R", "k", "batch_size", "epochs", "steps", "eval_samples",
    "train_samples", "max_steps", "eval_every", "n_eval", "heads", "log_epochs",
}
# Parameters whose value is a name, not an expression (e.g. features = "relu_centred").
STRING_PARAMS = {"features", "mlp_input", "centring"}
# Upper limits on sizes: a typo such as d = 1e9 must fail at load time, not allocate terabytes.
# The same limits as a run config's (empirics.config), so an experiment cannot ask for a size
# that its own run configs would then refuse.
SIZE_LIMITS = {"V": MAX_V, "N": MAX_N, "d": MAX_D, "L": MAX_L, "m": MAX_M, "R": MAX_R}
SEARCH_METHODS = ("bisect", "curve")
CLAIM_RELATIONS = ("slope <", "slope >", "level <", "level >")


class SafeExpression:
    """An arithmetic expression over named symbols, evaluated in floats.

    A thin wrapper over :class:`recallkit.theory.expr.NumericExpression`: the text is parsed by the
    one whitelist parser of recallkit (same limits as theory packs and run configs) and evaluated
    by walking the parsed tree, so user text is never executed.
    """

    def __init__(self, text: str, symbols: set[str] | tuple[str, ...], where: str):
        self.text = text
        self.where = where
        self._expression = compile_numeric(text, symbols, where)
        self.symbols: set[str] = set(self._expression.symbols)

    def evaluate(self, env: dict[str, float]) -> float:
        return self._expression.evaluate(env)

    def __repr__(self) -> str:
        return f"SafeExpression({self.text!r})"


def _integer(value: float) -> int:
    # 256**0.5 evaluates to 16.000000000000004 or 15.999999999999998: floor with a tolerance.
    return int(math.floor(value + 1e-9))


@dataclass
class Line:
    """One line through the scaling plane: assignments of the dependent sizes in base and size."""

    scaling: str
    label: str
    assignments: list[tuple[str, SafeExpression]]
    theory_scaling: str = ""
    overrides: dict[str, str] = field(default_factory=dict)  # task / model / trainer
    fixed: dict[str, Any] = field(default_factory=dict)
    search_overrides: dict[str, Any] = field(default_factory=dict)  # raw [search] keys of this line
    search: "SearchSettings | None" = None  # the merged settings of this line (None: the experiment's)
    reference_note: str | None = None  # set: this line's fit is shown against the pack for reference only
    metric: str | None = None  # this line's metric (None: the experiment's)
    primary: str | None = None  # this line's primary check, as its threshold text ("0.1", "0.5 x ceiling")
    # constants the line's theory_scaling gives the pack's declared variables that its scaling leaves out and the
    # task's config takes: they reach the runs too (given once, see _link_theory)
    theory_constants: dict[str, float] = field(default_factory=dict)


@dataclass
class SearchSettings:
    min: int
    max: int
    start: SafeExpression | None = None
    resolution: float = 0.0
    bracket: float = 1.5
    expand: float = 2.0
    grid: float | None = None          # ratio of the constant-ratio grid of sizes (None: every integer)
    grid_text: str | None = None       # the grid as written in the file
    budget_factor: float | None = None  # training-budget check (None: no check)
    budget_key: str = "steps"
    method: str = "bisect"
    points: int = 5
    ratio: float = 2 ** 0.5
    ceiling: SafeExpression | None = None
    reach: SafeExpression | None = None

    def ceiling_size(self, base_name: str, base_value: int) -> int:
        """The size at which a curve search measures the instance's ceiling (default: ``max``)."""
        if self.ceiling is None:
            return self.max
        return max(self.min, _integer(self.ceiling.evaluate({base_name: base_value})))

    def reach_size(self, base_name: str, base_value: int) -> int:
        """The largest size a curve search runs to: ``reach`` where it is beyond the ceiling size, else the ceiling
        size; never beyond ``max``."""
        size = self.ceiling_size(base_name, base_value)
        if self.reach is not None:
            size = max(size, _integer(self.reach.evaluate({base_name: base_value})))
        return min(self.max, max(size, self.min))

    def grid_sizes(self) -> list[int] | None:
        """The distinct sizes round(grid**k) inside [min, max], ascending; None without a grid."""
        if self.grid is None:
            return None
        step = math.log(self.grid)
        first, last = math.floor(math.log(self.min) / step), math.ceil(math.log(self.max) / step)
        values = {round(self.grid ** k) for k in range(first, last + 1)}
        return sorted(v for v in values if self.min <= v <= self.max)


@dataclass(frozen=True)
class ClaimSide:
    """One side of a comparative claim: a fitted line (label) at a threshold, of this experiment or another."""

    line: str
    threshold: float | None = None  # None: the other side's, or every threshold both sides share
    relative: bool = False  # a fraction of the instance's ceiling (relative_thresholds)
    experiment: str | None = None  # None: the experiment that declares the claim; else the other one's name
    experiment_path: str | None = None  # where that other experiment's file was found

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"line": self.line, "threshold": self.threshold, "relative": self.relative}
        if self.experiment is not None:
            out.update(experiment=self.experiment, experiment_path=self.experiment_path)
        return out


@dataclass(frozen=True)
class Claim:
    """A comparative claim declared in ``[[claims]]``: ``relation`` holds between side ``a`` and side ``b``
    (``"slope <"`` reads slope(a) < slope(b)). compare (``compare.claims``) judges it from the fits."""

    id: str
    text: str
    relation: str  # one of CLAIM_RELATIONS
    a: ClaimSide
    b: ClaimSide
    provenance: str
    alpha: float | None = None  # None: compare's default level

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "text": self.text, "relation": self.relation, "a": self.a.to_dict(),
                "b": self.b.to_dict(), "alpha": self.alpha, "provenance": self.provenance}


@dataclass
class Experiment:
    """A loaded, validated experiment file with one preset applied."""

    path: str
    name: str
    description: str
    pack: str | None
    task: str
    model: str
    trainer: str
    kind: str
    base: str
    size: str
    metric: str
    thresholds: list[float]
    lines: list[Line]
    fixed: dict[str, Any]
    search: SearchSettings
    verdict: dict[str, Any]
    preset: str
    base_values: list[int]
    seeds: list[int]
    sizes: list[int]  # kind = "grid" only
    line_base_values: dict[str, list[int]] = field(default_factory=dict)  # per line label, when the preset gives them
    relative_thresholds: list[float] = field(default_factory=list)  # search.method = "curve" only
    claims: list[Claim] = field(default_factory=list)  # [[claims]]: comparative claims between fitted lines
    file_lines: list[str] = field(default_factory=list)  # every line label of the file (a preset may run fewer)
    variables: dict[str, str] = field(default_factory=dict)  # the pack's declared variables: name -> domain
    law: str | None = None  # kind = "law": the pack's [[laws]] name whose metric is measured
    direction: str | None = None  # law, min_size, max_capacity: lower | higher is better for the metric
    # fields changed for this command (``--set FIELD=VALUE``, empirics.overrides), recorded beside its results
    settings: tuple[tuple[str, Any], ...] = ()
    # the run configs validated when the file was loaded (the corners of each line), by (line label, base value,
    # size, seed): the search takes these instead of validating the same config a second time
    checked_configs: dict[tuple[str, int, int, int], Any] = field(default_factory=dict, repr=False, compare=False)

    def values_of(self, line_index: int) -> list[int]:
        """The base values swept along one line (the preset's list, or that line's own)."""
        return self.line_base_values.get(self.lines[line_index].label, self.base_values)

    def reaches(self, value: float, threshold: float) -> bool:
        """Whether a metric value reaches a threshold: at least t, or at most t where lower is better. Every search
        (bisection, grid, budget check, monotonicity check) decides it here."""
        return value <= threshold if self.direction == "lower" else value >= threshold

    def threshold_targets(self) -> list[tuple[float, bool]]:
        """(value, relative) for every threshold: absolute ones, then fractions of the ceiling."""
        return [(t, False) for t in self.thresholds] + [(t, True) for t in self.relative_thresholds]

    def planned_runs(self) -> int:
        """About how many models the sweep trains (an upper estimate for searches: the bracket plus a
        bisection in log size down to the resolution, per line, base value and seed; thresholds share)."""
        cells = sum(len(self.values_of(i)) for i in range(len(self.lines))) * len(self.seeds)
        if self.kind == "law":  # one run per (line, base value, seed)
            return cells
        if self.kind == "grid":
            return cells * len(self.sizes)
        total = 0
        for i, line in enumerate(self.lines):
            search, line_cells = line.search or self.search, len(self.values_of(i)) * len(self.seeds)
            if search.method == "curve":  # first round + ceiling + about two more sizes per threshold
                total += line_cells * (search.points + 1 + 2 * len(self.threshold_targets()))
                continue
            ratio = math.log(search.max / search.min)
            step = math.log1p(search.resolution) if search.resolution > 0 else ratio / search.max
            total += line_cells * (4 + math.ceil(math.log2(max(2.0, ratio / max(step, 1e-12)))))
        return total

    def build_config(self, line: Line, base_value: int, size_value: int, seed: int) -> dict:
        """The flat run config (see docs/ARCHITECTURE.md) of one trained model."""
        env: dict[str, float] = {self.base: base_value, self.size: size_value}
        config: dict[str, Any] = {
            "task": line.overrides.get("task", self.task),
            "model": line.overrides.get("model", self.model),
            "trainer": line.overrides.get("trainer", self.trainer),
            "seed": int(seed),
            self.base: int(base_value),
        }
        if self.size:  # a law experiment moves its base only: it has no searched size
            config[self.size] = int(size_value)
        at = f"{self.base}={base_value}" + (f", {self.size}={size_value}" if self.size else "")
        for name, expr in line.assignments:
            value = expr.evaluate(env)
            value = value if self.variables.get(name) == "real" else _integer(value)
            _check_size(value, name, f"{self.path}: line {line.scaling!r}: {name} at {at}")
            _check_declared(value, name, self.variables, f"{self.path}: line {line.scaling!r}: {name} at {at}")
            env[name] = value
            config[name] = value
        for name, value in line.theory_constants.items():  # a pack constant given once, in the theory_scaling
            value = _integer(value) if self.variables.get(name) == "integer" else value
            _check_declared(value, name, self.variables, f"{self.path}: line {line.label!r}: theory_scaling {name}")
            env[name] = value
            config[name] = value
        for name, raw in {**self.fixed, **line.fixed}.items():
            if isinstance(raw, SafeExpression):
                value = raw.evaluate(env)
                value = _integer(value) if name in INTEGER_PARAMS or self.variables.get(name) == "integer" else value
            else:
                value = raw
            if name in SIZE_SYMBOLS or name in self.variables:
                _check_declared(value, name, self.variables, f"{self.path}: fixed.{name} at {at}")
                env[name] = value
            config[name] = value
        return config

    def planned_config(self, line: Line, base_value: int, size_value: int, seed: int):
        """:meth:`build_config` validated (an ``empirics.config.ParsedConfig``), once per config."""
        checked = self.checked_configs.get((line.label, base_value, size_value, seed))
        return checked if checked is not None else planned_config(self.build_config(line, base_value, size_value, seed))

    def metric_of(self, line: "int | str") -> str:
        """The metric line ``line`` (an index or a label) is judged on: its own ``metric``, else the experiment's."""
        found = self.lines[line] if isinstance(line, int) else next((ln for ln in self.lines if ln.label == line), None)
        return (found.metric if found else None) or self.metric

    def to_dict(self) -> dict:
        return {
            "path": self.path, "name": self.name, "description": self.description, "pack": self.pack,
            "task": self.task, "model": self.model, "trainer": self.trainer, "kind": self.kind,
            "base": self.base, "size": self.size, "metric": self.metric, "thresholds": self.thresholds,
            "lines": [{"scaling": ln.scaling, "theory_scaling": ln.theory_scaling, "label": ln.label, **ln.overrides,
                       "fixed": {k: _shown(v) for k, v in ln.fixed.items()},
                       "search": {k: _shown(v) for k, v in ln.search_overrides.items()},
                       **({"reference_note": ln.reference_note} if ln.reference_note else {}),
                       **({"metric": ln.metric} if ln.metric else {})} for ln in self.lines],
            "fixed": {k: _shown(v) for k, v in self.fixed.items()},
            "search": {"min": self.search.min, "max": self.search.max,
                       "start": self.search.start.text if self.search.start else None,
                       "resolution": self.search.resolution, "bracket": self.search.bracket,
                       "expand": self.search.expand, "grid": self.search.grid_text,
                       "budget_factor": self.search.budget_factor,
                       "budget_key": self.search.budget_key if self.search.budget_factor else None,
                       "method": self.search.method, "points": self.search.points,
                       "ratio": self.search.ratio,
                       "ceiling": self.search.ceiling.text if self.search.ceiling else None,
                       **({"reach": self.search.reach.text} if self.search.reach else {})},
            "relative_thresholds": self.relative_thresholds,
            "verdict": self.verdict, "preset": self.preset, self.base: self.base_values,
            "seeds": self.seeds, "sizes": self.sizes,
            **({f"{self.base}_by_line": self.line_base_values} if self.line_base_values else {}),
            "claims": [claim.to_dict() for claim in self.claims],
            **({"law": self.law, "direction": self.direction} if self.kind == "law" else {}),
            # a search's default (higher) is left out, so the shipped experiments' dicts read as before
            **({"direction": self.direction} if self.kind != "law" and self.direction == "lower" else {}),
        }


def _shown(value: Any) -> Any:
    return value.text if isinstance(value, SafeExpression) else value


def _check_size(value: Any, name: str, where: str) -> None:
    if name in SIZE_LIMITS:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InputError(f"{where}: expected a positive integer, got {value!r}")
        if value > SIZE_LIMITS[name]:
            raise InputError(f"{where}: {value} is above the limit {SIZE_LIMITS[name]} for {name}")


def _check_declared(value: Any, name: str, variables: Mapping[str, str], where: str) -> None:
    """A value of a variable the pack declares: positive (its symbol is), and an integer where it is declared so."""
    domain = variables.get(name)
    if domain is None:
        return
    integral = isinstance(value, int) and not isinstance(value, bool)
    if domain == "integer" and (not integral or value <= 0):
        raise InputError(f"{where}: expected a positive integer, got {value!r}")
    if domain == "real" and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                             or value <= 0):
        raise InputError(f"{where}: expected a positive number, got {value!r}")


def _number(value: Any, where: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: expected a number, got {value!r}")
    if positive and value <= 0:
        raise InputError(f"{where}: expected a positive number, got {value!r}")
    return float(value)


def _positive_int_list(value: Any, where: str, name: str | None = None) -> list[int]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: expected a non-empty list of positive integers, got {value!r}")
    for i, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or item <= 0:
            raise InputError(f"{where}[{i}]: expected a positive integer, got {item!r}")
        if name is not None:
            _check_size(item, name, f"{where}[{i}]")
    return list(value)


def _fixed_table(table: Any, where: str, symbols: set[str]) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table of parameters, got {table!r}")
    out: dict[str, Any] = {}
    for key, value in table.items():
        if not key.isidentifier():
            raise InputError(f"{where}.{key}: parameter names must be identifiers")
        if isinstance(value, str) and key in STRING_PARAMS:
            out[key] = value
            continue
        if isinstance(value, str):
            expr = SafeExpression(value, symbols, f"{where}.{key}")
            # A plain number written as a string ("1e7") is stored as a number.
            out[key] = expr.evaluate({}) if not expr.symbols else expr
            if key in INTEGER_PARAMS and not expr.symbols:
                out[key] = _integer(out[key])
        elif isinstance(value, bool) or isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(f"{where}.{key}: expected a finite number, got {value!r}")
            out[key] = value
        else:
            raise InputError(f"{where}.{key}: expected a number, a boolean or an expression string, got {value!r}")
        if key in SIZE_SYMBOLS and not isinstance(out[key], SafeExpression):
            _check_size(out[key], key, f"{where}.{key}")
    return out


def _parse_scaling(text: str, base: str, size: str, where: str,
                   declared: Mapping[str, str] | InputError = {}) -> list[tuple[str, SafeExpression]]:
    """A line's assignments; ``declared``: the variables the pack declares (or why the pack could not be read)."""
    known = {base, size}
    assignments: list[tuple[str, SafeExpression]] = []
    for name, rhs in split_assignments(text, where):
        if name not in SIZE_SYMBOLS and isinstance(declared, InputError):
            raise declared  # the name may be one the pack declares: its reason it cannot say
        if name not in SIZE_SYMBOLS and name not in declared:
            if declared:
                raise InputError(f"{where}: {name!r} is not a size symbol or a variable of the pack (expected one of "
                                 f"{', '.join([*SIZE_SYMBOLS, *declared])})")
            raise InputError(f"{where}: {name!r} is not a size symbol (expected one of {', '.join(SIZE_SYMBOLS)})")
        if name in known:
            raise InputError(f"{where}: {name} is assigned twice or is the base/searched variable")
        assignments.append((name, SafeExpression(rhs, known, where)))
        known.add(name)
    return assignments


# -- the sections of an experiment file, one declarative table each (the schema of the module docstring) ------
# Converters run inside theory.schema.validate: each gets the value, its place for messages and the context
# (the values of the section checked before it, plus the caller's: base, size, kind).
def _parameters(value: Any, at: str, context: Mapping[str, Any]) -> dict[str, Any]:
    return _fixed_table(value, at, set(SIZE_SYMBOLS))


def _size(value: Any, at: str, context: Mapping[str, Any]) -> Any:
    _check_size(value, context["size"], at)
    return value


def _above_min(value: Any, at: str, context: Mapping[str, Any]) -> Any:
    if context["min"] >= value:
        raise InputError(f"{at}: expected max > min, got min={context['min']}, max={value}")
    return value


def _as_text(types: tuple[type, ...]) -> Rule:
    """A number written without quotes where an expression is expected: read as its text."""
    return converts(lambda v, at, context: repr(v) if isinstance(v, types) and not isinstance(v, bool) else v)


def _expression(value: Any, at: str, context: Mapping[str, Any]) -> SafeExpression:
    return SafeExpression(value, set(SIZE_SYMBOLS), at)


def _ratio(value: Any, at: str, context: Mapping[str, Any]) -> float:
    return SafeExpression(value, set(), at).evaluate({}) if isinstance(value, str) else _number(value, at)


def _method(value: Any, at: str, context: Mapping[str, Any]) -> str:
    if value == "curve" and context["kind"] != "min_size":
        raise InputError(f"{at}: 'curve' is for kind = 'min_size' only, got kind = {context['kind']!r}")
    return value


_POSITIVE = number(0, closed="neither", expected="a positive number", message="{at}: expected {expected}, got {raw}")
_SIZE_BOUND = (integer(1), converts(_size))
# a size as an integer or an expression in the base variable (search.ceiling, search.reach)
_SIZE_EXPRESSION = (_as_text((int,)), satisfies(lambda v: isinstance(v, str), "", "{at}: expected an integer or an "
                                                "expression in the base variable"), converts(_expression))
_SEARCH = Section("[search]", (
    Field("min", _SIZE_BOUND, "smallest size probed", REQUIRED, "{at}: missing; expected the smallest {size} to probe"),
    Field("max", _SIZE_BOUND + (converts(_above_min),), "largest size probed; not reaching it = censored", REQUIRED,
          "{at}: missing; expected the largest {size} to probe"),
    Field("start", (_as_text((int, float)), satisfies(lambda v: isinstance(v, str), "", "{at}: expected a number or "
                    "an expression in the base variable"), converts(_expression)), "first guess (expression in base)"),
    Field("resolution", (number(), number(0, expected="a number >= 0")), "stop when hi <= lo*(1+resolution)", 0.0),
    Field("bracket", (number(), number(1, expected="a number >= 1")), "first bracket [guess/b, guess*b]", 1.5),
    Field("expand", (number(), number(1, closed="neither", expected="a number > 1")), "widening of a missed bracket",
          2.0),
    Field("grid", (converts(_ratio), satisfies(lambda v: v > 1, "", '{at}: expected a ratio > 1 (such as '
                   '"2**(1/4)"), got {raw}')), "probe only sizes round(grid**k)"),
    Field("budget_factor", (number(), number(1, closed="neither", expected="a number > 1",
                                             message="{at}: expected {expected}, got {raw}")), "budget-check factor"),
    Field("budget_key", (satisfies(lambda v: isinstance(v, str) and v.isidentifier(),
                                   'a parameter name such as "steps"'),), "the parameter the check multiplies", "steps"),
    Field("method", (options(SEARCH_METHODS), converts(_method)), "bisect | curve", "bisect"),
    Field("points", (integer(2, 64, "an integer in [2, 64]"),), "curve: sizes of the first round", 5),
    Field("ratio", (number(), number(1, closed="neither", expected="a number > 1")), "curve: spacing of the sizes",
          2 ** 0.5),
    Field("ceiling", _SIZE_EXPRESSION, "curve: where the ceiling is"),
    Field("reach", _SIZE_EXPRESSION, "curve: how far a curve goes for a threshold not reached by the ceiling size"),
))
# A line's [search] overrides are merged over the file's (and the preset's) and checked as a whole then; only
# its max, a cap that a preset's smaller max may replace, is checked on its own.
_LINE_SEARCH = Section("[[lines]] search", tuple(Field(f.name, (), f.meaning) for f in _SEARCH.fields if f.name not in (
    "method", "max")) + (Field("max", (integer(1, message="{at}: expected a positive integer (this line's cap on "
                                                           "{size}), got {got}"), converts(_size)), "this line's cap"),),
    not_table="{where}: expected a table of [search] keys")


def _search_keys(value: dict, at: str, context: Mapping[str, Any]) -> dict:
    check_keys(value, _SEARCH, at)
    return dict(value)


def _line_search(value: Any, at: str, context: Mapping[str, Any]) -> dict[str, Any]:
    checked = validate(value, _LINE_SEARCH, at, context=context)
    return {key: checked[key] for key in value}


_LINE = Section("[[lines]]", (
    Field("scaling", (satisfies(lambda v: isinstance(v, str), "", "{at}: expected a string of assignments such as "
                                "'N=V*log(V), L=V**0.5' (or \"\")"),), "assignments of the dependent sizes", REQUIRED),
    Field("theory_scaling", (text(),), "the line as the pack states it", lambda v, c: v["scaling"] or REQUIRED),
    Field("label", (text(),), "for tables and plots", lambda v, c: v["theory_scaling"]),
    Field("task", (text(),), "this line's task"),
    Field("model", (text(),), "this line's model"),
    Field("trainer", (text(),), "this line's trainer"),
    Field("fixed", (converts(_parameters),), "overrides of [fixed]", {}),
    Field("search", (converts(_line_search),), "overrides of [search]", {}),
    Field("reference_note", (text(), converts(lambda v, at, c: v.strip())), "no verdict for this line, why"),
    Field("metric", (text(),), "this line's metric"),
    Field("primary", (text(),), "this line's primary check: one of its thresholds, e.g. '0.1' or '0.5 x ceiling'"),
))


def _line(table: Any, where: str, context: Mapping[str, Any]) -> Line:
    v = validate(table, _LINE, where, context=context)
    return Line(scaling=v["scaling"], theory_scaling=v["theory_scaling"], label=v["label"],
                assignments=_parse_scaling(v["scaling"], context["base"], context["size"], f"{where}.scaling",
                                           context.get("declared", {})),
                overrides={k: v[k] for k in ("task", "model", "trainer") if v[k] is not None}, fixed=v["fixed"],
                search_overrides=v["search"], reference_note=v["reference_note"], metric=v["metric"],
                primary=v["primary"])


def _lines(value: list, at: str, context: Mapping[str, Any]) -> list[Line]:
    lines = [_line(table, f"{at}[{i}]", context) for i, table in enumerate(value)]
    if len({ln.label for ln in lines}) != len(lines):
        raise InputError(f"{at}: two lines have the same label; give each a distinct 'label'")
    return lines


_VERDICT = Section("[verdict]", (
    Field("delta", (number(), _POSITIVE), "equivalence margin on the slope"),
    Field("alpha", (number(), _POSITIVE, number(high=1, closed="left", expected="a number in (0, 1)")), "test level"),
    Field("reference_only", (boolean(),), "the pack's slope for reference, no verdict", False),
    Field("reference_note", (text(message="{at}: expected a non-empty string next to reference_only = true"),
                             converts(lambda v, at, c: v.strip())), "why reference only"),
))


def _verdict(value: Any, at: str, context: Mapping[str, Any]) -> dict[str, Any]:
    v = validate(value, _VERDICT, at, context=context)
    verdict: dict[str, Any] = {key: v[key] for key in value if key in ("delta", "alpha")}
    if v["reference_only"]:  # the pack's prediction is for another training algorithm: show it, decide nothing
        verdict["reference_only"] = True
    if v["reference_note"] is not None:
        if not v["reference_only"]:
            raise InputError(f"{at}.reference_note: expected a non-empty string next to reference_only = true")
        verdict["reference_note"] = v["reference_note"]
    return verdict


def _base_name(value: Any, at: str, context: Mapping[str, Any]) -> str:
    """A size symbol, or for a law experiment also a variable the pack declares (the law's x may be one)."""
    if isinstance(value, str) and value in SIZE_SYMBOLS:
        return value
    declared = context.get("declared") or {}
    if context["kind"] != "law":
        raise InputError(f"{at}: expected one of {', '.join(SIZE_SYMBOLS)}, got {value!r}")
    if isinstance(declared, InputError):
        raise declared
    if isinstance(value, str) and value in declared:
        return value
    pack = f"a variable of pack {context.get('pack_name')} ({', '.join(declared)})" if declared else (
        "a variable the pack declares (it declares none)")
    raise InputError(f"{at}: expected a size symbol ({', '.join(SIZE_SYMBOLS)}) or {pack}, got {value!r}")


def _not_base(value: str, at: str, context: Mapping[str, Any]) -> str:
    if context["kind"] == "law":
        raise InputError(f"{at}: not used with kind = 'law' (each line moves its base; nothing is searched)")
    if value == context["base"]:
        raise InputError(f"{at}: must differ from base ({value})")
    return value


_SEARCH_TABLE = (table_rule(message="{at}: expected a table"), converts(_search_keys))
_TOP = Section("experiment file", (
    Field("name", (text(), satisfies(lambda v: v.replace("_", "").replace("-", "").isalnum(),
                                     "letters, digits, '_' or '-'")), "identifier, the name in the store", REQUIRED),
    Field("kind", (options(KINDS),), "min_size | max_capacity | grid", "min_size"),
    Field("base", (converts(_base_name),), "grid variable (V; d for max_capacity; for a law a declared variable too)",
          lambda v, c: REQUIRED if v["kind"] == "law" else "d" if v["kind"] == "max_capacity" else "V"),
    Field("size", (options(SIZE_SYMBOLS), converts(_not_base)), "searched variable (d; N for max_capacity)",
          lambda v, c: "" if v["kind"] == "law" else "N" if v["kind"] == "max_capacity" else "d"),
    Field("pack", (satisfies(lambda v: isinstance(v, str) and bool(v), "a theory pack name or path"),),
          "theory pack of the predicted boundary and the verdict"),
    Field("lines", (satisfies(lambda v: isinstance(v, list) and bool(v), "", "{at}: expected at least one [[lines]] "
                              "table with a 'scaling'"), converts(_lines)), "lines through the scaling plane", REQUIRED),
    Field("presets", (satisfies(lambda v: isinstance(v, dict) and bool(v), "", "{at}: expected [presets.quick] and "
                                "[presets.paper] tables"),), "named presets (checked by _preset)", REQUIRED),
    Field("fixed", (converts(_parameters),), "fixed parameters: numbers or expressions", {}),
    Field("thresholds", (), "a size reaches t when metric >= t, <= t for direction lower (checked with the preset's)"),
    Field("search", _SEARCH_TABLE, "bounds and resolution of the search", {}),
    Field("relative_thresholds", (), "curve search: fractions of the ceiling (checked with the preset's)"),
    Field("verdict", (converts(_verdict),), "handed to compare", {}),
    Field("task", (text(),), "a registered task", REQUIRED),
    Field("model", (text(),), "empirics model", REQUIRED),
    Field("trainer", (text(),), "empirics trainer", REQUIRED),
    Field("metric", (text(),), "metric compared with the thresholds", "accuracy"),
    Field("description", (converts(lambda v, at, c: str(v)),), "free text", ""),
    Field("claims", (), "comparative claims (checked by parse_claims)"),
    Field("law", (text(),), "kind = 'law': a [[laws]] name of the pack (checked by _law_fields)"),
    Field("direction", (options(DIRECTIONS),), "law, min_size, max_capacity: lower | higher is better for the metric"),
))


def _grid_sizes(value: Any, at: str, context: Mapping[str, Any]) -> list[int]:
    if context["kind"] != "grid":
        raise InputError(f"{at}: only used with kind = 'grid' (this experiment is {context['kind']})")
    return _positive_int_list(value, at, context["size"])


_PRESET = Section("[presets.X]", (
    Field("lines", (satisfies(lambda v: isinstance(v, list) and bool(v) and all(isinstance(x, str) for x in v), "",
                              "{at}: expected a non-empty list of line labels"),), "run only these lines (by label)"),
    Field("fixed", (converts(_parameters),), "merged over [fixed]", {}),
    Field("thresholds", (), "replaces thresholds"),
    Field("search", _SEARCH_TABLE, "merged over [search]", {}),
    Field("relative_thresholds", (), "replaces relative_thresholds"),
    Field("seeds", (satisfies(lambda v: isinstance(v, list) and bool(v) and all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v),
        "a non-empty list of non-negative integers"),), "seeds", REQUIRED),
    Field("sizes", (converts(_grid_sizes),), "kind = 'grid': the size values of the heatmap",
          lambda v, c: REQUIRED if c["kind"] == "grid" else [], "{at}: missing; kind = 'grid' needs the list of {size} "
                                                              "values"),
))
# One item of thresholds / relative_thresholds.
_THRESHOLD = Field("thresholds[i]", (number(), number(0, 1, "right", message="{at}: expected a number in (0, 1], "
                                                                            "got {raw}")), "a threshold")
_LOWER_THRESHOLD = Field("thresholds[i]", (number(), number(0, None, "neither", message="{at}: expected a positive "
                                                                                     "number (direction = 'lower'), "
                                                                                     "got {raw}")),
                         "a threshold on a lower-is-better metric")
_RELATIVE = Field("relative_thresholds[i]", (number(), number(0, 1, "right", message="{at}: expected a fraction of "
                                                                                   "the ceiling in (0, 1], got {raw}")),
                  "a fraction of the ceiling")
_CLAIM = Section("[[claims]]", (
    Field("id", (satisfies(lambda v: isinstance(v, str) and bool(v) and v[0].isalnum() and all(
        c.isalnum() or c in "_.-" for c in v), "letters, digits, '_', '.' or '-'"),), "unique in the file", REQUIRED),
    Field("text", (text(),), "the claim in words", REQUIRED),
    Field("relation", (satisfies(lambda v: _relation(v) in CLAIM_RELATIONS, "one of " + ", ".join(
        map(repr, CLAIM_RELATIONS)), convert=lambda v, at, c: _relation(v)),), "slope < | slope > | level < | level >",
          REQUIRED),
    Field("a", (), "side A: { line, threshold, relative, experiment }", REQUIRED),
    Field("b", (), "side B, the same keys", REQUIRED),
    Field("provenance", (text(),), "where the claim comes from", REQUIRED),
    Field("alpha", (number(),), "level of the one-sided test (default verdict.alpha)"),
), missing="{at}: missing")
_CLAIM_SIDE = Section("claim side", (
    Field("experiment", (), "another experiment's name or path (default: this one)"),
    Field("line", (text("a line label"),), "a line label of that experiment", REQUIRED),
    Field("relative", (boolean(),), "a fraction of the ceiling", False),
    Field("threshold", (number(),), "one of that experiment's thresholds (default: the other side's)"),
), not_table='{where}: expected a table such as {{ line = "...", threshold = 0.1 }}, got {got}')
# A side given in Python (no file to check it against): only its shape.
_GIVEN_SIDE = replace(_CLAIM_SIDE, not_table="{where}: expected a table with 'line'", fields=(
    _CLAIM_SIDE.fields[0], Field("line", (satisfies(lambda v: isinstance(v, str) and bool(v), "a line label"),), "a line label",
                                 REQUIRED), *_CLAIM_SIDE.fields[2:]))


def _relation(value: Any) -> str | None:
    return " ".join(value.replace("<", " < ").replace(">", " > ").split()) if isinstance(value, str) else None


def resolve_experiment(name: str | Path) -> Path:
    """A path as given, or a shipped experiment by name (its file stem) or file name, from any
    directory: every registered system's ``experiments/`` folder is searched."""
    path = Path(name)
    if path.is_file():
        return path
    try:
        shipped = registry.experiment_paths()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    stem = path.name[:-5] if path.name.endswith(".toml") else path.name
    if stem in shipped and (len(path.parts) == 1 or not path.exists()):
        return shipped[stem]
    if path.exists():
        raise InputError(f"{name}: not an experiment file (a directory?)")
    raise InputError(f"{name}: no such experiment file (shipped: {', '.join(sorted(shipped))})")


def read_experiment_file(path: str | Path) -> dict:
    """The one reader of experiment files: TOML into a dict, every failure a one-line InputError naming
    the file. Search experiments and system runners both read through here. A relative ``pack`` path is resolved
    from the file's folder (:func:`_pack_beside`)."""
    path = Path(path)
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{shown}: no such experiment file") from None
    except IsADirectoryError:
        raise InputError(f"{shown}: is a directory, expected an experiment file (TOML)") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    raw = loads_toml(text, shown)  # nesting bounded before tomllib recurses
    if isinstance(raw, dict) and isinstance(raw.get("pack"), str):
        raw["pack"] = _pack_beside(raw["pack"], path)
    return raw


def presets_in(table: Any) -> set[str]:
    """The names in every ``presets`` table of a parsed experiment file, at any depth: a search experiment keeps
    them at the top ([presets.X]), a system's own kind under its own table ([KIND.presets.X], [KIND.P.presets.X])."""
    if not isinstance(table, dict):
        return set()
    found: set[str] = set()
    for key, value in table.items():
        found |= set(value) if key == "presets" and isinstance(value, dict) else presets_in(value)
    return found


def shipped_experiments() -> list[dict[str, Any]]:
    """Every experiment the registered systems ship (their ``experiments/`` folders), sorted by name: ``name`` (its
    file stem, how commands take it), ``system``, ``path``, ``kind``, ``presets`` and ``description``; a file that
    cannot be read is listed with its ``error``."""
    found = []
    for system in registry.systems():
        for path in system.experiment_paths():
            entry: dict[str, Any] = {"name": path.stem, "system": system.name, "path": str(path)}
            try:
                raw = read_experiment_file(path)
            except InputError as exc:
                found.append({**entry, "error": str(exc)})
                continue
            # a search's kind, or the table a system's own kind keeps its presets under
            kind = raw.get("kind") or next((key for key, value in raw.items() if presets_in(value)), "")
            found.append({**entry, "kind": str(kind), "presets": sorted(presets_in(raw)),
                          "description": str(raw.get("description") or "")})
    return sorted(found, key=lambda e: e["name"])


def load_experiment(path: str | Path, preset: str = "quick", max_runs: int | None = None,
                    settings: FieldSettings = ()) -> Experiment:
    """Read, validate and apply ``preset`` to an experiment TOML file (a path or a shipped name);
    errors are one-line InputErrors. ``max_runs``: see :func:`max_runs_allowed`; ``settings``: fields changed for
    this command (``--set``, :mod:`recallkit.empirics.overrides`)."""
    path = resolve_experiment(path)
    return experiment_with_settings(read_experiment_file(path), str(path), preset, max_runs, settings)


def experiment_with_settings(raw: dict, shown: str, preset: str, max_runs: int | None,
                             settings: FieldSettings) -> Experiment:
    """:func:`experiment_from_dict` of the file with ``settings`` applied; an error they cause says so."""
    if not settings:
        return experiment_from_dict(raw, shown, preset, max_runs=max_runs)
    try:
        experiment = experiment_from_dict(apply_settings(raw, settings, preset, shown), shown, preset,
                                          max_runs=max_runs)
    except InputError as exc:
        given = ", ".join(f"{field}={value!r}" for field, value in settings)
        raise InputError(f"{exc} (with --set {given})") from None
    experiment.settings = tuple(settings)
    return experiment


def _pack_beside(pack: str, experiment_file: Path) -> str:
    """A relative pack path is read from the experiment file's folder (where the file that names it is), as an
    import is read from the module that writes it; a pack name, an absolute path, or a path that is only found from
    the working directory (as earlier versions read it) is left as it is. Neither found: one line naming both
    places."""
    if not pack or PACK_NAME.fullmatch(pack) or Path(pack).is_absolute():
        return pack
    beside = experiment_file.parent / pack
    if beside.is_file():
        return str(beside)
    if Path(pack).is_file():
        return pack
    raise InputError(f"{experiment_file}: pack: {pack!r}: no pack file at {beside} (a relative pack path is read "
                     f"from the experiment file's folder) nor at {Path(pack).resolve()}")


def experiment_from_dict(raw: dict, shown: str, preset: str = "quick", max_runs: int | None = None) -> Experiment:
    """Validate a parsed experiment file against its section tables and build it with ``preset`` applied."""
    declared = _declared_variables(raw.get("pack") if isinstance(raw, dict) else None)
    top = validate(raw, _TOP, shown, prefix=f"{shown}: ", context={"declared": declared,
                                                                   "pack_name": _pack_name(raw.get("pack"))})
    declared = {} if isinstance(declared, InputError) else declared
    kind, base, size = top["kind"], top["base"], top["size"]
    law, metric, direction = _law_fields(raw, top, shown)
    chosen, pw = _preset(top["presets"], preset, shown, {"kind": kind, "base": base, "size": size})
    all_labels = [ln.label for ln in top["lines"]]
    lines = top["lines"]
    if chosen["lines"] is not None:
        for i, label in enumerate(chosen["lines"]):
            if label not in all_labels:
                raise InputError(f"{pw}.lines[{i}]: no line labelled {label!r} (labels: {', '.join(map(repr, all_labels))})")
        lines = [ln for ln in lines if ln.label in chosen["lines"]]
    thresholds, relative_thresholds = _thresholds(top, chosen, shown, pw, kind, direction)
    search_raw = {**top["search"], **chosen["search"]}
    search = _search_settings(search_raw, kind, size, f"{shown}: search")
    for line in lines:
        if line.search_overrides:
            overrides = dict(line.search_overrides)
            cap, preset_max = overrides.get("max"), search_raw.get("max")
            if all(isinstance(v, int) and not isinstance(v, bool) for v in (cap, preset_max)):
                overrides["max"] = min(cap, preset_max)  # a line's max is a cap: the preset's smaller max wins
            line.search = _search_settings({**search_raw, **overrides}, kind, size,
                                           f"{shown}: line {line.label!r} search")
    if direction == "lower" and kind != "law" and any((ln.search or search).method == "curve" for ln in lines):
        # the curve search's fit, its bootstrap in compare and its ceilings read a metric that rises with size
        raise InputError(f"{shown}: direction: 'lower' needs search.method = 'bisect' (the curve search reads "
                         f"higher-is-better metrics only)")
    if relative_thresholds and (kind != "min_size" or search.method != "curve"):
        where = f"{pw}.relative_thresholds" if chosen["relative_thresholds"] is not None else f"{shown}: relative_thresholds"
        raise InputError(f"{where}: only with kind = 'min_size' and search.method = 'curve' (the ceiling is measured "
                         f"by the curve search)")
    base_values, line_base_values = _base_values(top["presets"][preset], base, lines, all_labels, pw)
    experiment = Experiment(
        path=shown, name=top["name"], description=top["description"], pack=top["pack"], task=top["task"],
        model=top["model"], trainer=top["trainer"], kind=kind, base=base, size=size, metric=metric,
        thresholds=thresholds, lines=lines, fixed={**top["fixed"], **chosen["fixed"]}, search=search,
        verdict=top["verdict"], preset=preset, base_values=base_values, seeds=[int(s) for s in chosen["seeds"]],
        sizes=chosen["sizes"], line_base_values=line_base_values, relative_thresholds=relative_thresholds,
        file_lines=list(all_labels), variables=declared, law=law, direction=direction,
    )
    _check_task_keys(experiment, top, chosen, pw)
    _link_theory(experiment, top, chosen, pw)
    _check_reach(experiment, top, chosen, pw)
    _check_law_direction(experiment, top)
    _check_primary(experiment, shown)
    if "claims" in raw:
        experiment.claims = parse_claims(raw["claims"], shown, raw, experiment.verdict.get("alpha"))
    _check_corners(experiment, max_runs)
    return experiment


def _check_reach(experiment: Experiment, top: dict[str, Any], chosen: dict[str, Any], pw: str) -> None:
    """``search.reach`` (a curve's furthest size) is a positive expression in the base: at every base value of each
    line it is a size, at least 1 (``"-V"`` or ``"0"`` is one line naming the file and the field)."""
    base = experiment.base
    for index, line in enumerate(experiment.lines):
        settings = line.search or experiment.search
        if settings.reach is None:
            continue
        if "reach" in line.search_overrides:
            where = f"{experiment.path}: lines[{top['lines'].index(line)}].search.reach"
        else:
            where = f"{pw}.search.reach" if "reach" in chosen["search"] else f"{experiment.path}: search.reach"
        text = settings.reach.text
        others = sorted(settings.reach.symbols - {base})
        if others:
            raise InputError(f"{where}: {text!r} uses {', '.join(others)}; expected a positive expression in the base "
                             f"{base}, such as '8*{base}'")
        for value in experiment.values_of(index):
            reach = settings.reach.evaluate({base: value})
            if not (math.isfinite(reach) and reach >= 1):
                raise InputError(f"{where}: {text!r} is {reach:g} at {base}={value}; expected a positive expression in "
                                 f"the base {base} (a size of at least 1 at every {base} of the preset), such as "
                                 f"'8*{base}'")


def _check_law_direction(experiment: Experiment, top: dict[str, Any]) -> None:
    """A law experiment measures a metric that its direction says is better lower (higher) as the base grows along
    each line: every term of the law must then fall (rise) with the base along the line, or stay constant, a
    negative (positive) exponent of the base. A term that goes the other way dominates the sum as the base grows and
    the metric gets worse, so the fit would test the opposite of what the experiment measures. One line naming the
    file, the line and the term; a line the law cannot be reduced along is left to the plan, which names why."""
    if experiment.kind != "law" or experiment.direction not in DIRECTIONS:
        return
    pack = load_pack(experiment.pack)
    law = next(law for law in pack.laws if law.name == experiment.law)
    base, lower = experiment.base, experiment.direction == "lower"
    for line in experiment.lines:
        where = f"{experiment.path}: lines[{top['lines'].index(line)}]"
        try:
            scaling = parse_scaling(line.theory_scaling, f"{where}.theory_scaling", pack.constants, pack.variables)
            along = [(term, reduce_term(term.expr, scaling, base, None, pack.constants, f"{where}: {term.name}",
                                        pack.variables)) for term in law.terms]
        except InputError:
            continue  # the plan's prediction names it
        for term, monomial in along:
            exponent, log_power = monomial.exponent, monomial.log_power
            if not (exponent.is_number and log_power.is_number):
                continue
            growth = (float(exponent), float(log_power))
            if (growth > (0.0, 0.0)) if lower else (growth < (0.0, 0.0)):
                shown = power_text(base, exponent, log_power)
                raise InputError(
                    f"{where} ({line.label!r}): term {term.name} of law {law.name} is ~ {shown} along "
                    f"{str(scaling)!r}, which {'rises' if lower else 'falls'} with {base}; with direction = "
                    f"{experiment.direction!r} ({experiment.direction} is better) expected every term to "
                    f"{'fall' if lower else 'rise'} with {base} or stay constant (a "
                    f"{'negative' if lower else 'positive'} exponent of {base})")


def _check_primary(experiment: Experiment, shown: str) -> None:
    """Each line's ``primary`` names one of the preset's thresholds, as the report writes it."""
    known = [threshold_text(t, relative) for t, relative in experiment.threshold_targets()]
    for index, line in enumerate(experiment.lines):
        if line.primary is None:
            continue
        found = next((k for k in known if k.replace(" ", "") == line.primary.replace(" ", "")), None)
        if found is None:
            raise InputError(f"{shown}: lines[{index}].primary: expected one of the thresholds "
                             f"{', '.join(known) or '(none)'}, got {line.primary!r}")
        line.primary = found


def _pack_name(pack: Any) -> str | None:
    """The name of the experiment's pack for messages (the text as given where it cannot be read)."""
    if not isinstance(pack, str) or not pack:
        return None
    try:
        return load_pack(pack).name
    except InputError:
        return pack


def _stored_metrics(task: str) -> set[str] | None:
    """What every stored run of ``task`` holds: the engine's metrics and the task's own; None for an unknown task
    (the run-config check names it)."""
    try:
        return set(RUN_METRICS) | set(task_spec(task).run_metrics)
    except (InputError, registry.RegistryError):
        return None


def _law_fields(raw: dict, top: dict[str, Any], shown: str) -> tuple[str | None, str, str | None]:
    """(law, metric, direction) of the file: for kind = "law" the law is one of the pack's [[laws]], the metric
    (default: the law's) one the task's runs store, the direction lower | higher (default: higher for an accuracy,
    else lower); other kinds take no law, min_size and max_capacity a direction (default higher: a size reaches a
    threshold when its metric is at least it), a grid none."""
    if top["kind"] != "law":
        if top["law"] is not None:
            raise InputError(f"{shown}: law: only used with kind = 'law' (this experiment is {top['kind']})")
        if top["kind"] == "grid":
            if top["direction"] is not None:
                raise InputError(f"{shown}: direction: only used with kind = 'min_size', 'max_capacity' or 'law' "
                                 f"(this experiment is grid)")
            return None, top["metric"], None
        return None, top["metric"], top["direction"] or "higher"
    if top["pack"] is None:
        raise InputError(f"{shown}: pack: missing; kind = 'law' needs a pack with [[laws]]")
    pack = load_pack(top["pack"])
    listed = ", ".join(law.name for law in pack.laws) or "none"
    if top["law"] is None:
        raise InputError(f"{shown}: law: missing; expected a [[laws]] name of pack {pack.name} (its laws: {listed})")
    law = next((law for law in pack.laws if law.name == top["law"]), None)
    if law is None:
        raise InputError(f"{shown}: law: {top['law']!r} is not a law of pack {pack.name} (its laws: {listed})")
    metric = top["metric"] if "metric" in raw else law.metric
    stored = _stored_metrics(top["task"])
    places = [(f"{shown}: metric", metric)] + [(f"{shown}: lines[{i}].metric", line.metric)
                                               for i, line in enumerate(top["lines"]) if line.metric]
    for where, name in places:
        if stored is not None and name not in stored:
            raise InputError(f"{where}: {name!r} is not a metric the runs of task {top['task']} store (they store: "
                             f"{', '.join(sorted(stored))}); a metric the task's evaluate returns is stored for "
                             f"experiments once its Task lists it: Task({top['task']!r}, ..., "
                             f"run_metrics=({name!r},)) in the system's registration")
    direction = top["direction"] or ("higher" if metric in HIGHER_IS_BETTER else "lower")
    return law.name, metric, direction


def _declared_variables(pack: Any) -> dict[str, str] | InputError:
    """The variables the experiment's pack declares (name -> domain), which its lines and [fixed] may set; {}
    without a pack. A pack that cannot be read gives its error, raised only where a line names a variable that is
    not a size symbol: elsewhere the experiment reads as before, and the plan names the pack's error."""
    if not isinstance(pack, str) or not pack:
        return {}
    try:
        return {variable.name: variable.domain for variable in load_pack(pack).declared_variables}
    except InputError as exc:
        return exc


def _check_task_keys(experiment: Experiment, top: dict[str, Any], chosen: dict[str, Any], pw: str) -> None:
    """A declared variable that a line or [fixed] sets reaches the run config only where the task's config takes
    that key: otherwise one line naming the field and the task's keys (not the run-config check's later message
    about one corner of one line)."""
    if not experiment.variables:
        return
    shown = experiment.path
    for index, line in enumerate(top["lines"]):
        task = line.overrides.get("task", experiment.task)
        places = [(name, f"{shown}: lines[{index}].scaling") for name, _ in line.assignments]
        places += [(name, f"{shown}: lines[{index}].fixed.{name}") for name in line.fixed]
        places += [(name, f"{shown}: fixed.{name}") for name in top["fixed"]]
        places += [(name, f"{pw}.fixed.{name}") for name in chosen["fixed"]]
        for name, where in places:
            if name not in experiment.variables:
                continue
            try:
                keys = {f.name for f in dataclasses.fields(task_spec(task).config_class())} - {"model"}
            except InputError:
                return  # an unknown task: the run-config check names it
            if name not in keys:
                raise InputError(f"{where}: {name} is a variable of pack {load_pack(experiment.pack).name}, but task "
                                 f"{task}'s config has no key {name!r} (its keys: {', '.join(sorted(keys))})")


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _constants(pairs: list[tuple[str, str]], where: str) -> dict[str, tuple[float, str]]:
    """name -> (value, text) of the assignments whose right-hand side is a number (``1/4``, ``0.5``); one naming a
    symbol, or in a form only the pack's parser reads, is left out."""
    found = {}
    for name, rhs in pairs:
        try:
            found[name] = (SafeExpression(rhs, (), where).evaluate({}), rhs.strip())
        except InputError:
            continue
    return found


def _config_keys(task: str) -> set[str]:
    """The keys a task's config dataclass takes (none for an unknown task: the run-config check names it)."""
    try:
        return {f.name for f in dataclasses.fields(task_spec(task).config_class())}
    except (InputError, registry.RegistryError, TypeError):
        return set()


def _link_theory(experiment: Experiment, top: dict[str, Any], chosen: dict[str, Any], pw: str) -> None:
    """Each value that a line's runs and its prediction share is given once (module docstring, "One value, given
    once"): a constant that the line's theory_scaling gives a declared variable its scaling leaves out reaches the
    runs (where the task's config takes it); a constant that [fixed] or the scaling gives a declared variable the
    theory_scaling leaves out reaches the prediction; a variable given two different values is one error naming
    the file, the line and both values."""
    for line in experiment.lines:
        index = top["lines"].index(line)
        where = f"{experiment.path}: lines[{index}]"
        try:
            pairs = split_assignments(line.theory_scaling, f"{where}.theory_scaling")
        except InputError:
            continue  # the pack's parser names it with the line's prediction
        given = _constants(pairs, f"{where}.theory_scaling")
        assigned = {name for name, _ in line.assignments}
        keys = _config_keys(line.overrides.get("task", experiment.task))
        line.theory_constants = {name: value for name, (value, _) in given.items()
                                 if name in experiment.variables and name not in assigned and name in keys}
        sources = {name: f"lines[{index}].fixed" if name in line.fixed else f"{pw.split(': ', 1)[-1]}.fixed"
                   if name in chosen["fixed"] else "[fixed]" if name in top["fixed"] else "its scaling"
                   for name in given}
        _check_agreement(experiment, line, given, where, sources)
        named = {name for name, _ in pairs}
        added = [f"{name}={_number_text(value)}" for name, value in _run_constants(experiment, line).items()
                 if name not in named]
        if added:
            line.theory_scaling = ", ".join([line.theory_scaling, *added])


def _run_constants(experiment: Experiment, line: Line) -> dict[str, float]:
    """The constants a line's runs give the pack's declared variables: from its scaling, overridden by [fixed] (the
    preset's, the line's), as :meth:`Experiment.build_config` applies them."""
    found = {name: expr.evaluate({}) for name, expr in line.assignments
             if name in experiment.variables and not expr.symbols}
    for name, raw in {**experiment.fixed, **line.fixed}.items():
        if name in experiment.variables:
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                found[name] = raw
            else:
                found.pop(name, None)
    return found


def _check_agreement(experiment: Experiment, line: Line, given: dict[str, tuple[float, str]], where: str,
                     sources: dict[str, str]) -> None:
    """The runs of ``line`` (at its smallest and largest base value) give each variable that its theory_scaling sets
    to a constant the same value, floored where the variable is a count; ``sources``: where each run value comes
    from, for the message."""
    if not given:
        return
    values = experiment.values_of(experiment.lines.index(line))
    size = 0 if experiment.kind == "law" else (experiment.sizes or [experiment.search.min])[0]
    for base_value in sorted({min(values), max(values)}):
        config = experiment.build_config(line, base_value, size, experiment.seeds[0])
        for name, (value, written) in given.items():
            if name not in config or isinstance(config[name], (str, bool)):
                continue  # the theory's alone (a linear memory's config has no m)
            integral = name in INTEGER_PARAMS or experiment.variables.get(name) == "integer"
            expected = _integer(value) if integral else value
            if math.isclose(float(config[name]), float(expected), rel_tol=1e-9, abs_tol=1e-12):
                continue
            raise InputError(f"{where} ({line.label!r}): {name} = {config[name]:g} in {sources[name]} but {name} = "
                             f"{written} in its theory_scaling {line.theory_scaling!r} (at {experiment.base}={base_value});"
                             f" give it once: a constant in theory_scaling reaches the runs too")


def _preset(presets: dict, preset: str, shown: str, context: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The chosen preset's validated values, and its place in messages; every preset's keys are checked."""
    if preset not in presets:
        raise InputError(f"{shown}: presets: no preset {preset!r} (available: {', '.join(sorted(presets))})")
    pw = f"{shown}: presets.{preset}"
    if not isinstance(presets[preset], dict):
        raise InputError(f"{pw}: expected a table")
    for other, table in presets.items():
        if isinstance(table, dict):
            check_keys(table, _PRESET, f"{shown}: presets.{other}", extra={context["base"]})
    if context["base"] not in presets[preset]:  # the one key named by the file (its base variable)
        raise InputError(f"{pw}.{context['base']}: missing; expected the list of {context['base']} values to sweep")
    return validate(presets[preset], _PRESET, pw, extra={context["base"]}, context=context), pw


def _thresholds(top: dict, chosen: dict, shown: str, pw: str, kind: str,
                direction: str | None = None) -> tuple[list[float], list[float]]:
    """thresholds and relative_thresholds: the preset's where it gives them, else the file's. A threshold on a
    lower-is-better metric (a loss) is any positive number; a fraction of the ceiling needs a higher-is-better one."""
    def pick(key: str) -> tuple[Any, str]:
        return (chosen[key], f"{pw}.{key}") if chosen[key] is not None else (top[key], f"{shown}: {key}")

    (values, tw), (relative, rw) = pick("thresholds"), pick("relative_thresholds")
    if kind == "law":
        given = [where for value, where in ((values, tw), (relative, rw)) if value is not None]
        if given:
            raise InputError(f"{given[0]}: not used with kind = 'law' (its checks are the law's metric against the "
                             f"base, one per line)")
        return [], []
    lower = direction == "lower"
    if kind != "grid" or values is not None:
        if not isinstance(values, list) or not (values or relative):
            raise InputError(f"{tw}: expected a non-empty list of "
                             f"{'positive numbers' if lower else 'numbers in (0, 1]'}")
    thresholds = [_threshold(t, f"{tw}[{i}]", lower, kind != "grid") for i, t in enumerate(values or [])]
    relative = [] if relative is None else relative
    if lower and relative:
        raise InputError(f"{rw}: only with direction = 'higher' (a fraction of the ceiling, the metric's highest "
                         f"value; give thresholds on the metric itself)")
    if not isinstance(relative, list):
        raise InputError(f"{rw}: expected a list of fractions in (0, 1]")
    return thresholds, [check_value(_RELATIVE, t, f"{rw}[{i}]") for i, t in enumerate(relative)]


def _threshold(value: Any, at: str, lower: bool, directed: bool) -> float:
    """One threshold, checked for the metric's direction; where the kind takes a direction (``directed``), a number
    above 1 on a higher-is-better metric says how to mean it."""
    if lower:
        return check_value(_LOWER_THRESHOLD, value, at)
    try:
        return check_value(_THRESHOLD, value, at)
    except InputError as exc:
        if (directed and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and value > 1):
            raise InputError(f"{exc} (a threshold above 1 needs direction = 'lower')") from None
        raise


def _base_values(chosen: dict, base: str, lines: list[Line], all_labels: list[str],
                 pw: str) -> tuple[list[int], dict[str, list[int]]]:
    """The preset's values of the base variable: one list, or one per line label (lines whose boundaries lie in
    different ranges of the base variable)."""
    if not isinstance(chosen[base], dict):
        return _positive_int_list(chosen[base], f"{pw}.{base}", base), {}
    labels = [ln.label for ln in lines]
    line_base_values: dict[str, list[int]] = {}
    for label, values in chosen[base].items():
        if label not in all_labels:
            raise InputError(f"{pw}.{base}: no line labelled {label!r} (labels: {', '.join(map(repr, all_labels))})")
        if label in labels:
            line_base_values[label] = sorted(set(_positive_int_list(values, f"{pw}.{base}.{label}", base)))
    for label in labels:
        if label not in line_base_values:
            raise InputError(f"{pw}.{base}: no values for line {label!r} (give a list per line, or one list)")
    return sorted({b for values in line_base_values.values() for b in values}), line_base_values


def _check_corners(experiment: Experiment, max_runs: int | None = None) -> None:
    """Evaluate every line at the corners of the sweep, so a bad expression fails before training; the run-config
    validator (empirics.config) then names any key the task or trainer does not take. The checked configs are
    kept for the search. Last, the planned number of trained models against the limit."""
    shown, base, size, search = experiment.path, experiment.base, experiment.size, experiment.search
    for i, line in enumerate(experiment.lines):
        values = experiment.values_of(i)
        settings = line.search or search
        probe_sizes = [0] if experiment.kind == "law" else experiment.sizes or [settings.min, settings.max]
        if settings.method == "curve":
            probe_sizes = probe_sizes + [f(base, b) for b in (min(values), max(values))
                                         for f in (settings.ceiling_size, settings.reach_size)]
        for b in (min(values), max(values)):
            for s in (min(probe_sizes), max(probe_sizes)):
                config = experiment.build_config(line, b, s, experiment.seeds[0])
                where = f"{shown}: line {line.label!r} at {base}={b}" + (f", {size}={s}" if size else "")
                checked = planned_config(config, where=where)
                experiment.checked_configs[(line.label, b, s, experiment.seeds[0])] = checked
                if experiment.kind in ("grid", "law"):  # every run is trained; a search may never reach its max
                    check_memory(checked.parsed, where)
                if search.budget_factor is not None and search.budget_key not in config:
                    raise InputError(f"{shown}: search.budget_key: {search.budget_key!r} is not a parameter of "
                                     f"line {line.label!r} (its config has: {', '.join(sorted(config))})")
    runs = experiment.planned_runs()
    limit = max_runs_allowed(max_runs)
    if runs > limit:
        raise InputError(f"{shown}: preset {experiment.preset} plans about {runs:,} trained models, more than the "
                         f"limit {limit:,}; shrink the preset, or raise the limit with --max-runs N "
                         f"(or RECALLKIT_MAX_RUNS=N)")


def _file_line_labels(raw: dict) -> list[str]:
    """The label of every line of a raw experiment file, as :func:`experiment_from_dict` names them."""
    labels = []
    for table in raw.get("lines") or []:
        if isinstance(table, dict):
            scaling = table.get("scaling")
            labels.append(table.get("label") or table.get("theory_scaling") or scaling)
    return [label for label in labels if isinstance(label, str)]


def _file_thresholds(raw: dict, key: str) -> set[float]:
    """Every value of ``thresholds`` / ``relative_thresholds`` at the top level or in any preset of a raw file."""
    found: set[float] = set()
    tables = [raw] + [t for t in (raw.get("presets") or {}).values() if isinstance(t, dict)]
    for table in tables:
        values = table.get(key)
        if isinstance(values, list):
            found |= {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return found


def _other_experiment(name: Any, shown: str, own: dict, where: str) -> tuple[str, str, dict]:
    """(name, path, raw table) of the experiment a claim side names; InputError naming ``where`` if it cannot be
    read or cannot be compared with this one (a grid, another base variable)."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{where}: expected the name (or path) of another experiment, got {name!r}")
    beside = Path(shown).parent / name
    try:
        path = beside if beside.is_file() else resolve_experiment(name)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    other = read_experiment_file(path)
    kind = other.get("kind", "min_size")
    if kind == "grid":
        raise InputError(f"{where}: {name!r} is a grid experiment; it has no fitted lines to compare")
    base = lambda raw: raw.get("base", "d" if raw.get("kind") == "max_capacity" else "V")  # noqa: E731
    if base(other) != base(own) or (kind == "max_capacity") != (own.get("kind") == "max_capacity"):
        raise InputError(f"{where}: {name!r} fits against another x ({kind}, base {base(other)}) than this "
                         f"experiment ({own.get('kind', 'min_size')}, base {base(own)}); the sides must share x")
    other_name = other.get("name")
    if not isinstance(other_name, str) or not other_name:
        raise InputError(f"{where}: {path} has no 'name'")
    return other_name, str(path), other


def _claim_side(table: Any, where: str, shown: str, own: dict, own_labels: list[str]) -> ClaimSide:
    v = validate(table, _CLAIM_SIDE, where)
    experiment = path = None
    raw, labels = own, own_labels
    if "experiment" in table and table["experiment"] != own.get("name"):
        experiment, path, raw = _other_experiment(table["experiment"], shown, own, f"{where}.experiment")
        labels = _file_line_labels(raw)
    line, threshold, relative = v["line"], v["threshold"], v["relative"]
    if line not in labels:
        raise InputError(f"{where}.line: no line labelled {line!r} in {experiment or 'this experiment'} "
                         f"(labels: {', '.join(map(repr, labels))})")
    if threshold is not None:
        key = "relative_thresholds" if relative else "thresholds"
        known = _file_thresholds(raw, key)
        if threshold not in known:
            listed = ", ".join(f"{t:g}" for t in sorted(known)) or "none"
            raise InputError(f"{where}.threshold: {threshold:g} is not one of the {key} of "
                             f"{experiment or 'this experiment'} (its {key}: {listed})")
    elif relative:
        raise InputError(f"{where}.relative: a relative threshold needs 'threshold' (a fraction of the ceiling)")
    return ClaimSide(line, threshold, relative, experiment, path)


def claim_from_dict(table: Any, where: str, shown: str = ".", own: dict | None = None,
                    labels: list[str] | None = None, default_alpha: float | None = None) -> Claim:
    """One ``[[claims]]`` table as a :class:`Claim`; every key is checked and a bad one is a one-line InputError
    naming it. ``own``: the raw experiment file declaring it (its lines and thresholds are checked against
    it; None: only the shape is checked, for claims given in Python)."""
    v = validate(table, _CLAIM, where)
    alpha = default_alpha if v["alpha"] is None else v["alpha"]
    if alpha is not None and not 0 < alpha < 0.5:
        shown_alpha = f"{where}.alpha" if "alpha" in table else f"{where}.alpha (the experiment's verdict.alpha)"
        raise InputError(f"{shown_alpha}: expected a number in (0, 0.5) for a one-sided test, got {alpha:g}")
    if own is None:
        a, b = (ClaimSide(s["line"], s["threshold"], s["relative"], s["experiment"])
                for s in (validate(v[key], _GIVEN_SIDE, f"{where}.{key}") for key in ("a", "b")))
    else:
        a, b = (_claim_side(v[key], f"{where}.{key}", shown, own, labels or []) for key in ("a", "b"))
    if (a.experiment, a.line, a.threshold, a.relative) == (b.experiment, b.line, b.threshold, b.relative):
        raise InputError(f"{where}.b: the same line and threshold as side a; a claim compares two fitted lines")
    return Claim(v["id"], v["text"], v["relation"], a, b, v["provenance"], alpha)


def parse_claims(value: Any, shown: str, raw: dict, default_alpha: float | None = None) -> list[Claim]:
    """The ``[[claims]]`` of a raw experiment file (see the module docstring), validated against its lines."""
    where = f"{shown}: claims"
    if not isinstance(value, list):
        raise InputError(f"{where}: expected [[claims]] tables")
    if value and raw.get("kind", "min_size") == "grid":
        raise InputError(f"{where}: kind = 'grid' has no fitted lines to compare")
    labels = _file_line_labels(raw)
    claims: list[Claim] = []
    for i, table in enumerate(value):
        claim = claim_from_dict(table, f"{where}[{i}]", shown, raw, labels, default_alpha)
        if any(c.id == claim.id for c in claims):
            raise InputError(f"{where}[{i}].id: {claim.id!r} is used by another claim; ids must be unique")
        claims.append(claim)
    return claims


DEFAULT_MAX_RUNS = 200_000


def max_runs_allowed(max_runs: int | None = None) -> int:
    """The most trained models one experiment may plan: ``max_runs`` (the ``--max-runs`` flag) when given, else
    the user's ``RECALLKIT_MAX_RUNS``, else :data:`DEFAULT_MAX_RUNS`. It is checked before a single config is
    built."""
    if max_runs is not None:
        return max_runs
    raw = os.environ.get("RECALLKIT_MAX_RUNS", "")
    if not raw:
        return DEFAULT_MAX_RUNS
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise InputError(f"RECALLKIT_MAX_RUNS / --max-runs: expected a positive integer, got {raw!r}")
    return int(raw)


def _search_settings(table: dict, kind: str, size: str, where: str) -> SearchSettings:
    if kind == "law":
        if table:
            raise InputError(f"{where}: not used with kind = 'law' (every base value of a line is one run)")
        return SearchSettings(min=1, max=2)
    if kind == "grid" and not table:
        return SearchSettings(min=1, max=SIZE_LIMITS.get(size, 1 << 16))
    v = validate(table, _SEARCH, where, context={"kind": kind, "size": size})
    if v["grid"] is not None and v["method"] == "curve":
        raise InputError(f"{where}.grid: a grid is for method = 'bisect'; a curve search spaces its sizes by 'ratio'")
    grid_text = None if v["grid"] is None else table["grid"] if isinstance(table["grid"], str) else repr(table["grid"])
    settings = SearchSettings(min=v["min"], max=v["max"], start=v["start"], resolution=v["resolution"],
                              bracket=v["bracket"], expand=v["expand"], grid=v["grid"], grid_text=grid_text,
                              budget_factor=v["budget_factor"], budget_key=v["budget_key"], method=v["method"],
                              points=v["points"], ratio=v["ratio"], ceiling=v["ceiling"], reach=v["reach"])
    if settings.reach is not None and settings.method != "curve":
        raise InputError(f"{where}.reach: only with method = 'curve' (how far a seed-mean curve goes past its ceiling "
                         f"size); a bisection runs to max")
    if settings.grid is not None and len(settings.grid_sizes()) < 2:
        raise InputError(f"{where}.grid: fewer than two grid sizes between min = {v['min']} and max = {v['max']}")
    return settings

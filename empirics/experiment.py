"""Experiment files: one declarative TOML file per reproduced figure or table.

Schema (every key below is checked; an unknown key is an error)::

    name = "my_fig2"                       # identifier, used as the experiment name in the store
    description = "Fig 2 of ..."           # free text
    pack = "my_pack"                       # theory pack used for the predicted boundary and the verdict
    task = "my_task"                       # a registered task (recallkit.registry)
    model = "attention-only"               # empirics model
    trainer = "three_step"                 # empirics trainer
    kind = "min_size"                      # min_size | max_capacity | grid
    base = "V"                             # grid variable (default V; d for max_capacity)
    size = "d"                             # searched variable (default d; N for max_capacity)
    metric = "accuracy"                    # metric compared with the thresholds (default accuracy)
    thresholds = [0.1, 0.125, 0.15]        # a size "reaches" t when metric >= t (may be [] when
                                           # relative_thresholds are given)
    relative_thresholds = [0.5]            # search.method = "curve" only: t = this fraction of each
                                           # (line, base) instance's ceiling (stored, reported)

    [[lines]]                              # one or more lines through the scaling plane
    scaling = "N=V*log(V), L=V**0.5"       # assignments, evaluated in order, in base, size and earlier names
                                           # ("" when the config needs none, e.g. the linear memory)
    theory_scaling = "m=d"                 # optional: the line as the theory pack states it (default: scaling)
    label = "N~V log V, L~V^0.5"           # optional, for tables and plots (default: the scaling)
    model = "..."                          # optional per-line override of model / trainer / task
    fixed = { eta = 0.5 }                  # optional per-line overrides of [fixed]
    search = { ceiling = "2*V**0.5" }      # optional per-line overrides of [search] (after the preset's)
    metric = "accuracy_epoch_8"            # optional per-line metric (default: the experiment's); lines that
                                           # differ only in it share their runs (e.g. per-epoch accuracies)
    reference_note = "..."                 # optional: this line's fit is drawn against the pack's slope for
                                           # reference, with no verdict, for this reason (e.g. the pack
                                           # states its prediction for small L only)

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
                                           # instance's ceiling (its accuracy at large size) is measured

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

Expressions are parsed by recallkit's one whitelist parser, ``theory.expr`` (numbers, declared
symbols, ``+ - * / **``, parentheses, and ``log sqrt exp floor ceil Min Max min max``), and evaluated
in floats by walking the parsed tree; nothing in the file is ever executed.
Integer-valued parameters (sizes, batch size, epochs, steps) are floored after evaluation.
"""
from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallkit.empirics.config import MAX_D, MAX_L, MAX_M, MAX_N, MAX_R, MAX_V, check_memory, planned_config
from recallkit.theory.errors import InputError
from recallkit.theory.expr import compile_numeric

KINDS = ("min_size", "max_capacity", "grid")
# Symbols an expression may name: the sizes of the three SPEC tasks.
SIZE_SYMBOLS = ("V", "N", "d", "L", "m", "R")
# Parameters that are counts; expressions for them are floored to integers.
INTEGER_PARAMS = {
    "V", "N", "d", "L", "m", "R", "k", "batch_size", "epochs", "steps", "eval_samples",
    "train_samples", "max_steps", "eval_every", "n_eval", "heads", "log_epochs",
}
# Parameters whose value is a name, not an expression (e.g. features = "relu_centred").
STRING_PARAMS = {"features", "mlp_input"}
# Upper limits on sizes: a typo such as d = 1e9 must fail at load time, not allocate terabytes.
# The same limits as a run config's (empirics.config), so an experiment cannot ask for a size
# that its own run configs would then refuse.
SIZE_LIMITS = {"V": MAX_V, "N": MAX_N, "d": MAX_D, "L": MAX_L, "m": MAX_M, "R": MAX_R}
_TOP_KEYS = {
    "name", "description", "pack", "task", "model", "trainer", "kind", "base", "size", "metric",
    "thresholds", "relative_thresholds", "lines", "fixed", "search", "verdict", "presets", "claims",
}
_LINE_KEYS = {"scaling", "theory_scaling", "label", "model", "trainer", "task", "fixed", "search", "reference_note", "metric"}
_SEARCH_KEYS = {"min", "max", "start", "resolution", "bracket", "expand", "grid", "budget_factor", "budget_key",
                "method", "points", "ratio", "ceiling"}
SEARCH_METHODS = ("bisect", "curve")
_VERDICT_KEYS = {"delta", "alpha", "reference_only", "reference_note"}
_PRESET_KEYS = {"seeds", "sizes", "thresholds", "relative_thresholds", "fixed", "search", "lines"}
CLAIM_RELATIONS = ("slope <", "slope >", "level <", "level >")
_CLAIM_KEYS = {"id", "text", "relation", "a", "b", "alpha", "provenance"}
_CLAIM_SIDE_KEYS = {"line", "threshold", "relative", "experiment"}


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

    def ceiling_size(self, base_name: str, base_value: int) -> int:
        """The size at which a curve search measures the instance's ceiling (default: ``max``)."""
        if self.ceiling is None:
            return self.max
        return max(self.min, _integer(self.ceiling.evaluate({base_name: base_value})))

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
    # the run configs validated when the file was loaded (the corners of each line), by their canonical JSON:
    # the search takes these instead of validating the same config a second time
    checked_configs: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def values_of(self, line_index: int) -> list[int]:
        """The base values swept along one line (the preset's list, or that line's own)."""
        return self.line_base_values.get(self.lines[line_index].label, self.base_values)

    def threshold_targets(self) -> list[tuple[float, bool]]:
        """(value, relative) for every threshold: absolute ones, then fractions of the ceiling."""
        return [(t, False) for t in self.thresholds] + [(t, True) for t in self.relative_thresholds]

    def planned_runs(self) -> int:
        """About how many models the sweep trains (an upper estimate for searches: the bracket plus a
        bisection in log size down to the resolution, per line, base value and seed; thresholds share)."""
        cells = sum(len(self.values_of(i)) for i in range(len(self.lines))) * len(self.seeds)
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
            self.size: int(size_value),
        }
        for name, expr in line.assignments:
            value = _integer(expr.evaluate(env))
            _check_size(value, name, f"{self.path}: line {line.scaling!r}: {name} at {self.base}={base_value}, {self.size}={size_value}")
            env[name] = value
            config[name] = value
        for name, raw in {**self.fixed, **line.fixed}.items():
            if isinstance(raw, SafeExpression):
                value = raw.evaluate(env)
                value = _integer(value) if name in INTEGER_PARAMS else value
            else:
                value = raw
            if name in SIZE_SYMBOLS:
                env[name] = value
            config[name] = value
        return config

    def planned_config(self, line: Line, base_value: int, size_value: int, seed: int):
        """:meth:`build_config` validated (an ``empirics.config.ParsedConfig``), once per config."""
        config = self.build_config(line, base_value, size_value, seed)
        checked = self.checked_configs.get(json.dumps(config, sort_keys=True, default=str))
        return checked if checked is not None else planned_config(config)

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
                       "ceiling": self.search.ceiling.text if self.search.ceiling else None},
            "relative_thresholds": self.relative_thresholds,
            "verdict": self.verdict, "preset": self.preset, self.base: self.base_values,
            "seeds": self.seeds, "sizes": self.sizes,
            **({f"{self.base}_by_line": self.line_base_values} if self.line_base_values else {}),
            "claims": [claim.to_dict() for claim in self.claims],
        }


def _shown(value: Any) -> Any:
    return value.text if isinstance(value, SafeExpression) else value


def _check_size(value: Any, name: str, where: str) -> None:
    if name in SIZE_LIMITS:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InputError(f"{where}: expected a positive integer, got {value!r}")
        if value > SIZE_LIMITS[name]:
            raise InputError(f"{where}: {value} is above the limit {SIZE_LIMITS[name]} for {name}")


def _unknown_keys(table: dict, allowed: set[str], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise InputError(f"{where}: unknown key {key!r} (expected one of: {', '.join(sorted(allowed))})")


def _string(table: dict, key: str, where: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}{key}: expected a non-empty string, got {value!r}")
    return value


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


def _parse_scaling(text: str, base: str, size: str, where: str) -> list[tuple[str, SafeExpression]]:
    known = {base, size}
    assignments: list[tuple[str, SafeExpression]] = []
    from recallkit.theory.scaling import split_assignments

    for name, rhs in split_assignments(text, where):
        if name not in SIZE_SYMBOLS:
            raise InputError(f"{where}: {name!r} is not a size symbol (expected one of {', '.join(SIZE_SYMBOLS)})")
        if name in known:
            raise InputError(f"{where}: {name} is assigned twice or is the base/searched variable")
        assignments.append((name, SafeExpression(rhs, known, where)))
        known.add(name)
    return assignments


def resolve_experiment(name: str | Path) -> Path:
    """A path as given, or a shipped experiment by name (its file stem) or file name, from any
    directory: every registered system's ``experiments/`` folder is searched."""
    from recallkit import registry

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
    the file. Search experiments and system runners both read through here."""
    path = Path(path)
    shown = str(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{shown}: no such experiment file") from None
    except IsADirectoryError:
        raise InputError(f"{shown}: is a directory, expected an experiment file (TOML)") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{shown}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{shown}: malformed TOML: {exc}") from None


def load_experiment(path: str | Path, preset: str = "quick") -> Experiment:
    """Read, validate and apply ``preset`` to an experiment TOML file (a path or a shipped name);
    errors are one-line InputErrors."""
    path = resolve_experiment(path)
    return experiment_from_dict(read_experiment_file(path), str(path), preset)


def experiment_from_dict(raw: dict, shown: str, preset: str = "quick") -> Experiment:
    w = f"{shown}: "
    _unknown_keys(raw, _TOP_KEYS, shown)
    name = _string(raw, "name", w)
    if not name.replace("_", "").replace("-", "").isalnum():
        raise InputError(f"{w}name: expected letters, digits, '_' or '-', got {name!r}")
    kind = raw.get("kind", "min_size")
    if kind not in KINDS:
        raise InputError(f"{w}kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    base = raw.get("base", "d" if kind == "max_capacity" else "V")
    size = raw.get("size", "N" if kind == "max_capacity" else "d")
    for key, value in (("base", base), ("size", size)):
        if value not in SIZE_SYMBOLS:
            raise InputError(f"{w}{key}: expected one of {', '.join(SIZE_SYMBOLS)}, got {value!r}")
    if base == size:
        raise InputError(f"{w}size: must differ from base ({base})")
    pack = raw.get("pack")
    if pack is not None and (not isinstance(pack, str) or not pack):
        raise InputError(f"{w}pack: expected a theory pack name or path, got {pack!r}")

    if not isinstance(raw.get("lines"), list) or not raw["lines"]:
        raise InputError(f"{w}lines: expected at least one [[lines]] table with a 'scaling'")
    lines: list[Line] = []
    for i, table in enumerate(raw["lines"]):
        where = f"{shown}: lines[{i}]"
        if not isinstance(table, dict):
            raise InputError(f"{where}: expected a table")
        _unknown_keys(table, _LINE_KEYS, where)
        scaling = table.get("scaling")
        if not isinstance(scaling, str):
            raise InputError(f"{where}.scaling: expected a string of assignments such as 'N=V*log(V), L=V**0.5' (or \"\")")
        assignments = _parse_scaling(scaling, base, size, f"{where}.scaling")
        theory_scaling = _string(table, "theory_scaling", f"{where}.", scaling or None)
        symbols = set(SIZE_SYMBOLS)
        lines.append(Line(
            scaling=scaling,
            theory_scaling=theory_scaling,
            label=_string(table, "label", f"{where}.", theory_scaling),
            assignments=assignments,
            overrides={k: _string(table, k, f"{where}.") for k in ("task", "model", "trainer") if k in table},
            fixed=_fixed_table(table.get("fixed", {}), f"{where}.fixed", symbols),
            search_overrides=_line_search(table.get("search", {}), f"{where}.search", size),
            reference_note=_string(table, "reference_note", f"{where}.").strip() if "reference_note" in table else None,
            metric=_string(table, "metric", f"{where}.") if "metric" in table else None,
        ))
    if len({ln.label for ln in lines}) != len(lines):
        raise InputError(f"{w}lines: two lines have the same label; give each a distinct 'label'")

    presets = raw.get("presets")
    if not isinstance(presets, dict) or not presets:
        raise InputError(f"{w}presets: expected [presets.quick] and [presets.paper] tables")
    if preset not in presets:
        raise InputError(f"{w}presets: no preset {preset!r} (available: {', '.join(sorted(presets))})")
    chosen = presets[preset]
    pw = f"{shown}: presets.{preset}"
    if not isinstance(chosen, dict):
        raise InputError(f"{pw}: expected a table")
    for other, table in presets.items():
        if isinstance(table, dict):
            _unknown_keys(table, _PRESET_KEYS | {base}, f"{shown}: presets.{other}")

    all_labels = [ln.label for ln in lines]
    if "lines" in chosen:
        wanted = chosen["lines"]
        labels = [ln.label for ln in lines]
        if not isinstance(wanted, list) or not wanted or not all(isinstance(x, str) for x in wanted):
            raise InputError(f"{pw}.lines: expected a non-empty list of line labels")
        for i, label in enumerate(wanted):
            if label not in labels:
                raise InputError(f"{pw}.lines[{i}]: no line labelled {label!r} (labels: {', '.join(map(repr, labels))})")
        lines = [ln for ln in lines if ln.label in wanted]
    fixed = _fixed_table(raw.get("fixed", {}), f"{shown}: fixed", set(SIZE_SYMBOLS))
    fixed.update(_fixed_table(chosen.get("fixed", {}), f"{pw}.fixed", set(SIZE_SYMBOLS)))

    thresholds_raw = chosen.get("thresholds", raw.get("thresholds"))
    tw = f"{pw}.thresholds" if "thresholds" in chosen else f"{shown}: thresholds"
    relative_given = bool(chosen.get("relative_thresholds", raw.get("relative_thresholds")))
    if kind != "grid" or thresholds_raw is not None:
        if not isinstance(thresholds_raw, list) or not (thresholds_raw or relative_given):
            raise InputError(f"{tw}: expected a non-empty list of numbers in (0, 1]")
    thresholds = []
    for i, t in enumerate(thresholds_raw or []):
        value = _number(t, f"{tw}[{i}]")
        if not 0 < value <= 1:
            raise InputError(f"{tw}[{i}]: expected a number in (0, 1], got {t!r}")
        thresholds.append(value)

    search_raw = dict(raw.get("search", {}))
    if not isinstance(search_raw, dict):
        raise InputError(f"{shown}: search: expected a table")
    _unknown_keys(search_raw, _SEARCH_KEYS, f"{shown}: search")
    preset_search = chosen.get("search", {})
    if not isinstance(preset_search, dict):
        raise InputError(f"{pw}.search: expected a table")
    _unknown_keys(preset_search, _SEARCH_KEYS, f"{pw}.search")
    search_raw.update(preset_search)
    search = _search_settings(search_raw, kind, size, f"{shown}: search")
    for i, line in enumerate(lines):
        if line.search_overrides:
            overrides = dict(line.search_overrides)
            cap, preset_max = overrides.get("max"), search_raw.get("max")
            if all(isinstance(v, int) and not isinstance(v, bool) for v in (cap, preset_max)):
                overrides["max"] = min(cap, preset_max)  # a line's max is a cap: the preset's smaller max wins
            line.search = _search_settings({**search_raw, **overrides}, kind, size,
                                           f"{shown}: line {line.label!r} search")
    relative_raw = chosen.get("relative_thresholds", raw.get("relative_thresholds", []))
    rw = f"{pw}.relative_thresholds" if "relative_thresholds" in chosen else f"{shown}: relative_thresholds"
    if not isinstance(relative_raw, list):
        raise InputError(f"{rw}: expected a list of fractions in (0, 1]")
    relative_thresholds = []
    for i, t in enumerate(relative_raw):
        value = _number(t, f"{rw}[{i}]")
        if not 0 < value <= 1:
            raise InputError(f"{rw}[{i}]: expected a fraction of the ceiling in (0, 1], got {t!r}")
        relative_thresholds.append(value)
    if relative_thresholds and (kind != "min_size" or search.method != "curve"):
        raise InputError(f"{rw}: only with kind = 'min_size' and search.method = 'curve' (the ceiling is measured "
                         f"by the curve search)")

    verdict_raw = raw.get("verdict", {})
    if not isinstance(verdict_raw, dict):
        raise InputError(f"{shown}: verdict: expected a table")
    _unknown_keys(verdict_raw, _VERDICT_KEYS, f"{shown}: verdict")
    reference_only = verdict_raw.get("reference_only", False)
    if not isinstance(reference_only, bool):
        raise InputError(f"{shown}: verdict.reference_only: expected true or false, got {reference_only!r}")
    verdict = {k: _number(v, f"{shown}: verdict.{k}", positive=True) for k, v in verdict_raw.items()
               if k not in ("reference_only", "reference_note")}
    if reference_only:
        # the pack's prediction is for another training algorithm: show it, but decide nothing
        verdict["reference_only"] = True
    if "reference_note" in verdict_raw:
        note = verdict_raw["reference_note"]
        if not isinstance(note, str) or not note.strip() or not reference_only:
            raise InputError(f"{shown}: verdict.reference_note: expected a non-empty string next to reference_only = true")
        verdict["reference_note"] = note.strip()
    if "alpha" in verdict and not verdict["alpha"] < 1:
        raise InputError(f"{shown}: verdict.alpha: expected a number in (0, 1), got {verdict['alpha']}")

    if base not in chosen:
        raise InputError(f"{pw}.{base}: missing; expected the list of {base} values to sweep")
    line_base_values: dict[str, list[int]] = {}
    if isinstance(chosen[base], dict):
        # one list per line label: lines whose boundaries lie in different ranges of the base variable
        labels = [ln.label for ln in lines]
        for label, values in chosen[base].items():
            if label not in all_labels:
                raise InputError(f"{pw}.{base}: no line labelled {label!r} (labels: {', '.join(map(repr, all_labels))})")
            if label in labels:
                line_base_values[label] = sorted(set(_positive_int_list(values, f"{pw}.{base}.{label}", base)))
        for label in labels:
            if label not in line_base_values:
                raise InputError(f"{pw}.{base}: no values for line {label!r} (give a list per line, or one list)")
        base_values = sorted({b for values in line_base_values.values() for b in values})
    else:
        base_values = _positive_int_list(chosen[base], f"{pw}.{base}", base)
    seeds_raw = chosen.get("seeds")
    if not isinstance(seeds_raw, list) or not seeds_raw or any(
        isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds_raw
    ):
        raise InputError(f"{pw}.seeds: expected a non-empty list of non-negative integers, got {seeds_raw!r}")
    sizes: list[int] = []
    if kind == "grid":
        if "sizes" not in chosen:
            raise InputError(f"{pw}.sizes: missing; kind = 'grid' needs the list of {size} values")
        sizes = _positive_int_list(chosen["sizes"], f"{pw}.sizes", size)
    elif "sizes" in chosen:
        raise InputError(f"{pw}.sizes: only used with kind = 'grid' (this experiment is {kind})")

    experiment = Experiment(
        path=shown, name=name, description=str(raw.get("description", "")), pack=pack,
        task=_string(raw, "task", w), model=_string(raw, "model", w), trainer=_string(raw, "trainer", w),
        kind=kind, base=base, size=size, metric=_string(raw, "metric", w, "accuracy"),
        thresholds=thresholds, lines=lines, fixed=fixed, search=search, verdict=verdict, preset=preset,
        base_values=base_values, seeds=[int(s) for s in seeds_raw], sizes=sizes,
        line_base_values=line_base_values,
        relative_thresholds=relative_thresholds,
        file_lines=list(all_labels),
    )
    if "claims" in raw:
        experiment.claims = parse_claims(raw["claims"], shown, raw, verdict.get("alpha"))
    # Evaluate every line at the corners of the sweep now, so a bad expression fails before training.
    # The run-config validator (empirics.config) then names any key the task or trainer does not take.
    for i, line in enumerate(lines):
        values = experiment.values_of(i)
        settings = line.search or search
        probe_sizes = sizes or [settings.min, settings.max]
        if settings.method == "curve":
            probe_sizes = probe_sizes + [settings.ceiling_size(base, b) for b in (min(values), max(values))]
        for b in (min(values), max(values)):
            for s in (min(probe_sizes), max(probe_sizes)):
                config = experiment.build_config(line, b, s, experiment.seeds[0])
                where = f"{shown}: line {line.label!r} at {base}={b}, {size}={s}"
                checked = planned_config(config, where=where)
                experiment.checked_configs[json.dumps(config, sort_keys=True, default=str)] = checked
                parsed = checked.parsed
                if kind == "grid":  # every size of a grid is trained; a search may never reach its max
                    check_memory(parsed, where)
                if search.budget_factor is not None and search.budget_key not in config:
                    raise InputError(f"{shown}: search.budget_key: {search.budget_key!r} is not a parameter of "
                                     f"line {line.label!r} (its config has: {', '.join(sorted(config))})")
    runs = experiment.planned_runs()
    limit = max_runs_allowed()
    if runs > limit:
        raise InputError(f"{shown}: preset {preset} plans about {runs:,} trained models, more than the limit "
                         f"{limit:,}; shrink the preset, or raise the limit with --max-runs N "
                         f"(or RECALLKIT_MAX_RUNS=N)")
    return experiment


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
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table such as {{ line = \"...\", threshold = 0.1 }}, got {table!r}")
    _unknown_keys(table, _CLAIM_SIDE_KEYS, where)
    experiment = path = None
    raw, labels = own, own_labels
    if "experiment" in table and table["experiment"] != own.get("name"):
        experiment, path, raw = _other_experiment(table["experiment"], shown, own, f"{where}.experiment")
        labels = _file_line_labels(raw)
    line = table.get("line")
    if not isinstance(line, str) or not line.strip():
        raise InputError(f"{where}.line: expected a line label, got {line!r}")
    if line not in labels:
        raise InputError(f"{where}.line: no line labelled {line!r} in {experiment or 'this experiment'} "
                         f"(labels: {', '.join(map(repr, labels))})")
    relative = table.get("relative", False)
    if not isinstance(relative, bool):
        raise InputError(f"{where}.relative: expected true or false, got {relative!r}")
    threshold = None
    if "threshold" in table:
        threshold = _number(table["threshold"], f"{where}.threshold")
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
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table")
    _unknown_keys(table, _CLAIM_KEYS, where)
    for key in ("id", "text", "relation", "a", "b", "provenance"):
        if key not in table:
            raise InputError(f"{where}.{key}: missing")
    claim_id = table["id"]
    if not isinstance(claim_id, str) or not claim_id or not claim_id[0].isalnum() or not all(
            c.isalnum() or c in "_.-" for c in claim_id):
        raise InputError(f"{where}.id: expected letters, digits, '_', '.' or '-', got {claim_id!r}")
    text = _string(table, "text", f"{where}.")
    provenance = _string(table, "provenance", f"{where}.")
    relation = table["relation"]
    normal = " ".join(relation.replace("<", " < ").replace(">", " > ").split()) if isinstance(relation, str) else None
    if normal not in CLAIM_RELATIONS:
        raise InputError(f"{where}.relation: expected one of {', '.join(map(repr, CLAIM_RELATIONS))}, got {relation!r}")
    alpha = default_alpha
    if "alpha" in table:
        alpha = _number(table["alpha"], f"{where}.alpha")
    if alpha is not None and not 0 < alpha < 0.5:
        shown_alpha = f"{where}.alpha" if "alpha" in table else f"{where}.alpha (the experiment's verdict.alpha)"
        raise InputError(f"{shown_alpha}: expected a number in (0, 0.5) for a one-sided test, got {alpha:g}")
    if own is None:
        sides = []
        for key in ("a", "b"):
            side = table[key]
            if not isinstance(side, dict):
                raise InputError(f"{where}.{key}: expected a table with 'line'")
            _unknown_keys(side, _CLAIM_SIDE_KEYS, f"{where}.{key}")
            if not isinstance(side.get("line"), str) or not side["line"]:
                raise InputError(f"{where}.{key}.line: expected a line label, got {side.get('line')!r}")
            threshold = side.get("threshold")
            if threshold is not None:
                threshold = _number(threshold, f"{where}.{key}.threshold")
            relative = side.get("relative", False)
            if not isinstance(relative, bool):
                raise InputError(f"{where}.{key}.relative: expected true or false, got {relative!r}")
            sides.append(ClaimSide(side["line"], threshold, relative, side.get("experiment")))
        a, b = sides
    else:
        a = _claim_side(table["a"], f"{where}.a", shown, own, labels or [])
        b = _claim_side(table["b"], f"{where}.b", shown, own, labels or [])
    if (a.experiment, a.line, a.threshold, a.relative) == (b.experiment, b.line, b.threshold, b.relative):
        raise InputError(f"{where}.b: the same line and threshold as side a; a claim compares two fitted lines")
    return Claim(claim_id, text, normal, a, b, provenance, alpha)


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


def max_runs_allowed() -> int:
    """The most trained models one experiment may plan: ``RECALLKIT_MAX_RUNS`` (set by ``--max-runs``), else
    :data:`DEFAULT_MAX_RUNS`. It is checked before a single config is built."""
    import os

    raw = os.environ.get("RECALLKIT_MAX_RUNS", "")
    if not raw:
        return DEFAULT_MAX_RUNS
    if not raw.isdigit() or int(raw) < 1:
        raise InputError(f"RECALLKIT_MAX_RUNS / --max-runs: expected a positive integer, got {raw!r}")
    return int(raw)


def _line_search(table: Any, where: str, size: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table of [search] keys")
    _unknown_keys(table, _SEARCH_KEYS - {"method"}, where)
    if "max" in table:  # a cap, checked here: a preset's smaller max may replace it later
        value = table["max"]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{where}.max: expected a positive integer (this line's cap on {size}), got {value!r}")
        _check_size(value, size, f"{where}.max")
    return dict(table)


def _search_settings(table: dict, kind: str, size: str, where: str) -> SearchSettings:
    if kind == "grid" and not table:
        return SearchSettings(min=1, max=SIZE_LIMITS.get(size, 1 << 16))
    for key in ("min", "max"):
        if key not in table:
            raise InputError(f"{where}.{key}: missing; expected the {'smallest' if key == 'min' else 'largest'} {size} to probe")
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise InputError(f"{where}.{key}: expected a positive integer, got {value!r}")
        _check_size(value, size, f"{where}.{key}")
    if table["min"] >= table["max"]:
        raise InputError(f"{where}.max: expected max > min, got min={table['min']}, max={table['max']}")
    start = None
    if "start" in table:
        start_raw = table["start"]
        if isinstance(start_raw, (int, float)) and not isinstance(start_raw, bool):
            start_raw = repr(start_raw)
        if not isinstance(start_raw, str):
            raise InputError(f"{where}.start: expected a number or an expression in the base variable")
        start = SafeExpression(start_raw, set(SIZE_SYMBOLS), f"{where}.start")
    resolution = _number(table.get("resolution", 0.0), f"{where}.resolution")
    if resolution < 0:
        raise InputError(f"{where}.resolution: expected a number >= 0, got {resolution}")
    bracket = _number(table.get("bracket", 1.5), f"{where}.bracket")
    expand = _number(table.get("expand", 2.0), f"{where}.expand")
    if bracket < 1:
        raise InputError(f"{where}.bracket: expected a number >= 1, got {bracket}")
    if expand <= 1:
        raise InputError(f"{where}.expand: expected a number > 1, got {expand}")
    grid = grid_text = None
    if "grid" in table:
        raw_grid = table["grid"]
        if isinstance(raw_grid, str):
            grid = SafeExpression(raw_grid, set(), f"{where}.grid").evaluate({})
            grid_text = raw_grid
        else:
            grid = _number(raw_grid, f"{where}.grid")
            grid_text = repr(raw_grid)
        if grid <= 1:
            raise InputError(f"{where}.grid: expected a ratio > 1 (such as \"2**(1/4)\"), got {raw_grid!r}")
    budget_factor = None
    if "budget_factor" in table:
        budget_factor = _number(table["budget_factor"], f"{where}.budget_factor")
        if budget_factor <= 1:
            raise InputError(f"{where}.budget_factor: expected a number > 1, got {table['budget_factor']!r}")
    budget_key = table.get("budget_key", "steps")
    if not isinstance(budget_key, str) or not budget_key.isidentifier():
        raise InputError(f"{where}.budget_key: expected a parameter name such as \"steps\", got {budget_key!r}")
    method = table.get("method", "bisect")
    if method not in SEARCH_METHODS:
        raise InputError(f"{where}.method: expected one of {', '.join(SEARCH_METHODS)}, got {method!r}")
    if method == "curve" and kind != "min_size":
        raise InputError(f"{where}.method: 'curve' is for kind = 'min_size' only, got kind = {kind!r}")
    points = table.get("points", 5)
    if isinstance(points, bool) or not isinstance(points, int) or not 2 <= points <= 64:
        raise InputError(f"{where}.points: expected an integer in [2, 64], got {points!r}")
    ratio = _number(table.get("ratio", 2 ** 0.5), f"{where}.ratio")
    if ratio <= 1:
        raise InputError(f"{where}.ratio: expected a number > 1, got {ratio}")
    ceiling = None
    if "ceiling" in table:
        ceiling_raw = table["ceiling"]
        if isinstance(ceiling_raw, int) and not isinstance(ceiling_raw, bool):
            ceiling_raw = repr(ceiling_raw)
        if not isinstance(ceiling_raw, str):
            raise InputError(f"{where}.ceiling: expected an integer or an expression in the base variable")
        ceiling = SafeExpression(ceiling_raw, set(SIZE_SYMBOLS), f"{where}.ceiling")
    if grid is not None and method == "curve":
        raise InputError(f"{where}.grid: a grid is for method = 'bisect'; a curve search spaces its sizes by 'ratio'")
    settings = SearchSettings(min=table["min"], max=table["max"], start=start, resolution=resolution,
                              bracket=bracket, expand=expand, grid=grid, grid_text=grid_text,
                              budget_factor=budget_factor, budget_key=budget_key, method=method, points=points,
                              ratio=ratio, ceiling=ceiling)
    if grid is not None and len(settings.grid_sizes()) < 2:
        raise InputError(f"{where}.grid: fewer than two grid sizes between min = {table['min']} and max = {table['max']}")
    return settings

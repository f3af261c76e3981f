"""What identifies one check of an experiment, written in one place.

A *check* is one thing a verdict is given for: a line of an experiment at one threshold of its metric (the
smallest size, or the largest count, that reaches it), or, for a law, the metric against one variable. The
search makes the boundary points of a check, compare fits and judges them, the report draws them, and each
shows the check's name: :class:`CheckKey` is that name, and ``str(key)`` (with :func:`threshold_text`) is the
only place its label is written.

The search's records live here too: :class:`BoundaryPoint` (one per line, threshold, seed or seed mean, base
value), :class:`Violation` (a threshold crossed the wrong way along the size axis) and :class:`ProbeRun` (one
probe's run: a cell of the (base value, size) grid a heatmap draws). Their names of experiment variables (the
base, the searched size, the metric) differ per experiment, so each record holds those names as fields and the
values in a mapping; ``to_dict()`` writes the dict that summary.json, the results store's exports and the
report have always held, key for key and in the same order. It is called where JSON is written, nowhere else.

:class:`StoredRun` is one row of the results store as it is read back (``empirics.store``): a row that does not
validate against it is left out of every fit and named once, by its rowid.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# the experiment variables a boundary point carries from its answer's config, in the order a point writes them
# (re-exported: the searches read it here)
from recallkit.theory.sizes import SIZE_SYMBOLS

__all__ = ["BoundaryPoint", "CheckKey", "ProbeRun", "SIZE_SYMBOLS", "StoredMetrics", "StoredRun", "Violation",
           "stored_run_problem", "threshold_text"]


def threshold_text(threshold: float | None, relative: bool = False) -> str:
    """``0.1``, or ``0.5 x ceiling`` for a fraction of each instance's ceiling; ``""`` without a threshold."""
    if threshold is None:
        return ""
    text = f"{float(threshold):g}"
    return f"{text} x ceiling" if relative else text


@dataclass(frozen=True)
class CheckKey:
    """One check: ``experiment``'s line ``line`` at ``threshold`` of ``metric`` (``relative``: a fraction of the
    instance's ceiling), or, with ``variable`` set and no threshold, the law of ``metric`` against it."""

    experiment: str
    line: str
    metric: str = "accuracy"
    threshold: float | None = None
    relative: bool = False
    variable: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any], experiment: str | None = None) -> "CheckKey":
        """The key of a fit, a boundary point or a summary row (``experiment``, ``line``, ``threshold``,
        ``threshold_relative``, ``metric``; ``experiment`` given here wins)."""
        threshold = row.get("threshold")
        return cls(experiment=str(experiment if experiment is not None else row.get("experiment")),
                   line=str(row.get("line")), metric=str(row.get("metric") or "accuracy"),
                   threshold=None if threshold is None else float(threshold),
                   relative=bool(row.get("threshold_relative")), variable=row.get("variable"))

    @property
    def threshold_text(self) -> str:
        return threshold_text(self.threshold, self.relative)

    def __str__(self) -> str:
        """``tr_fig2 [N=V**1.5, L=V**0.5, threshold 0.5 x ceiling]``: how every output names the check."""
        if self.threshold is not None:
            return f"{self.experiment} [{self.line}, threshold {self.threshold_text}]"
        if self.variable is not None:
            return f"{self.experiment} [{self.line}, {self.metric} against {self.variable}]"
        return f"{self.experiment} [{self.line}]"


@dataclass(frozen=True)
class BoundaryPoint:
    """One boundary point: the answer of one (line, threshold, seed, base value) of a search, or, with ``seed``
    None, of the seed-mean curve of a curve search (``search.method = "curve"``).

    ``values`` holds the point's experiment variables in the order the point writes them: the base value first
    (under ``base``), then its answer's config values (V, N, R, L, d, m as present; for a curve point N, R, L,
    the searched size and m); the searched one (``size``) is None when nothing is known. One type serves both
    directions of a search: ``largest`` marks a ``max_capacity`` answer (the largest size that still reaches
    the threshold) against a ``min_size`` one (the smallest that reaches it). A law's point (the metric against
    one variable) fits the same record: ``threshold`` None and ``variable`` naming the variable in ``values``.

    Seed points (bisection, grid) carry the answer's ``metric_value`` and ``config_hash`` when the answer is
    known; ``non_monotone`` once the monotonicity check has run; ``budget_check`` (the training-budget check's
    record, :mod:`~recallkit.empirics.budget_check`) and ``budget_flagged`` where that check ran. Curve points
    carry ``threshold_value`` (the absolute target; None while a relative threshold's ceiling is unknown),
    ``n_seeds``, ``bracket``, ``ceiling`` and the per-seed ``curve``.
    """

    experiment: str
    line: str
    scaling: str | None
    threshold: float | None
    seed: int | None
    base: str
    base_value: Any
    size: str
    values: Mapping[str, Any]
    param_count: float | None
    metric: str = "accuracy"
    metric_value: float | None = None
    config_hash: str | None = None
    censored: bool = False
    censor_reason: str | None = None
    non_monotone: bool | None = None
    budget_check: Mapping[str, Any] | None = None
    budget_flagged: bool | None = None
    largest: bool = False
    relative: bool = False
    threshold_value: float | None = None
    n_seeds: int | None = None
    bracket: tuple[int, int] | None = None
    ceiling: Mapping[str, Any] | None = None
    curve: Mapping[str, Any] | None = None
    variable: str | None = None

    @property
    def key(self) -> CheckKey:
        """The check this point belongs to."""
        return CheckKey(self.experiment, self.line, metric=self.metric, threshold=self.threshold,
                        relative=self.relative, variable=self.variable)

    @property
    def size_value(self) -> Any:
        """The answer's searched size (for a censored point the bound that was hit, or None)."""
        return self.values.get(self.size)

    @property
    def seed_label(self) -> int | str:
        """The seed as a point writes it: ``"mean"`` for a seed-mean point."""
        return "mean" if self.seed is None else self.seed

    @property
    def coordinates(self) -> dict[str, Any]:
        """What a fit's x and y read: the variable values and the parameter count (and a law's point its metric)."""
        own = {self.metric: self.metric_value} if self.variable is not None else {}
        return {**self.values, "param_count": self.param_count, **own}

    def to_dict(self) -> dict[str, Any]:
        """The point as summary.json and the report have always written it (keys in that order)."""
        if self.seed is None:
            return self._curve_dict()
        out: dict[str, Any] = {"experiment": self.experiment, "line": self.line, "scaling": self.scaling,
                               "threshold": self.threshold, "seed": self.seed, self.base: self.base_value}
        out.update(self.values)
        out["param_count"] = self.param_count
        if self.config_hash is not None:  # the answer is known: its metric and run
            out[self.metric] = self.metric_value
            out["config_hash"] = self.config_hash
        if self.variable is not None:  # a law's point: the variable its check fits the metric against
            out["variable"] = self.variable
        self._tail(out)
        if self.budget_check is not None:
            out["budget_check"] = dict(self.budget_check)
            out["budget_flagged"] = self.budget_flagged
        return out

    def _curve_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"experiment": self.experiment, "line": self.line, "scaling": self.scaling,
                               "threshold": self.threshold, "threshold_relative": self.relative,
                               "threshold_value": self.threshold_value, "seed": "mean", "n_seeds": self.n_seeds,
                               self.base: self.base_value, "method": "curve"}
        out.update((k, v) for k, v in self.values.items() if k != "m")
        out["param_count"] = self.param_count
        if "m" in self.values:  # m follows the parameter count it is derived from
            out["m"] = self.values["m"]
        if self.bracket is not None:
            out["bracket"] = list(self.bracket)
        if self.config_hash is not None:
            out["config_hash"] = self.config_hash
        out["censored"], out["censor_reason"] = self.censored, self.censor_reason
        out["ceiling"] = self.ceiling
        out["curve"] = self.curve
        out["non_monotone"] = self.non_monotone
        return out

    def _tail(self, out: dict[str, Any]) -> None:
        out["censored"], out["censor_reason"] = self.censored, self.censor_reason
        if self.non_monotone is not None:
            out["non_monotone"] = self.non_monotone

    @classmethod
    def from_dict(cls, point: Mapping[str, Any], base: str | None = None) -> "BoundaryPoint":
        """A point written by hand or read back from JSON, as far as a fit reads it: its variables are the
        size symbols it holds (``base`` first where given), ``"seed": "mean"`` is a seed-mean point."""
        names = [base] if base is not None and base in point else []
        names += [k for k in point if k in SIZE_SYMBOLS and k not in names]
        seed = point.get("seed")
        bracket = point.get("bracket")
        base = base if base in point else (names[0] if names else "")
        return cls(
            experiment=str(point.get("experiment") or ""), line=point.get("line"), scaling=point.get("scaling"),
            threshold=point.get("threshold"), seed=None if seed == "mean" else seed,
            base=base, base_value=point.get(base),
            size=str(point.get("size") or ""), values={k: point[k] for k in names},
            param_count=point.get("param_count"), metric=str(point.get("metric") or "accuracy"),
            config_hash=point.get("config_hash"), censored=bool(point.get("censored")),
            censor_reason=point.get("censor_reason"), non_monotone=point.get("non_monotone"),
            budget_check=point.get("budget_check"), budget_flagged=point.get("budget_flagged"),
            relative=bool(point.get("threshold_relative")), threshold_value=point.get("threshold_value"),
            n_seeds=point.get("n_seeds"), bracket=tuple(bracket) if bracket is not None else None,
            ceiling=point.get("ceiling"), curve=point.get("curve"), variable=point.get("variable"))


@dataclass(frozen=True)
class Violation:
    """A threshold crossed the wrong way along the size axis at one (line, base value, seed): for ``min_size``
    the first size that reached it (``reached_at``) and the larger ones that missed it (``missed_at``); for
    ``max_capacity`` (``largest``) the first size that missed it and the larger ones that reached it.
    ``values``: the metric at every probed size, by size."""

    line: str
    base: str
    base_value: Any
    seed: int
    threshold: float
    size: str
    reached_at: int | list[int]
    missed_at: int | list[int]
    values: Mapping[int, float] = field(default_factory=dict)
    largest: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, self.base: self.base_value, "seed": self.seed, "threshold": self.threshold,
                "reached_at": _copied(self.reached_at), "missed_at": _copied(self.missed_at),
                self.size + "_values": {str(k): self.values[k] for k in sorted(self.values)}}


def _copied(value: Any) -> Any:
    """A list as a new list (a written dict shares nothing with its record), anything else as it is."""
    return list(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class ProbeRun:
    """One probe's run (a line, base value, size and seed): its store hash and its metrics, or its error; the
    cells of the (base value, size) grid a heatmap draws. ``metric_value`` is the line's metric, written under
    the experiment's ``metric`` name; ``metrics`` the others a run row keeps, in row order."""

    line: str
    base: str
    base_value: Any
    size: str
    size_value: Any
    seed: int
    config_hash: str
    metric: str = "accuracy"
    metric_value: float | None = None
    metrics: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def measured(self) -> dict[str, Any]:
        """Every metric of the run as its row writes them (empty for a failed run)."""
        if self.error is not None:
            return {}
        return {self.metric: self.metric_value, **self.metrics}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"line": self.line, self.base: self.base_value}
        if self.size:  # a law experiment's run has no searched size
            out[self.size] = self.size_value
        out.update(seed=self.seed, config_hash=self.config_hash)
        if self.error is not None:
            out["error"] = self.error
        else:
            out.update(self.measured)
        return out


class StoredMetrics(BaseModel):
    """A stored run's metrics: any keys (each task writes its own), with the ones every search reads typed. A value
    that was NaN or an infinity is null, and ``nonfinite`` says which and what it was (``{"loss": "nan"}``)."""

    model_config = ConfigDict(strict=True, extra="allow")

    accuracy: float | None = None
    train_accuracy: float | None = None
    param_count: float | None = None
    wall_time_s: float | None = None
    nonfinite: dict[str, str] | None = None


class StoredRun(BaseModel):
    """One row of the results store's ``runs`` table, with its JSON columns parsed (``config_json`` as ``config``,
    ``metrics_json`` as ``metrics``). Types are strict: SQLite keeps whatever a hand edit put in a column, and a
    row that does not validate is left out, never coerced."""

    model_config = ConfigDict(strict=True, extra="forbid")

    rowid: int
    config_hash: str = Field(min_length=1)
    experiment: str
    seed: int | None = None
    accuracy: float | None = None
    wall_time_s: float | None = None
    device: str | None = None
    threads: int | None = None
    torch_version: str | None = None
    code_version: str | None = None
    created_at: str
    config: dict[str, Any]
    metrics: StoredMetrics


# where a field of StoredRun is read from: its column in the runs table
_COLUMN_OF = {"config": "config_json", "metrics": "metrics_json"}
# what a failed check means, said as a store's reader would say it
_EXPECTED = {"int_type": "expected an integer", "float_type": "expected a number", "string_type": "expected text",
             "dict_type": "expected a JSON object", "string_too_short": "expected text that is not empty"}


def stored_run_problem(row: Mapping[str, Any]) -> str | None:
    """What is wrong with a stored row (a dict of :class:`StoredRun`'s fields), in one line naming the column
    (``seed: expected an integer, got 'abc'``); None when it validates."""
    try:
        StoredRun.model_validate(dict(row))
    except ValidationError as exc:
        found = []
        for error in exc.errors()[:2]:
            loc = [str(part) for part in error["loc"]] or ["row"]
            where = ": ".join([_COLUMN_OF.get(loc[0], loc[0]), *loc[1:]])
            given = error.get("input")
            if error["type"] == "missing" or given is None:
                found.append(f"{where}: missing")
            else:
                found.append(f"{where}: {_EXPECTED.get(error['type'], error['msg'])}, got {repr(given)[:40]}")
        more = exc.error_count() - len(found)
        return "; ".join(found) + (f" (and {more} more)" if more > 0 else "")
    return None

"""What the search's pieces share: a failed probe, a cell's answer, the sweep's result, and the one interface
every search strategy (bisection, curve, grid) offers the driver.

Kept apart from :mod:`recallkit.empirics.search` so that the strategies and the driver can import these
without importing the module that imports them (``search`` re-exports every name here).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from recallkit.empirics.experiment import Experiment
from recallkit.empirics.records import BoundaryPoint, ProbeRun, Violation

__all__ = ["MISSING", "Cell", "CellKey", "CellResult", "Failure", "Prober", "SearchStrategy", "SweepResult"]


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
    """What a search returns: its records (read their attributes), written as JSON by :meth:`to_dict` only."""

    experiment: Experiment
    points: list[BoundaryPoint]
    violations: list[Violation]
    runs: list[ProbeRun]  # every run of the search (one trained model per line, base, size, seed), with its metrics
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
            "boundary_points": [p.to_dict() for p in self.points],
            "monotonicity_violations": [v.to_dict() for v in self.violations],
            "runs": [r.to_dict() for r in self.runs],
            "budget_runs": self.budget_runs,
        }

    def summary_line(self) -> str:
        return f"reused {self.reused} / computed {self.computed}"


class SearchStrategy(Protocol):
    """One way of choosing an experiment's probes. A strategy asks its driver
    (:class:`~recallkit.empirics.sweep_driver.SweepDriver`) for probes round by round (``driver.execute``
    trains or reuses them); its state is a function of the results it has seen, so a replay against the
    store takes the same rounds."""

    def search(self) -> None:
        """Probe until every cell (or curve, or grid point) has its answer."""

    def points(self, violations: list[Violation]) -> list[BoundaryPoint]:
        """The boundary points, one per (line, threshold, seed or seed mean, base value)."""

    def budget_runs(self) -> list[dict]:
        """The runs trained beside the search at a larger training budget (the budget checks), if any."""


CellKey = tuple[int, int, int, float]  # (line index, base index, seed, threshold)


class Cell:
    """One bisection cell: a line, base value, seed and threshold, with its answer once found."""

    __slots__ = ("base_index", "guess", "line_index", "result", "rounds", "seed", "threshold")

    def __init__(self, line_index: int, base_index: int, seed: int, threshold: float):
        self.line_index, self.base_index, self.seed, self.threshold = line_index, base_index, seed, threshold
        self.result: CellResult | None = None
        self.rounds = 0
        self.guess: int | None = None


class Prober(Protocol):
    """What a search strategy asks of the driver (:class:`recallkit.empirics.sweep_driver.SweepDriver`): the
    planned experiment, a probe's store key and metric, and one round of probes trained or reused. Typed as a
    protocol so that the strategies do not import the driver that imports them."""

    exp: Experiment
    plan: Any
    progress: bool
    cache: dict[str, Any]
    config_of: dict[str, dict]
    hash_of: dict[tuple[int, int, int, int], str]

    def key(self, line_index: int, base_value: int, size: int, seed: int) -> str: ...

    def metric(self, line_index: int, base_value: int, size: int, seed: int) -> float | Failure | None: ...

    def known(self, line_index: int, base_value: int, seed: int) -> dict[int, float | Failure]: ...

    def execute(self, wanted: dict[str, dict]) -> None: ...

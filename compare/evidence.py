"""Evidence: which verdicts are tests and which are fits.

A verdict is a test only if its prediction was fixed before the runs that judge it. Every input of a tested
prediction carries where it came from:

* ``a priori``: the pack, the experiment's config or a written derivation; nothing measured;
* ``calibration``: a constant measured on named runs (:class:`Calibration`: experiment, preset, seeds, base values,
  lines) whose seeds and configs are disjoint from the runs it judges;
* ``conditional``: a measured quantity of the judged runs themselves (a seed-mean ceiling, an attention mass).

One rule gives each verdict its label (:func:`judge_evidence`, the one entry point every prediction goes through):

1. not frozen before its first judged run (``recallkit freeze``), its number changed since the freeze, or its form
   selected on the preset's runs (the prediction source's ``selected_on``) -> **exploratory**;
2. frozen, but reading a measured quantity of the judged runs (or a constant calibrated on runs that share a seed and
   a configuration with them) -> **conditional**, naming the quantity;
3. otherwise -> **confirmatory**.

A freeze holds the resolved grid and every predicted number; it holds while the numbers recomputed now equal the
frozen ones (to a relative 1e-6: a refactor that changes no number keeps it).

The prediction-source interface a system implements (the ``recallkit_prediction_source`` hook, an object):

* ``form(pack) -> {"name", "covers", "selected_on", "derivation"} | None``: the finite-size form the system applies
  to ``pack`` (None: the pack is judged on its asymptotic or realised-grid prediction only);
* ``calibrations(pack) -> [Calibration fields as dict]``: the constants the pack's tested prediction uses, with the
  runs they were measured on;
* ``ceiling(pack, finite_size, sizes) -> {base value: metric} | None``: the form's own value of the metric at the
  ceiling size ``sizes[base value]``, so that a fraction of the ceiling has an a priori level.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping, Sequence

__all__ = ["A_PRIORI", "CALIBRATION", "CONDITIONAL", "CONFIRMATORY", "EXPLORATORY", "EVIDENCE_LABELS",
           "EVIDENCE_CLASSES", "Calibration", "Evidence", "FrozenPrediction", "PredictionInput", "TestedPrediction",
           "evidence_counts", "FREEZE_FORMAT", "freeze_digest", "judge_evidence", "latest_freeze", "same_number",
           "weakest"]

A_PRIORI, CALIBRATION, CONDITIONAL = "a priori", "calibration", "conditional"
EVIDENCE_CLASSES = (A_PRIORI, CALIBRATION, CONDITIONAL)
CONFIRMATORY, EXPLORATORY = "confirmatory", "exploratory"
# strongest first
EVIDENCE_LABELS = (CONFIRMATORY, CONDITIONAL, EXPLORATORY)

RELATIVE_TOLERANCE = 1e-6
FREEZE_FORMAT = "recallkit-freeze/1"


@dataclass(frozen=True)
class Calibration:
    """The runs a calibrated constant was measured on."""

    experiment: str
    preset: str
    seeds: tuple[int, ...]
    base_values: tuple[Any, ...] = ()
    lines: tuple[str, ...] = ()
    description: str = ""

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "Calibration":
        return cls(str(doc["experiment"]), str(doc["preset"]), tuple(int(s) for s in doc.get("seeds") or ()),
                   tuple(doc.get("base_values") or ()), tuple(str(x) for x in doc.get("lines") or ()),
                   str(doc.get("description") or ""))

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "preset": self.preset, "seeds": list(self.seeds),
                "base_values": list(self.base_values), "lines": list(self.lines), "description": self.description}

    def shares_runs(self, experiment: str, runs: Iterable[tuple[str, Any, int]]) -> bool:
        """Whether a judged run (line, base value, seed) of ``experiment`` has a seed and a configuration (line and
        base value) that this calibration measured."""
        if experiment != self.experiment:
            return False
        seeds, values, lines = set(self.seeds), set(self.base_values), set(self.lines)
        return any(seed in seeds and (not values or value in values) and (not lines or line in lines)
                   for line, value, seed in runs)


@dataclass(frozen=True)
class PredictionInput:
    """One input of a tested prediction and where it came from."""

    name: str
    evidence: str  # one of EVIDENCE_CLASSES
    source: str
    calibration: Calibration | None = None

    def __post_init__(self) -> None:
        if self.evidence not in EVIDENCE_CLASSES:
            raise ValueError(f"evidence: expected one of {', '.join(EVIDENCE_CLASSES)}, got {self.evidence!r}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "evidence": self.evidence, "source": self.source}
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_dict()
        return out

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "PredictionInput":
        calibration = Calibration.from_dict(doc["calibration"]) if doc.get("calibration") else None
        return cls(str(doc["name"]), str(doc["evidence"]), str(doc.get("source") or ""), calibration)


@dataclass(frozen=True)
class TestedPrediction:
    """One check's tested prediction: its number, the form it comes from and every input with its evidence."""

    __test__: ClassVar[bool] = False  # a record, not a test class (pytest collects names that start with "Test")

    check: str
    slope: float | None
    form: str
    inputs: tuple[PredictionInput, ...] = ()
    selected_on: tuple[str, ...] = ()  # presets whose runs the form was chosen on
    log_power: float = 0.0  # a power of log(base) the verdict takes the finite-range slope of

    @property
    def conditional_on(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.evidence == CONDITIONAL)

    @property
    def calibrations(self) -> tuple[Calibration, ...]:
        return tuple(i.calibration for i in self.inputs if i.calibration is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.check, "slope": None if self.slope is None or not math.isfinite(self.slope)
                else float(self.slope), "form": self.form, "inputs": [i.to_dict() for i in self.inputs],
                "selected_on": list(self.selected_on), "log_power": float(self.log_power)}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "TestedPrediction":
        return cls(str(doc["check"]), None if doc.get("slope") is None else float(doc["slope"]), str(doc["form"]),
                   tuple(PredictionInput.from_dict(i) for i in doc.get("inputs") or ()),
                   tuple(doc.get("selected_on") or ()), float(doc.get("log_power") or 0.0))


@dataclass(frozen=True)
class FrozenPrediction:
    """A freeze as the verdicts read it: its hash, when it was made and the tested prediction of every check."""

    hash: str
    created_at: str  # ISO 8601, UTC
    checks: Mapping[str, TestedPrediction] = field(default_factory=dict)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], digest: str) -> "FrozenPrediction":
        checks = {c["check"]: TestedPrediction.from_dict(c) for c in doc.get("checks") or ()}
        return cls(digest, str(doc["created_at"]), checks)


@dataclass(frozen=True)
class Evidence:
    """A verdict's evidence label and the one-line reason for it."""

    label: str  # one of EVIDENCE_LABELS
    reason: str
    conditional_on: tuple[str, ...] = ()
    freeze: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"evidence": self.label, "evidence_reason": self.reason, "conditional_on": list(self.conditional_on),
                "freeze": self.freeze}


def same_number(a: float | None, b: float | None) -> bool:
    """Two predicted numbers are the same prediction: both absent, or equal to a relative 1e-6."""
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12)


def _short(digest: str | None) -> str:
    return (digest or "")[:12]


def judge_evidence(prediction: TestedPrediction | None, *, experiment: str, preset: str,
                   freeze: FrozenPrediction | None, first_run_at: str | None,
                   judged_runs: Sequence[tuple[str, Any, int]] = ()) -> Evidence:
    """The evidence label of one verdict (see the module docstring for the rule).

    ``first_run_at``: when the earliest run the verdict reads was stored (ISO 8601, UTC; None: no run);
    ``judged_runs``: (line, base value, seed) of every run it reads, to find a calibration that shares them."""
    if prediction is None or prediction.slope is None and not prediction.conditional_on:
        return Evidence(EXPLORATORY, "no tested prediction")
    if preset in prediction.selected_on:
        return Evidence(EXPLORATORY, f"its form ({prediction.form}) was selected on the {preset} preset's runs")
    if freeze is None:
        return Evidence(EXPLORATORY, f"prediction not frozen before its runs (recallkit freeze {experiment} "
                                     f"--preset {preset})")
    frozen = freeze.checks.get(prediction.check)
    if frozen is None:
        return Evidence(EXPLORATORY, f"check not in the freeze {_short(freeze.hash)}", freeze=freeze.hash)
    changed = not same_number(frozen.log_power, prediction.log_power) or not same_number(frozen.slope, prediction.slope)
    if changed and not (frozen.slope is None and prediction.conditional_on):
        was = "none" if frozen.slope is None else f"{frozen.slope:.4g}"
        now = "none" if prediction.slope is None else f"{prediction.slope:.4g}"
        return Evidence(EXPLORATORY, f"prediction changed since the freeze {_short(freeze.hash)} (frozen {was}, now "
                                     f"{now})", freeze=freeze.hash)
    if first_run_at is not None and first_run_at <= freeze.created_at:
        return Evidence(EXPLORATORY, f"runs predate the freeze {_short(freeze.hash)} (first run {first_run_at}, freeze "
                                     f"{freeze.created_at})", freeze=freeze.hash)
    measured = list(prediction.conditional_on)
    measured += [f"{c.description or 'calibrated constants'} (calibrated on {c.experiment} {c.preset}, which shares "
                 f"seeds and configurations with these runs)" for c in prediction.calibrations
                 if c.shares_runs(experiment, judged_runs)]
    if measured:
        return Evidence(CONDITIONAL, "frozen, but reads " + "; ".join(measured) + " of the judged runs",
                        tuple(measured), freeze.hash)
    return Evidence(CONFIRMATORY, f"frozen ({_short(freeze.hash)}, {freeze.created_at}) before its runs; every input "
                                  f"a priori or calibrated on other runs", (), freeze.hash)


def weakest(labels: Iterable[str | None]) -> str:
    """The weakest of some evidence labels (a comparative claim is as strong as the weaker check it compares); a
    missing label is exploratory."""
    found = [label if label in EVIDENCE_LABELS else EXPLORATORY for label in labels]
    return max(found, key=EVIDENCE_LABELS.index) if found else EXPLORATORY


def evidence_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """How many rows carry each evidence label (rows without one are not counted)."""
    rows = list(rows)
    return {label: sum(r.get("evidence") == label for r in rows) for label in EVIDENCE_LABELS}


def freeze_digest(doc: Mapping[str, Any]) -> str:
    """A freeze's hash: SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, allow_nan=False).encode()).hexdigest()


def latest_freeze(store: Any, experiment: str, preset: str) -> FrozenPrediction | None:
    """The newest freeze of an experiment's preset that the store (``empirics.store.ResultStore``) holds intact: its
    document still hashes to its key and has this format. None if there is none."""
    for record in reversed(store.freezes(experiment, preset)):
        doc = record["document"]
        try:
            if freeze_digest(doc) != record["hash"] or doc.get("format") != FREEZE_FORMAT:
                continue
            return FrozenPrediction.from_document(doc, record["hash"])
        except (KeyError, TypeError, ValueError):
            continue
    return None

"""An experiment planned once: the file read and checked once, its pack loaded once, its predictions computed
once, into a frozen :class:`Plan` that every later stage reads.

``plan(name_or_path, preset)`` is the one way in. What it holds:

- ``experiment``: the validated :class:`~recallkit.empirics.experiment.Experiment` with the preset applied
  (None for a file of a system's own kind, which names that system's ``runner``);
- ``pack``: the theory pack (:class:`~recallkit.theory.pack.Pack`) the experiment is judged against, or None;
- ``predictions``: per line label, ``theory.predict(pack, line).to_dict()`` (the asymptotic prediction), or
  ``{"error": message}`` where the pack cannot predict the line; for a law experiment (``kind = "law"``) the
  law's exponent of its metric against the base along the line instead (:func:`law_prediction`: ``slope`` is
  the ``exponent_float`` of ``theory.law_exponents``' one region, kept under that name too);
- ``realised``: per line label of a ``min_size`` experiment, the pack's prediction at the sizes the preset
  actually runs (``theory.realised.realised_prediction``: floored counts, log factors), or ``{"error": ...}``;
  the finite-size form, which needs the runs' measured metrics, is computed by ``compare`` after the search;
- ``search_exponents``: per line label, (x, y) with searched size ~ base**x (log base)**y, which the search
  uses for its first guesses (None: the search calibrates from data alone).

The search, the fits, the verdicts, the report and the assertions take a Plan; nothing downstream reads the
experiment file or loads the pack again.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from recallkit import registry, theory
from recallkit.empirics.experiment import (Experiment, Line, experiment_with_settings,
                                           read_experiment_file, resolve_experiment)
from recallkit.empirics.overrides import FieldSettings
from recallkit.theory.errors import InputError
from recallkit.theory.pack import Pack
from recallkit.theory.realised import realised_prediction
from recallkit.theory.symbols import variable_symbol

__all__ = ["BOUNDARY_MARGIN", "law_prediction", "Plan", "plan", "plan_of", "runner_of", "realised_rows"]

# A law line whose two leading terms' exponents along it differ by at most this sits on (or near) the boundary
# between the law's regions: the measured slope there lies between the two terms' (constants decide which shows)
BOUNDARY_MARGIN = 0.05


@dataclass(frozen=True)
class Plan:
    """One experiment file and preset, read, checked and predicted once (see the module docstring)."""

    path: Path
    preset: str
    experiment: Experiment | None = None
    runner: str | None = None  # a system's runner reference ("module:function") for a file of its own kind
    system: Any = None  # the registered system that owns that runner
    pack: Pack | None = None
    predictions: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    realised: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    search_exponents: Mapping[str, tuple[float, float] | None] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def name(self) -> str:
        return self.experiment.name if self.experiment is not None else self.path.stem

    @property
    def is_search(self) -> bool:
        """A search experiment (swept and fitted by the stages), not a system's own kind."""
        return self.experiment is not None

    def search_experiment(self, why: str, where: str | None = None) -> Experiment:
        """The search experiment, for a command that works on one only; a system's own kind is refused in one
        line, ``WHERE: not a search experiment WHY`` (``where``: the file by default; ``why``: what the user
        should know, e.g. `` (its system runs it: recallkit report)``)."""
        if self.experiment is None:
            raise InputError(f"{self.path if where is None else where}: not a search experiment{why}")
        return self.experiment


def runner_of(raw: Mapping[str, Any]) -> tuple[Any, str] | None:
    """(system, runner reference) when a parsed experiment file is one of a system's own kinds (a top-level
    table the system registered in ``System.runners``), else None: a plain search experiment."""
    try:
        runners = registry.runners()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    for table in raw:
        if table in runners and isinstance(raw[table], dict):
            return runners[table]
    return None


def plan(name_or_path: str | Path, preset: str = "quick", max_runs: int | None = None,
         settings: FieldSettings = ()) -> Plan:
    """Read, check and predict one experiment (a path, or a shipped experiment's name) with ``preset``.
    Errors are one-line InputErrors naming the file and field. ``max_runs``: the most trained models the
    preset may plan (``--max-runs``; default ``empirics.experiment.max_runs_allowed``); ``settings``: fields
    changed for this command (``--set``, :mod:`recallkit.empirics.overrides`)."""
    path = resolve_experiment(name_or_path)
    raw = read_experiment_file(path)
    found = runner_of(raw)
    if found is not None:
        if settings:
            raise InputError(f"--set: {path}: its system's runner reads the file itself; --set changes the fields "
                             f"of search experiments (min_size, max_capacity, grid, law)")
        return Plan(path=path, preset=preset, system=found[0], runner=found[1])
    return plan_of(experiment_with_settings(raw, str(path), preset, max_runs, settings))


def plan_of(experiment: Experiment | Plan) -> Plan:
    """The Plan of an experiment already loaded (a Plan is returned as it is)."""
    if isinstance(experiment, Plan):
        return experiment
    pack = theory.load_pack(experiment.pack) if experiment.pack is not None else None
    predictions = _predictions(experiment, pack)
    return Plan(path=Path(experiment.path), preset=experiment.preset, experiment=experiment, pack=pack,
                predictions=MappingProxyType(predictions),
                realised=MappingProxyType(_realised(experiment, pack)),
                search_exponents=MappingProxyType({line.label: _exponents(experiment, predictions.get(line.label))
                                                   for line in experiment.lines}))


def _predictions(experiment: Experiment, pack: Pack | None) -> dict[str, dict[str, Any]]:
    """``theory.predict`` for each line, keyed by label; ``{"error": message}`` where it cannot predict."""
    if pack is None:
        return {line.label: {"error": f"{experiment.path}: no 'pack' to predict from"} for line in experiment.lines}
    out: dict[str, dict[str, Any]] = {}
    for line in experiment.lines:
        if experiment.kind == "law":
            try:
                out[line.label] = law_prediction(pack, experiment.law, line.theory_scaling or line.scaling,
                                                  experiment.base)
            except InputError as exc:
                out[line.label] = {"error": f"line {line.label!r}: {exc}"}
            continue
        try:
            # theory_scaling: the line as the pack states it (a linear memory's config has no m; the pack's m = d)
            out[line.label] = theory.predict(pack, theory.parse_scaling(line.theory_scaling or line.scaling,
                                                                        variables=pack.variables)).to_dict()
        except InputError as exc:
            out[line.label] = {"error": str(exc)}
    return out


def law_prediction(pack: Pack, law: str, scaling: str, base: str) -> dict[str, Any]:
    """The law's prediction along one fully specified line: the exponent of its metric against ``base`` (``slope``,
    with ``log_power`` of log(base)), the dominant term, every term's exponent along the line, and how far the
    line is from a boundary between the law's regions (``boundary_gap``: the dominant term's exponent minus the
    next one's; ``boundary_warning`` when that is at most :data:`BOUNDARY_MARGIN`).

    The names are a fit's prediction's; each is a key of the line's one region in ``theory.law_exponents``:
    ``slope`` = ``exponent_float``, ``slope_exact`` = ``exponent`` (both kept under those names too),
    ``log_power`` and ``log_power_float``, ``dominant``, ``tied_with``, and ``exponents_against`` = ``variables``
    (the metric's exponent against each variable, the others held fixed); ``terms``: each term's ``exponent`` /
    ``exponent_float`` / ``log_power`` / ``log_power_float`` along the line."""
    document = theory.law_exponents(pack, law, theory.parse_scaling(scaling, variables=pack.variables))
    if document["base"] != base:
        raise InputError(f"the scaling {scaling!r} leaves {document['base']} free in law {law}, not the experiment's "
                         f"base {base}; set {document['base']} along the line")
    if document["axes"] or len(document["regions"]) != 1:
        raise InputError(f"the scaling {scaling!r} leaves free exponents ({', '.join(document['axes'])}); a law "
                         f"experiment's line gives every exponent a number")
    region = document["regions"][0]
    terms = [{"name": t["name"], "exponent": t["exponent"], "exponent_float": t["exponent_float"],
              "log_power": t["log_power"], "log_power_float": t["log_power_float"]} for t in document["terms"]]
    others = [t["exponent_float"] for t in terms if t["name"] != region["dominant"] and t["exponent_float"] is not None]
    gap = region["exponent_float"] - max(others) if others else None
    warning = None
    if gap is not None and gap <= BOUNDARY_MARGIN:
        runner_up = max((t for t in terms if t["name"] != region["dominant"]), key=lambda t: t["exponent_float"])
        warning = (f"the line lies within {BOUNDARY_MARGIN:g} of the boundary between terms {region['dominant']} and "
                   f"{runner_up['name']} of law {document['law']} (their exponents along it: "
                   f"{region['exponent_float']:g} and {runner_up['exponent_float']:g}); the measured slope there "
                   f"lies between the two terms'")
    return {"kind": "law", "law": document["law"], "metric": document["metric"], "combine": document["combine"],
            "pack": document["pack"], "scaling": document["scaling"], "base": base,
            "slope": region["exponent_float"], "slope_exact": region["exponent"],
            "exponent": region["exponent"], "exponent_float": region["exponent_float"],  # law_exponents' names
            "log_power": region["log_power"], "log_power_float": region["log_power_float"],
            "dominant": region["dominant"], "tied_with": list(region["tied_with"]),
            "exponents_against": dict(region["variables"]), "terms": terms,
            "boundary_gap": None if gap is None else round(gap, 12), "boundary_warning": warning}


def _exponents(experiment: Experiment, prediction: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """(x, y) with searched size ~ base**x (log base)**y from the line's prediction, or None.

    ``theory.predict`` solves the pack's success condition for its size variable as a power of its base.
    When the experiment searches the pack's base at fixed size (capacity: N at each d, pack stated as
    d ~ N**x (log N)**y) the relation is inverted to leading order: N ~ d**(1/x) (log d)**(-y/x).
    """
    if not prediction or "error" in prediction:
        return None
    try:
        x = float(prediction["size_exponent_float"])
        y = float(prediction["size_log_power_float"])
        pack_base, pack_size = prediction["base"], prediction["size"]
    except (KeyError, TypeError, ValueError):
        return None
    if not (math.isfinite(x) and math.isfinite(y)):
        return None
    if (pack_base, pack_size) == (experiment.base, experiment.size):
        return x, y
    if (pack_base, pack_size) == (experiment.size, experiment.base) and x > 0:
        return 1 / x, -y / x
    return None


def realised_rows(experiment: Experiment, pack: Pack, line: Line) -> list[dict[str, Any]]:
    """The grid the preset runs on one line, as the pack's variables: one row per base value, with the run
    config (``_config``) that row's models use at the smallest searched size, for finite-size forms."""
    scaling = theory.parse_scaling(line.theory_scaling or line.scaling, variables=pack.variables)
    tied = {name for name, expr in scaling.as_dict().items() if variable_symbol(pack.size, pack.variables)
            in expr.free_symbols}
    rows = []
    for value in experiment.base_values:
        config = experiment.build_config(line, value, experiment.search.min, experiment.seeds[0])
        row = {v: config[v] for v in pack.variables if v != pack.size and v in config and v not in tied}
        rows.append({**row, "_config": config})
    return rows


def _realised(experiment: Experiment, pack: Pack | None) -> dict[str, dict[str, Any]]:
    """Per line of a min-size experiment, the pack's prediction at the sizes actually run, or an error."""
    if pack is None or experiment.kind != "min_size":
        return {}
    out: dict[str, dict[str, Any]] = {}
    for line in experiment.lines:
        try:
            scaling = theory.parse_scaling(line.theory_scaling or line.scaling, variables=pack.variables)
            plain = [{k: v for k, v in row.items() if not k.startswith("_")}
                     for row in realised_rows(experiment, pack, line)]
            out[line.label] = realised_prediction(pack, scaling, plain)
        except (InputError, KeyError, ValueError, ZeroDivisionError) as exc:
            out[line.label] = {"error": str(exc)}
    return out

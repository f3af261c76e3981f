"""Assertions for users' own test suites, and the experiment-level fitting they rest on.

* :func:`assert_slope` works on plain arrays or boundary-point dicts: no training involved.
* :func:`assert_scaling` runs (or reuses from the results store) an experiment's sweep, fits every
  line and threshold, and checks each verdict.
* :func:`fit_boundary_points` groups boundary points by (line, threshold) and fits each group;
  :func:`fit_law_points` fits a law experiment's points, log(metric) on log(base) per line;
  :func:`fit_experiment` does the whole experiment (search -> points -> predictions -> fits); a grid experiment
  has no checks, and gives its sweep (the heatmap's cells) with no fits.

Both assertions raise ``AssertionError`` whose message carries the fitted slope, both
intervals, the prediction, delta and the verdict with its reason, and return the fit results
when they pass.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from recallkit import registry, theory
from recallkit.compare.fit_cache import cached_document, cached_fits
from recallkit.compare.fits import (DEFAULT_ALPHA, DEFAULT_BOOTSTRAP_SEED, DEFAULT_N_BOOTSTRAP, fit_constant, fit_slope,
                                    variable_regressor)
from recallkit.compare.results import FitOptions, FitResult, PointLike, as_points, fit_curve_points, fit_points
from recallkit.compare.evidence import (A_PRIORI, CALIBRATION, CONDITIONAL, Calibration, PredictionInput,
                                        TestedPrediction, judge_evidence, latest_freeze, same_number)
from recallkit.compare.schema import FIT_SCHEMA
from recallkit.compare.verdicts import DEFAULT_DELTA, VERDICTS, decide
from recallkit.empirics.experiment import Experiment, SafeExpression, load_experiment
from recallkit.empirics.plan import Plan, plan_of, realised_rows
from recallkit.empirics.records import BoundaryPoint, CheckKey, ProbeRun, threshold_text
from recallkit.empirics.search import replay
from recallkit.empirics.store import ResultStore, default_store_path
from recallkit.theory.errors import InputError
from recallkit.theory.realised import realised_prediction

__all__ = ["assert_slope", "check_verdicts", "default_store_path", "describe_fit", "expected_verdicts",
           "ExperimentFits", "fit_arrays", "fit_boundary_points", "fit_experiment", "fit_law_points", "LAW_METHOD",
           "METHOD", "predictions_for", "read_store",
           "realised_predictions", "regressor_for", "StoreReading"]


def expected_verdicts(expect: str | Iterable[str]) -> tuple[str, ...]:
    wanted = (expect,) if isinstance(expect, str) else tuple(expect)
    for name in wanted:
        if name not in VERDICTS:
            raise InputError(f"expect: expected one of {', '.join(VERDICTS)} (or a list of them), got {name!r}")
    if not wanted:
        raise InputError("expect: expected at least one verdict")
    return wanted


def _pair(pair: Sequence[float] | None) -> str:
    if pair is None or any(v is None or (isinstance(v, float) and math.isnan(v)) for v in pair):
        return "n/a"
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def describe_fit(result: FitResult) -> str:
    """A few lines a person reads in a failing test or the CLI: what was fitted and why the verdict."""
    doc = result.to_dict()
    level = f"{100 * (1 - doc['alpha']):g}%"
    level_tost = f"{100 * (1 - 2 * doc['alpha']):g}%"
    where = [f"experiment {doc['experiment']!r}" if doc["experiment"] else "points"]
    if doc["line"]:
        where.append(f"line {doc['line']!r}")
    if doc["threshold"] is not None:  # "0.5 x ceiling" for a relative one: the check's own label
        where.append(f"threshold {result.key.threshold_text}")
    elif doc.get("variable"):  # a law's check: its metric against one variable
        where.append(f"{doc['metric']} against {doc['variable']}")
    lines = [", ".join(where) + f": verdict {doc['verdict']!r}"]
    if doc["slope"] is not None:
        boot = doc["bootstrap"]
        lines.append(
            f"  fitted slope of {doc['y']} on {doc['x']}: {doc['slope']:.3f} (HC3 se {doc['slope_se']:.3f}, "
            f"n = {doc['n_points']} points, {doc['n_seeds']} seeds, R^2 = {doc['r2']:.3f})")
        lines.append(
            f"  {level} CI {_pair(doc['slope_ci'])}; {level_tost} CI (TOST) {_pair(doc['slope_ci_tost'])}; "
            f"bootstrap {level} CI over {boot['unit']}s {_pair(doc['slope_ci_bootstrap'])}")
        if boot.get("note"):
            lines.append(f"  note: {boot['note']}")
    else:
        lines.append(f"  no fit: {doc['n_points']} uncensored points")
    if doc["predicted_slope_tested"] is not None:
        predicted = f"  tested prediction {doc['predicted_slope_tested']:.3f}"
        if doc["predicted_slope_asymptotic"] not in (None, doc["predicted_slope_tested"]):
            predicted += f" (asymptotic {doc['predicted_slope_asymptotic']:.3f})"
        lines.append(predicted + f", delta {doc['delta']:g}, band {_pair(doc['band'])}")
    if doc["C"] is not None:
        lines.append(f"  C = {doc['C']:.4g}, {level} CI {_pair(doc['C_ci'])}, bootstrap {_pair(doc['C_ci_bootstrap'])}")
    if doc["censored"]:
        lines.append(f"  censored (not fitted): {len(doc['censored'])} points")
    lines.append(f"  reason: {doc['verdict_reason']}")
    return "\n".join(lines)


def check_verdicts(results: Sequence[FitResult], wanted: tuple[str, ...], what: str) -> None:
    failing = [r for r in results if r.verdict.verdict not in wanted]
    if not results:
        raise AssertionError(f"{what}: no fits to check (no boundary points)")
    if failing:
        head = (f"{what}: expected verdict {' or '.join(map(repr, wanted))}, "
                f"{len(failing)} of {len(results)} fits disagree")
        raise AssertionError(head + "\n" + "\n".join(describe_fit(r) for r in failing))


def _is_array_triple(points: Any) -> bool:
    return (isinstance(points, (tuple, list)) and len(points) in (2, 3)
            and not any(isinstance(p, (Mapping, BoundaryPoint)) for p in points))


def fit_arrays(
    x: Iterable[float],
    y: Iterable[float],
    seeds: Sequence[Any] | None,
    predicted_slope: float,
    *,
    x_name: str = "x",
    delta: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    log_power: float = 0.0,
    capacity: bool = False,
    label: str = "",
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> FitResult:
    """A :class:`FitResult` for x, y already on log scale (raises InputError on unusable arrays)."""
    delta = DEFAULT_DELTA if delta is None else delta
    x_list, y_list = list(x), list(y)
    seed_list = list(seeds) if seeds is not None else [0] * len(x_list)
    fit = fit_slope(x_list, y_list, seed_list, alpha=alpha, n_bootstrap=n_bootstrap, bootstrap_seed=bootstrap_seed)
    verdict = decide(fit, predicted_slope, delta=delta, alpha=alpha, log_power=log_power)
    constant = (fit_constant(x_list, y_list, seed_list, alpha=alpha, n_bootstrap=n_bootstrap,
                             bootstrap_seed=bootstrap_seed) if capacity else None)
    points = [{"x": float(a), "y": float(b), "seed": s} for a, b, s in zip(x_list, y_list, seed_list)]
    return FitResult(label, None, None, x_name, fit, verdict, points, [], constant)


def assert_slope(
    points: Any,
    predicted: float,
    expect: str | Iterable[str] = "consistent",
    *,
    x: str = "log V",
    delta: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    log_power: float = 0.0,
    capacity: bool = False,
    label: str = "",
) -> FitResult:
    """Fit ``points`` and assert the verdict against ``predicted`` is one of ``expect``.

    ``points`` is either a sequence of boundary-point dicts (docs/ARCHITECTURE.md; ``x`` names the
    regressor, y is log param_count) or arrays ``(x, y)`` / ``(x, y, seeds)`` already on log scale.
    """
    wanted = expected_verdicts(expect)
    if _is_array_triple(points):
        seeds = points[2] if len(points) == 3 else None
        result = fit_arrays(points[0], points[1], seeds, predicted, delta=delta, alpha=alpha,
                            log_power=log_power, capacity=capacity, label=label)
    else:
        result = fit_points(list(points), predicted_slope=predicted, x=x, delta=delta, alpha=alpha,
                            log_power=log_power, capacity=capacity, experiment=label)
    check_verdicts([result], wanted, "scaling-law assertion failed")
    return result


def _float_or_zero(value: Any) -> float:
    """A number from a prediction field that may be a float or an exact string such as '1/2'."""
    if value is None:
        return 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:  # SafeExpression: the whitelist parser, which never executes the text
        return SafeExpression(str(value), set(), "theory prediction").evaluate({})
    except InputError:
        return math.nan


N_LN_N = "log(N ln N)"


def regressor_for(kind: str, base: str, predictions: Mapping[str, Any] | None = None) -> tuple[str, bool]:
    """The x of the fit and whether C is fitted, from the experiment's kind (docs/ARCHITECTURE.md). A capacity
    experiment fits against log(N ln N) where its pack predicts params ~ N log N (slope = log power, every line;
    C is then params / (N ln N)), else against log N (C = params / N) with the pack's log power in the verdict."""
    if kind != "max_capacity":
        return f"log {base}", False
    forms = [p for p in (predictions or {}).values() if isinstance(p, Mapping) and p.get("slope") is not None]
    if all(_float_or_zero(p.get("log_power_float", p.get("log_power"))) == _float_or_zero(p["slope"]) for p in forms):
        return N_LN_N, True
    return "log N", True


def _log_in_x(capacity: bool, x: str) -> bool:
    """Whether the fit's x already holds the one power of log N of params ~ N log N."""
    return capacity and x == N_LN_N


def _all_terms_extra(every: Mapping[str, Any], extra: dict[str, Any]) -> float | None:
    """Record one check's all-terms prediction (the system's ``all_terms`` hook) in ``extra``; its slope, or None."""
    if every.get("note"):  # an effect the system names for this line (e.g. a cap on its accuracy)
        extra["prediction_note"] = every["note"]
    if every.get("slope") is None:
        return None
    extra.update(predicted_slope_all_terms=float(every["slope"]), prediction_compared="all terms",
                 all_terms_d={str(V): d for V, d in every["d"].items()})
    if every.get("slope_gaussian_counts") is not None:  # the same with the label counts folded into one Gaussian
        extra["predicted_slope_all_terms_gaussian_counts"] = float(every["slope_gaussian_counts"])
    return float(every["slope"])


def _all_terms_over_fitted_bases(every: Mapping[str, Any], group: Sequence[BoundaryPoint], base: str,
                                 slope: float, extra: dict[str, Any]) -> float:
    """The all-terms slope the check is tested against: over every base value of the grid, whichever the runs reached
    (a prediction is frozen before the runs, so it cannot follow their gaps). A base value whose point is censored
    is named in ``unreached``, and each censored bound is set against the form's d there
    (``censored_against_all_terms``): a curve that never reached the level puts the boundary past its largest size,
    one that had already reached it below its smallest. The form's slope over only the base values with a boundary is
    kept beside, for the reader (``predicted_slope_all_terms_reached_bases``), never tested."""
    d_of = {int(V): float(d) for V, d in (every.get("d") or {}).items()}
    censored = [p for p in group if p.censored]
    if not censored or not d_of:
        return slope
    bounds = []
    for p in censored:
        V, bound, predicted = int(p.values[base]), p.values.get(p.size), d_of.get(int(p.values[base]))
        if bound is None or predicted is None or p.curve is None or not p.curve.get("sizes"):
            continue
        past = bound >= max(p.curve["sizes"])  # never reached: the boundary is past the bound
        bounds.append({"base": base, "base_value": V, "size": p.size, "bound": bound, "past": past,
                       "predicted": predicted, "agrees": predicted > bound if past else predicted < bound})
    if bounds:
        extra["censored_against_all_terms"] = bounds
    counts = {int(V): float(c) for V, c in (every.get("param_count") or {}).items()}
    used = sorted({int(p.values[base]) for p in group if not p.censored})
    reached = [(V, counts[V]) for V in used if V in counts and math.isfinite(counts[V])]
    unreached = sorted(V for V, c in counts.items() if math.isfinite(c) and V not in used)
    if unreached:
        extra["unreached"] = unreached
    if len(reached) >= 2 and unreached:
        extra["predicted_slope_all_terms_reached_bases"] = float(
            np.polyfit(np.log([V for V, _ in reached]), np.log([c for _, c in reached]), 1)[0])
    return slope


def _prediction_source(pack: str | None) -> Any:
    """The prediction source (``compare.evidence``) of the system that owns ``pack``, or None."""
    system = registry.system_of_pack(pack) if pack else None
    if system is None or not getattr(system, "prediction_source", None):
        return None
    return registry.load_object(system.prediction_source)


def _reading(line_realised: Mapping[str, Any], check: str) -> tuple[Mapping[str, Any], Mapping[str, Any] | None]:
    """(the reading a check is tested on, the conditional reading kept beside it or None). The tested one is the a
    priori reading (nothing measured on the judged runs) wherever it has the check's level; a fraction of the ceiling
    that no a priori ceiling serves is tested on the judged runs' ceiling, and so is conditional."""
    conditional = line_realised.get("conditional")
    conditional = {**line_realised, **conditional} if conditional else None
    levels = line_realised.get("levels")
    if levels is not None and check and check not in levels and conditional is not None:
        return conditional, None
    return line_realised, conditional


def _inputs(prediction: Any, reading: Mapping[str, Any], check: str, compared: str | None, source: Any,
            measured: bool, experiment: str = "") -> tuple[tuple[PredictionInput, ...], tuple[str, ...]]:
    """Every input of a tested prediction with its evidence, and the presets of ``experiment`` its form was selected
    on (the source's ``selected_on``, where its ``selected_experiment`` is this one or unnamed)."""
    pack = prediction.get("pack") if isinstance(prediction, Mapping) else None
    if pack is None:
        return (PredictionInput("slope", A_PRIORI, "given by the user"),), ()
    inputs = [PredictionInput("pack terms", A_PRIORI, f"pack {pack}: its terms and exponents")]
    selected_on: tuple[str, ...] = ()
    if compared is not None:
        inputs.append(PredictionInput("realised grid", A_PRIORI, "the preset's sizes as run: floored counts and log "
                                                                 "factors"))
    if compared in ("finite size", "all terms"):
        constants = (reading.get("finite_size") or {}).get("constants") or []
        said = sorted({str(c.get("source")) for c in constants if isinstance(c, Mapping) and c.get("source")})
        if measured:
            inputs.append(PredictionInput("finite-size constants", CONDITIONAL,
                                          "the judged runs' mean metrics" + (f" ({'; '.join(said)})" if said else "")))
        else:
            inputs.append(PredictionInput("finite-size constants", A_PRIORI,
                                          "the config alone, no run read" + (f" ({'; '.join(said)})" if said else "")))
        level = (reading.get("levels") or {}).get(check)
        if level:
            inputs.append(PredictionInput("level", level["evidence"], level["source"]))
        form = source.form(pack) if source is not None else None
        if form and form.get("selected_experiment") in (None, experiment):
            selected_on = tuple(form.get("selected_on") or ())
    if compared == "all terms" and source is not None:
        for record in source.calibrations(pack):
            calibration = Calibration.from_dict(record)
            inputs.append(PredictionInput("probed constants", CALIBRATION, calibration.description
                                          or f"measured on {calibration.experiment} {calibration.preset}", calibration))
    return tuple(inputs), selected_on


def _form_of(extra: Mapping[str, Any]) -> str:
    return extra.get("prediction_compared") or "asymptotic"


def tested_prediction(key: str, prediction: Any, line_realised: Mapping[str, Any], check: str, capacity: bool,
                      extra: dict[str, Any], *, group: Sequence[BoundaryPoint] = (), base: str = "V",
                      experiment: str = "", x: str = N_LN_N) -> tuple[TestedPrediction, float | None,
                                                                      TestedPrediction | None]:
    """The one way a check's tested prediction is made, for a fit and for a freeze alike: (the tested prediction with
    its inputs and their evidence, the binding terms' slope where every term at once is tested instead, the same
    form on the judged runs' measured quantities where that reading differs, else None). ``extra`` receives the
    fields the fit's record carries (which slope was compared, the others beside it). ``x``: the fit's regressor
    (:func:`regressor_for`)."""
    slope, log_power = _tested_slope(prediction, _log_in_x(capacity, x))
    pack = prediction.get("pack") if isinstance(prediction, Mapping) else None
    source = _prediction_source(pack)
    if slope is None or capacity:
        inputs, _ = _inputs(prediction, {}, check, None, source, False) if slope is not None else ((), ())
        return TestedPrediction(key, slope, "asymptotic", inputs, (), log_power), None, None
    reading, beside = _reading(line_realised, check)

    def one(found: Mapping[str, Any], into: dict[str, Any]) -> tuple[float, float, float | None]:
        this_slope, this_log, binding = slope, log_power, None
        own = (found.get("finite_size_by_check") or {}).get(check)
        if own is not None:  # the finite-size form at this check's own level (e.g. the argmax's accuracy)
            found = {**found, "finite_size": own}
            into["finite_size_at"] = "the check's own level"
        this_slope, this_log = _prefer_realised(this_slope, this_log, found, into)
        every_doc = (found.get("all_terms_by_check") or {}).get(check) or {}
        every = _all_terms_extra(every_doc, into)
        if every is not None:  # every term at once (the system's hook) is tested; the binding terms kept beside
            every = _all_terms_over_fitted_bases(every_doc, group, base, every, into)
            binding, this_slope, this_log = this_slope, every, 0.0
        return this_slope, this_log, binding

    measured = reading is not line_realised
    tested_slope, tested_log, binding = one(reading, extra)
    inputs, selected_on = _inputs(prediction, reading, check, extra.get("prediction_compared"), source, measured,
                                  experiment)
    tested = TestedPrediction(key, tested_slope, _form_of(extra), inputs, selected_on, tested_log)
    conditional = None
    if beside is not None:
        aside: dict[str, Any] = {}
        other_slope, other_log, _ = one(beside, aside)
        other_inputs, _ = _inputs(prediction, beside, check, aside.get("prediction_compared"), source, True)
        if not same_number(other_slope, tested_slope):
            conditional = TestedPrediction(key, other_slope, _form_of(aside), other_inputs, selected_on, other_log)
    return tested, binding, conditional


def fit_boundary_points(
    points: Sequence[PointLike],
    predictions: Mapping[str, Mapping[str, Any] | float] | float | None,
    *,
    experiment: str = "",
    kind: str = "min_size",
    base: str = "V",
    delta: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    thresholds: Iterable[float] | None = None,
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED,
    realised: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[FitResult]:
    """One :class:`FitResult` per (line, threshold) group of boundary points, in first-seen order.

    Points of a curve search (they carry ``"curve"``) are fitted by :func:`compare.results.fit_curve_points`,
    and relative thresholds (``threshold_relative``) form their own groups. ``realised``: line label ->
    ``theory.realised.realised_prediction`` dict; where it has a slope the verdict is taken against it (the
    pack's prediction at the sizes actually run, log factors included) and the asymptotic slope is kept
    beside it as ``predicted_slope_asymptotic``.

    ``predictions`` maps a line (the points' ``"line"`` value) to ``theory.predict(...).to_dict()``
    (``slope`` and ``log_power`` on log(base) are used) or to a bare slope on the fit's x; a single
    number applies to every line. For a theory prediction in a capacity experiment
    (x = log(N ln N)) one power of log N is already in x, so the log power passed to the verdict is
    the prediction's log power minus its slope (zero for params ~ N log N).
    """
    x_name, capacity = regressor_for(kind, base, predictions if isinstance(predictions, Mapping) else None)
    results = []
    for (line, threshold, relative), group in _check_groups(as_points(points, base), thresholds).items():
        prediction = predictions if not isinstance(predictions, Mapping) else predictions.get(line)
        slope, log_power = _tested_slope(prediction, _log_in_x(capacity, x_name))
        asymptotic = (slope, log_power)
        extra: dict[str, Any] = {"threshold_relative": relative}
        line_realised = (realised or {}).get(line) or {}
        check = threshold_text(threshold, relative)  # "" without a threshold: no per-check prediction
        key = str(CheckKey(experiment, str(line), threshold=None if threshold is None else float(threshold),
                           relative=bool(relative)))
        tested, binding, conditional = tested_prediction(key, prediction, line_realised, check, capacity, extra,
                                                         group=group, base=base, experiment=experiment, x=x_name)
        slope, log_power = tested.slope, tested.log_power
        options = FitOptions(predicted_slope=slope, x=x_name, experiment=experiment, line=line, threshold=threshold,
                             delta=delta, alpha=alpha, log_power=log_power, grid_key=base, n_bootstrap=n_bootstrap,
                             bootstrap_seed=bootstrap_seed)
        if any(p.curve is not None for p in group):
            result = fit_curve_points(group, options)
            extra["method"] = "curve"
            extra["ceilings"] = {str(p.values.get(base)): (p.ceiling or {}).get("mean") for p in group}
        else:
            result = fit_points(group, options, capacity=capacity)
        if asymptotic[0] is not None:
            extra.setdefault("predicted_slope_asymptotic", asymptotic[0])
        if asymptotic[0] is not None and extra.get("prediction_compared"):
            extra.update(_asymptotic_verdict(result, asymptotic, delta, alpha))
        extra["tested_prediction"] = tested.to_dict()
        if conditional is not None and result.fit is not None and conditional.slope is not None:
            # beside the tested one: the same form reading the judged runs' own measured quantities
            other = decide(result.fit, conditional.slope, delta=delta if delta is not None else DEFAULT_DELTA,
                           alpha=alpha, log_power=conditional.log_power)
            extra.update(predicted_slope_conditional=conditional.slope, verdict_conditional=other.verdict,
                         conditional_reading_on=list(conditional.conditional_on))
        if binding is not None and result.fit is not None:
            # beside the tested one: the binding terms alone (the finite-size form the check was tested against
            # before the system predicted it from every term)
            other = decide(result.fit, binding, delta=delta if delta is not None else DEFAULT_DELTA, alpha=alpha)
            extra.update(verdict_binding_terms=other.verdict)
        within = (line_realised.get("conditional") or line_realised).get("finite_size_within_ceiling") or {}
        capped = within.get(check)
        if capped is not None and capped.get("slope") is not None and result.fit is not None:
            # beside the tested one: the same form at the level within the instance's ceiling (DERIVATION of the
            # system: where the ceiling is a cap, a fraction of it asks for a fixed level among the inputs it allows)
            other = decide(result.fit, float(capped["slope"]), delta=delta if delta is not None else DEFAULT_DELTA,
                           alpha=alpha)
            extra.update(predicted_slope_within_ceiling=float(capped["slope"]), verdict_within_ceiling=other.verdict)
        result.extra.update(extra)
        results.append(result)
    return results


def fit_law_points(
    points: Sequence[PointLike],
    predictions: Mapping[str, Mapping[str, Any] | float] | float | None,
    *,
    experiment: str = "",
    base: str,
    law: str | None = None,
    direction: str | None = None,
    delta: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP,
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> list[FitResult]:
    """One :class:`FitResult` per line of a law experiment's points (``empirics.grid_sweep``: one per run), in
    first-seen order: OLS of log(metric) on log(base) over every seed's point with HC3 and the seed bootstrap
    (:func:`compare.results.fit_points`, as a min-size line), judged by the same TOST against the line's
    prediction (``empirics.plan.law_prediction``: ``slope`` and ``log_power``, or a bare slope). A prediction's
    ``boundary_warning`` (the line near a boundary between the law's regions) is added to the verdict's reason.
    Each fit carries ``kind`` "law", ``law``, ``metric``, ``direction`` and ``variable`` (= ``base``)."""
    x_name = variable_regressor(base)
    groups: dict[str, list[BoundaryPoint]] = {}
    for point in as_points(points, base):
        groups.setdefault(point.line, []).append(point)
    results = []
    for line, group in groups.items():
        prediction = predictions if not isinstance(predictions, Mapping) else predictions.get(line)
        slope, log_power = _tested_slope(prediction, False)
        metric = group[0].metric
        options = FitOptions(predicted_slope=slope, x=x_name, experiment=experiment, line=line, threshold=None,
                             delta=delta, alpha=alpha, log_power=log_power, grid_key=base, n_bootstrap=n_bootstrap,
                             bootstrap_seed=bootstrap_seed)
        result = fit_points(group, options, y_key=metric)
        extra: dict[str, Any] = {"kind": "law", "law": law, "metric": metric, "direction": direction,
                                 "variable": base, "y": f"log({metric})"}
        if isinstance(prediction, Mapping):
            extra.update(dominant=prediction.get("dominant"), boundary_gap=prediction.get("boundary_gap"),
                         boundary_warning=prediction.get("boundary_warning"))
            if prediction.get("boundary_warning"):
                result.verdict = replace(result.verdict,
                                         reason=f"{result.verdict.reason}; warning: {prediction['boundary_warning']}")
        result.extra.update(extra)
        results.append(result)
    return results


def _check_groups(points: Sequence[BoundaryPoint], thresholds: Iterable[Any] | None
                  ) -> dict[tuple[Any, Any, bool], list[BoundaryPoint]]:
    """Boundary points by check (line, threshold, relative), in first-seen order; only ``thresholds`` if given: a
    number selects that value (absolute or relative), a ``(value, relative)`` pair exactly that check."""
    wanted = None if thresholds is None else list(thresholds)
    groups: dict[tuple[Any, Any, bool], list[BoundaryPoint]] = {}
    for point in points:
        key = (point.line, point.threshold, point.relative)
        if wanted is not None and key[1] is not None and not any(
                (float(w[0]) == float(key[1]) and bool(w[1]) == key[2]) if isinstance(w, tuple)
                else float(w) == float(key[1]) for w in wanted):
            continue
        groups.setdefault(key, []).append(point)
    return groups


def _tested_slope(prediction: Mapping[str, Any] | float | None, log_in_x: bool) -> tuple[float | None, float]:
    """(slope on the fit's x, log power) of a line's prediction: a theory prediction dict or a bare slope.
    ``log_in_x``: the x is log(N ln N), which holds one power of log N already."""
    if prediction is None:
        return None, 0.0
    if not isinstance(prediction, Mapping):
        return float(prediction), 0.0  # a bare slope is already the slope on x
    slope = _float_or_zero(prediction.get("slope")) if prediction.get("slope") is not None else None
    log_power = _float_or_zero(prediction.get("log_power_float", prediction.get("log_power")))
    if log_in_x and slope is not None:
        log_power -= slope  # theory states the slope on log N; x = log(N ln N) holds one log N
    return slope, log_power


def _prefer_realised(slope: float, log_power: float, found: Mapping[str, Any], extra: dict[str, Any]
                     ) -> tuple[float, float]:
    """The slope the verdict is taken against: the finite-size one, else the realised-grid one, else the
    asymptotic one; ``extra`` records which, with the others beside it."""
    realised_slope = (found.get("realised") or {}).get("slope")
    finite_slope = (found.get("finite_size") or {}).get("slope")
    if realised_slope is not None:
        extra.update(predicted_slope_asymptotic=slope, predicted_slope_realised=realised_slope,
                     predicted_realised_terms=found["realised"].get("terms"), prediction_compared="realised grid")
        slope, log_power = float(realised_slope), 0.0
    if finite_slope is not None:
        extra.update(predicted_slope_finite_size=finite_slope, prediction_compared="finite size",
                     finite_size_constants=found["finite_size"].get("constants"))
        slope, log_power = float(finite_slope), 0.0
    return slope, log_power


def _asymptotic_verdict(result: FitResult, asymptotic: tuple[float, float], delta: float | None, alpha: float
                        ) -> dict[str, Any]:
    """The verdict against the asymptotic slope, kept beside the tested one."""
    if result.fit is None:
        return {"verdict_asymptotic": "inconclusive", "verdict_reason_asymptotic": result.verdict.reason}
    other = decide(result.fit, asymptotic[0], delta=delta if delta is not None else DEFAULT_DELTA, alpha=alpha,
                   log_power=asymptotic[1])
    return {"verdict_asymptotic": other.verdict, "verdict_reason_asymptotic": other.reason}


def realised_predictions(plan: Any, sweep: Any = None) -> dict[str, Any]:
    """The pack's prediction at the sizes a min-size experiment actually runs, per line label.

    Each entry is the a priori reading, which reads no run: ``{"realised": the plan's realised-grid prediction
    (floored counts, log factors), "finite_size": the same with each term in its finite-size form where the pack's
    system provides one (registry ``System.finite_size``) at the config alone, "finite_size_by_check" and
    "all_terms_by_check": that form and every term at once at each check's level, "levels": check -> where its level
    came from (the threshold, or a fraction of the form's own ceiling, ``prediction_source.ceiling``)}``. Where runs
    exist (``sweep``), ``"conditional"`` holds the same form handed the judged runs' mean metrics (e.g. the attention
    mass) and, for a fraction of the ceiling, their seed-mean ceiling, with the within-ceiling reading: what the
    verdicts keep beside the tested one, labelled conditional (``compare.evidence``). ``{"error": ...}`` where
    neither can be computed. ``plan``: an ``empirics.plan.Plan`` (or a loaded experiment, planned here)."""
    plan = plan_of(plan)
    experiment, pack = plan.experiment, plan.pack
    out: dict[str, Any] = {}
    if pack is None or experiment.kind != "min_size":
        return out
    system = registry.system_of_pack(experiment.pack)
    hook = registry.load_object(system.finite_size) if system is not None and system.finite_size else None
    all_terms = registry.load_object(system.all_terms) if hook is not None and system.all_terms else None
    source = _prediction_source(experiment.pack)
    runs = list(getattr(sweep, "runs", None) or [])
    for index, line in enumerate(experiment.lines):
        realised = plan.realised.get(line.label) or {}
        if "error" in realised:
            out[line.label] = {"error": realised["error"]}
            continue
        entry: dict[str, Any] = {"realised": dict(realised), "finite_size": None}
        if hook is not None:
            try:
                finite = _finite_size(plan, line, [], hook)  # the config alone: no run read
                entry.update(_form_reading(plan, line, [], hook, all_terms, _apriori_targets(
                    plan, index, line, finite, source), finite=finite))
            except (InputError, KeyError, ValueError, ZeroDivisionError) as exc:
                entry = {"error": str(exc)}
            if runs and "error" not in entry:
                try:  # its own try: a failure here keeps the a priori reading, which is the tested one
                    entry["conditional"] = _form_reading(plan, line, runs, hook, all_terms,
                                                         _measured_targets(sweep, line.label), within=sweep)
                except (InputError, KeyError, ValueError, ZeroDivisionError) as exc:
                    entry["conditional_error"] = str(exc)
        out[line.label] = entry
    return out


def _form_reading(plan: Any, line: Any, runs: list[ProbeRun], hook: Any, all_terms: Any,
                  levels: Mapping[str, tuple[Mapping[Any, float], Mapping[str, str]]], within: Any = None,
                  finite: Any = None) -> dict[str, Any]:
    """The finite-size form of one line handed ``runs`` (none: the config alone), at the line's default level
    (``finite``, where it is already made) and at each check's ``levels`` (check -> (base value -> level, where that
    level came from)); every term at once at the same levels where the system has that form; with ``within`` (a
    sweep), the within-ceiling reading too."""
    reading: dict[str, Any] = {"finite_size": finite if finite is not None else _finite_size(plan, line, runs, hook),
                               "levels": {check: dict(said) for check, (_, said) in levels.items()}}
    by_check = {check: _finite_size(plan, line, runs, hook, targets) for check, (targets, _) in levels.items()}
    line_slope = (reading["finite_size"] or {}).get("slope")
    if line_slope is not None and any(found is not None and abs(found["slope"] - line_slope) > 1e-9
                                      for found in by_check.values()):  # the form reads the level
        reading["finite_size_by_check"] = by_check
        if within is not None:
            reading["finite_size_within_ceiling"] = {
                threshold_text(*key): _finite_size(plan, line, runs, hook, targets)
                for key, targets in _check_targets(within, line.label, within_ceiling=True).items()}
    if all_terms is not None and reading["finite_size"] is not None:
        try:  # its own try: a failure here keeps the finite-size prediction (then tested as before)
            reading["all_terms_by_check"] = {check: all_terms(plan.pack.name, reading["finite_size"], targets)
                                             for check, (targets, _) in levels.items()}
        except (InputError, KeyError, ValueError, ZeroDivisionError) as exc:
            reading["all_terms_error"] = str(exc)
    return reading


def _apriori_targets(plan: Any, index: int, line: Any, finite: Any, source: Any
                     ) -> dict[str, tuple[dict[Any, float], dict[str, str]]]:
    """Per check of a line, the level its boundary reaches at each base value, known before any run: the threshold
    itself, or that fraction of the form's own value at the ceiling size (``source.ceiling``); a fraction of the
    ceiling with no such form has no a priori level (it is left out, and tested on the measured ceiling)."""
    experiment = plan.experiment
    values = experiment.values_of(index)
    out: dict[str, tuple[dict[Any, float], dict[str, str]]] = {}
    ceiling = None
    for threshold, relative in experiment.threshold_targets():
        check = threshold_text(threshold, relative)
        if not relative:
            out[check] = ({V: float(threshold) for V in values},
                          {"evidence": A_PRIORI, "source": f"the threshold {threshold:g}"})
            continue
        if ceiling is None:
            ceiling = _apriori_ceiling(plan, index, line, finite, source)
        if ceiling:
            search = line.search or experiment.search
            sizes = sorted({search.ceiling_size(experiment.base, V) for V in values})
            shown = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]} .. {sizes[-1]}"
            out[check] = ({V: float(threshold) * ceiling[V] for V in values},
                          {"evidence": A_PRIORI, "source": f"{threshold:g} x the form's own {experiment.metric} at "
                                                           f"the ceiling size ({experiment.size} = {shown})"})
    return out


def _apriori_ceiling(plan: Any, index: int, line: Any, finite: Any, source: Any) -> dict[Any, float] | None:
    """The form's own value of the metric at each base value's ceiling size, from the line's finite-size prediction at
    the config alone (``finite``); None where the system has no such form (or it fails to give one at every base
    value)."""
    if source is None or finite is None:
        return None
    experiment = plan.experiment
    search = line.search or experiment.search
    values = experiment.values_of(index)
    found = source.ceiling(plan.pack.name, finite, {int(V): float(search.ceiling_size(experiment.base, V))
                                                    for V in values})
    if not found or any(found.get(int(V)) is None or not math.isfinite(found[int(V)]) for V in values):
        return None
    return {V: float(found[int(V)]) for V in values}


def _measured_targets(sweep: Any, line: str) -> dict[str, tuple[dict[Any, float], dict[str, str]]]:
    """Per check of a line, the level its boundary reached at each base value on the judged runs: the threshold, or
    that fraction of the runs' seed-mean ceiling (conditional)."""
    out = {}
    for (threshold, relative), targets in _check_targets(sweep, line).items():
        said = ({"evidence": CONDITIONAL, "source": f"{threshold:g} x the judged runs' seed-mean ceiling"} if relative
                else {"evidence": A_PRIORI, "source": f"the threshold {threshold:g}"})
        out[threshold_text(threshold, relative)] = (targets, said)
    return out


def _mean_metrics(runs: list[ProbeRun], skip: set[str]) -> dict[str, float]:
    """The mean of every numeric metric over some runs: what a system's finite-size form may read (the
    stage does not know which metric a system needs, e.g. token retrieval's measured attention)."""
    sums: dict[str, list[float]] = {}
    for run in runs:
        for key, value in run.measured.items():
            if key not in skip and isinstance(value, (int, float)) and not isinstance(value, bool):
                sums.setdefault(key, []).append(value)
    return {key: sum(values) / len(values) for key, values in sums.items()}


def _check_targets(sweep: Any, line: str, within_ceiling: bool = False) -> dict[tuple[float, bool], dict[Any, float]]:
    """Per check (threshold, relative) of a line, the metric's value its boundary reaches at each base value: the
    threshold, or for a relative one that fraction of the instance's measured ceiling (curve points carry it as
    ``threshold_value``). Empty without a sweep's curve points. ``within_ceiling``: that value as a fraction of the
    instance's ceiling instead (the fraction for a relative check; threshold / ceiling for an absolute one, left out
    at or above the ceiling): the level among the inputs the model can get right when the ceiling is a cap."""
    out: dict[tuple[float, bool], dict[Any, float]] = {}
    for point in getattr(sweep, "points", None) or []:
        value = getattr(point, "threshold_value", None)
        if point.line == line and point.threshold is not None and value is not None and point.seed is None:
            if within_ceiling:
                ceiling = (getattr(point, "ceiling", None) or {}).get("mean")
                value = point.threshold if point.relative else value / ceiling if ceiling else None
                if value is None or not 0 < value < 1:
                    continue
            out.setdefault((float(point.threshold), bool(point.relative)), {})[point.base_value] = float(value)
    return out


def _finite_size(plan: Any, line: Any, runs: list[ProbeRun], hook: Any,
                 targets: Mapping[Any, float] | None = None) -> dict[str, Any] | None:
    """The realised prediction with each term in the system's finite-size form at the runs' measured metrics; with
    ``targets`` (base value -> the metric's value one check's boundary reaches there), the hook also gets that value
    as ``target`` and the experiment's metric as ``target_metric``, so a form that depends on the level reached
    (token retrieval's argmax cost) is taken at the check's own level. None if a base value has no target."""
    experiment, pack = plan.experiment, plan.pack
    scaling = theory.parse_scaling(line.theory_scaling or line.scaling, variables=pack.variables)
    rows = realised_rows(experiment, pack, line)
    for row, value in zip(rows, experiment.base_values):
        mine = [r for r in runs if r.line == line.label and r.base_value == value]
        row["_measured"] = _mean_metrics(mine, skip={"line", "seed", experiment.base, experiment.size})
        if targets is not None:
            if value not in targets:
                return None
            row["_measured"].update(target=targets[value], target_metric=line.metric or experiment.metric)

    def plain(row: dict) -> dict:
        return {k: v for k, v in row.items() if not k.startswith("_")}

    finite = realised_prediction(pack, scaling, rows, factors=lambda term, row: hook(
        pack.name, term, plain(row), {"config": row["_config"], **row["_measured"]}))
    if finite.get("slope") is None:
        return None
    finite["constants"] = [hook(pack.name, None, plain(row), {"config": row["_config"], **row["_measured"]})
                           for row in rows]
    return finite


@dataclass
class ExperimentFits:
    """Every fit of one experiment and preset, with where the runs came from."""

    experiment: str
    path: str
    preset: str
    kind: str
    store: str
    fits: list[FitResult]
    predictions: dict[str, Any] = field(default_factory=dict)
    sweep: dict[str, Any] = field(default_factory=dict)  # reused / computed / missing / violations
    # the typed records the fits were made from, so that nothing downstream replays the search to rebuild them
    sweep_result: Any = field(default=None, repr=False, compare=False)
    plan: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out = {"schema": FIT_SCHEMA, "experiment": self.experiment, "path": self.path, "preset": self.preset, "kind": self.kind,
               "store": self.store, "sweep": self.sweep, "method": LAW_METHOD if self.kind == "law" else METHOD,
               "predictions": self.predictions, "fits": [f.to_dict() for f in self.fits]}
        # the metric the thresholds are on, which the report's heatmap draws; stated only where it is not
        # accuracy, so that the summary (and the pages drawn from it) of an accuracy experiment stay as they were
        experiment = getattr(self.plan, "experiment", None)
        if experiment is not None:
            if experiment.settings:  # fields this command changed (--set): beside the numbers they changed
                out["set"] = dict(experiment.settings)
            if experiment.metric != "accuracy":
                out["metric"] = experiment.metric
            own = {line.label: line.metric for line in experiment.lines if line.metric}
            if own:
                out["line_metrics"] = own
            if experiment.kind == "law":
                out["law"] = {"name": experiment.law, "metric": experiment.metric, "direction": experiment.direction,
                              "variable": experiment.base}
        return out


# How the numbers were made, stated once next to them (the report prints it).
METHOD = {
    "fit": "OLS of log(param_count) on x, HC3 standard errors, Student-t intervals with n - 2 df",
    "bootstrap": "resample seeds with replacement, refit pooled points, percentile interval "
                 f"({DEFAULT_N_BOOTSTRAP} resamples, numpy default_rng({DEFAULT_BOOTSTRAP_SEED}))",
    "C": "log C = mean(log param_count - x) with slope fixed at 1; HC3 + t interval, and bootstrap over seeds",
    "verdict": "consistent: TOST at level alpha ((1 - 2 alpha) interval inside prediction +- delta); "
               "inconsistent: (1 - alpha) interval outside the band; otherwise inconclusive",
}


# A law experiment's fits: the y is its metric, the x its base variable.
LAW_METHOD = {**METHOD,
              "fit": "OLS of log(metric) (e.g. log(test_error)) on log(base variable), one point per run (line, base "
                     "value, seed), HC3 standard errors, Student-t intervals with n - 2 df",
              "verdict": METHOD["verdict"] + "; the prediction is the law's exponent of the metric against the base "
                                             "along the line (its dominant term)"}
LAW_METHOD.pop("C")


@dataclass(frozen=True)
class StoreReading:
    """What fitting one experiment reads of the results store beside its sweep's own records: the stored runs'
    provenance (:func:`_run_provenance`), the preset's latest freeze and when the judged runs were first stored (the
    evidence labels read both)."""
    provenance: dict
    freeze: Any
    first_run_at: str | None


def _judged_runs(sweep: Any) -> list:
    return [r for r in (getattr(sweep, "runs", None) or []) if getattr(r, "error", None) is None]


def read_store(experiment: Any, results_store: Any, sweep: Any) -> StoreReading:
    """What :func:`fit_experiment` reads of an open store for ``sweep`` of ``experiment`` (a plan or loaded
    experiment)."""
    loaded = experiment.experiment if isinstance(experiment, Plan) else experiment
    judged_runs = _judged_runs(sweep)
    first_run_at = results_store.first_stored(r.config_hash for r in judged_runs) if judged_runs else None
    return StoreReading(_run_provenance(results_store, loaded.name),
                        latest_freeze(results_store, loaded.name, loaded.preset), first_run_at)


def _run_provenance(results_store: Any, experiment_name: str) -> dict[str, Any]:
    """Devices, thread counts, math-library code paths, torch and code versions of the stored runs of this
    experiment (rows stored before the code path was recorded count as "unrecorded"), and the stored rows left out
    because they do not validate (by rowid, with the line the report shows)."""
    rows = results_store.rows(experiment_name)
    count = lambda key: dict(sorted(Counter(str(r.get(key)) for r in rows).items()))  # noqa: E731
    paths = Counter(str((r.get("metrics") or {}).get("math_path", "unrecorded")) for r in rows)
    found = {"stored_runs": len(rows), "devices": count("device"), "threads": count("threads"),
             "math_paths": dict(sorted(paths.items())),
             "torch_versions": count("torch_version"), "stored_code_versions": count("code_version")}
    skipped = getattr(results_store, "skipped_rows", None) or []
    if skipped:  # rows that do not validate: left out of the fits, named by rowid on the report
        found.update(left_out_rows=sorted({row.rowid for row in skipped}), left_out=results_store.left_out_text())
    return found


def predictions_for(experiment: Any) -> dict[str, Any]:
    """theory.predict for each line of a plan (or a loaded experiment), keyed by line label; an entry holds
    ``{"error": message}`` where the pack cannot predict the line (its fits are then inconclusive)."""
    return {label: dict(found) for label, found in plan_of(experiment).predictions.items()}


def fit_experiment(
    experiment: Any,
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    sweep: Any = None,
    delta: float | None = None,
    alpha: float | None = None,
    thresholds: Iterable[float | str] | None = None,
    predicted: float | Mapping[str, Any] | None = None,
    cache: Any = None,
    reading: StoreReading | None = None,
) -> ExperimentFits:
    """Fit and judge what the results store holds for ``experiment`` (an ``empirics.plan.Plan``, a loaded
    experiment, a path or a shipped name); nothing is trained here (``recallkit.sweep_and_fit`` runs the
    sweep first).

    ``sweep``: an ``empirics.search.SweepResult`` just computed for it (else the store is replayed).
    delta / alpha default to the experiment's ``[verdict]`` table, then to the compare defaults.
    ``predicted`` replaces the theory pack's prediction: one slope for every line, or a mapping
    line label -> slope or prediction dict (for theories that are not packs, or to test a wrong one).
    ``thresholds`` keeps only those checks: a number is an absolute threshold, ``"0.5 x ceiling"`` (the report's
    label) a relative one. ``cache``: a ``compare.fit_cache.DiskCache`` the fits are kept in, under a hash of
    every input they are computed from (an unchanged report reuses them; any changed input fits again).
    ``reading``: what :func:`read_store` read of the store for ``sweep`` (given, the store is not opened here: the
    main job fits one experiment in a thread while the next one trains and writes the store).
    """
    plan = experiment if isinstance(experiment, Plan) else plan_of(
        experiment if isinstance(experiment, Experiment) else load_experiment(experiment, preset=preset))
    loaded = plan.experiment
    store_path = str(store) if store is not None else default_store_path()
    delta = delta if delta is not None else loaded.verdict.get("delta", DEFAULT_DELTA)
    alpha = alpha if alpha is not None else loaded.verdict.get("alpha", DEFAULT_ALPHA)
    if thresholds is not None and loaded.kind in ("grid", "law"):
        raise InputError(f"--threshold: {loaded.name} is a {loaded.kind} experiment; it has no thresholds to choose")
    thresholds = _checked_thresholds(loaded, thresholds)
    if reading is None or sweep is None:
        with ResultStore(store_path, readonly=True) as results_store:
            if sweep is None:
                sweep = replay(plan, results_store)
            reading = read_store(plan, results_store, sweep)
    provenance, freeze, first_run_at = reading.provenance, reading.freeze, reading.first_run_at
    judged_runs = _judged_runs(sweep)
    if loaded.kind == "grid":  # no checks: the sweep's cells (sweep_result.runs) are what a report draws
        predictions, realised, fits = {}, {}, []
    else:
        predictions = predictions_for(plan) if predicted is None else _given_predictions(loaded, predicted)
        slopes = {label: (None if "error" in p else p.get("slope_on_x", p)) for label, p in predictions.items()}
        realised = _realised(plan, sweep, cache) if predicted is None else {}
        if loaded.kind == "law":
            options = dict(experiment=loaded.name, base=loaded.base, law=loaded.law, direction=loaded.direction,
                           delta=delta, alpha=alpha)
            fits = cached_fits(cache, [sweep.points, slopes, options, DEFAULT_N_BOOTSTRAP, DEFAULT_BOOTSTRAP_SEED,
                                       "law"], lambda: fit_law_points(sweep.points, slopes, **options))
        else:
            options = dict(experiment=loaded.name, kind=loaded.kind, base=loaded.base, delta=delta, alpha=alpha,
                           thresholds=thresholds, realised=realised)
            fits = cached_fits(cache, [sweep.points, slopes, options, DEFAULT_N_BOOTSTRAP, DEFAULT_BOOTSTRAP_SEED],
                               lambda: fit_boundary_points(sweep.points, slopes, **options))
        _untested_lines(loaded, fits, predictions, predicted is None, delta, alpha)
    primary = {line.label: line.primary for line in loaded.lines if line.primary}
    for fit in fits:
        fit.extra.setdefault("decided_by", decided_by(loaded, fit.line))
        if fit.line in primary:  # the line's one check named before any freeze: counted apart
            fit.extra["primary"] = fit.key.threshold_text == primary[fit.line]
    _judge_evidence(loaded, fits, predictions, freeze, first_run_at,
                    [(r.line, r.base_value, r.seed) for r in judged_runs])
    summary = {"reused": sweep.reused, "computed": sweep.computed, "missing": sweep.missing,
               "failed": sweep.failed, "monotonicity_violations": len(sweep.violations),
               "wall_time_s": round(sweep.wall_time_s, 3), "code_versions": dict(sweep.code_versions),
               **provenance}
    for label, found in realised.items():
        if label in predictions and "error" not in predictions[label]:
            predictions[label]["realised"] = found
    return ExperimentFits(loaded.name, str(loaded.path), loaded.preset, loaded.kind, store_path, fits, predictions,
                          summary, sweep_result=sweep, plan=plan)


def _law_prediction(key: str, prediction: Any) -> TestedPrediction | None:
    """A law's tested prediction: its exponent along the line, from the pack alone."""
    slope, log_power = _tested_slope(prediction, False)
    if slope is None:
        return None
    inputs, _ = _inputs(prediction, {}, "", None, None, False)
    return TestedPrediction(key, slope, "law exponent", inputs, (), log_power)


def _judge_evidence(loaded: Experiment, fits: Sequence[FitResult], predictions: Mapping[str, Any],
                    freeze: Any, first_run_at: str | None, judged: Sequence[tuple[str, Any, int]]) -> None:
    """Every fit's evidence label (``compare.evidence.judge_evidence``): against the latest freeze of the experiment's
    preset in the store, the time its judged runs were stored and the runs (line, base value, seed) a calibration may
    share."""
    for fit in fits:
        doc = fit.extra.get("tested_prediction")
        if fit.verdict.predicted_slope is None:
            tested = None  # not tested (no prediction, or shown for reference only)
        elif doc is not None:
            tested = TestedPrediction.from_dict(doc)
        else:
            tested = _law_prediction(str(fit.key), predictions.get(fit.line))
            if tested is not None:
                fit.extra["tested_prediction"] = tested.to_dict()
        evidence = judge_evidence(tested, experiment=loaded.name, preset=loaded.preset, freeze=freeze,
                                  first_run_at=first_run_at, judged_runs=[j for j in judged if j[0] == fit.line])
        fit.extra.update(evidence.to_dict())


def decided_by(experiment: Experiment, line: str | None) -> str:
    """Which preset a check's verdict comes from, with the base values and seeds it ran: "the medium preset (V = 64
    .. 1024, 5 values; 14 seeds)"."""
    index = next((i for i, candidate in enumerate(experiment.lines) if candidate.label == line), None)
    values = experiment.values_of(index) if index is not None else experiment.base_values
    span = f"{experiment.base} = {min(values):g} .. {max(values):g}, {len(values)} values; " if values else ""
    return f"the {experiment.preset} preset ({span}{len(experiment.seeds)} seeds)"


def _realised(plan: Plan, sweep: Any, cache: Any) -> dict[str, Any]:
    """:func:`realised_predictions`, kept in ``cache`` under all it reads: the experiment and the pack as written
    (their reprs), the plan's realised grid, the runs' metrics; only where the pack's finite-size and all-terms forms
    (a system's code, which may import torch) are recallkit's own, whose source the key holds."""
    system = registry.system_of_pack(plan.experiment.pack) if plan.pack is not None else None
    if system is not None and any(hook and not (isinstance(hook, str) and hook.startswith("recallkit."))
                                  for hook in (system.finite_size, system.all_terms)):
        cache = None
    inputs = [repr(plan.experiment), repr(plan.pack), plan.realised, list(getattr(sweep, "runs", None) or []),
              {f"{line.label} {threshold_text(*key)} {within}": targets for line in plan.experiment.lines
               for within in (False, True)
               for key, targets in _check_targets(sweep, line.label, within_ceiling=within).items()}]
    return cached_document(cache, "realised predictions", inputs, lambda: realised_predictions(plan, sweep))


def _checked_thresholds(loaded: Experiment, thresholds: Iterable[float | str] | None) -> list[tuple[float, bool]] | None:
    """``--threshold`` values as (value, relative) checks, each one the experiment has (one-line error otherwise):
    a number is an absolute threshold, ``"0.5 x ceiling"`` (as the report writes it) a relative one."""
    if thresholds is None:
        return None
    known = [(float(t), False) for t in loaded.thresholds] + [(float(t), True) for t in loaded.relative_thresholds]
    checks = []
    for value in thresholds:
        check = _threshold_check(value)
        if check is None or check not in known:
            raise InputError(f"--threshold: {value!r} is not a threshold of {loaded.name} (its thresholds: "
                             f"{', '.join(threshold_text(t, relative) for t, relative in known)})")
        checks.append(check)
    return checks


def _threshold_check(value: Any) -> tuple[float, bool] | None:
    """(value, relative) of a number or of a label such as ``"0.5 x ceiling"``; None if it is neither."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (float(value), False) if math.isfinite(value) else None
    if isinstance(value, str):
        found = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(x\s*ceiling)?\s*", value)
        if found:
            return float(found[1]), found[2] is not None
    return None


def _given_predictions(loaded: Experiment, predicted: float | Mapping[str, Any]) -> dict[str, Any]:
    """A user's slopes in place of the pack's: one for every line, or per line label."""
    predictions: dict[str, Any] = {}
    for line in loaded.lines:
        given = predicted.get(line.label) if isinstance(predicted, Mapping) else predicted
        if given is None:
            predictions[line.label] = {"error": f"no slope given for line {line.label!r}"}
        elif isinstance(given, Mapping):
            predictions[line.label] = {**given, "source": "given"}
        else:
            predictions[line.label] = {"slope_on_x": float(given), "source": "given"}
    return predictions


def _untested_lines(loaded: Experiment, fits: list[FitResult], predictions: Mapping[str, Any], from_pack: bool,
                    delta: float, alpha: float) -> None:
    """Fits without a tested prediction (the pack cannot predict the line, the file marks it reference-only)
    become inconclusive, with the reason."""
    reference_only = bool(loaded.verdict.get("reference_only")) and from_pack
    line_notes = {ln.label: ln.reference_note for ln in loaded.lines if ln.reference_note} if from_pack else {}
    shown = Path(loaded.path).name  # the file's name, not where it is installed: the report reads the same anywhere
    for result in fits:
        error = predictions.get(result.line, {}).get("error")
        if reference_only and not error:
            why = loaded.verdict.get("reference_note") or (
                f"pack {loaded.pack}'s slope is for another training algorithm than {loaded.trainer}")
            error = f"{shown}: verdict.reference_only: {why}; shown for reference, not tested"
        elif result.line in line_notes and not error:
            error = f"{shown}: line {result.line!r}: reference_note: {line_notes[result.line]}; shown for reference, not tested"
        if error:
            reason = f"no predicted slope for this line: {error}"
            if result.fit is None:  # keep the data's own reason too
                reason += f"; and {result.verdict.reason}"
            result.verdict = type(result.verdict)("inconclusive", reason, None, None, delta, alpha)
            for key in ("tested_prediction", "predicted_slope_conditional", "verdict_conditional",
                        "conditional_reading_on"):  # nothing is tested on this line, so nothing is read beside it
                result.extra.pop(key, None)

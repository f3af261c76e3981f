"""Run a sweep (training only what the results store lacks), then fit and judge it: the convenience
behind ``recallkit.assert_scaling``, the ``scaling_law`` pytest marker and ``recallkit fit``.

Orchestration lives here, on top of the stages: ``empirics`` trains and stores, ``compare`` fits and
judges what is stored (:func:`recallkit.compare.fit_experiment`) and never trains.
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from recallkit.fail_on import evidence_short, required_evidence
from recallkit.compare.assertions import (ExperimentFits, StoreReading, check_verdicts, default_store_path,
                                          expected_verdicts, read_store)
from recallkit.compare.assertions import fit_experiment as fit_stored
from recallkit.compare.claims import CLAIM_VERDICTS, check_claims, judge_claims
from recallkit.empirics.executors import make_executor
from recallkit.empirics.plan import Plan, plan
from recallkit.empirics.search import run_sweep
from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError

__all__ = ["assert_claim", "assert_scaling", "judge_experiment_claims", "sweep_and_fit", "sweep_and_read"]


def sweep_and_fit(
    experiment: Any,
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    run: bool = True,
    executor: Any = None,
    progress: bool = False,
    log: Any = sys.stderr,
    settings: Any = (),
    **fit_options: Any,
) -> ExperimentFits:
    """Search (training only what the store lacks when ``run``; else replaying it), fit, decide.

    ``experiment``: an ``empirics.plan.Plan``, a path or a shipped experiment's name (planned here with
    ``preset``). A law experiment (``kind = "law"``) runs every (line, base value, seed) and fits log(metric)
    against log(base) per line; a grid experiment is swept and returned with no fits (its cells are
    ``sweep_result.runs``, for a heatmap). ``fit_options`` (delta, alpha, thresholds, predicted) go to
    :func:`recallkit.compare.fit_experiment`, which fits the search's own records (with ``run``, the sweep just made;
    without, the store replayed once). ``settings``: fields of the experiment file changed for this call
    (``--set``: ``(("verdict.delta", 0.1), ...)``, :mod:`recallkit.empirics.overrides`).
    """
    planned = experiment if isinstance(experiment, Plan) else plan(experiment, preset=preset, settings=settings)
    store_path = str(store) if store is not None else default_store_path()
    if not run:
        planned.search_experiment(" (its system runs it: recallkit report)")
        return fit_stored(planned, store=store_path, preset=preset, **fit_options)
    own_executor = executor is None
    executor = make_executor("local", threads=1) if own_executor else executor  # one thread, as sweep and report
    try:
        sweep, reading = sweep_and_read(planned, store_path, executor, progress=progress, log=log)
    finally:
        if own_executor:
            executor.close()
    return fit_stored(planned, store=store_path, preset=preset, sweep=sweep, reading=reading, **fit_options)


def sweep_and_read(planned: Plan, store: str | Path, executor: Any, *, progress: bool = False,
                   log: Any = sys.stderr) -> tuple[Any, StoreReading]:
    """A search experiment's sweep (training what the store lacks) and what its fit reads of the store
    (:func:`recallkit.compare.assertions.read_store`), through one connection: the report's sweeping thread
    runs this while the main thread fits the experiment before, and the fit then opens no store."""
    planned.search_experiment(" (its system runs it: recallkit report)")
    with ResultStore(str(store)) as results_store:
        sweep = run_sweep(planned, results_store, executor, progress=progress, log=log)
        return sweep, read_store(planned, results_store, sweep)


def fit_experiment(*args: Any, **kwargs: Any) -> ExperimentFits:
    """Deprecated name of :func:`sweep_and_fit` (``recallkit.compare.fit_experiment`` is the one that never
    trains); kept so that existing scripts run, with a DeprecationWarning."""
    warnings.warn("recallkit.fit_experiment is now recallkit.sweep_and_fit", DeprecationWarning, stacklevel=2)
    return sweep_and_fit(*args, **kwargs)


def assert_scaling(
    experiment: str | Path,
    expect: str | Iterable[str] = "consistent",
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    threshold: float | str | Iterable[float | str] | None = None,
    delta: float | None = None,
    alpha: float | None = None,
    predicted: float | Mapping[str, Any] | None = None,
    run: bool = True,
    progress: bool = False,
    evidence: str | None = None,
) -> ExperimentFits:
    """Run (reusing the store) and fit ``experiment`` (a path or a shipped name); assert every fitted line
    and threshold has a verdict in ``expect``. ``threshold`` restricts the check to one threshold (a number, or
    ``"0.5 x ceiling"`` for a relative one, as the report labels it) or a list of them; ``predicted`` replaces the
    theory pack's prediction (see :func:`sweep_and_fit`). ``evidence`` ("confirmatory" or "conditional") also
    asserts that every verdict's evidence is at least that strong (``compare.evidence``: "confirmatory" needs a
    freeze before the runs, ``recallkit freeze``)."""
    wanted = expected_verdicts(expect)
    required = required_evidence(evidence)
    one = isinstance(threshold, (int, float, str))  # a threshold, or a list of them
    thresholds = None if threshold is None else ([threshold] if one else threshold)
    fitted = sweep_and_fit(experiment, store=store, preset=preset, run=run, progress=progress, delta=delta,
                           alpha=alpha, thresholds=thresholds, predicted=predicted)
    check_verdicts(fitted.fits, wanted, f"scaling law of {fitted.experiment} ({fitted.preset} preset)")
    short = evidence_short([f.to_dict() for f in fitted.fits], required)
    if short:
        raise AssertionError(f"scaling law of {fitted.experiment} ({fitted.preset} preset): {short}")
    return fitted


def judge_experiment_claims(
    experiment: str | Path,
    claim: str | Iterable[str] | None = None,
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    alpha: float | None = None,
    run: bool = True,
    progress: bool = False,
) -> list[Any]:
    """Run (reusing the store; ``run=False`` replays it) and fit ``experiment`` and every other experiment its
    ``[[claims]]`` name, then judge the claims (all, or those with the id(s) ``claim``): a list of
    :class:`recallkit.compare.claims.ClaimResult`. ``alpha`` replaces the level of every claim."""
    planned = experiment if isinstance(experiment, Plan) else plan(experiment, preset=preset)
    loaded = planned.search_experiment(", so it has no [[claims]] to judge")
    claims = list(loaded.claims)
    if not claims:
        raise InputError(f"{loaded.path}: no [[claims]] to judge")
    if claim is not None:
        wanted = [claim] if isinstance(claim, str) else list(claim)
        ids = [c.id for c in claims]
        for name in wanted:
            if name not in ids:
                raise InputError(f"claim: {loaded.name} has no claim {name!r} (its claims: {', '.join(ids)})")
        claims = [c for c in claims if c.id in wanted]
    if alpha is not None:
        claims = [replace(c, alpha=alpha) for c in claims]
    fitted = sweep_and_fit(planned, store=store, preset=preset, run=run, progress=progress)
    others: dict[str, Any] = {}
    for side in [c.a for c in claims] + [c.b for c in claims]:
        if side.experiment and side.experiment != loaded.name and side.experiment not in others:
            try:
                others[side.experiment] = sweep_and_fit(side.experiment_path or side.experiment, store=store,
                                                        preset=preset, run=run, progress=progress)
            except InputError as exc:
                others[side.experiment] = f"experiment {side.experiment} cannot be fitted in preset {preset}: {exc}"
    return judge_claims(fitted, claims, experiment=loaded.name, preset=preset, other_fits=others)


def assert_claim(
    experiment: str | Path,
    claim: str | Iterable[str] | None = None,
    expect: str | Iterable[str] = "consistent",
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    alpha: float | None = None,
    run: bool = True,
    progress: bool = False,
) -> list[Any]:
    """Judge ``experiment``'s comparative claims (all, or the id(s) ``claim``; see
    :func:`judge_experiment_claims`) and assert each verdict is in ``expect`` (default ``consistent``):
    AssertionError with the claim, both sides and the reason otherwise. Returns the claim results."""
    wanted = (expect,) if isinstance(expect, str) else tuple(expect)
    if not wanted or any(v not in CLAIM_VERDICTS for v in wanted):
        raise InputError(f"expect: expected one of {', '.join(CLAIM_VERDICTS)} (or a list of them), got {expect!r}")
    results = judge_experiment_claims(experiment, claim, store=store, preset=preset, alpha=alpha, run=run,
                                      progress=progress)
    check_claims(results, wanted, f"claims of {results[0].experiment if results else experiment} ({preset} preset)")
    return results

"""Run a sweep (training only what the results store lacks), then fit and judge it: the convenience
behind ``recallkit.assert_scaling``, the ``scaling_law`` pytest marker and ``recallkit fit``.

Orchestration lives here, on top of the stages: ``empirics`` trains and stores, ``compare`` fits and
judges what is stored (:func:`recallkit.compare.fit_experiment`) and never trains.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from recallkit.compare.assertions import (ExperimentFits, check_verdicts, default_store_path, expected_verdicts)
from recallkit.compare.assertions import fit_experiment as fit_stored

__all__ = ["assert_scaling", "fit_experiment"]


def fit_experiment(
    experiment: str | Path,
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    run: bool = True,
    executor: Any = None,
    progress: bool = False,
    log: Any = sys.stderr,
    **fit_options: Any,
) -> ExperimentFits:
    """Search (training only what the store lacks when ``run``; else replaying it), fit, decide.

    ``experiment``: a path or a shipped experiment's name. ``fit_options`` (delta, alpha, thresholds,
    predicted) go to :func:`recallkit.compare.fit_experiment`.
    """
    from recallkit.empirics.experiment import load_experiment

    loaded = load_experiment(experiment, preset=preset)
    store_path = str(store) if store is not None else default_store_path()
    sweep = None
    if run:
        from recallkit.empirics.executors import make_executor
        from recallkit.empirics.search import run_sweep
        from recallkit.empirics.store import ResultStore
        from recallkit.theory.errors import InputError

        if loaded.kind == "grid":
            raise InputError(f"{loaded.path}: kind = 'grid' has no boundary points to fit (use a min_size or "
                             f"max_capacity experiment)")
        from recallkit.interrupts import watch_store

        watch_store(store_path)
        own_executor = executor is None
        executor = make_executor("local") if own_executor else executor
        try:
            with ResultStore(store_path) as results_store:
                sweep = run_sweep(loaded, results_store, executor, progress=progress, log=log)
        finally:
            if own_executor:
                executor.close()
    return fit_stored(loaded, store=store_path, preset=preset, sweep=sweep, **fit_options)


def assert_scaling(
    experiment: str | Path,
    expect: str | Iterable[str] = "consistent",
    *,
    store: str | Path | None = None,
    preset: str = "quick",
    threshold: float | Iterable[float] | None = None,
    delta: float | None = None,
    alpha: float | None = None,
    predicted: float | Mapping[str, Any] | None = None,
    run: bool = True,
    progress: bool = False,
) -> ExperimentFits:
    """Run (reusing the store) and fit ``experiment`` (a path or a shipped name); assert every fitted line
    and threshold has a verdict in ``expect``. ``threshold`` restricts the check to one threshold or a
    list of them; ``predicted`` replaces the theory pack's prediction (see :func:`fit_experiment`)."""
    wanted = expected_verdicts(expect)
    thresholds = None if threshold is None else ([threshold] if isinstance(threshold, (int, float)) else threshold)
    fitted = fit_experiment(experiment, store=store, preset=preset, run=run, progress=progress, delta=delta,
                            alpha=alpha, thresholds=thresholds, predicted=predicted)
    check_verdicts(fitted.fits, wanted, f"scaling law of {fitted.experiment} ({fitted.preset} preset)")
    return fitted

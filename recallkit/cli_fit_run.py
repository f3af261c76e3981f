"""What ``recallkit fit`` does once its arguments are read: sweep and fit, judge the claims, print, --fail-on.

Apart from :mod:`recallkit.cli_fit` (the command's options and help), because this side imports the fits and
the pipeline (scipy, matplotlib and sympy, about 1.5 s) and ``recallkit fit --help`` must not.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from typing import Any

import typer

from recallkit import assertions, cli_fit
from recallkit.cli_output import RunFailures, json_text, raise_if_failed, run_failures
from recallkit.compare.claims import describe_claim
from recallkit.empirics.executors import make_executor
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.search_types import MISSING
from recallkit.empirics.store import ResultStore, default_store_path
from recallkit.fail_on import evidence_short, verdicts_matching
from recallkit.interrupts import watch_store
from recallkit.pipeline import judge_loaded_claims
from recallkit.reports.pdf import claim_rows
from recallkit.theory.errors import RecallkitError

__all__ = ["fit", "judge_claims"]


def judge_claims(fitted: Any, *, preset: str, alpha: Any) -> list:
    """The experiment's [[claims]] judged on the fits just made (a side in another experiment: its stored runs,
    nothing trained for it)."""
    if fitted.plan is not None:  # the experiment as planned for the fit: not read again
        loaded = fitted.plan.experiment
    else:
        try:
            loaded = load_experiment(fitted.path, preset=preset)
        except RecallkitError:  # the fits did not come from a file this process can read (a stand-in fit)
            return []
    if not loaded.claims:
        return []
    claims = [replace(c, alpha=alpha) for c in loaded.claims] if alpha is not None else None
    return judge_loaded_claims(loaded, fitted, fitted.store, loaded.preset, claims=claims)


def fit(experiment: str, *, preset: str, store: str | None, run: bool, threshold: list[float] | None,
        delta: float | None, alpha: float | None, device: str, as_json: bool, wanted: Any, required: Any = None,
        settings: Any = ()) -> None:
    """``recallkit fit`` with its arguments checked (``wanted``: the parsed --fail-on verdicts)."""
    executor = None
    if run:
        # one torch thread, as sweep, train and report use, so a stored row does not depend on which command trained it
        executor = make_executor("local", device=None if device == "auto" else device, threads=1)
        watch_store(store or default_store_path())  # Ctrl-C then names the store and its row count
    try:
        # through the module, so that a test's stand-in for sweep_and_fit is used
        fitted = assertions.sweep_and_fit(experiment, store=store, preset=preset, run=run, executor=executor,
                                          progress=not as_json and sys.stderr.isatty(), delta=delta, alpha=alpha,
                                          thresholds=threshold, log=sys.stderr, settings=settings)
    finally:
        if executor is not None:
            executor.close()
    doc = fitted.to_dict()
    claims = judge_claims(fitted, preset=preset, alpha=alpha)
    if claims:
        doc["claims"] = [c.to_dict() for c in claims]
    sweep = doc["sweep"]
    failures = _failures(fitted)
    counts = (f"reused {sweep['reused']} / computed {sweep['computed']}"
              + (f" / missing {sweep['missing']}" if sweep.get("missing") else ""))
    if as_json:
        typer.echo(json_text(doc))
        typer.echo(counts, err=True)  # after the document: when it cannot be written, the error is the one line
    else:
        typer.echo(counts, err=True)
        typer.echo(cli_fit.format_table(doc))
        if claims:
            typer.echo("\ncomparative claims ([[claims]]; stored runs only for a side in another experiment):")
            for c in claims:
                typer.echo(describe_claim(c))
    matching = None
    if wanted:  # a claim is a check too, as in the report (a claim not run in this preset is none)
        matching = verdicts_matching(doc["fits"] + claim_rows({"name": fitted.experiment, "claims": doc.get("claims", [])}),
                                     wanted)
    if matching:
        typer.echo(matching, err=True)
    short = evidence_short(doc["fits"] + claim_rows({"name": fitted.experiment, "claims": doc.get("claims", [])}),
                           required)
    if short:
        typer.echo(short, err=True)
    raise_if_failed(failures)  # exit 3: asked-for work failed, before --fail-on's exit 1
    if matching or short:
        raise typer.Exit(1)


def _failures(fitted: Any) -> RunFailures:
    """The fitted experiment's runs that raised or gave non-finite metrics (as the store holds them), of all its
    runs (a run missing from the store with --no-run is neither); from the sweep's counts alone where the fits carry
    no sweep (a stand-in fit)."""
    result = getattr(fitted, "sweep_result", None)
    if result is None:
        sweep = getattr(fitted, "sweep", None) or {}
        raised = int(sweep.get("failed", 0) or 0)
        total = raised + sum(int(sweep.get(key, 0) or 0) for key in ("reused", "computed"))
        return RunFailures(total=total, raised=raised)
    runs = [(run.config_hash, run.error) for run in result.runs if run.error != MISSING.message]  # not failed
    extra = max(0, int(result.failed or 0) - sum(error is not None for _, error in runs))
    store = getattr(fitted, "store", None)
    if store is None or not any(error is None for _, error in runs):
        return run_failures(runs, None, extra)
    try:
        with ResultStore(store, readonly=True) as db:
            return run_failures(runs, db, extra)
    except RecallkitError:  # the store went away since the fit read it: what the sweep counted
        return run_failures(runs, None, extra)

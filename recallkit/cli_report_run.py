"""What ``recallkit report`` does once its arguments are read: check the preset, run the main job, say where the
report is and exit 1 on a failure or a --fail-on verdict.

Apart from :mod:`recallkit.cli_report` (the command's options and help), because this side imports the whole
pipeline (matplotlib, scipy and sympy, about 1.5 s) and ``recallkit report --help`` must not.
"""
from __future__ import annotations

import json
from typing import Any

import typer

from recallkit.empirics import cost
from recallkit.empirics.experiment import presets_in, read_experiment_file, resolve_experiment
from recallkit.fail_on import evidence_short, verdicts_matching
from recallkit.interrupts import watch_store
from recallkit.pipeline import default_experiments, report_store, run_report
from recallkit.report_settings import ReportSettings
from recallkit.reports.render import env_jobs
from recallkit.theory.errors import InputError, RecallkitError

__all__ = ["run"]


def run(settings: ReportSettings, experiments: list[str], *, limit: float, wanted: Any, required: Any = None) -> None:
    """``recallkit report`` with its arguments checked: ``experiments`` as given, ``limit`` (--max-cost) and
    ``wanted`` (the --fail-on verdicts) read."""
    env_jobs()  # read when the pages are drawn, after every experiment has run: a bad value fails now instead
    _check_preset(settings.preset, experiments)
    watch_store(report_store(settings))  # Ctrl-C then names the store and its row count
    with cost.budget(limit):  # one budget for every experiment of the report
        pdf = run_report(settings)
    typer.echo(f"report: {pdf}")
    typer.echo(f"summary: {pdf.parent / 'summary.json'}")
    summary = json.loads((pdf.parent / "summary.json").read_text())
    failures = summary.get("failures") or []
    if failures:
        typer.echo(f"error: {len(failures)} experiment(s) failed and are listed in the report and in summary.json "
                   f"(failures); the others are reported", err=True)
    matching = verdicts_matching(summary.get("entries", []), wanted) if wanted else None
    if matching:
        typer.echo(matching, err=True)
    short = evidence_short(summary.get("entries", []), required)
    if short:
        typer.echo(short, err=True)
    if failures or matching or short:
        raise typer.Exit(1)


def _check_preset(preset: str, experiments: list[str]) -> None:
    """A --preset that none of the report's experiments defines is one line before anything runs (each
    experiment failed on its own and the report held nothing but those failures). One that some define runs
    in those, the others failing alone as before; a file that cannot be read is left to the pipeline, which
    reports it."""
    paths = []
    for name in experiments:
        try:
            paths.append(resolve_experiment(name))
        except RecallkitError:
            continue
    defined: set[str] = set()
    for path in paths if experiments else default_experiments():
        try:
            defined |= presets_in(read_experiment_file(path))
        except RecallkitError:
            continue
    if defined and preset not in defined:
        raise InputError(f"--preset: expected a preset that these experiments define ({', '.join(sorted(defined))}), "
                         f"got {preset!r}")

"""What ``recallkit report`` does once its arguments are read: check the preset and that --out can be written, run
the main job, say where the report is, and exit 3 when an experiment or a run failed (saying how many), else 1 on a
--fail-on verdict.

Apart from :mod:`recallkit.cli_report` (the command's options and help), because this side imports the whole
pipeline (matplotlib, scipy and sympy, about 1.5 s) and ``recallkit report --help`` must not.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from recallkit.cli_output import RunFailures, run_failures
from recallkit.cli_report import report_outcome
from recallkit.empirics import cost
from recallkit.empirics.files import check_writable
from recallkit.empirics.executors import check_dask
from recallkit.empirics.experiment import presets_in, read_experiment_file, resolve_experiment
from recallkit.interrupts import watch_store
from recallkit.empirics.search_types import MISSING
from recallkit.empirics.store import ResultStore
from recallkit.pipeline import default_experiments, report_store, run_report
from recallkit.report_replay import record as record_report, replay_key
from recallkit.report_settings import ReportSettings
from recallkit.reports.render import env_jobs
from recallkit.theory.errors import InputError, RecallkitError, WorkFailed

__all__ = ["run"]


def run(settings: ReportSettings, experiments: list[str], *, limit: float, wanted: Any, required: Any = None) -> None:
    """``recallkit report`` with its arguments checked: ``experiments`` as given, ``limit`` (--max-cost) and
    ``wanted`` (the --fail-on verdicts) read."""
    if settings.executor == "dask":
        check_dask()  # the extra not installed: one line before anything is checked or planned
    env_jobs()  # read when the pages are drawn, after every experiment has run: a bad value fails now instead
    _check_preset(settings.preset, experiments)
    out = Path(settings.out_dir)
    if not (out.exists() and not out.is_dir()):  # a file there is an input error the pipeline names
        check_writable(out, "--out")  # before anything is trained: exit 3, one line
    watch_store(report_store(settings))  # Ctrl-C then names the store and its row count
    before = replay_key(settings)
    with cost.budget(limit):  # one budget for every experiment of the report
        pdf = run_report(settings)
    summary, flagged = report_outcome(pdf, wanted, required)
    failed = _failed_work(summary, report_store(settings))
    if failed:  # exit 3: asked-for work failed (before --fail-on's exit 1)
        raise WorkFailed(failed)
    if before is not None and replay_key(settings) == before:  # it trained and stored nothing: the next one replays it
        record_report(settings, before)
    if flagged:
        raise typer.Exit(1)


def _failed_work(summary: dict, store: Path) -> str | None:
    """One line saying how many experiments of the report failed and how many of its runs raised or gave
    non-finite metrics (as the store holds them); None when nothing failed."""
    failures = summary.get("failures") or []
    experiments = summary.get("experiments") or []
    runs = _run_failures(experiments, store)
    parts = []
    if failures:
        parts.append(f"{len(failures)} of {len(failures) + len(experiments)} experiments failed and are listed in the "
                     f"report and in summary.json (failures); the others are reported")
    if runs.failed:
        parts.append(runs.line())
    return "; ".join(parts) or None


def _run_failures(experiments: list[dict], store: Path) -> RunFailures:
    """The report's runs (every config hash its experiments read, and each heatmap cell whose run raised) that
    raised or gave non-finite metrics."""
    runs: dict[str, str | None] = {}
    for entry in experiments:
        for config_hash in entry.get("config_hashes") or ():
            runs.setdefault(str(config_hash), None)
        for line in entry.get("lines") or ():
            for record in (line.get("heatmap") or ()) if isinstance(line, dict) else ():
                if (isinstance(record, dict) and record.get("error") not in (None, MISSING.message)
                        and record.get("config_hash")):
                    runs[str(record["config_hash"])] = str(record["error"])
    if not runs:
        return RunFailures()
    try:
        with ResultStore(store, readonly=True) as db:
            return run_failures(runs.items(), db)
    except RecallkitError:  # the store cannot be read now: the runs that raised are still known
        return run_failures(runs.items(), None)


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

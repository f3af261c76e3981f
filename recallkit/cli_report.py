"""``recallkit report``: the main job (theory -> sweeps -> fits -> verdicts -> PDF)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from recallkit.cli_sweep import MAX_PROCESSES, MAX_THREADS
from recallkit.empirics import cost
from recallkit.empirics.overrides import SET_HELP, parse_settings
from recallkit.fail_on import fail_on_verdicts, required_evidence
from recallkit.report_settings import ReportSettings
from recallkit.theory.errors import InputError

__all__ = ["register", "report"]


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    experiments: Optional[List[str]] = typer.Argument(
        None, help="Experiment files (or shipped names such as assoc_memory_linear); default: the shipped quick set."),
    out: Path = typer.Option(Path("reports/out"), "--out", help="Folder for the PDF, figures/ and summary.json."),
    preset: str = typer.Option("quick", "--preset", help="Preset of every experiment: quick (this CPU) or paper."),
    store: Optional[Path] = typer.Option(
        None, "--store", help="Results store (SQLite); default $RECALLKIT_STORE or results/recallkit.db. Reused runs are not retrained."),
    executor: str = typer.Option("local", "--executor", help="local (in-process batched engine) or dask."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address tcp://HOST:PORT."),
    dask_local: Optional[int] = typer.Option(None, "--dask-local", min=1, max=MAX_PROCESSES, help="Start a Dask LocalCluster with N workers."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or cuda:N (default: cuda when present, else cpu)."),
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1, max=MAX_PROCESSES, help="local executor: processes training at once (default: one per usable core); the numbers do not depend on it."),
    threads: int = typer.Option(1, "--threads", min=1, max=MAX_THREADS, help="torch threads per process (1 is fastest for these small models on a shared CPU)."),
    set_fields: Optional[List[str]] = typer.Option(None, "--set", help=SET_HELP + "; a system's runner experiment runs "
                                                                               "as written"),
    probes: Optional[bool] = typer.Option(None, "--probes/--no-probes", help="Include the systems' diagnostics (token retrieval's term probes and gradient-access check, when the report has a token-retrieval experiment). Default: in the main job (no experiment named), not in a report of named experiments."),
    png: bool = typer.Option(False, "--png", help="Also write each page as PNG under figures/ (PDF only by default)."),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", min=1, max=MAX_PROCESSES, help="Processes drawing the pages (default: one per core this process may use, none for a few pages)."),
    redraw: bool = typer.Option(
        False, "--redraw", help="Draw every page, even those the previous report in --out or the page cache ($RECALLKIT_CACHE, "
                        "else ~/.cache/recallkit; off to disable) holds for the same input and code."),
    fail_on: Optional[List[str]] = typer.Option(
        None, "--fail-on", help="Exit 1 when any check's verdict is this (inconsistent | inconclusive; repeatable or "
                                "comma-separated), after writing the report: for CI."),
    require: Optional[str] = typer.Option(
        None, "--require", help="Exit 1 when any check's evidence is weaker than this (confirmatory | conditional): "
                                "a verdict is confirmatory only when its prediction was frozen (recallkit freeze) "
                                "before its runs and reads nothing measured on them."),
    max_cost: Optional[str] = typer.Option(
        None, "--max-cost", help="Refuse training estimated above this much compute over the whole report, e.g. 2h, "
                                 "30m or inf (default 2h, or $RECALLKIT_MAX_COST); searches are priced round by round."),
) -> None:
    """Run the quick preset of the shipped experiments end to end and write reports/out/recallkit-report.pdf.

    Trains only what the results store lacks, fits exponents with confidence intervals, gives a
    verdict per experiment and threshold, and writes the PDF (with an outline and a contents page),
    every page alone as PDF (and PNG with --png) under figures/, and summary.json. Pages unchanged since
    the previous report in --out are reused, not redrawn. Progress goes to stderr; the last lines say
    where the report is. With --fail-on, exit 1 when a verdict matches."""
    limit = cost.max_cost_allowed(max_cost)
    if workers is not None and workers > 1 and executor != "local":
        raise InputError("--workers: only with --executor local (a Dask cluster has its own workers)")
    wanted = fail_on_verdicts(fail_on)
    required = required_evidence(require)
    fields = parse_settings(set_fields)
    if probes is None:  # a report of named experiments runs those; the main job adds the diagnostics
        probes = not experiments
    settings = ReportSettings(experiments=[Path(e) for e in (experiments or [])], out_dir=out, preset=preset,
                              store=store, executor=executor, scheduler=scheduler, dask_local=dask_local,
                              device=device, threads=threads, probes=probes, png=png, jobs=jobs, redraw=redraw, workers=workers,
                              settings=fields)
    from recallkit.cli_report_run import run  # the whole pipeline: matplotlib, scipy and sympy, about 1.5 s

    run(settings, experiments or [], limit=limit, wanted=wanted, required=required)



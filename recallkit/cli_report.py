"""``recallkit report``: the main job (theory -> sweeps -> fits -> verdicts -> PDF)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from recallkit.fail_on import fail_on_verdicts, verdicts_matching
from recallkit.interrupts import watch_store
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
    dask_local: Optional[int] = typer.Option(None, "--dask-local", help="Start a Dask LocalCluster with N workers."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or cuda:N (default: cuda when present, else cpu)."),
    workers: Optional[int] = typer.Option(
        None, "--workers", help="local executor: processes training at once (default: one per usable core); the numbers do not depend on it."),
    threads: int = typer.Option(1, "--threads", help="torch threads per process (1 is fastest for these small models on a shared CPU)."),
    probes: bool = typer.Option(True, "--probes/--no-probes", help="Include the token-retrieval term probes."),
    png: bool = typer.Option(False, "--png", help="Also write each page as PNG under figures/ (PDF only by default)."),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", help="Processes drawing the pages (default: one per core this process may use, none for a few pages)."),
    redraw: bool = typer.Option(
        False, "--redraw", help="Draw every page, even those the previous report in --out or the page cache ($RECALLKIT_CACHE, "
                        "else ~/.cache/recallkit; off to disable) holds for the same input and code."),
    fail_on: Optional[List[str]] = typer.Option(
        None, "--fail-on", help="Exit 1 when any check's verdict is this (inconsistent | inconclusive; repeatable or "
                                "comma-separated), after writing the report: for CI."),
) -> None:
    """Run the quick preset of the shipped experiments end to end and write reports/out/recallkit-report.pdf.

    Trains only what the results store lacks, fits exponents with confidence intervals, gives a
    verdict per experiment and threshold, and writes the PDF (with an outline and a contents page),
    every page alone as PDF (and PNG with --png) under figures/, and summary.json. Pages unchanged since
    the previous report in --out are reused, not redrawn. Progress goes to stderr; the last lines say
    where the report is. With --fail-on, exit 1 when a verdict matches."""
    # the whole pipeline: matplotlib and scipy (about 1 s to import), which --help must not load
    from recallkit.pipeline import ReportSettings, report_store, run_report

    if threads < 1:
        raise InputError(f"--threads: expected a positive integer, got {threads}")
    if jobs is not None and jobs < 1:
        raise InputError(f"--jobs: expected a positive integer, got {jobs}")
    if workers is not None and workers < 1:
        raise InputError(f"--workers: expected a positive integer, got {workers}")
    if workers is not None and workers > 1 and executor != "local":
        raise InputError("--workers: only with --executor local (a Dask cluster has its own workers)")
    wanted = fail_on_verdicts(fail_on)
    settings = ReportSettings(experiments=[Path(e) for e in (experiments or [])], out_dir=out, preset=preset,
                              store=store, executor=executor, scheduler=scheduler, dask_local=dask_local,
                              device=device, threads=threads, probes=probes, png=png, jobs=jobs, redraw=redraw, workers=workers)
    watch_store(report_store(settings))  # Ctrl-C then names the store and its row count
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
    if failures or matching:
        raise typer.Exit(1)

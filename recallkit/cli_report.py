"""``recallkit report``: the main job (theory -> sweeps -> fits -> verdicts -> PDF)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


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
    threads: int = typer.Option(1, "--threads", help="torch threads per process (1 is fastest for these small models on a shared CPU)."),
    probes: bool = typer.Option(True, "--probes/--no-probes", help="Include the token-retrieval term probes."),
) -> None:
    """Run the quick preset of the shipped experiments end to end and write reports/out/recallkit-report.pdf.

    Trains only what the results store lacks, fits exponents with confidence intervals, gives a
    verdict per experiment and threshold, and writes the PDF, every figure alone (PNG and PDF) and
    summary.json. Progress goes to stderr; the last line says where the report is."""
    from recallkit.pipeline import ReportSettings, run_report

    if threads < 1:
        from recallkit.theory.errors import InputError

        raise InputError(f"--threads: expected a positive integer, got {threads}")
    settings = ReportSettings(experiments=[Path(e) for e in (experiments or [])], out_dir=out, preset=preset,
                              store=store, executor=executor, scheduler=scheduler, dask_local=dask_local,
                              device=device, threads=threads, probes=probes)
    pdf = run_report(settings)
    typer.echo(f"report: {pdf}")
    typer.echo(f"summary: {pdf.parent / 'summary.json'}")
    import json

    failures = json.loads((pdf.parent / "summary.json").read_text()).get("failures") or []
    if failures:
        typer.echo(f"error: {len(failures)} experiment(s) failed and are listed in the report and in summary.json "
                   f"(failures); the others are reported", err=True)
        raise typer.Exit(1)

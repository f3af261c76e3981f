"""``recallkit figures EXP``: an experiment's data figures, one file each, ready for a paper."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from recallkit.theory.errors import InputError

__all__ = ["figures", "register"]


def register(app: typer.Typer) -> None:
    app.command("figures")(figures)


def figures(
    experiment: str = typer.Argument(..., metavar="EXP", help="Experiment file or shipped name, e.g. tr_fig2_attention_only."),
    fmt: str = typer.Option("pdf", "--format", help="pdf | svg | png."),
    out: Path = typer.Option(Path("figures"), "--out", help="Folder for the figures (made if missing)."),
    store: Optional[str] = typer.Option(
        None, "--store", help="Results store (SQLite); default $RECALLKIT_STORE or results/recallkit.db. Nothing is trained."),
    preset: str = typer.Option("quick", "--preset", help="Preset whose results are drawn."),
) -> None:
    """Write the experiment's figures (phase diagram with its lines, accuracy heatmap per line, one fit
    per line and threshold, capacity law, d_min) each as its own file: cut to the drawing, no page
    title or caption, fonts embedded as TrueType. Drawn from what the store holds; the numbers are
    the report's."""
    # both import matplotlib (about 0.5 s), the pipeline scipy too: only this command needs them, not --help
    from recallkit.pipeline import search_entry
    from recallkit.reports.paper import FORMATS, paper_figures  # matplotlib, as the comment above says

    if fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, expected a folder")
    entry = search_entry(experiment, store=store, preset=preset, log=sys.stderr)
    for path in paper_figures(entry, out, fmt):
        typer.echo(str(path))

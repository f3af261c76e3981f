"""``recallkit figures EXP``: an experiment's data figures, one file each, ready for a paper."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

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
    style: str = typer.Option("paper", "--style", help="paper: the drawing alone (no page title, verdict, caption or "
                                                       "notes) | report: each figure as the report draws it."),
) -> None:
    """Write the experiment's figures (phase diagram with its lines, accuracy heatmap per line, one fit
    per line and threshold, capacity law, d_min) each as its own file: cut to the drawing, no page
    title or caption, fonts embedded as TrueType. Drawn from what the store holds; the numbers are
    the report's."""
    from recallkit.cli_figures_run import write_figures  # matplotlib and the pipeline (scipy, sympy), about 1.5 s

    write_figures(experiment, fmt=fmt, out=out, store=store, preset=preset, style=style)

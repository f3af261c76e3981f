"""``recallkit diff STORE_A STORE_B``: the slopes, intervals and verdicts that differ between two stores."""
from __future__ import annotations

from typing import List, Optional

import typer

from recallkit.cli_output import json_text

__all__ = ["diff", "register"]


def register(app: typer.Typer) -> None:
    app.command("diff")(diff)


def diff(
    store_a: str = typer.Argument(..., metavar="STORE_A", help="Results store (SQLite), e.g. from an earlier code "
                                                                "version, or a report's summary.json."),
    store_b: str = typer.Argument(..., metavar="STORE_B", help="Results store or summary.json to compare with it."),
    experiments: Optional[List[str]] = typer.Option(
        None, "--exp", help="Experiment file or shipped name (repeatable); default: the main job's search experiments."),
    preset: str = typer.Option("quick", "--preset", help="Preset whose fits are compared."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout and nothing else."),
    exit_code: bool = typer.Option(False, "--exit-code", help="Exit 1 when any check differs (as git diff "
                                                              "--exit-code), 0 when none does: for CI."),
) -> None:
    """Fit both stores as they stand (nothing is trained), or read both reports' summary.json (this schema version
    or the previous one), and print each check (experiment, line,
    threshold) whose slope, 95% interval, tested prediction or verdict differs, or that only one store
    has; then the count of changed and unchanged checks. Each store's code versions head the output. With
    --exit-code, exit 1 when anything differs."""
    from recallkit.diff import diff_stores, format_diff  # fits through compare: scipy.stats, about 0.7 s to import

    doc = diff_stores(store_a, store_b, experiments or [], preset=preset)
    if as_json:
        typer.echo(json_text(doc))
    else:
        typer.echo(format_diff(doc))
    if exit_code and doc["changed"]:
        raise typer.Exit(1)

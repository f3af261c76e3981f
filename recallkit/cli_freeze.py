"""``recallkit freeze EXPERIMENT --preset P``: every tested prediction of a preset, frozen before its runs."""
from __future__ import annotations

from typing import Optional

import typer

from recallkit.empirics.files import check_writable

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("freeze")(freeze)


def freeze(
    experiment: str = typer.Argument(..., help="Experiment file (TOML) or a shipped experiment's name."),
    preset: str = typer.Option("quick", "--preset", help="Preset whose resolved grid is frozen."),
    store: Optional[str] = typer.Option(
        None, "--store", help="Results store (SQLite) that records the freeze. Default: $RECALLKIT_STORE or "
                              "results/recallkit.db."),
    out: str = typer.Option("frozen", "--out", help="Folder for the prediction file (one file per freeze, named by "
                                                    "its hash; commit it)."),
    show: bool = typer.Option(False, "--show", help="Print the store's freezes of this preset (newest last) and "
                                                    "freeze nothing."),
    as_json: bool = typer.Option(False, "--json", help="With --show: the newest freeze's document as JSON."),
) -> None:
    """Compute every check's tested prediction for the preset's resolved grid, before any run of it, and record it:
    a verdict is confirmatory only while the prediction recomputed then equals the frozen one and its runs came
    after the freeze (otherwise exploratory, with the reason; conditional where it reads a measured quantity of
    its own runs)."""
    from recallkit.compare import freeze as freezing  # the fits and the packs: scipy and sympy, about 1.5 s

    store_path = store or freezing.default_store_path()
    if show:
        lines = freezing.show_freezes(experiment, preset, store_path, as_json)
    else:
        check_writable(out, "--out")  # the prediction file's folder, before anything is computed: exit 3, one line
        lines = freezing.freeze_experiment(experiment, preset, store_path, out)
    for line in lines:
        typer.echo(line, err=line.startswith("note:"))

"""``recallkit experiments``: the experiments the registered systems ship, with their presets."""
from __future__ import annotations

import typer

from recallkit.cli_output import json_text

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    app.command("experiments")(experiments)


def experiments(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout and nothing else."),
) -> None:
    """List every experiment the shipped and installed systems provide: the name every command takes, its system,
    kind and presets (--preset), and what it reproduces."""
    from recallkit.empirics.experiment import shipped_experiments  # the loader: sympy, about 0.5 s

    found = shipped_experiments()
    if as_json:
        typer.echo(json_text({"experiments": found}))
        return
    width = max((len(e["name"]) for e in found), default=0)
    for entry in found:
        if "error" in entry:
            typer.echo(f"{entry['name']:<{width}}  {entry['system']}: cannot be read: {entry['error']}")
            continue
        typer.echo(f"{entry['name']:<{width}}  {entry['system']}, {entry['kind']}; presets {', '.join(entry['presets'])}")
        if entry["description"]:
            typer.echo(f"{'':<{width}}  {entry['description']}")

"""``recallkit cache``: where the cache of derived data is, what it holds, and the two things a user does to it:
``verify`` (recompute a sample of its verdict-bearing entries from the store and say which differ) and ``clear``."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

__all__ = ["register"]

app = typer.Typer(help="The cache of derived data (fits, pages, steps): where it is, verify it, clear it.",
                  no_args_is_help=True)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="cache")


def _run():
    from recallkit import cli_cache_run  # the pipeline: scipy and sympy, about 1.5 s, which --help must not load

    return cli_cache_run


@app.command("info")
def info() -> None:
    """Print where the cache and its secret are, how many entries of each kind it holds and their size."""
    for line in _run().info_lines():
        typer.echo(line)


@app.command("verify")
def verify(
    experiments: Optional[List[str]] = typer.Argument(
        None, help="Experiments whose entries to verify (names or files); default: the main job's."),
    store: Optional[Path] = typer.Option(None, "--store", help="Results store the entries are recomputed from; "
                                                               "default $RECALLKIT_STORE, else the default store."),
    preset: str = typer.Option("quick", "--preset", help="Preset the entries were made with."),
    every: bool = typer.Option(False, "--all", help="Recompute every entry the experiments reach, not a sample."),
    sample: float = typer.Option(0.25, "--sample", min=0.0, max=1.0,
                                 help="Fraction of the entries recomputed (by key), without --all."),
) -> None:
    """Recompute verdict-bearing cache entries (fits and the documents they are made from) from the store and
    report any that differ from what the entry holds; a differing entry is rewritten with what was computed.

    Every entry is signed with your secret, so an entry that differs was signed by you: a bug, or a result that
    changed with something its key does not hold (a library built differently, another CPU code path). Exit 0
    when none differs, 1 when some did, 3 when an experiment could not be fitted."""
    audit, failures = _run().verify(experiments or [], store, preset, 1.0 if every else sample)
    for kind, key, what in audit.differ:
        typer.echo(f"differs: {kind}/{key} ({what}): recomputed from the store and rewritten")
    typer.echo(f"cache verify: {len(audit.checked)} of {audit.hits} cached entries the experiments reach were "
               f"recomputed; {len(audit.differ)} differ" + (f"; {len(failures)} experiments failed" if failures else ""))
    if audit.differ:
        raise typer.Exit(1)
    if failures:
        raise typer.Exit(3)


@app.command("clear")
def clear() -> None:
    """Remove every entry of the cache (only the files the cache writes, in its own folders)."""
    typer.echo(_run().clear())

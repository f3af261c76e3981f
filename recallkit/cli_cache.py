"""``recallkit cache``: where the cache of derived data is, what it holds, and the two things a user does to it:
``verify`` (recompute a sample of its verdict-bearing entries from the store and say which differ) and ``clear``."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

__all__ = ["register"]

app = typer.Typer(help="The cache of derived data (fits, pages, steps): where it is, verify it, clear it.",
                  no_args_is_help=True)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="cache")


def _cache():
    from recallkit.empirics import cache  # numpy: only when a command runs

    return cache


@app.command("info")
def info() -> None:
    """Print where the cache and its secret are, how many entries of each kind it holds and their size."""
    cache = _cache()
    root = cache.cache_root()
    if root is None:
        typer.echo("cache: off (RECALLKIT_CACHE=off)")
        return
    opened = cache.from_env()
    typer.echo(f"cache: {root}")
    typer.echo(f"secret: {cache.key_path()}")
    if opened is None:
        typer.echo("entries: none (no secret could be made: the cache is off)")
        return
    counts: dict[str, int] = {}
    for kind, _ in opened.entries():
        counts[kind] = counts.get(kind, 0) + 1
    size = sum(p.stat().st_size for kind in cache.KINDS if (root / kind).is_dir()
               for p in (root / kind).iterdir() if p.is_file() and not p.is_symlink())
    typer.echo("entries: " + (", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none")
               + f"; {size / 2**20:.1f} MB of at most {opened.limit / 2**20:.0f} MB (RECALLKIT_CACHE_MB)")


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

    Every entry is signed with your secret, so an entry that differs was signed by you: a bug, or a store changed
    under the same key. Exit 0 when none differs, 1 when some did."""
    from recallkit.pipeline import verify_cache
    from recallkit.report_settings import ReportSettings

    settings = ReportSettings(experiments=[Path(e) for e in experiments or []],
                              preset=preset, store=store, log=sys.stderr)
    audit, failures = verify_cache(settings, 1.0 if every else sample)
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
    cache = _cache()
    root = cache.cache_root()
    if root is None:
        typer.echo("cache: off (RECALLKIT_CACHE=off): nothing to clear")
        return
    opened = cache.from_env(create_key=False)
    removed = (opened or cache.Cache(root, b"", cache.max_bytes())).clear()
    typer.echo(f"cache clear: removed {removed} entries from {root}")

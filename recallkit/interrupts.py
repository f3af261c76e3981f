"""What a command that writes results tells the user when it is interrupted (Ctrl-C).

A long command names its results store with :func:`watch_store`; :func:`interrupt_message` then says
how many rows the store holds (every row is committed as it is trained) and that rerunning the same
command resumes from there.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["interrupt_message", "watch_store"]


_store: Path | None = None


def watch_store(path) -> None:
    global _store
    _store = Path(path) if path is not None else None


def interrupt_message() -> str:
    if _store is None:
        return "interrupted"
    try:
        uri = f"file:{_store.resolve()}?mode=ro"
        with sqlite3.connect(uri, uri=True, timeout=2) as db:
            rows = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except Exception:  # the store may not exist yet, or be locked: the message must not fail
        return f"interrupted; results kept so far are in {_store}; rerun the same command to resume"
    return f"interrupted: {rows} rows are stored in {_store}; rerun the same command to resume (stored runs are reused)"

"""CLI commands for the 'probe' stage (filled in by the issue that owns it)."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""

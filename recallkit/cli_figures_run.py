"""What ``recallkit figures`` does once its arguments are read: draw the experiment's figures, one file each.

Apart from :mod:`recallkit.cli_figures` (the command's options and help), because this side imports
matplotlib and the pipeline (scipy, sympy: about 1.5 s together) and ``recallkit figures --help`` must not.
"""
from __future__ import annotations

import sys
from pathlib import Path

import typer

from recallkit.empirics.files import check_writable
from recallkit.pipeline import search_entry
from recallkit.reports.paper import FORMATS, STYLES, paper_figures
from recallkit.theory.errors import InputError

__all__ = ["write_figures"]


def write_figures(experiment: str, *, fmt: str, out: Path, store: str | None, preset: str,
                  style: str = "paper") -> None:
    """Check --format, --style and --out (that a file can be written there: before the store is read), then write
    each figure (whole or not at all) and print their paths once every one is written."""
    if fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if style not in STYLES:
        raise InputError(f"--style: expected one of {', '.join(STYLES)}, got {style!r}")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: is a file, expected a folder")
    check_writable(out, "--out")
    entry = search_entry(experiment, store=store, preset=preset, log=sys.stderr)
    paths = paper_figures(entry, out, fmt, style=style)
    for path in paths:
        typer.echo(str(path))

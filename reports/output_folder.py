"""The report's output folder: checking up front that it can be written, the staging folder each build
draws into, and moving a finished build over the previous one (figures, then summary.json, the PDF
last) so that a build interrupted at any point leaves the previous complete report as it was.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from recallkit.reports import render
from recallkit.theory.errors import InputError

__all__ = ["REPORT_NAME", "STAGING_PREFIX", "check_output_dir", "new_staging", "move_into_place"]

REPORT_NAME = "recallkit-report.pdf"
STAGING_PREFIX = ".recallkit-staging-"


def check_output_dir(out_dir: Path) -> None:
    """Fail now, with one line, if the report cannot be written to ``out_dir`` (before anything is trained)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: is a file, expected a folder for the report")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=STAGING_PREFIX, delete=True):
            pass
    except OSError as exc:
        raise InputError(f"--out {out_dir}: cannot write the report there ({exc.strerror or exc})") from None


def new_staging(out_dir: Path) -> Path:
    """A fresh staging folder inside ``out_dir``, after removing those left by builds that were killed."""
    for old in out_dir.glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(old, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))


_PAGE_FILE = re.compile(r"\d\d-[a-z0-9-]+")


def move_into_place(staging: Path, out_dir: Path, current: set[str], write_summary: bool, png: bool) -> None:
    """Move the finished build over the previous one: figures first, then summary.json, the PDF last.
    (The manifest records a hash of the joined PDF, so one killed between the two moves is never reused
    for the wrong document.) Pages of an earlier build that this one does not write would be
    mistaken for current results: they are removed (only files named like our pages, "NN-....png|pdf"),
    and so are the PNGs of an earlier ``--png`` build when this one draws none."""
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    manifest = staging / "figures" / render.MANIFEST
    for new in sorted((staging / "figures").iterdir()):
        if new != manifest:
            os.replace(new, fig_dir / new.name)
    for old in fig_dir.iterdir():
        if old.suffix in (".png", ".pdf") and _PAGE_FILE.fullmatch(old.stem) and (
                old.stem not in current or (old.suffix == ".png" and not png)):
            old.unlink()
    os.replace(manifest, fig_dir / render.MANIFEST)  # after the pages it describes
    if write_summary:
        os.replace(staging / "summary.json", out_dir / "summary.json")
    os.replace(staging / REPORT_NAME, out_dir / REPORT_NAME)

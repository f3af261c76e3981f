"""The report's output folder: checking up front that it can be written, the staging folder each build
draws into, and moving a finished build over the previous one (figures, then summary.json, the PDF
last) so that a build interrupted at any point leaves the previous complete report as it was.

A staging folder is named after the process that draws into it (``.recallkit-staging-PID@HOST-XXXXXXXX``),
so a later build removes only those whose process is gone (killed before it could clean up), never the one a
report running beside it is drawing into.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Iterator

from recallkit.reports import render
from recallkit.theory.errors import InputError, OutputError

__all__ = ["REPORT_NAME", "STAGING_PREFIX", "check_output_dir", "new_staging", "move_into_place", "writing_report"]

REPORT_NAME = "recallkit-report.pdf"
STAGING_PREFIX = ".recallkit-staging-"
SUMMARY_NAME = "summary.json"
# PID@HOST-random: the random part is tempfile's (letters, digits, underscore); a host name may hold "-" and "."
_OWNED = re.compile(re.escape(STAGING_PREFIX) + r"(\d+)@([A-Za-z0-9.-]*)-[a-z0-9_]+")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "", socket.gethostname())


def _owned_prefix() -> str:
    return f"{STAGING_PREFIX}{os.getpid()}@{_host()}-"


def check_output_dir(out_dir: Path) -> None:
    """Fail now, with one line, if the report cannot be written to ``out_dir`` (before anything is trained)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out {out_dir}: is a file, expected a folder for the report")
    _check_targets(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out_dir, prefix=_owned_prefix(), delete=True):
            pass
    except OSError as exc:
        raise OutputError(f"--out {out_dir}: cannot write the report there ({exc.strerror or exc})") from None


def _check_targets(out_dir: Path, pages: tuple[str, ...] = ()) -> None:
    """What the build moves into place must not meet a folder there (``os.replace`` cannot put a file over a
    folder, and would fail with the figures already moved): one line, and the previous report stays whole."""
    for name in (REPORT_NAME, SUMMARY_NAME, *(f"figures/{page}" for page in pages)):
        target = out_dir / name
        if target.is_dir() and not target.is_symlink():
            raise InputError(f"--out {out_dir}: {target} is a folder, expected the report's file there "
                             f"(move it away or choose another --out)")
    figures = out_dir / "figures"
    if figures.exists() and not figures.is_dir():
        raise InputError(f"--out {out_dir}: {figures} is a file, expected the folder of the report's pages "
                         f"(move it away or choose another --out)")


def _stale(entry: Path) -> bool:
    """Whether a staging entry was left by a build whose process is gone. One named by an older recallkit
    (no owner in its name) is stale too, as that version treated every staging folder; one owned by another
    host, or by a process that is alive (even a reused pid), is kept."""
    match = _OWNED.fullmatch(entry.name)
    if match is None:
        return True
    pid, host = int(match.group(1)), match.group(2)
    if host != _host() or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, as another user's
        pass
    return False


def new_staging(out_dir: Path) -> Path:
    """A fresh staging folder inside ``out_dir``, after removing those left by builds that were killed."""
    for old in out_dir.glob(f"{STAGING_PREFIX}*"):
        if _stale(old):
            if old.is_dir() and not old.is_symlink():
                shutil.rmtree(old, ignore_errors=True)
            else:  # check_output_dir's probe file, left by a build killed right there
                with contextlib.suppress(OSError):
                    old.unlink()
    return Path(tempfile.mkdtemp(prefix=_owned_prefix(), dir=out_dir))


@contextlib.contextmanager
def writing_report(out_dir: Path) -> Iterator[None]:
    """Writing the report into ``out_dir``: an OSError (a full disk, media gone read-only, a file that cannot be
    replaced) becomes one line naming ``--out`` and what went wrong. Nothing of the previous report has been
    replaced then (the build writes only into its staging folder until it moves a finished build into
    place), and the results store is not written here."""
    try:
        yield
    except OSError as exc:  # (an OutputError is one: its message already names the file and the reason)
        what = exc.strerror or str(exc) or type(exc).__name__
        names = [str(name) for name in (exc.filename2, exc.filename) if name]  # a copy's destination first
        # a path in the staging folder (a page's hash) says nothing to the reader: --out says where
        where = f" ({names[0]})" if names and not any(STAGING_PREFIX in name for name in names) else ""
        raise OutputError(f"--out {out_dir}: cannot write the report: {what}{where}; the previous report there "
                             f"and the results store are kept") from None


_PAGE_FILE = re.compile(r"\d\d-[a-z0-9-]+")


def move_into_place(staging: Path, out_dir: Path, current: set[str], write_summary: bool, png: bool) -> None:
    """Move the finished build over the previous one: figures first, then summary.json, the PDF last.
    (The manifest records a hash of the joined PDF, so one killed between the two moves is never reused
    for the wrong document.) Pages of an earlier build that this one does not write would be
    mistaken for current results: they are removed (only files named like our pages, "NN-....png|pdf"),
    and so are the PNGs of an earlier ``--png`` build when this one draws none."""
    _check_targets(out_dir, tuple(new.name for new in (staging / "figures").iterdir()))  # before the first move
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
        os.replace(staging / SUMMARY_NAME, out_dir / SUMMARY_NAME)
    os.replace(staging / REPORT_NAME, out_dir / REPORT_NAME)

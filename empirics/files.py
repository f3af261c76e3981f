"""Reading and writing files that someone else may have placed or may be filling: the one place that does both.

Reading (cache entries, page files, manifests): :func:`read_regular` opens a path only as a regular file. A
symbolic link is not followed (``O_NOFOLLOW``), a FIFO or device is not waited on (``O_NONBLOCK``, then an
``fstat`` check), and no more than a size limit is read, so a FIFO in place of a cache entry cannot hang a
report and a link to ``/dev/zero`` cannot fill memory. :func:`loads_json` parses with a nesting limit and turns
every way a text can fail (bad UTF-8, bad JSON, too deep, NaN or infinity) into a ``ValueError``. Callers treat
either error as "not there": a miss, never a hang or a traceback.

Writing (every file output: summary.json, figures, pages, the joined PDF, cache entries): :func:`write_atomic`
writes a temporary file beside the target, flushes it to disk (``fsync``) and renames it into place, so a file
output is whole or absent whatever happens to the process or the disk. :func:`atomic_path` does the same for a
writer that wants a path (matplotlib, pypdf). A failure (read-only folder, ``ENOSPC``, ``EFBIG``) is one
:class:`~recallkit.theory.errors.OutputError` naming the file and the reason. :func:`check_writable` tries a
folder before any costly work starts.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterator

from recallkit.theory.errors import OutputError

__all__ = ["DEFAULT_MAX_BYTES", "MAX_DEPTH", "TMP_PREFIX", "NotRegularFile", "atomic_path", "check_writable",
           "loads_json", "read_regular", "read_json", "write_atomic"]

DEFAULT_MAX_BYTES = 64 * 2**20  # a cache entry or manifest larger than this was not written by us
MAX_DEPTH = 64  # no document we write nests deeper than a few levels
TMP_PREFIX = ".tmp-"  # every temporary file starts so: the cache's prune removes stale ones


class NotRegularFile(OSError):
    """The path is a link, a FIFO, a device or a folder, or larger than the limit: not a file we wrote."""


def read_regular(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """The bytes of ``path`` if it is a regular file (not a link) of at most ``max_bytes``; OSError otherwise
    (:class:`NotRegularFile` for a link, FIFO, device, folder or an oversized file)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (getattr(os, "ELOOP", -1), getattr(os, "EMLINK", -1)):  # O_NOFOLLOW on a link
            raise NotRegularFile(f"{path}: a symbolic link, not followed") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(f"{path}: not a regular file")
        if info.st_size > max_bytes:
            raise NotRegularFile(f"{path}: larger than {max_bytes} bytes")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:  # grew while read
                raise NotRegularFile(f"{path}: larger than {max_bytes} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth_ok(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


def loads_json(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON document in ``data``; ValueError when it is not UTF-8 JSON, holds NaN or an infinity, or nests
    deeper than ``max_depth`` (the parser's own recursion limit is caught, never a RecursionError)."""
    try:
        document = json.loads(data, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc.reason}") from None
    if not _depth_ok(document, max_depth):
        raise ValueError(f"JSON nested deeper than {max_depth}")
    return document


def read_json(path: Path | str, max_bytes: int = DEFAULT_MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`read_regular` then :func:`loads_json`: OSError or ValueError on anything but a plain JSON file."""
    return loads_json(read_regular(path, max_bytes), max_depth)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _output_error(target: Path, exc: OSError) -> OutputError:
    """One OutputError naming ``target``, keeping the OSError's errno and reason (``strerror``) for a caller that
    says where in its own words."""
    error = OutputError(f"cannot write {target}: {_reason(exc)}")
    error.errno, error.strerror, error.filename = exc.errno, _reason(exc), str(target)
    return error


@contextlib.contextmanager
def _no_sigxfsz() -> Iterator[None]:
    """A write past ``ulimit -f`` raises EFBIG instead of killing the process (the main thread only)."""
    sigxfsz = getattr(signal, "SIGXFSZ", None)
    try:
        previous = signal.signal(sigxfsz, signal.SIG_IGN) if sigxfsz is not None else None
    except ValueError:  # not the main thread: the caller's disposition stays
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            with contextlib.suppress(ValueError):
                signal.signal(sigxfsz, previous)


@contextlib.contextmanager
def atomic_path(path: Path | str, mode: int = 0o644) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer to fill; on a clean exit it is flushed to disk and renamed
    to ``path``, otherwise removed. Any OSError (here or in the writer) becomes one OutputError naming ``path``."""
    target = Path(path)
    tmp: str | None = None
    try:
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(target).st_mode) and not target.is_symlink():
                raise OutputError(f"cannot write {target}: not a regular file (a device, FIFO or folder)")
        with _no_sigxfsz():
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX, suffix=target.suffix)
            os.close(fd)
            yield Path(tmp)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
            tmp = None
    except OutputError:
        raise
    except OSError as exc:
        raise _output_error(target, exc) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_atomic(path: Path | str, data: bytes | str, mode: int = 0o644) -> None:
    """``path`` holds ``data`` (str is written as UTF-8), or what it held before: never part of it. OutputError
    (one line naming ``path``) when it cannot be written."""
    payload = data.encode() if isinstance(data, str) else data
    with atomic_path(path, mode) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()


def check_writable(folder: Path | str, what: str = "--out") -> Path:
    """Prove a file can be written in ``folder`` (making it and its parents for the test, and removing what the test
    made); OutputError naming ``what`` and the folder otherwise. Run before any costly work, so that no result is
    computed only to be lost."""
    target = Path(folder)
    created = [p for p in (target, *target.parents) if not os.path.lexists(p)]  # what the check makes, removed after
    try:
        target.mkdir(parents=True, exist_ok=True)
        if not target.is_dir():
            raise NotADirectoryError(20, "not a folder")
        fd, tmp = tempfile.mkstemp(dir=target, prefix=TMP_PREFIX)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise OutputError(f"{what} {target}: cannot write there: {_reason(exc)}") from None
    finally:
        for made in created:  # deepest first: a command that then fails on its input leaves no empty folder
            with contextlib.suppress(OSError):
                os.rmdir(made)
    return target

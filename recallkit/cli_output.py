"""What the command line writes, checked: standard output, JSON without a bare NaN, and the runs that failed.

- Standard output: :func:`checked_stdout` puts a thin wrapper over ``sys.stdout`` for the length of a command, so a
  write or flush that fails (``--json`` into a full disk or /dev/full, a reader that closed the pipe) is one
  :class:`StdoutError` (an :class:`~recallkit.theory.errors.OutputError`: one line, exit 3), whichever code wrote
  it (``typer.echo``, ``print``); :func:`discard_stdout` then points the descriptor at /dev/null, so the
  interpreter's own last flush cannot print "Exception ignored" after that line.
- JSON: :func:`json_text` writes every document a command prints with ``allow_nan=False``, after
  :func:`recallkit.empirics.store.finite_json` has made each NaN or infinity null and recorded where it was and what
  it was beside it (``"nonfinite": {"loss": "nan"}``), so a reader's strict parser never meets a bare ``NaN``.
- Failed runs: :class:`RunFailures` counts the runs of a command that raised or gave non-finite metrics (as the
  results store records them) and says so in one line, ``3 of 8 runs failed (...)``: ``sweep``, ``fit`` and
  ``report`` print it and exit 3 (:class:`~recallkit.theory.errors.WorkFailed`).
"""
from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

from recallkit.empirics.store import finite_json
from recallkit.theory.errors import OutputError, WorkFailed

__all__ = ["RunFailures", "StdoutError", "checked_stdout", "discard_stdout", "json_text", "nonfinite_metrics",
           "raise_if_failed", "run_failures"]


class StdoutError(OutputError):
    """Standard output could not be written (a full device, a closed pipe, a file-size limit)."""


def _stdout_error(exc: OSError) -> StdoutError:
    return StdoutError(f"cannot write to standard output: {exc.strerror or type(exc).__name__}")


class _CheckedStream:
    """A text stream (``sys.stdout``) whose failed write or flush is one :class:`StdoutError`; everything else is
    the stream's own (``isatty``, ``encoding``, ``fileno``, ``buffer``), so click takes it as the text stream it is."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: Any) -> int:
        try:
            return self._write(text)
        except OSError as exc:
            raise _stdout_error(exc) from None

    def _write(self, text: Any) -> int:
        """Write ``text`` whole, or raise. A text stream ignores the count its buffer returns, and a buffered writer
        handed more than its buffer holds returns the count of a short write (a full disk, a file-size limit) and
        drops the rest: ``fit --json`` cut at 4 kB exited 0. So the text is encoded here and written to the buffer
        until all of it is taken, the next short write raising the error the system gives."""
        stream = self._stream
        buffer = getattr(stream, "buffer", None)
        if not isinstance(text, str) or buffer is None or not callable(getattr(buffer, "write", None)):
            return stream.write(text)
        stream.flush()  # what the text layer holds goes first
        view = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
        while view:
            taken = buffer.write(view)
            if taken is None:  # a non-blocking stream that would block: leave it to the stream
                buffer.flush()
                taken = len(view)
            if taken <= 0:
                raise OSError(errno.EIO, "short write")
            view = view[taken:]
        if getattr(stream, "line_buffering", False) and "\n" in text:
            buffer.flush()
        return len(text)

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise _stdout_error(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def checked_stdout() -> Iterator[None]:
    """``sys.stdout`` checked for the block, and flushed at its end so that a short write is seen while the command
    can still say so (a StdoutError); the stream it was is put back after. When the block raises, what it printed
    is flushed too, and if that fails the rest is discarded (the block's own error is the one to tell)."""
    original = sys.stdout
    if original is None:  # no standard output at all (pythonw): nothing to check
        yield
        return
    checked = _CheckedStream(original)
    sys.stdout = checked
    try:
        yield
    except BaseException:
        try:
            checked.flush()
        except StdoutError:
            discard_stdout(original)
        raise
    else:
        checked.flush()
    finally:
        if sys.stdout is checked:
            sys.stdout = original


def discard_stdout(stream: Any = None) -> None:
    """After standard output (``stream``, default ``sys.stdout``) failed: what is still buffered, and anything
    written later, goes to /dev/null, so the interpreter's last flush at exit neither fails again nor prints
    'Exception ignored'."""
    stream = sys.stdout if stream is None else stream
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO): nothing at exit to fail
        return
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def json_text(document: Any, **options: Any) -> str:
    """``document`` as JSON text with no bare NaN or infinity: each is null, with where it was and what it was in
    ``nonfinite`` (:func:`recallkit.empirics.store.finite_json`); numpy numbers as numbers."""
    return json.dumps(finite_json(document), allow_nan=False, **options)


def _reason(value: float) -> str:
    return "nan" if value != value else "inf" if value > 0 else "-inf"


def nonfinite_metrics(metrics: Mapping[str, Any]) -> dict[str, str]:
    """The metrics of one run that are not finite numbers, with what they were: the store's record of them
    (``metrics["nonfinite"]``) and any NaN or infinity still in ``metrics`` (a run just trained)."""
    recorded = metrics.get("nonfinite")
    found = {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, Mapping) else {}
    for key, value in metrics.items():
        if isinstance(value, float) and not math.isfinite(value):
            found.setdefault(str(key), _reason(value))
    return found


@dataclass
class RunFailures:
    """How many of a command's runs failed: ``raised`` (the run raised; no result) and ``nonfinite`` (a result
    with a NaN or an infinity among its metrics), of ``total``; ``metrics`` counts the runs per non-finite
    metric."""

    total: int = 0
    raised: int = 0
    nonfinite: int = 0
    metrics: Counter = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        return self.raised + self.nonfinite

    def line(self) -> str:
        """``3 of 8 runs failed (1 raised; 2 gave non-finite metrics: loss 2)``."""
        parts = []
        if self.raised:
            parts.append(f"{self.raised} raised")
        if self.nonfinite:
            which = ", ".join(f"{name} {count}" if count != self.nonfinite else name
                              for name, count in self.metrics.most_common(4))
            more = ", ..." if len(self.metrics) > 4 else ""
            parts.append(f"{self.nonfinite} gave non-finite metrics: {which}{more}")
        return f"{self.failed} of {self.total} runs failed ({'; '.join(parts)})"


def run_failures(runs: Iterable[tuple[str | None, str | None]], store: Any = None,
                 extra_raised: int = 0) -> RunFailures:
    """The failures among ``runs`` ((config hash, error or None) each, one per run): those with an error raised,
    and those whose stored metrics (``store.get``: a :class:`~recallkit.empirics.store.ResultStore`) are not all
    finite. ``extra_raised``: runs that raised and are not among ``runs`` (the sweep counted them)."""
    errors: set[str] = set()
    good: set[str] = set()
    anonymous = 0
    for config_hash, error in runs:
        if error is not None:
            if config_hash:
                errors.add(config_hash)
            else:
                anonymous += 1
        elif config_hash:
            good.add(config_hash)
    good -= errors
    found = RunFailures(total=len(good) + len(errors) + anonymous + extra_raised,
                        raised=len(errors) + anonymous + extra_raised)
    stored = store.get(sorted(good)) if store is not None and good else {}
    for record in stored.values():
        bad = nonfinite_metrics(record.get("metrics") or {})
        if bad:
            found.nonfinite += 1
            found.metrics.update(bad.keys())
    return found


def raise_if_failed(failures: RunFailures, what: str = "") -> None:
    """WorkFailed (one line, exit 3) saying how many runs failed, when any did."""
    if failures.failed:
        raise WorkFailed(f"{what}{failures.line()}")

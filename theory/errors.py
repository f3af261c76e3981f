"""Errors shared by every stage.

``theory`` is the leftmost package, so the base classes live here and the others import them.
The CLI catches :class:`RecallkitError` and prints its message as one line, exit status 2.
"""
from __future__ import annotations

__all__ = ["InputError", "OutputError", "RecallkitError", "WorkFailed"]


class RecallkitError(Exception):
    """Base class of every error the toolkit raises on purpose. Its message is one line."""


class InputError(RecallkitError, ValueError):
    """Bad user input: a malformed file, an unknown key, a bad flag value.

    The message names the file, field or flag and what was expected, e.g.
    ``theory/packs/x.toml: terms[2].expr: unknown symbol 'Q' (allowed: V, N, d)``.
    """


class OutputError(RecallkitError, OSError):
    """An output could not be written (read-only folder, full disk, file-size limit, closed pipe). The CLI
    prints its one-line message and exits with the status for failed work (3); nothing after it claims success."""

    def __str__(self) -> str:  # its own line, even where errno and strerror are kept for a caller
        return str(self.args[0]) if self.args else super().__str__()


class WorkFailed(RecallkitError):
    """Work the user asked for did not produce its result (every run raised, or gave non-finite metrics).
    The CLI prints its one-line message and exits with the status for failed work (3)."""

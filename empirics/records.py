"""What identifies one check of an experiment, written in one place.

A *check* is one thing a verdict is given for: a line of an experiment at one threshold of its metric (the
smallest size, or the largest count, that reaches it), or, for a law, the metric against one variable. The
search makes the boundary points of a check, compare fits and judges them, the report draws them, and each
shows the check's name: :class:`CheckKey` is that name, and ``str(key)`` (with :func:`threshold_text`) is the
only place its label is written.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["CheckKey", "threshold_text"]


def threshold_text(threshold: float | None, relative: bool = False) -> str:
    """``0.1``, or ``0.5 x ceiling`` for a fraction of each instance's ceiling; ``""`` without a threshold."""
    if threshold is None:
        return ""
    text = f"{float(threshold):g}"
    return f"{text} x ceiling" if relative else text


@dataclass(frozen=True)
class CheckKey:
    """One check: ``experiment``'s line ``line`` at ``threshold`` of ``metric`` (``relative``: a fraction of the
    instance's ceiling), or, with ``variable`` set and no threshold, the law of ``metric`` against it."""

    experiment: str
    line: str
    metric: str = "accuracy"
    threshold: float | None = None
    relative: bool = False
    variable: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any], experiment: str | None = None) -> "CheckKey":
        """The key of a fit, a boundary point or a summary row (``experiment``, ``line``, ``threshold``,
        ``threshold_relative``, ``metric``; ``experiment`` given here wins)."""
        threshold = row.get("threshold")
        return cls(experiment=str(experiment if experiment is not None else row.get("experiment")),
                   line=str(row.get("line")), metric=str(row.get("metric") or "accuracy"),
                   threshold=None if threshold is None else float(threshold),
                   relative=bool(row.get("threshold_relative")), variable=row.get("variable"))

    @property
    def threshold_text(self) -> str:
        return threshold_text(self.threshold, self.relative)

    def __str__(self) -> str:
        """``tr_fig2 [N=V**1.5, L=V**0.5, threshold 0.5 x ceiling]``: how every output names the check."""
        if self.threshold is not None:
            return f"{self.experiment} [{self.line}, threshold {self.threshold_text}]"
        if self.variable is not None:
            return f"{self.experiment} [{self.line}, {self.metric} against {self.variable}]"
        return f"{self.experiment} [{self.line}]"

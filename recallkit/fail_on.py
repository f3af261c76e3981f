"""``--fail-on``: which verdicts make ``recallkit fit`` and ``recallkit report`` exit 1 after their output."""
from __future__ import annotations

from recallkit.compare.evidence import EVIDENCE_LABELS, weakest
from recallkit.empirics.records import CheckKey
from recallkit.theory.errors import InputError

__all__ = ["evidence_short", "FAIL_ON_CHOICES", "fail_on_verdicts", "REQUIRE_CHOICES", "required_evidence", "verdicts_matching"]

FAIL_ON_CHOICES = ("inconsistent", "inconclusive")


def fail_on_verdicts(values) -> tuple[str, ...]:
    """``--fail-on`` values (repeatable, each may be comma-separated) as a tuple of verdict names."""
    wanted: list[str] = []
    for value in values or ():
        for name in str(value).split(","):
            name = name.strip()
            if name not in FAIL_ON_CHOICES:
                raise InputError(f"--fail-on: expected {' or '.join(FAIL_ON_CHOICES)} (comma-separated or repeated), "
                                 f"got {name!r}")
            if name not in wanted:
                wanted.append(name)
    return tuple(wanted)


def verdicts_matching(rows, wanted) -> str | None:
    """One line naming the checks whose verdict is in ``wanted`` (None if there are none): what a CI job
    prints before it exits 1. ``rows``: summary entries or fit dicts (``experiment``, ``line``,
    ``threshold``, ``verdict``)."""
    rows = [r for r in rows if r.get("verdict") != "no check"]  # a grid's heatmap row is no check to count
    hits = [r for r in rows if r.get("verdict") in wanted]
    if not hits:
        return None

    counts = ", ".join(f"{sum(r.get('verdict') == v for r in hits)} {v}" for v in wanted if any(r.get("verdict") == v for r in hits))
    shown = "; ".join(f"{CheckKey.of(r)}: {r.get('verdict')}" for r in hits[:3])
    more = f"; and {len(hits) - 3} more" if len(hits) > 3 else ""
    return f"fail-on: {counts} of {len(rows)} checks: {shown}{more} (exit 1)"


REQUIRE_CHOICES = EVIDENCE_LABELS[:-1]  # confirmatory, conditional: requiring exploratory requires nothing


def required_evidence(value: str | None) -> str | None:
    """``--require`` (``evidence=`` in the pytest plugin): the weakest evidence label a check may carry, or None."""
    if value is None:
        return None
    if value not in REQUIRE_CHOICES:
        raise InputError(f"--require: expected {' or '.join(REQUIRE_CHOICES)}, got {value!r}")
    return value


def evidence_short(rows, required: str | None) -> str | None:
    """One line naming the checks whose evidence is weaker than ``required`` (None if there are none, or nothing is
    required): confirmatory > conditional > exploratory (``compare.evidence``). A check without an evidence label (a
    diagnostic such as a term probe, or a system's own check that no freeze covers) counts as exploratory: nothing
    passes a requirement by having no label."""
    if required is None:
        return None
    rows = [r for r in rows if r.get("verdict") != "no check"]
    short = [r for r in rows if weakest([r.get("evidence"), required]) != required]
    if not short:
        return None
    shown = "; ".join(f"{CheckKey.of(r)}: {r.get('evidence') or 'exploratory'} "
                      f"({r.get('evidence_reason') or 'no evidence label: a diagnostic or a system check'})"
                      for r in short[:3])
    more = f"; and {len(short) - 3} more" if len(short) > 3 else ""
    return f"require {required}: {len(short)} of {len(rows)} checks are not: {shown}{more} (exit 1)"

"""What a reader is told first: each experiment's result in one sentence (its claim with the claim's provenance,
the verdict counts and the evidence), the headline counts with the experiments' checks and the diagnostics apart,
and what the diagnostics are (config hashes, monotonicity violations, budget flags, the term probes' and the other
diagnostic checks' verdicts) with one sentence on whether they matter.

A row is a diagnostic when its page kind's rows say so (``"diagnostic": True``: a probe of the theory's terms or of
a bound, not an experiment's prediction); an entry whose every row is one is a diagnostic entry, whose section
follows the experiments'. The counts a pipeline note states (``117 monotonicity violations ...``, ``3 points flagged
by the training-budget check``, ``sweep: 972 runs``) are read here, or from the entry's ``diagnostics`` dict when
it has one, and shown on the diagnostics page instead of the section's first page.
"""
from __future__ import annotations

import re
from typing import Sequence

from recallkit.reports.mathexpr import line_mathtext
from recallkit.reports.style import VERDICT_COLOURS
from recallkit.reports.summary_rows import NO_CHECK, page_kinds

__all__ = ["ordered_experiments", "diagnostics_table", "is_diagnostic_entry", "experiment_rows", "diagnostic_rows", "verdict_counts", "evidence_text",
           "result_sentence", "split_notes", "entry_diagnostics", "DIAGNOSTICS_MATTER"]

_NOTE_KEYS = (("monotonicity_violations", re.compile(r"^(\d+) monotonicity violations")),
              ("budget_flagged", re.compile(r"^(\d+) points flagged by the training-budget check")),
              ("runs", re.compile(r"^sweep: (\d+) runs")))

DIAGNOSTICS_MATTER = (
    "Whether they matter: config hashes name each trained configuration, for rerunning or auditing a run, and "
    "change no number. A monotonicity violation is a probed size where the accuracy fell as the size grew (seed "
    "noise near the threshold); the curve search fits a monotone accuracy curve through them and the seed bootstrap "
    "carries the spread they add, so they widen an interval rather than move a verdict, though many on one line say "
    "its threshold sits where the accuracy curve is flat. A point flagged by the training-budget check moves by one "
    "search step with a larger budget: its line's slope is less certain than its interval says. The diagnostic "
    "checks (term probes, bound checks) test the theory's parts, not an experiment's prediction: they are counted "
    "apart from the experiments' checks and their sections follow the experiments'.")


def diagnostic_rows(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("diagnostic")]


def experiment_rows(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if not r.get("diagnostic")]


def is_diagnostic_entry(exp: dict, rows: Sequence[dict]) -> bool:
    """An entry whose every row is a diagnostic (and that has some)."""
    mine = [r for r in rows if r.get("experiment") == exp.get("name")]
    return bool(mine) and all(r.get("diagnostic") for r in mine)


def verdict_counts(rows: Sequence[dict]) -> dict:
    """{"checks": n, "consistent": .., "inconsistent": .., "inconclusive": ..} over the rows that are checks."""
    checks = [r for r in rows if r.get("verdict") != NO_CHECK]
    return {"checks": len(checks), **{v: sum(r.get("verdict") == v for r in checks) for v in VERDICT_COLOURS}}


def evidence_text(rows: Sequence[dict]) -> str:
    """"all exploratory", "2 confirmatory, 14 exploratory", or "no evidence label"."""
    labels = [r.get("evidence") for r in rows if r.get("verdict") != NO_CHECK]
    named = {label: labels.count(label) for label in dict.fromkeys(labels) if label}
    if not named:
        return "no evidence label"
    if len(named) == 1 and sum(named.values()) == len(labels):
        return f"all {next(iter(named))}"
    return ", ".join(f"{n} {label}" for label, n in named.items()) + (
        f", {len(labels) - sum(named.values())} unlabelled" if sum(named.values()) < len(labels) else "")


def _counts_text(rows: Sequence[dict]) -> str:
    counts = verdict_counts(rows)
    if not counts["checks"]:
        return "no checks (a picture, not a test)"
    rest = [f"{counts[v]} {v}" for v in ("inconsistent", "inconclusive") if counts[v]]
    return f"{counts['consistent']} of {counts['checks']} checks consistent" + (", " + ", ".join(rest) if rest else "")


def _provenance(exp: dict) -> str:
    """Where the claim comes from: the provenance of the terms that dominate its lines (the pack's terms), and
    the comparative claims' own labels."""
    terms = {t.get("name"): t.get("provenance") for t in exp.get("terms") or [] if isinstance(t, dict)}
    dominant = [(line.get("prediction") or {}).get("dominant") for line in exp.get("lines") or []]
    dominant += [p.get("dominant") for p in (exp.get("predictions") or {}).values() if isinstance(p, dict)]
    labels = list(dict.fromkeys(terms[d] for d in dominant if d in terms and terms[d]))
    claims = list(dict.fromkeys(str(c.get("provenance")) for c in exp.get("claims") or [] if c.get("provenance")))
    said = " and ".join(labels) if labels else ""
    if claims:
        said += ("; claims " if said else "claims ") + ", ".join(claims)
    return said or "provenance not recorded"


def _predicted_growth(exp: dict) -> str:
    predictions = dict(exp.get("predictions") or {})
    for line in exp.get("lines") or []:
        if line.get("prediction"):
            predictions.setdefault(line.get("name"), line["prediction"])
    parts = []
    for name, pred in predictions.items():
        if not isinstance(pred, dict) or pred.get("slope") is None:
            continue
        base = pred.get("base") or "V"
        slope = str(pred.get("slope_exact") or pred.get("slope"))
        parts.append(f"${base}^{{{slope}}}$ along {line_mathtext(name)}")
    return "; ".join(parts)


def _claim(exp: dict, rows: Sequence[dict]) -> str:
    """What the experiment claims, in words, by kind."""
    kind = exp.get("kind", "min_size")
    growth = _predicted_growth(exp)
    if kind == "grid":
        return f"{exp.get('metric') or 'the metric'} over ({exp.get('base', 'base')}, {exp.get('size', 'size')})"
    if kind == "law":
        law = exp.get("law") if isinstance(exp.get("law"), dict) else {}
        return (f"{law.get('metric') or exp.get('metric') or 'the metric'} scales with {law.get('variable') or 'the base'}"
                f" as law {law.get('name') or '?'} predicts along each line")
    if kind in ("min_size", "max_capacity", "capacity") and growth:
        what = "the parameter count needed at each accuracy threshold" if kind == "min_size" else "the capacity"
        return f"{what} grows as {growth}"
    own = page_kinds().get(kind)
    if own is not None and own.compared:
        return own.compared
    return exp.get("description") or "; ".join(dict.fromkeys(str(r.get("line")) for r in rows)) or "no claim recorded"


def result_sentence(exp: dict, rows: Sequence[dict]) -> str:
    """``title — provenance: claim. counts; evidence.`` — the first sentence of an experiment's section."""
    mine = [r for r in rows if r.get("experiment") == exp.get("name")]
    head = exp.get("title") or exp.get("name")
    if exp.get("kind") == "grid" and not verdict_counts(mine)["checks"]:
        return f"{head}: a heatmap of {_claim(exp, mine)}, mean over seeds; it tests no prediction."
    return (f"{head} — {_provenance(exp)}: {_claim(exp, mine)}. Result: {_counts_text(mine)}; "
            f"evidence {evidence_text(mine)}.")


def entry_diagnostics(exp: dict) -> dict:
    """The entry's diagnostic counts: its ``diagnostics`` dict, else what its notes state; and its config hashes."""
    found = dict(exp.get("diagnostics") or {})
    for note in exp.get("notes") or []:
        for key, pattern in _NOTE_KEYS:
            match = pattern.match(str(note))
            if match and key not in found:
                found[key] = int(match.group(1))
    hashes = list(exp.get("config_hashes") or [])
    if hashes:
        found.setdefault("config_hashes", len(hashes))
        found.setdefault("first_hash", hashes[0])
    return found


def split_notes(notes: Sequence[str]) -> list[str]:
    """The notes a section's first page keeps: those that are no diagnostic count."""
    return [n for n in notes if not any(pattern.match(str(n)) for _, pattern in _NOTE_KEYS)]


def ordered_experiments(experiments: Sequence[dict], rows: Sequence[dict]) -> list[dict]:
    """The report's sections in order: the experiments as the summary lists them, then the diagnostic entries."""
    return sorted(experiments, key=lambda e: is_diagnostic_entry(e, rows))


def diagnostics_table(experiments: Sequence[dict], rows: Sequence[dict]) -> list[list[str]]:
    """One row per entry with anything to show on the diagnostics page: section, runs, config hashes (how many,
    the first), monotonicity violations, budget-flagged points, and its diagnostic checks' verdicts."""
    out = []
    for i, exp in enumerate(ordered_experiments(experiments, rows), start=1):
        found = entry_diagnostics(exp)
        mine = diagnostic_rows([r for r in rows if r.get("experiment") == exp.get("name")])
        if not found and not mine:
            continue
        counts = verdict_counts(mine)
        checks = (f"{counts['checks']}: " + ", ".join(f"{counts[v]} {v}" for v in VERDICT_COLOURS)) if mine else ""
        hashes = f"{found['config_hashes']} (first {found['first_hash'][:12]})" if found.get("config_hashes") else ""
        out.append([f"{i}. {exp.get('title') or exp.get('name')}", str(found.get("runs", "")), hashes,
                    str(found.get("monotonicity_violations", "")), str(found.get("budget_flagged", "")), checks])
    return out

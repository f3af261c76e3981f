"""``recallkit diff STORE_A STORE_B``: what changed between two results stores, check by check.

Each store is fitted and judged as it stands (``compare.fit_experiment``: nothing is trained), for the
main job's search experiments or those named; a check (experiment, line, threshold) is listed when its
slope, its interval or its verdict differs, or when only one store has it. Every stored row records its
``code_version``, so the two stores' versions are printed too: comparing a store made by one version of
the code with one made by another is how a change to the code is seen in the numbers.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

from recallkit import registry
from recallkit.compare.assertions import fit_experiment
from recallkit.compare.schema import check_row, flat_row, upgrade_summary
from recallkit.empirics.files import loads_json, read_regular
from recallkit.empirics.plan import Plan, plan
from recallkit.empirics.records import CheckKey, threshold_text
from recallkit.empirics.store import ResultStore, left_out_line
from recallkit.frames import fit_rows
from recallkit.theory.errors import InputError

__all__ = ["diff_stores", "format_diff", "search_experiments"]

TOLERANCE = 5e-4  # slopes and interval ends are printed to 3 decimals; smaller differences are not changes
SUMMARY_MAX_BYTES = 256 * 2**20  # a summary.json larger than this was not written by a report


def search_experiments(preset: str = "quick") -> list[Plan]:
    """The main job's experiments that are searches (they have fits), planned; the others are judged by their
    system."""
    plans = [plan(path, preset=preset) for path in registry.default_report()]
    return [planned for planned in plans if planned.is_search]


def _fits(planned: Plan, store: Path) -> tuple[list[dict], dict]:
    if planned.experiment.kind == "grid":
        return [], {}
    doc = fit_experiment(planned, store=str(store)).to_dict()
    return fit_rows(doc), doc.get("sweep", {}).get("stored_code_versions") or doc.get("sweep", {}).get("code_versions") or {}


def _left_out(store: Path) -> list[int]:
    """The rowids of the store's rows that do not validate and are left out of every fit (each named once, in one
    warning line on stderr, when first read)."""
    with ResultStore(store, readonly=True) as opened:
        opened.rows()
        return [row.rowid for row in opened.skipped_rows]


def _differs(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    if isinstance(a, float) or isinstance(b, float):
        return not (math.isclose(float(a), float(b), abs_tol=TOLERANCE))
    return a != b


COMPARED = ("slope", "slope_ci_lo", "slope_ci_hi", "predicted_slope_tested", "verdict")


def _is_summary(path: Path) -> bool:
    """A summary.json of a report (``{"schema": "recallkit.summary/...", ...}``), not a results store."""
    if path.suffix.lower() == ".json":
        return True
    with open(path, "rb") as fh:
        return fh.read(1).strip() == b"{"


def _summary_side(flag: str, path: Path) -> tuple[dict, dict]:
    """A summary.json of this schema version or the previous one: its fitted checks' flat rows by experiment and
    check, and its code version with the number of checks."""
    try:  # a regular file (a link is resolved first), no NaN, at most MAX_DEPTH deep: never a RecursionError
        document = loads_json(read_regular(path.resolve(), SUMMARY_MAX_BYTES))
    except OSError as exc:
        raise InputError(f"{flag} {path}: not a readable summary.json ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise InputError(f"{flag} {path}: not a readable summary.json ({exc})") from None
    doc = upgrade_summary(document, where=f"{flag} {path}")
    rows: dict = {}
    for exp in doc["experiments"]:
        for fit in exp.get("fits") or ():
            row = flat_row(check_row(fit, exp.get("name")))
            rows.setdefault(exp.get("name"), {})[CheckKey.of(row)] = row
    version = (doc.get("provenance") or {}).get("code_version")
    checks = sum(len(r) for r in rows.values())
    return rows, ({version: checks} if version else {})


def diff_stores(store_a: str | Path, store_b: str | Path, experiments: Iterable[str | Path] = (),
                preset: str = "quick") -> dict:
    """Compare two sides check by check; each side is a results store (fitted as it stands, nothing trained) or
    a report's summary.json (this schema version or the previous one, read as written). Returns ``{"store_a",
    "store_b", "code_versions": {"a", "b"}, "left_out_rows": {"a", "b"}, "checks": n, "changed": [{"experiment",
    "line", "threshold", "a": row|None, "b": row|None, "fields": [...]}], "experiments": [...]}`` with rows as
    :func:`recallkit.frames.fit_rows` gives them; ``left_out_rows`` lists the rowids of a store's rows that do not
    validate (left out of every fit; empty for a summary)."""
    paths = []
    for flag, store in (("STORE_A", store_a), ("STORE_B", store_b)):
        path = Path(store)
        if not path.is_file():
            raise InputError(f"{flag} {path}: no such results store or summary.json")
        paths.append(path)
    summaries = {flag: _summary_side(flag, path) for flag, path in zip(("STORE_A", "STORE_B"), paths)
                 if _is_summary(path)}
    given = [str(e) for e in experiments]
    if not given and summaries:  # the experiments the summaries hold
        given = list(dict.fromkeys(n for side in summaries.values() for n in side[0]))
    plans = ([] if len(summaries) == 2 else [plan(e, preset=preset) for e in given] if given
             else search_experiments(preset))
    by_name = {p.experiment.name: p for p in plans}
    left_out = {side: ([] if flag in summaries else _left_out(path))
                for side, flag, path in (("a", "STORE_A", paths[0]), ("b", "STORE_B", paths[1]))}
    wanted = list(by_name) if plans else [Path(e).stem for e in given]
    changed, checks, names = [], 0, []
    versions: dict[str, dict] = {"a": {}, "b": {}}
    for name in wanted:
        sides = []
        for side, flag, path in (("a", "STORE_A", paths[0]), ("b", "STORE_B", paths[1])):
            if flag in summaries:
                rows, found = summaries[flag][0].get(name, {}), summaries[flag][1]
            else:
                planned = by_name[name]
                planned.search_experiment(" (its system judges it; it has no fits to compare)",
                                          where=f"--exp {planned.path}")
                fitted, found = _fits(planned, path)
                rows = {CheckKey.of(r): r for r in fitted}
            for version, n in (found or {}).items():
                versions[side][version] = versions[side].get(version, 0) + n
            sides.append(rows)
        names.append(name)
        by_a, by_b = sides  # one check per key: an absolute and a relative threshold of one value are two checks
        for k in list(by_a) + [k for k in by_b if k not in by_a]:
            checks += 1
            a, b = by_a.get(k), by_b.get(k)
            fields = list(COMPARED) if a is None or b is None else [f for f in COMPARED if _differs(a[f], b[f])]
            if fields:
                changed.append({"experiment": k.experiment, "line": k.line, "threshold": k.threshold,
                                "threshold_relative": k.relative, "check": str(k), "a": a, "b": b, "fields": fields})
    return {"store_a": str(paths[0]), "store_b": str(paths[1]), "preset": preset, "experiments": names,
            "code_versions": versions, "left_out_rows": left_out, "checks": checks, "changed": changed}


def _num(v: Any) -> str:
    return "-" if v is None else f"{float(v):.3f}"


def _side(row: dict | None) -> str:
    if row is None:
        return "(not in this store)"
    return f"{_num(row['slope'])} [{_num(row['slope_ci_lo'])}, {_num(row['slope_ci_hi'])}] {row['verdict']}"


def format_diff(doc: dict) -> str:
    """The changed checks as an aligned table, A then B, and one line of counts."""
    lines = [f"A: {doc['store_a']}  code versions: "
             + (", ".join(f"{v} ({n} rows)" for v, n in doc["code_versions"]["a"].items()) or "none"),
             f"B: {doc['store_b']}  code versions: "
             + (", ".join(f"{v} ({n} rows)" for v, n in doc["code_versions"]["b"].items()) or "none")]
    for side in ("a", "b"):
        rowids = (doc.get("left_out_rows") or {}).get(side) or []
        if rowids:
            lines.append(f"{side.upper()}: {left_out_line(rowids)}")
    header = ["experiment", "line", "thr.", "tested", "A: slope [95% CI] verdict", "B: slope [95% CI] verdict", "changed"]
    names = {"slope": "slope", "slope_ci_lo": "CI", "slope_ci_hi": "CI", "predicted_slope_tested": "prediction",
             "verdict": "verdict"}
    rows = []
    for c in doc["changed"]:
        tested = (c["b"] or c["a"])["predicted_slope_tested"]
        what = "only in " + ("B" if c["a"] is None else "A") if c["a"] is None or c["b"] is None else \
            ", ".join(dict.fromkeys(names[f] for f in c["fields"]))
        threshold = threshold_text(c["threshold"], c.get("threshold_relative", False)) or "-"
        rows.append([c["experiment"], str(c["line"]), threshold,
                     _num(tested), _side(c["a"]), _side(c["b"]), what])
    if rows:
        widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
        lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines.extend("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows)
    n_verdicts = sum("verdict" in c["fields"] for c in doc["changed"])
    lines.append(f"{doc['checks']} checks in {len(doc['experiments'])} experiments ({doc['preset']} preset): "
                 f"{len(doc['changed'])} changed ({n_verdicts} verdicts), {doc['checks'] - len(doc['changed'])} the same")
    return "\n".join(lines)

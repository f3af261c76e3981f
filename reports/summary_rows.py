"""The report's numbers before any drawing: a summary's shape is checked (:func:`validate_summary`), and
it is flattened into one row per verdict (:func:`summary_entries`: every fit, system
check and comparative claim, the rows of the summary table and of summary.json's ``entries``) and one
overview row per experiment for the title page (:func:`overview_rows`). Which kinds of entry the report
knows is decided here too: the base kinds below and the page kinds the registered systems add.
"""
from __future__ import annotations

import datetime as _dt
from typing import Any

from recallkit import registry
from recallkit.compare.schema import check_row
from recallkit.reports.style import VERDICT_COLOURS
from recallkit.theory.errors import InputError

__all__ = ["BASE_KINDS", "page_kinds", "kinds", "entry_page_kinds", "generic_fits", "validate_summary", "summary_entries",
           "claim_rows", "grid_rows", "metric_direction", "overview_rows", "summary_date", "NO_CHECK", "LAW_FIELDS"]

# the empirics experiment kinds (min_size | max_capacity | grid | law) and "capacity" as an alias; every other kind
# is a system's own, drawn by the pages it registered (recallkit.registry.PageKind)
BASE_KINDS = ("min_size", "max_capacity", "capacity", "grid", "law")

#: what a law fit adds to its summary row: which law, its metric and which way is better, and the variable the
#: metric is fitted against (a row of the other kinds has none of these keys)
LAW_FIELDS = ("kind", "law", "metric", "direction", "variable")


def page_kinds() -> dict[str, registry.PageKind]:
    """Every registered system page kind by name (a broken registration is an InputError)."""
    try:
        return registry.page_kinds()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None


def kinds() -> tuple[str, ...]:
    """Every summary kind this report can draw: the base kinds and those the registered systems add."""
    return BASE_KINDS + tuple(page_kinds())


def entry_page_kinds(exp: dict) -> list[registry.PageKind]:
    """The system page kinds that draw pages and verdict rows for one entry: its ``kind`` when a system
    registered it, then those named in its optional ``page_kinds`` list (a system's judge adds one to a
    search experiment's entry, whose kind stays the empirics kind)."""
    known = page_kinds()
    names = [exp.get("kind", "")] + [k for k in exp.get("page_kinds") or [] if k != exp.get("kind")]
    return [known[name] for name in names if name in known]


def generic_fits(exp: dict) -> list[dict]:
    """The fits the report draws and lists itself: none for an entry whose own ``kind`` a system registered (a
    runner's entry), since its page kind draws and lists them (as its own quantity, not a parameter count);
    a search entry keeps its fits beside the kinds named in its ``page_kinds``."""
    if exp.get("kind", "") in page_kinds():
        return []
    return list(exp.get("fits", []))


#: the verdict column of a grid's row: a grid draws its metric and tests nothing, so it is no verdict of the three
#: (not inconclusive, which says a test could not decide) and the counts of checks leave it out
NO_CHECK = "no check"


def metric_direction(exp: dict, metric: str | None = None) -> str | None:
    """Whether ``higher`` or ``lower`` values of the entry's metric are better: its ``direction`` when it states
    one, else higher for an accuracy, lower for a loss or an error, else None (not known)."""
    if exp.get("direction") in ("higher", "lower"):
        return exp["direction"]
    name = str(metric or exp.get("metric") or "accuracy").lower()
    if "accuracy" in name:
        return "higher"
    if "loss" in name or "error" in name:
        return "lower"
    return None


def _is_grid_without_fits(exp: dict) -> bool:
    return exp.get("kind") == "grid" and not generic_fits(exp)


def grid_rows(exp: dict) -> list[dict]:
    """The one summary row of a grid entry without fits: what its heatmaps draw, and that it has no fitted checks
    (``kind = "grid"``, verdict :data:`NO_CHECK`). A grid entry with fits (a summary written by hand) has its fits'
    rows instead."""
    if not _is_grid_without_fits(exp):
        return []
    metric = str(exp.get("metric") or "accuracy")
    axes = f"({exp.get('base') or 'base'}, {exp.get('size') or 'size'})"
    return [{
        "kind": "grid", "experiment": exp["name"], "line": f"heatmap of {metric} over {axes}, mean over seeds",
        "threshold": None, "threshold_relative": False, "x": None, "metric": metric,
        "direction": metric_direction(exp, metric), "slope": None, "dominant": "", "verdict": NO_CHECK,
        "verdict_reason": f"a grid experiment draws {metric} over {axes} on its heatmap pages; it has no fitted "
                          f"checks (no slope is fitted and no prediction is tested)",
        "n_points": None, "n_censored": None,
    }]


def validate_summary(summary: Any) -> None:
    """Raise InputError naming the first field that does not have the documented shape."""
    if not isinstance(summary, dict):
        raise InputError(f"summary: expected a JSON object, got {type(summary).__name__}")
    exps = summary.get("experiments")
    if not isinstance(exps, list):
        raise InputError("summary.experiments: expected a list of experiment entries")
    seen = set()
    for i, exp in enumerate(exps):
        where = f"summary.experiments[{i}]"
        if not isinstance(exp, dict) or not isinstance(exp.get("name"), str) or not exp["name"]:
            raise InputError(f"{where}.name: expected a non-empty string")
        if exp["name"] in seen:
            raise InputError(f"{where}.name: duplicate experiment name {exp['name']!r}")
        seen.add(exp["name"])
        if exp.get("kind", "min_size") not in kinds():
            raise InputError(f"{where}.kind: expected one of {', '.join(kinds())}, got {exp.get('kind')!r}")
        extra = exp.get("page_kinds", [])
        if not isinstance(extra, list) or any(k not in page_kinds() for k in extra):
            raise InputError(f"{where}.page_kinds: expected a list of registered page kinds "
                             f"({', '.join(page_kinds())}), got {extra!r}")
        for key in ("fits", "terms", "lines"):
            if key in exp and not isinstance(exp[key], list):
                raise InputError(f"{where}.{key}: expected a list")
        for j, fit in enumerate(exp.get("fits", [])):
            if not isinstance(fit, dict) or "points" not in fit:
                raise InputError(f"{where}.fits[{j}]: expected a FitResult dict with 'points'")
    prov = summary.get("provenance", {})
    if not isinstance(prov, dict):
        raise InputError("summary.provenance: expected an object")


def _dominant_of(exp: dict) -> dict:
    """line label -> dominant term, from ``lines[].prediction`` or compare's ``predictions`` mapping."""
    out = {label: pred.get("dominant") for label, pred in (exp.get("predictions") or {}).items()
           if isinstance(pred, dict) and pred.get("dominant")}
    for line in exp.get("lines", []):
        pred = line.get("prediction") or {}
        if line.get("name") and pred.get("dominant"):
            out[line["name"]] = pred["dominant"]
    return out


def _log_power_of(exp: dict) -> dict:
    """line label -> the log power of its prediction (a string such as "1" or "1/2")."""
    out = {label: pred.get("log_power") for label, pred in (exp.get("predictions") or {}).items()
           if isinstance(pred, dict) and pred.get("log_power") is not None}
    for line in exp.get("lines", []):
        pred = line.get("prediction") or {}
        if line.get("name") and pred.get("log_power") is not None:
            out[line["name"]] = pred["log_power"]
    return out


def summary_entries(summary: dict) -> list[dict]:
    """One flat row per (experiment, line, threshold): the numbers each verdict rests on.

    A fitted check's row is its :class:`~recallkit.compare.schema.CheckRow`: ``predicted_slope_asymptotic`` is
    the asymptotic slope of the prediction, ``predicted_slope_tested`` the one the verdict compared (its
    finite-range slope over the fitted range when the prediction has a log factor, ``log_power``, or a
    system's finite-size reading), and ``band`` is that slope +- delta."""
    rows = []
    for exp in summary.get("experiments", []):
        dominant = _dominant_of(exp)
        log_powers = _log_power_of(exp)
        for fit in generic_fits(exp):
            row = check_row(fit, exp["name"], log_powers.get(fit.get("line")))
            row["dominant"] = fit.get("dominant") or dominant.get(fit.get("line"), "")
            rows.append(row)
        rows += grid_rows(exp)
        for page_kind in entry_page_kinds(exp):
            rows += registry.load_object(page_kind.rows)(exp)
        rows += claim_rows(exp)
    return rows


def claim_rows(exp: dict) -> list[dict]:
    """One summary row (``kind = "claim"``) per judged comparative claim of an experiment entry
    (``compare.claims``). A claim whose lines are not run in this preset (verdict ``not run``) is listed on the
    claims page and in the entry's ``claims``, but it is no check: it has no row."""
    rows = []
    for claim in exp.get("claims") or []:
        if claim.get("verdict") not in VERDICT_COLOURS:
            continue
        a, b = claim.get("a") or {}, claim.get("b") or {}
        rows.append({
            "kind": "claim",
            "experiment": exp["name"],
            "line": f"claim {claim.get('id')}: {claim.get('claim')}",
            "threshold": claim.get("threshold"),
            "threshold_relative": bool(claim.get("threshold_relative")),
            "x": f"{claim.get('statistic')} difference A - B",
            "claim_id": claim.get("id"),
            "claim_text": claim.get("text"),
            "relation": claim.get("relation"),
            "side_a": f"{a.get('experiment')}: {a.get('line')}",
            "side_b": f"{b.get('experiment')}: {b.get('line')}",
            "difference": claim.get("difference"),
            "se": claim.get("se"),
            "df": claim.get("df"),
            "interval": claim.get("interval"),
            "p": claim.get("p"),
            "alpha": claim.get("alpha"),
            "provenance": claim.get("provenance"),
            "dominant": "",
            "verdict": claim.get("verdict"),
            "verdict_reason": claim.get("reason"),
            "evidence": claim.get("evidence"),
            "evidence_reason": claim.get("evidence_reason"),
            "n_points": None,
            "n_censored": None,
        })
    return rows


def summary_date(summary: dict) -> _dt.datetime | None:
    """``provenance.date`` of the summary (UTC when it names no zone), or None when absent or unreadable."""
    raw = (summary.get("provenance") or {}).get("date")
    if not raw:
        return None
    try:
        when = _dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=_dt.timezone.utc)


_COMPARED = {"min_size": "fitted slope of log(parameter count) against log of the base, per line and threshold",
             "grid": "fitted slope of log(parameter count) against log of the base, per line and threshold",
             "max_capacity": "fitted capacity slope and constant C, per series",
             "capacity": "fitted capacity slope and constant C, per series"}


def overview_rows(summary: dict, rows: list[dict]) -> list[dict]:
    """One row per experiment for the title page: what is compared and how many checks gave which verdict."""
    out = []
    hashes = (summary.get("provenance") or {}).get("config_hashes") or {}
    for i, exp in enumerate(summary.get("experiments", []), start=1):
        mine = [r for r in rows if r.get("experiment") == exp["name"]]
        kind = exp.get("kind", "min_size")
        compared = _COMPARED.get(kind, "")
        if _is_grid_without_fits(exp):
            compared = grid_rows(exp)[0]["line"] + "; no fitted checks"
        elif kind == "law":
            law = exp.get("law") or {}
            compared = (f"fitted slope of log({law.get('metric') or exp.get('metric') or 'metric'}) against "
                        f"log({law.get('variable') or 'the base'}) per line, against the exponent of law "
                        f"{law.get('name') or '?'}")
        page_kind = page_kinds().get(kind)
        if page_kind is not None:  # a system's kind: its own words, else the checks its rows name
            compared = page_kind.compared or ("; ".join(str(r.get("line")) for r in mine) if mine else "no verdict")
        for extra in entry_page_kinds(exp):
            if extra is not page_kind and extra.compared:
                compared = f"{compared}; {extra.compared}" if compared else extra.compared
        judged = [c for c in exp.get("claims") or [] if c.get("verdict") in VERDICT_COLOURS]
        if judged:
            what = f"{len(judged)} comparative claim{'s' if len(judged) > 1 else ''} between fitted lines"
            compared = f"{compared}; {what}" if compared else what
        own = exp.get("config_hashes") or (hashes.get(exp["name"]) if isinstance(hashes, dict) else None) or []
        out.append({"index": i, "experiment": exp.get("title") or exp["name"], "name": exp["name"], "kind": kind,
                    "compared": compared, "checks": sum(r.get("verdict") != NO_CHECK for r in mine),
                    **{v: sum(r.get("verdict") == v for r in mine) for v in VERDICT_COLOURS},
                    "config_hashes": (own[0] if len(own) == 1 else f"{own[0][:12]} (+{len(own) - 1})") if own else "n/a"})
    return out

"""The multi-page PDF report, built from the ``summary`` dict (docs/ARCHITECTURE.md, "reports: summary").

``build_report(summary, out_dir)`` writes ``out_dir/recallkit-report.pdf``, every page also alone as
PNG and PDF under ``out_dir/figures/``, and ``out_dir/summary.json`` (the input plus the flat
``entries`` table). The same summary gives the same bytes: dates come from SOURCE_DATE_EPOCH (or the
summary's own date), the Creator is fixed and figures carry no wall-clock metadata.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import shutil
import tempfile
import warnings
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from matplotlib.figure import Figure

from recallkit.reports import figures, render, tables
from recallkit.reports.style import (
    PAGE_LANDSCAPE,
    PALETTE,
    VERDICT_COLOURS,
    cut_lines,
    fill,
    new_figure,
    pdf_metadata,
    source_date,
    style_context,
    wrap_lines,
    wrap_title,
)
from recallkit import registry
from recallkit.theory.errors import InputError
from recallkit.theory.scaling import power_text

__all__ = ["build_report", "experiment_entry", "summary_entries", "validate_summary", "REPORT_NAME", "SCHEMA"]

REPORT_NAME = "recallkit-report.pdf"
SCHEMA = "recallkit.summary/1"
# the empirics experiment kinds (min_size | max_capacity | grid), "capacity" as an alias and "dmin" for
# minimal-size experiments judged log against power (compare.model_selection); every other kind is a
# system's own, drawn by the pages it registered (recallkit.registry.PageKind)
BASE_KINDS = ("min_size", "max_capacity", "capacity", "grid", "dmin")


def _page_kinds() -> dict[str, registry.PageKind]:
    try:
        return registry.page_kinds()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None


def kinds() -> tuple[str, ...]:
    """Every summary kind this report can draw: the base kinds and those the registered systems add."""
    return BASE_KINDS + tuple(_page_kinds())


def entry_page_kinds(exp: dict) -> list[registry.PageKind]:
    """The system page kinds that draw pages and verdict rows for one entry: its ``kind`` when a system
    registered it, then those named in its optional ``page_kinds`` list (a system's judge adds one to a
    search experiment's entry, whose kind stays the empirics kind)."""
    known = _page_kinds()
    names = [exp.get("kind", "")] + [k for k in exp.get("page_kinds") or [] if k != exp.get("kind")]
    return [known[name] for name in names if name in known]


def experiment_entry(fitted: dict, **extra: Any) -> dict:
    """A summary experiment entry from ``compare.fit_experiment(...).to_dict()`` (= ``recallkit fit --json``).

    ``extra`` adds or overrides keys: ``title``, ``regions``, ``phase_lines``, ``terms``, ``lines`` (with
    ``heatmap`` / ``boundary_points``), ``dmin``, ``notes``. Lines named only in ``predictions`` or in a
    fit are filled in by the report itself.
    """
    if not isinstance(fitted, dict) or not fitted.get("experiment"):
        raise InputError("fit result: expected compare.fit_experiment(...).to_dict() with an 'experiment' name")
    entry = {k: v for k, v in fitted.items() if k not in ("sweep",)}
    entry["name"] = fitted["experiment"]
    if fitted.get("sweep"):
        sweep = fitted["sweep"]
        # runs in total, not reused/computed: which of them this invocation trained depends on the
        # store's state, and the PDF must be the same for the same stored results
        runs = sum(int(sweep.get(k, 0) or 0) for k in ("reused", "computed"))
        entry.setdefault("notes", []).append(
            f"sweep: {runs} runs" + "".join(f", {k} {sweep[k]}" for k in ("missing", "failed") if k in sweep))
    entry.update(extra)
    return entry


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
        if not isinstance(extra, list) or any(k not in _page_kinds() for k in extra):
            raise InputError(f"{where}.page_kinds: expected a list of registered page kinds "
                             f"({', '.join(_page_kinds())}), got {extra!r}")
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

    ``predicted_slope`` is the asymptotic slope of the prediction; ``predicted_slope_tested`` is the one
    the verdict compared (its finite-range slope over the fitted range when the prediction has a log
    factor, ``log_power``), and ``band`` is that slope +- delta."""
    rows = []
    for exp in summary.get("experiments", []):
        dominant = _dominant_of(exp)
        log_powers = _log_power_of(exp)
        for fit in exp.get("fits", []):
            tested = fit.get("predicted_slope_finite_range")
            rows.append({
                "experiment": exp["name"],
                "line": fit.get("line"),
                "threshold": fit.get("threshold"),
                "threshold_relative": bool(fit.get("threshold_relative")),
                "x": fit.get("x"),
                "slope": fit.get("slope"),
                "slope_ci": fit.get("slope_ci"),
                "slope_ci_bootstrap": fit.get("slope_ci_bootstrap"),
                "predicted_slope": fit.get("predicted_slope"),
                "predicted_slope_tested": fit.get("predicted_slope") if tested is None else tested,
                "log_power": fit.get("log_power", log_powers.get(fit.get("line"))),
                "band": fit.get("band"),
                "p_tost": fit.get("p_tost"),
                "delta": fit.get("delta"),
                "alpha": fit.get("alpha"),
                "dominant": fit.get("dominant") or dominant.get(fit.get("line"), ""),
                "verdict": fit.get("verdict"),
                "verdict_reason": fit.get("verdict_reason"),
                "prediction_compared": fit.get("prediction_compared"),
                "predicted_slope_asymptotic": fit.get("predicted_slope_asymptotic"),
                "predicted_slope_realised": fit.get("predicted_slope_realised"),
                "predicted_slope_finite_size": fit.get("predicted_slope_finite_size"),
                "verdict_asymptotic": fit.get("verdict_asymptotic"),
                "n_points": fit.get("n_points"),
                "n_censored": len(fit.get("censored") or []),
                "C": fit.get("C"),
                "C_ci": fit.get("C_ci"),
            })
        dmin = exp.get("dmin") or {}
        for kind in ("learned", "frozen"):
            sel = (dmin.get(kind) or {}).get("selection") or {}
            for g in sel.get("groups", []):
                rows.append({
                    "experiment": exp["name"],
                    "line": f"{kind}, {sel.get('group_key', 'R')} = {g.get(sel.get('group_key', 'R'))}: "
                            + ("b of a + b log2 N" if g.get("preferred") == "log" else "p of c N^p"),
                    "threshold": None, "x": "d_min(N): log vs power",
                    "slope": (g.get("log") or {}).get("b") if g.get("preferred") == "log"
                    else (g.get("power") or {}).get("p"),
                    "slope_ci": (g.get("log") or {}).get("b_ci") if g.get("preferred") == "log"
                    else (g.get("power") or {}).get("p_ci"),
                    "slope_ci_bootstrap": None, "predicted_slope": None,
                    "dominant": (f"predicted {g['predicted']}, " if g.get("predicted") else "")
                    + f"data prefer {g.get('preferred', 'n/a')}",
                    "verdict": g.get("verdict"), "verdict_reason": g.get("verdict_reason") or g.get("preferred_reason"),
                    "n_points": g.get("n_points"), "n_censored": len(g.get("censored") or []),
                })
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
            "n_points": None,
            "n_censored": None,
        })
    return rows


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower()[:60] or "x"


def _summary_date(summary: dict) -> _dt.datetime | None:
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
             "capacity": "fitted capacity slope and constant C, per series",
             "dmin": "log (a + b log2 N) against power (c N^p) form of d_min(N), per model and R"}


def overview_rows(summary: dict, rows: list[dict]) -> list[dict]:
    """One row per experiment for the title page: what is compared and how many checks gave which verdict."""
    out = []
    hashes = (summary.get("provenance") or {}).get("config_hashes") or {}
    for i, exp in enumerate(summary.get("experiments", []), start=1):
        mine = [r for r in rows if r.get("experiment") == exp["name"]]
        kind = exp.get("kind", "min_size")
        compared = _COMPARED.get(kind, "")
        page_kind = _page_kinds().get(kind)
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
                    "compared": compared, "checks": len(mine),
                    **{v: sum(r.get("verdict") == v for r in mine) for v in VERDICT_COLOURS},
                    "config_hashes": (own[0] if len(own) == 1 else f"{own[0][:12]} (+{len(own) - 1})") if own else "n/a"})
    return out


def _title_page(summary: dict, rows: list[dict], max_rows: int = 16) -> Figure:
    """Title, provenance, the per-experiment verdict overview and any failed experiments."""
    prov = summary.get("provenance") or {}
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.04, 0.96, summary.get("title") or "recallkit report", fontsize=20, fontweight="bold", va="top")
        if summary.get("subtitle"):
            fig.text(0.04, 0.915, summary["subtitle"], fontsize=11, va="top", color="0.3")
        hashes = prov.get("config_hashes") or {}
        n_hashes = sum(len(v) for v in hashes.values()) if isinstance(hashes, dict) else len(hashes)
        when = source_date() or _summary_date(summary)
        fields = [
            ("code version", prov.get("code_version", "unknown")),
            ("date", when.strftime("%Y-%m-%d %H:%M UTC") if when else prov.get("date", "unknown")),
            ("device", f"{prov.get('device', 'unknown')}, {prov.get('threads', '?')} thread(s)"),
            ("torch", prov.get("torch_version", "n/a")),
            ("preset", prov.get("preset", "n/a")),
            ("config hashes", f"{n_hashes} over {len(hashes)} experiments: first of each in the table below, "
                              "all in summary.json (provenance.config_hashes)" if n_hashes else "none recorded"),
        ]
        # The run's wall time and how much came from the store stay in summary.json (run_wall_time_s,
        # notes): the PDF shows only what the stored results determine, so a re-run is byte-identical.
        y = 0.87
        for key, value in fields:
            fig.text(0.04, y, key, fontsize=9.5, color="0.35", va="top")
            fig.text(0.17, y, str(value), fontsize=9.5, va="top", family="DejaVu Sans Mono")
            y -= 0.028
        counts = {v: sum(r.get("verdict") == v for r in rows) for v in VERDICT_COLOURS}
        fig.text(0.04, y - 0.01, f"{len(rows)} checks: " + ", ".join(f"{n} {v}" for v, n in counts.items())
                 + " (each with its numbers on the next pages)",
                 fontsize=11, va="top", fontweight="bold")
        y -= 0.05
        overview = overview_rows(summary, rows)
        failures = [str(f) for f in summary.get("failures") or []]
        fail_text = ""
        if failures:
            fail_text = "\n".join(fill(f"- {f}", 150, subsequent_indent="  ") for f in failures[:8])
            if len(failures) > 8:
                fail_text += f"\n... and {len(failures) - 8} more (summary.json: failures)"
        fail_h = 0.0 if not fail_text else 0.05 + 0.022 * (fail_text.count("\n") + 1)
        header = ["#", "experiment", "kind", "what is compared", "checks", "consistent", "inconsistent",
                  "inconclusive", "config hash"]
        cells, colours = [], []
        for o in overview[:max_rows]:
            cells.append([str(o["index"]), o["experiment"], o["kind"], o["compared"], str(o["checks"]),
                          str(o["consistent"]), str(o["inconsistent"]), str(o["inconclusive"]), o["config_hashes"]])
            colours.append([None] * 5 + [VERDICT_COLOURS[v] if o[v] else None
                                         for v in ("consistent", "inconsistent", "inconclusive")] + [None])
        ax = fig.add_axes((0.03, 0.04 + fail_h, 0.94, y - 0.04 - fail_h))
        tables.draw_table(ax, header, cells, [0.03, 0.17, 0.09, 0.27, 0.05, 0.08, 0.08, 0.08, 0.15], fontsize=8,
                          cell_colours=colours, wrap=[0, 27, 0, 43, 0, 0, 0, 0, 0])
        if len(overview) > max_rows:
            ax.text(0.0, 0.0, f"... {len(overview) - max_rows} more experiments in the sections that follow",
                    transform=ax.transAxes, fontsize=9)
        if fail_text:
            fig.text(0.04, 0.03 + fail_h, f"{len(failures)} experiment(s) failed and are not in this report:",
                     fontsize=10, fontweight="bold", va="top", color=PALETTE["vermillion"])
            fig.text(0.04, 0.03 + fail_h - 0.03, fail_text, fontsize=8.5, va="top")
    return fig


def _hash_summary(hashes, n: int) -> str:
    if isinstance(hashes, dict):
        parts = [f"{exp}: {', '.join(v[:3])}{' ...' if len(v) > 3 else ''} ({len(v)})" for exp, v in hashes.items()]
        return "\n".join(parts) if parts else "none recorded"
    return ", ".join(list(hashes)[:6]) + (" ..." if n > 6 else "") if hashes else "none recorded"


_PARA_FONT = 10.5
_PARA_LINE = _PARA_FONT * 1.25 / 72 / PAGE_LANDSCAPE[1]  # one text line, in figure height


def _write_text(fig: Figure, title: str, paragraphs: Sequence[str], bottom: float = 0.08) -> float:
    """Title and paragraphs from the top of ``fig``; returns the y below the last one. Paragraphs that
    would pass ``bottom`` are replaced by one line saying how many were left out (nothing runs off)."""
    wrapped_title = wrap_title(title, PAGE_LANDSCAPE[0] * 0.92, 16, bold=True)
    fig.text(0.04, 0.96, wrapped_title, fontsize=16, fontweight="bold", va="top")
    y = 0.96 - (wrapped_title.count("\n") + 1) * 16 * 1.3 / 72 / PAGE_LANDSCAPE[1] - 0.03
    for k, para in enumerate(paragraphs):
        wrapped = fill(str(para), 120)
        height = _PARA_LINE * (wrapped.count("\n") + 1)
        if y - height < bottom:
            fig.text(0.04, y, f"... {len(paragraphs) - k} more paragraph(s) (notes) in summary.json",
                     fontsize=_PARA_FONT, va="top", style="italic")
            return y - _PARA_LINE - 0.015
        fig.text(0.04, y, wrapped, fontsize=_PARA_FONT, va="top")
        y -= height + 0.015
    return y


def _text_page(title: str, paragraphs: Sequence[str]) -> Figure:
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        _write_text(fig, title, paragraphs)
    return fig


def _section_page(title: str, paragraphs: Sequence[str], rows: list[dict], max_rows: int = 16) -> Figure:
    """A section's first page: what the experiment is, then its fitted-against-predicted table."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        # keep room for at least a few table rows under the text
        top = _write_text(fig, title, paragraphs, bottom=0.30 if rows else 0.06) - 0.01
        if rows:
            height = max(top - 0.06, 0.2)
            ax = fig.add_axes((0.03, 0.06, 0.94, height))
            # as many rows as the space holds (a row is as tall as its most wrapped cell)
            budget = tables.slope_table_budget(height * fig.get_figheight())
            shown = tables.chunk_rows(rows, budget=budget)[0][:max_rows]
            tables.draw_slope_table(ax, shown)
            if len(rows) > len(shown):
                fig.text(0.03, 0.035, f"{len(rows) - len(shown)} more rows in the summary of verdicts and in "
                         "summary.json", fontsize=9, va="top")
    return fig


def _lines_of(exp: dict) -> list[dict]:
    """The experiment's lines in order: ``lines`` first, then any line named only by a fit or a prediction."""
    lines = [dict(line) for line in exp.get("lines", [])]
    known = {line.get("name") for line in lines}
    predictions = exp.get("predictions") or {}
    for name in [f.get("line") for f in exp.get("fits", [])] + list(predictions):
        if name not in known:
            known.add(name)
            lines.append({"name": name})
    for line in lines:
        if "prediction" not in line and line.get("name") in predictions:
            line["prediction"] = predictions[line["name"]]
    return lines


def _heatmap_axes(exp: dict, cells: list[dict]) -> tuple[str, str]:
    """(base, size) keys of an experiment's heatmap cells: the entry's own ``base``/``size`` when given,
    else the fits' regressor ("log N" -> N), else the first of V, N present in the cells; size d."""
    base = exp.get("base")
    if not base:
        x = next((f.get("x") for f in exp.get("fits", []) if f.get("x")), "")
        name = str(x).removeprefix("log").strip(" ()")
        base = name if name and all(name in c for c in cells[:1]) else None
    if not base:
        base = next((k for k in ("V", "N") if cells and k in cells[0]), "V")
    return base, exp.get("size") or "d"


def _phase_page(regions: dict, phase_lines: list, head: str) -> Figure:
    from recallkit.reports.phase import draw_phase_diagram

    with style_context():
        fig = new_figure(PAGE_LANDSCAPE)
        draw_phase_diagram(regions, lines=phase_lines, ax=fig.add_subplot())
        fig.suptitle(wrap_title(f"{head}: phase diagram with the experiment's lines", 10.5, 14))
    return fig


def lower_bound_gap_rows(diagram: dict) -> list[list[str]]:
    """One row per (region, lower bound): the required parameter-count exponent (upper bound), the
    lower bound's exponent and the gap between them, each as base^(exponent) log(base)^(power)."""
    base = diagram.get("base", "V")

    def power(exponent: str, log_power: str) -> str:
        return power_text(base, exponent, log_power)

    rows = []
    for region in diagram.get("regions", []):
        required = power(region["required_param_exponent"], region["log_power"])
        for gap in region.get("lower_bound_gaps", []):
            rows.append([region["dominant"], required, gap["name"], power(gap["exponent"], gap["log_power"]),
                         power(gap["gap_exponent"], gap["gap_log_power"])])
    return rows


def lower_bound_gap_page(diagram: dict, title: str) -> Figure:
    """The gap between what the theory requires (the upper bound) and each lower bound, region by region."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.suptitle(wrap_title(title, 10.5, 14), x=0.04, ha="left")
        fig.text(0.04, 0.90, fill(
            f"Exponents in the free exponents of the scaling {diagram.get('scaling', '')}. required: the "
            f"parameter count {diagram.get('param_count', '')} that signal >= noise needs where that noise "
            "term dominates (upper bound); gap = required / lower bound. A zero gap means the bound is tight "
            "in that region; each bound's provenance and assumptions are on the theory-terms page and in the "
            "derivation.", 160), fontsize=9, va="top", color="0.25")
        ax = fig.add_axes([0.04, 0.05, 0.92, 0.78])
        tables.draw_table(ax, ["region (dominant noise)", "required count", "lower bound", "bound",
                               "gap (required / bound)"], lower_bound_gap_rows(diagram),
                          [0.18, 0.22, 0.2, 0.2, 0.2], fontsize=8.5, wrap=[24, 30, 26, 30, 30])
    return fig


def _as_pages(items, section: str, default_data: Any) -> list[render.Page]:
    """A system's page list (``(stem, builder)``, ``(stem, builder, label)`` or :class:`render.Page`) as
    Pages of ``section``; a page that names no data of its own is keyed by ``default_data``."""
    out = []
    for item in items:
        if isinstance(item, render.Page):
            out.append(item if item.section else render.Page(item.stem, item.build, item.label, section,
                                                             item.data if item.data is not None else default_data,
                                                             item.cacheable))
            continue
        stem, build, *rest = item
        label = rest[0] if rest else str(stem).replace("-", " ")
        out.append(render.Page(stem, build, label, section, default_data))
    return out


def _cut_reason(reason: str | None, check: int | None, width: int, lines: int = 2) -> str:
    """A verdict reason cut to ``lines`` lines on a page; the full text is in the appendix and summary.json."""
    where = f" [in full: appendix, check {check}]" if check else " [in full: appendix and summary.json]"
    return cut_lines(str(reason or ""), width, max_lines=lines, more=" ..." + where)


def _experiment_pages(exp: dict, index: int, experiments: Sequence[dict] = (),
                      terms_shown_in: int | None = None, rows: Sequence[dict] | None = None,
                      experiments_digest: str = "", system_pages: bool = True) -> list[render.Page]:
    """The pages of one experiment's section, in reading order.

    ``experiments``: every entry of the report, handed to a system's pages (one may draw what another
    produced). ``terms_shown_in``: the section that already showed this pack's terms (not repeated).
    ``rows``: this experiment's rows of the summary table (numbered by ``check``); made here if not given.
    ``system_pages=False``: leave out the pages a system draws (they may read every entry of the report)."""
    page_kind = _page_kinds().get(exp.get("kind", ""))
    system_kinds = entry_page_kinds(exp)
    name = exp["name"]
    head = f"{index}. {exp.get('title') or name}"
    section = head
    pages: list[render.Page] = []

    def page(stem: str, build: Callable[[], Figure], label: str, data: Any) -> None:
        pages.append(render.Page(stem, build, label, section, [head, data]))

    intro = [f"experiment: {name}   kind: {exp.get('kind', 'min_size')}"
             + (f"   pack: {exp['pack']}" if exp.get("pack") else "")
             + (f"   preset: {exp['preset']}" if exp.get("preset") else "")]
    if exp.get("reference"):
        intro.append(f"reference: {exp['reference']}")
    if exp.get("description"):
        intro.append(exp["description"])
    lines = _lines_of(exp)
    for line in lines:
        pred = line.get("prediction") or {}
        if pred.get("error"):
            intro.append(f"line {line.get('name')}: no prediction ({pred['error']})")
        elif pred:
            intro.append(f"line {line.get('name')}: predicted slope {pred.get('slope_exact', pred.get('slope'))}"
                         f" (dominant: {pred.get('dominant', 'n/a')}, log power {pred.get('log_power', '0')})"
                         + ("; tested over the fitted range as its finite-range slope (see the fits)"
                            if str(pred.get("log_power", "0")) not in ("0", "0.0") else ""))
    if exp.get("config_hashes"):
        intro.append("config hashes: " + ", ".join(exp["config_hashes"][:12])
                     + (" ..." if len(exp["config_hashes"]) > 12 else ""))
    intro += list(exp.get("notes", []))
    if rows is None:
        rows = [dict(r, check=None) for r in summary_entries({"experiments": [exp]})]
    rows = list(rows)
    if any(k.intro_reasons for k in system_kinds):  # verdicts that rest on numbers in words
        intro += [f"verdict on '{r['line']}': {r['verdict']}. " + _cut_reason(r.get("verdict_reason"), r.get("check"), 120)
                  for r in rows]
    if terms_shown_in:
        intro.append(f"theory terms of pack {exp.get('pack')}: see section {terms_shown_in}")
    if not (page_kind is not None and page_kind.own_intro):  # else the system's first page introduces it
        page("summary", partial(_section_page, head, intro, rows), "overview and verdicts", [intro, rows])

    if exp.get("regions"):
        page("phase", partial(_phase_page, exp["regions"], exp.get("phase_lines") or [], head), "phase diagram",
             [exp["regions"], exp.get("phase_lines")])
        if any(region.get("lower_bound_gaps") for region in exp["regions"].get("regions", [])):
            page("bounds", partial(lower_bound_gap_page, exp["regions"], f"{head}: required count against the lower bounds"),
                 "required count against the lower bounds", exp["regions"])
    terms = [] if terms_shown_in else exp.get("terms") or []
    # two-level fractions need about a tenth of a landscape page each; pages balanced, no lone last row
    per_page = -(-len(terms) // -(-len(terms) // 11)) if terms else 1
    for k in range(0, len(terms), per_page):
        part = f" ({k // per_page + 1} of {-(-len(terms) // per_page)})" if len(terms) > per_page else ""
        page("terms" + (f"-{k // per_page + 1}" if k else ""),
             partial(tables.term_table, terms[k:k + per_page], title=f"{head}: theory terms{part}"),
             f"theory terms{part}", [terms[k:k + per_page], part])

    # each fit carries its check number: its reason is cut on the page and given in full in the appendix
    fits = [dict(f, check=r.get("check")) for f, r in zip(exp.get("fits", []), rows)]
    predictions = {line.get("name"): line.get("prediction") for line in lines if line.get("prediction")}
    for f in fits:
        pred = predictions.get(f.get("line")) or {}
        if f.get("log_power") is None and pred.get("log_power") is not None:
            f["log_power"] = pred.get("log_power")
    capacity = exp.get("kind") in ("capacity", "max_capacity")
    if capacity and fits:
        labels = [str(f.get("line") or f.get("experiment")) for f in fits]
        page("capacity", partial(figures.capacity_plot, fits, labels=labels, size=PAGE_LANDSCAPE, title=f"{head}: capacity"),
             "capacity", [fits, labels])
        # one series per line: all on one page
        page("fits", partial(figures.fit_grid, fits, title=f"{head}: fits", size=PAGE_LANDSCAPE), "fits", fits)
    fitted_lines = {f.get("line") for f in fits if f.get("slope") is not None}
    if not capacity and exp.get("claims") and len(fitted_lines) > 1:
        # the lines against one another, with the claims under each threshold's panel: what the claims compare
        together = [f for f in fits if f.get("line") in fitted_lines]
        page("lines", partial(figures.lines_plot, together, exp["claims"], title=f"{head}: the lines together",
                              size=PAGE_LANDSCAPE), "the lines together", [together, exp["claims"]])
    for j, line in enumerate(lines):
        lname = line.get("name", f"line {j + 1}")
        line_fits = [] if capacity else [f for f in fits if f.get("line") == lname]
        if line.get("heatmap"):
            x_key, y_key = _heatmap_axes(exp, line["heatmap"])
            page(f"heatmap-{_slug(lname)}",
                 partial(figures.accuracy_heatmap, line["heatmap"], line.get("boundary_points") or [], line_fits,
                         x_key=x_key, y_key=y_key, title=f"{head}: accuracy, {lname}", size=PAGE_LANDSCAPE,
                         search=exp.get("kind")),
                 f"accuracy heatmap, {lname}", [line, line_fits, x_key, y_key, exp.get("kind")])
        if line_fits:
            page(f"fits-{_slug(lname)}", partial(figures.fit_grid, line_fits, title=f"{head}: fits along {lname}",
                                                 size=PAGE_LANDSCAPE),
                 f"fits along {lname}", [line_fits, lname])
    if exp.get("claims"):
        claims = [dict(c, check=r.get("check")) if r else dict(c) for c, r in _claim_checks(exp["claims"], rows)]
        page("claims", partial(tables.claim_table, claims, title=f"{head}: comparative claims"),
             "comparative claims", claims)
    if exp.get("dmin"):
        page("dmin", partial(figures.dmin_plot, exp["dmin"], size=PAGE_LANDSCAPE,
                             title=f"{head}: d_min, solid = a + b log2 N, dashed = c N$^p$"),
             "d_min: log against power", exp["dmin"])
    if system_pages:
        # a system's page may read any entry of the report: keyed by all of them
        for kind in system_kinds:
            pages += _as_pages(registry.load_object(kind.pages)(exp, head, experiments), section,
                               [head, exp, experiments_digest])
    return [dataclasses.replace(p, stem=f"{index:02d}-{_slug(name)}-{p.stem}") for p in pages]


def _claim_checks(claims: Sequence[dict], rows: Sequence[dict]) -> list[tuple[dict, dict | None]]:
    """Each claim with its summary row (None for a claim not run in this preset), in order."""
    mine = iter([r for r in rows if r.get("kind") == "claim"])
    return [(c, next(mine, None) if c.get("verdict") in VERDICT_COLOURS else None) for c in claims]


# ----------------------------------------------------------------------------- contents and appendix
_CONTENTS_FONT = 8.5
_CONTENTS_LINE = _CONTENTS_FONT * 1.35  # points per line
_CONTENTS_TOP, _CONTENTS_BOTTOM = 0.90, 0.05  # figure fractions
_CONTENTS_COLUMNS = ((0.04, 0.47), (0.53, 0.96))  # (left, right) of each column


def _contents_lines_per_column() -> int:
    return int((_CONTENTS_TOP - _CONTENTS_BOTTOM) * PAGE_LANDSCAPE[1] * 72 / _CONTENTS_LINE)


def contents_entries(pages: Sequence[render.Page], first_page: int = 1) -> list[dict]:
    """The lines of the contents: each section (level 0) and each page of a section (level 1), with the
    page number (1-based) it starts on."""
    out: list[dict] = []
    current = None
    for n, p in enumerate(pages, start=first_page):
        if not p.section:
            out.append({"level": 0, "label": p.label, "page": n})
            current = None
            continue
        if p.section != current:
            out.append({"level": 0, "label": p.section, "page": n})
            current = p.section
        out.append({"level": 1, "label": p.label, "page": n})
    return out


def _contents_layout(entries: Sequence[dict]) -> list[list[list[dict]]]:
    """Entries split into pages of columns; a section heading never ends a column."""
    per_column = _contents_lines_per_column()
    columns: list[list[dict]] = [[]]
    for k, e in enumerate(entries):
        col = columns[-1]
        heading_last = e["level"] == 0 and k + 1 < len(entries) and entries[k + 1]["level"] == 1
        if len(col) >= per_column or (heading_last and len(col) >= per_column - 1):
            columns.append([])
        columns[-1].append(e)
    n_cols = len(_CONTENTS_COLUMNS)
    return [columns[i:i + n_cols] for i in range(0, len(columns), n_cols)]


def contents_page_count(n_entries: int) -> int:
    # a heading may move to the next column: count generously, then lay out exactly (build_report checks)
    per_page = _contents_lines_per_column() * len(_CONTENTS_COLUMNS)
    return max(1, -(-int(n_entries * 1.05 + 1) // per_page))


def _contents_page(columns: list[list[dict]], part: str) -> Figure:
    """Sections and their pages with page numbers, in columns (each line links to its page in the PDF)."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.04, 0.96, f"Contents{part}", fontsize=16, fontweight="bold", va="top")
        for (left, right), column in zip(_CONTENTS_COLUMNS, columns):
            for level in (0, 1):  # one text block per level and column: cheap to lay out
                labels = "\n".join(cut_lines(e["label"], 70 if level else 64, max_lines=1) if e["level"] == level else ""
                                   for e in column)
                numbers = "\n".join(str(e["page"]) if e["level"] == level else "" for e in column)
                weight = "bold" if level == 0 else "normal"
                fig.text(left + 0.015 * level, _CONTENTS_TOP, labels, fontsize=_CONTENTS_FONT, va="top",
                         fontweight=weight, linespacing=1.35, color="black" if level == 0 else "0.15")
                fig.text(right, _CONTENTS_TOP, numbers, fontsize=_CONTENTS_FONT, va="top", ha="right",
                         fontweight=weight, linespacing=1.35)
        fig.text(0.04, 0.02, "Each line links to its page; the PDF's outline (bookmarks) holds the same entries.",
                 fontsize=8, color="0.4")
    return fig


def contents_links(columns: list[list[dict]]) -> list[tuple[tuple[float, float, float, float], int]]:
    """(rectangle in PDF points, 0-based target page) of each contents line, as :func:`_contents_page` draws it."""
    width, height = PAGE_LANDSCAPE[0] * 72, PAGE_LANDSCAPE[1] * 72
    out = []
    for (left, right), column in zip(_CONTENTS_COLUMNS, columns):
        for k, e in enumerate(column):
            top = _CONTENTS_TOP * height - k * _CONTENTS_LINE
            out.append(((left * width, top - _CONTENTS_LINE, right * width, top), e["page"] - 1))
    return out


_APPENDIX_FONT = 7.5
_APPENDIX_WIDTH = 205  # characters per line of the appendix (a landscape page holds about 220 at 7.5 pt)
_APPENDIX_LINES = 53  # (0.92 - 0.03) of the page at 7.5 pt x 1.3


def appendix_items(rows: Sequence[dict], section_of: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(heading, wrapped reason lines) of every check with a reason, numbered as in the summary table."""
    items = []
    for r in rows:
        reasons = []
        if r.get("verdict_reason"):
            reasons.append(f"{r.get('verdict')}: {r['verdict_reason']}")
        if r.get("verdict_reason_drift_corrected"):
            reasons.append(f"drift-corrected, {r.get('verdict_drift_corrected')}: {r['verdict_reason_drift_corrected']}")
        if not reasons:
            continue
        thr = r.get("threshold")
        head = (f"[{r.get('check')}] {section_of.get(r['experiment'], r['experiment'])}: {r.get('line') or ''}"
                + (f", threshold {float(thr):g}" if thr is not None else ""))
        body = [line for text in reasons for line in wrap_lines(text, _APPENDIX_WIDTH, initial_indent="    ",
                                                                 subsequent_indent="    ")]
        items.append((cut_lines(head, _APPENDIX_WIDTH - 10, max_lines=1), body))
    return items


def _appendix_chunks(items: list[tuple[str, list[str]]]) -> list[list[tuple[str, list[str]]]]:
    chunks: list[list] = [[]]
    used = 0
    for head, body in items:
        cost = 1 + len(body) + 0.4
        if chunks[-1] and used + cost > _APPENDIX_LINES:
            chunks.append([])
            used = 0
        chunks[-1].append((head, body))
        used += cost
    return [c for c in chunks if c]


def _appendix_page(chunk: list[tuple[str, list[str]]], title: str) -> Figure:
    """Every verdict's reason in full: one heading line (check number, section, what is checked) and the
    reason under it. Headings in bold, drawn as one text block per style (cheap to lay out)."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.03, 0.965, title, fontsize=13, fontweight="bold", va="top")
        heads, bodies = [], []
        for head, body in chunk:
            heads += [head] + [""] * len(body)
            bodies += [""] + body
        top = 0.92
        for text, weight in (("\n".join(heads), "bold"), ("\n".join(bodies), "normal")):
            fig.text(0.03, top, text, fontsize=_APPENDIX_FONT, va="top", fontweight=weight, linespacing=1.3,
                     family="DejaVu Sans")
    return fig


# ----------------------------------------------------------------------------- the report
def report_pages(summary: dict, rows: list[dict], max_title_rows: int = 16) -> list[render.Page]:
    """Every page of the report in order: title, contents, summary of verdicts, one section per
    experiment, the appendix of verdict reasons. ``rows``: :func:`summary_entries`, numbered (``check``)."""
    body: list[render.Page] = []
    chunks = tables.chunk_rows(rows, budget=tables.slope_table_budget(tables.SLOPE_TABLE_AXES[3] * PAGE_LANDSCAPE[1]))
    for k, chunk in enumerate(chunks, start=1):
        part = f" ({k} of {len(chunks)})" if len(chunks) > 1 else ""
        body.append(render.Page(f"00-summary-{k}", partial(
            tables.slope_table, chunk, title=f"Summary of verdicts{part}: one row per check; every reason in full in "
                                             "the appendix and in summary.json (entries)", max_rows=len(chunk)),
            f"part {k} of {len(chunks)}" if len(chunks) > 1 else "all checks", "Summary of verdicts", [chunk, part]))
    experiments = summary["experiments"]
    digest = render.data_digest(experiments)
    terms_section: dict[str, int] = {}  # pack -> first section that shows its terms
    section_of = {}
    for i, exp in enumerate(experiments, start=1):
        pack = exp.get("pack")
        shown = terms_section.get(pack) if pack else None
        if pack and exp.get("terms") and shown is None:
            terms_section[pack] = i
        section_of[exp["name"]] = f"{i}. {exp.get('title') or exp['name']}"
        mine = [r for r in rows if r.get("experiment") == exp["name"]]
        body += _experiment_pages(exp, i, experiments, terms_shown_in=shown, rows=mine, experiments_digest=digest)
    appendix = _appendix_chunks(appendix_items(rows, section_of))
    for k, chunk in enumerate(appendix, start=1):
        part = f" ({k} of {len(appendix)})" if len(appendix) > 1 else ""
        title = f"Appendix: every verdict's reason in full{part} (numbered as the checks in the summary of verdicts)"
        body.append(render.Page(f"99-appendix-{k}", partial(_appendix_page, chunk, title),
                                f"part {k} of {len(appendix)}" if len(appendix) > 1 else "all reasons",
                                "Appendix: verdict reasons", [chunk, title]))

    title_page = render.Page("00-title", partial(_title_page, summary, rows, max_title_rows), "Title page and overview",
                             "", [{k: v for k, v in summary.items() if k not in ("experiments", "entries", "run_wall_time_s")},
                                  overview_rows(summary, rows), [r.get("verdict") for r in rows], max_title_rows,
                                  str(source_date() or "")])
    # the contents come second and count themselves: find how many pages they take, then number
    n_contents = 1
    while True:
        contents_pages = [render.Page(f"00-contents-{k + 1}", _contents_page, "Contents") for k in range(n_contents)]
        entries = contents_entries([title_page, *contents_pages, *body])
        layout = _contents_layout(entries)
        if len(layout) <= n_contents:
            break
        n_contents = len(layout)
    layout += [[] for _ in range(n_contents - len(layout))]
    contents = []
    for k, columns in enumerate(layout):
        part = f" ({k + 1} of {n_contents})" if n_contents > 1 else ""
        contents.append(render.Page(f"00-contents-{k + 1}", partial(_contents_page, columns, part),
                                    "Contents" + part, "", [columns, part]))
    return [title_page, *contents, *body]


def _number(page, n: int, total: int, title: str) -> None:
    """The footer "title - page n of total", stamped on the joined page (the page files stay free of it,
    so a page that only moved is reused as it is)."""
    text = f"{title} - page {n} of {total}".encode("latin-1", "replace")
    text = text.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    size = 7.0
    x = float(page.mediabox.width) * 0.995 - 0.6 * size * len(text)  # Courier: every glyph is 0.6 em wide
    _append_content(page, b"q BT /RkFooter %.1f Tf 0.5 g 1 0 0 1 %.2f 3.00 Tm (%s) Tj ET Q" % (size, x, text))


def _append_content(page, data: bytes) -> None:
    """Draw ``data`` (PDF content operators; font /RkFooter = Courier) over ``page``, which must already
    belong to a PdfWriter. The page's own drawing is wrapped in q/Q so its graphics state cannot leak."""
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject

    writer = page.indirect_reference.pdf

    def stream(content: bytes):
        obj = DecodedStreamObject()
        obj.set_data(content)
        return writer._add_object(obj)

    contents = page["/Contents"]
    parts = list(contents.get_object()) if isinstance(contents.get_object(), ArrayObject) else [contents]
    page[NameObject("/Contents")] = ArrayObject([stream(b"q"), *parts, stream(b"Q " + data)])
    resources = page["/Resources"].get_object()
    if "/Font" not in resources:
        resources[NameObject("/Font")] = DictionaryObject()
    fonts = resources["/Font"].get_object()
    font = getattr(writer, "_recallkit_footer_font", None)
    if font is None:
        font = writer._add_object(DictionaryObject({
            NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Courier"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
        writer._recallkit_footer_font = font
    fonts[NameObject("/RkFooter")] = font


def _pdf_date(when: _dt.datetime | None) -> str | None:
    return None if when is None else when.astimezone(_dt.timezone.utc).strftime("D:%Y%m%d%H%M%SZ")


def _join(pages: Sequence[render.Page], folder: Path, path: Path, title: str, fallback_date) -> None:
    """One PDF from the page files in ``folder``, in order, with the footer on each page, an outline entry
    for every section and page, links from the contents lines, and metadata that depends only on the
    inputs (dates from SOURCE_DATE_EPOCH, else the summary's own date)."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.annotations import Link

    writer = PdfWriter()
    total = len(pages)
    for n, page in enumerate(pages, start=1):
        writer.add_page(PdfReader(folder / f"{page.stem}.pdf").pages[0])
        _number(writer.pages[-1], n, total, title)
    # outline: top-level pages and sections; a section's pages under it
    parents: dict[str, Any] = {}
    for n, page in enumerate(pages):
        if not page.section:
            writer.add_outline_item(title=page.label, page_number=n)
            continue
        if page.section not in parents:
            parents[page.section] = writer.add_outline_item(title=page.section, page_number=n)
        writer.add_outline_item(title=page.label, page_number=n, parent=parents[page.section])
    for n, page in enumerate(pages):
        columns = page.data[0] if page.stem.startswith("00-contents-") else None
        for rect, target in contents_links(columns) if columns else ():
            if 0 <= target < total:
                writer.add_annotation(n, Link(rect=rect, target_page_index=target))
    meta = pdf_metadata(title=title, fallback_date=fallback_date)
    info = {"/Title": title, "/Creator": meta["Creator"], "/Producer": meta["Producer"]}
    when = _pdf_date(meta.get("CreationDate"))
    if when:
        info.update({"/CreationDate": when, "/ModDate": when})
    writer.add_metadata(info)
    writer.page_mode = "/UseOutlines"  # open with the bookmarks shown
    with open(path, "wb") as fh:
        writer.write(fh)


def build_report(summary: dict, out_dir, max_title_rows: int = 16, write_summary: bool = True, png: bool = False,
                 jobs: int | None = None, reuse: bool = True, stats: dict | None = None) -> Path:
    """Write the PDF report (each page also alone under ``figures/``, and summary.json) under ``out_dir``;
    return the PDF path.

    Each page is drawn once, into its own PDF (and PNG only when ``png``), by ``jobs`` worker processes
    (default: one per core, none for a handful of pages); a page whose input and code are unchanged
    since the previous build in ``out_dir`` is reused, not redrawn (``reuse=False`` redraws all). The
    pages are joined with an outline (bookmarks) and a contents page. ``stats``, when given, is filled
    with the counts (pages, drawn, reused, workers, seconds, line).

    Atomic: everything is drawn into a staging folder inside ``out_dir`` and moved into place with
    ``os.replace`` only once every page is drawn, so an interrupted or killed build leaves the previous
    complete report (PDF, figures, summary.json) untouched. :class:`ReportBuilder` does the same while
    the job still computes, drawing each experiment's pages as soon as the experiment is done."""
    builder = ReportBuilder(out_dir, png=png, jobs=jobs, reuse=reuse, max_title_rows=max_title_rows,
                            incremental=False)
    return builder.finish(summary, write_summary=write_summary, stats=stats)


class ReportBuilder:
    """The report, built while the job runs: :meth:`add` each experiment entry as soon as it is computed
    (its section's pages start drawing in worker processes while the job goes on), then :meth:`finish`
    with the whole summary. What :meth:`finish` writes depends on the summary alone: pages drawn early
    from an entry that then changed are not used (each page file is named by the hash of its input).
    Use as a context manager, or call :meth:`close`, so an error or Ctrl-C stops the workers and removes
    the staging folder."""

    def __init__(self, out_dir, png: bool = False, jobs: int | None = None, reuse: bool = True,
                 max_title_rows: int = 16, incremental: bool = True) -> None:
        self.out_dir = Path(out_dir)
        check_output_dir(self.out_dir)
        self.png, self.max_title_rows = png, max_title_rows
        for old in self.out_dir.glob(f"{STAGING_PREFIX}*"):  # left by a build that was killed
            shutil.rmtree(old, ignore_errors=True)
        self.staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=self.out_dir))
        self.drawer = render.Drawer(self.staging / "figures", self.out_dir / "figures", png, _error_page, jobs=jobs,
                                    reuse=reuse)
        self.reuse = reuse
        self.incremental = incremental
        self._entries: list[dict] = []
        self._n_rows = 0
        self._terms_section: dict[str, int] = {}

    def __enter__(self) -> "ReportBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, entry: dict) -> None:
        """Start drawing the pages of the experiment ``entry`` (the next section) that depend on it alone.

        Speculative: :meth:`finish` decides what the report holds, so an entry that cannot be drawn here
        is left for it (it says what is wrong, on an error page or as an InputError)."""
        index = len(self._entries) + 1
        self._entries.append(entry)
        if not self.incremental:
            return
        try:
            rows = summary_entries({"experiments": [entry]})
            rows = [dict(r, check=self._n_rows + k) for k, r in enumerate(rows, start=1)]
            self._n_rows += len(rows)
            pack = entry.get("pack")
            shown = self._terms_section.get(pack) if pack else None
            if pack and entry.get("terms") and shown is None:
                self._terms_section[pack] = index
            pages = _experiment_pages(entry, index, terms_shown_in=shown, rows=rows, system_pages=False)
            self.drawer.submit(pages)  # (a page that cannot go to a worker waits for finish)
        except Exception:  # noqa: BLE001 - speculation only; finish() validates and reports
            self.incremental = False

    def finish(self, summary: dict, write_summary: bool = True, stats: dict | None = None) -> Path:
        """Draw what is not drawn yet, join the pages, write summary.json and move it all into place."""
        try:
            validate_summary(summary)
            rows = [dict(r, check=k) for k, r in enumerate(summary_entries(summary), start=1)]
            title = summary.get("title") or "recallkit report"
            pages = report_pages(summary, rows, self.max_title_rows)
            manifest, drawn = self.drawer.finish(pages)
            for error in drawn.errors:
                warnings.warn(f"report page {error.split(':')[0]} could not be drawn: {error}", stacklevel=3)
            date = _summary_date(summary)
            join_key = _join_key(pages, manifest, title, date) if not drawn.errors else None
            previous = self.out_dir / REPORT_NAME
            joined = _previous_join(self.out_dir / "figures" / render.MANIFEST)
            if (self.reuse and join_key is not None and joined.get("key") == join_key and previous.is_file()
                    and _sha256(previous) == joined.get("sha256")):
                shutil.copyfile(previous, self.staging / REPORT_NAME)  # every page and its place unchanged
            else:
                _join(pages, self.staging / "figures", self.staging / REPORT_NAME, title, date)
            if join_key is not None:  # recorded with the pages; checked against the PDF's own hash when reused
                _record_join(self.staging / "figures" / render.MANIFEST, join_key, _sha256(self.staging / REPORT_NAME))
            if write_summary:
                doc = dict(summary, schema=summary.get("schema", SCHEMA), entries=rows)
                if drawn.errors:
                    doc["page_errors"] = drawn.errors
                (self.staging / "summary.json").write_text(
                    json.dumps(doc, indent=1, sort_keys=True, default=_json_default) + "\n")
            _move_into_place(self.staging, self.out_dir, {p.stem for p in pages}, write_summary, self.png)
        finally:
            self.close()
        if stats is not None:
            stats.update(pages=drawn.pages, drawn=drawn.drawn, reused=drawn.reused, wasted=drawn.wasted,
                         workers=drawn.workers, seconds=round(drawn.seconds, 2), line=drawn.line())
        return self.out_dir / REPORT_NAME

    def close(self) -> None:
        """Stop the workers and remove the staging folder (the previous report stays as it was)."""
        self.drawer.close()
        shutil.rmtree(self.staging, ignore_errors=True)


def _error_page(stem: str, message: str) -> Figure:
    return _text_page(f"page {stem} could not be drawn", [message, "The numbers are in summary.json; this is a bug in "
                      "the report or a field missing from the summary, please report it."])


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


_PAGE_FILE = re.compile(r"\d\d-[a-z0-9-]+")


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _previous_join(manifest: Path) -> dict:
    """``{"key", "sha256"}`` of the PDF the previous build joined (see :func:`_join_key`), or {}."""
    try:
        joined = json.loads(manifest.read_text()).get("joined")
    except (OSError, ValueError, AttributeError):
        return {}
    return joined if isinstance(joined, dict) else {}


def _record_join(manifest: Path, key: str, sha256: str) -> None:
    doc = json.loads(manifest.read_text())
    doc["joined"] = {"key": key, "sha256": sha256}
    manifest.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _join_key(pages: Sequence[render.Page], manifest: dict, title: str, date) -> str | None:
    """A hash of everything the joined PDF is made of: each page's cache key (from the drawer's ``manifest``),
    stem, label and section in order, the title and the date. Equal keys, equal PDF bytes, so an unchanged
    report copies the PDF in place instead of joining it again. None when a page is not cacheable."""
    import hashlib

    keys = [(manifest.get(p.stem) or {}).get("key") for p in pages]
    if any(k is None for k in keys):
        return None
    text = json.dumps([title, str(date), [[p.stem, p.label, p.section, k] for p, k in zip(pages, keys)]])
    return hashlib.sha256(text.encode()).hexdigest()


def _move_into_place(staging: Path, out_dir: Path, current: set[str], write_summary: bool, png: bool) -> None:
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


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"summary: value of type {type(value).__name__} is not JSON-serialisable")

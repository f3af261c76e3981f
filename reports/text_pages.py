"""The report's pages of text and tables that frame the data figures: the title page (provenance and the
per-experiment verdict overview), the first page of each experiment's section (what it is, then its
fitted-against-predicted table), a plain text page, the page that stands in for one that could not be
drawn, and the table of required parameter counts against the lower bounds. Each returns a matplotlib
Figure in the house style; where the pages go and what they are drawn from is ``reports.layout``'s job.
"""
from __future__ import annotations

from typing import Sequence

from matplotlib.figure import Figure

from recallkit.compare.evidence import evidence_counts
from recallkit.reports import tables
from recallkit.reports.style import (
    PAGE_LANDSCAPE,
    PALETTE,
    VERDICT_COLOURS,
    fill,
    new_figure,
    source_date,
    style_context,
    wrap_title,
)
from recallkit.reports.headline import (DIAGNOSTICS_MATTER, diagnostic_rows, evidence_text, experiment_rows,
                                        is_diagnostic_entry, ordered_experiments, verdict_counts)
from recallkit.reports.mathexpr import line_mathtext
from recallkit.reports.summary_rows import overview_rows, summary_date
from recallkit.theory.scaling import power_text

__all__ = ["title_page", "diagnostics_page", "write_text", "text_page", "section_page", "error_page", "lower_bound_gap_rows",
           "lower_bound_gap_page"]


def _evidence_lines(fig: Figure, rows: list[dict], y: float, width: int = 170) -> float:
    """Under the headline: the primary checks apart (one per line, named before freezing) and what the evidence
    labels mean, wrapped to ``width`` characters. Returns the height left."""
    tested = [r for r in rows if r.get("evidence")]
    if not tested:
        return y
    said = ["evidence: confirmatory = frozen before its runs, nothing measured on them; conditional = frozen, reads "
            "a measured quantity of its runs; exploratory = not frozen first, or its form chosen on these runs"]
    primary = [r for r in tested if r.get("primary")]
    if primary:
        said.insert(0, f"primary checks (one per line, named before freezing): {len(primary)}: " + ", ".join(
            f"{sum(r.get('verdict') == v for r in primary)} {v}" for v in VERDICT_COLOURS) + "; "
            + ", ".join(f"{n} {label}" for label, n in evidence_counts(primary).items()))
    freezes = sorted({f"{r.get('experiment')} {str(r['freeze'])[:12]}" for r in tested if r.get("freeze")})
    if freezes:  # the freezes the confirmatory and conditional verdicts were judged against
        said.insert(len(said) - 1, "freezes: " + ", ".join(freezes))
    text = "\n".join(fill(line, width, subsequent_indent="  ") for line in said)
    fig.text(0.04, y + 0.005, text, fontsize=8.5, va="top", color="0.25")
    return y - 0.021 * (text.count("\n") + 1) - 0.012


def _headline(fig: Figure, summary: dict, rows: list[dict], y: float) -> float:
    """The experiments' checks, counted apart from the diagnostics' (term probes, bound checks): a report of 65
    checks of which 35 are diagnostics says so, and says how many experiments it holds."""
    experiments = [e for e in summary.get("experiments", []) if not is_diagnostic_entry(e, rows)]
    diagnostics = [e for e in summary.get("experiments", []) if is_diagnostic_entry(e, rows)]
    mine = experiment_rows(rows)
    counts = verdict_counts(mine)
    text = fill(f"{len(experiments)} experiment{'s' if len(experiments) != 1 else ''}, {counts['checks']} checks: "
                + ", ".join(f"{counts[v]} {v}" for v in VERDICT_COLOURS) + f"; evidence {evidence_text(mine)}", 110)
    fig.text(0.04, y, text, fontsize=12, va="top", fontweight="bold")
    y -= 0.028 * (text.count("\n") + 1) + 0.012
    theirs = diagnostic_rows(rows)
    if theirs:
        counts = verdict_counts(theirs)
        names = ", ".join(str(e.get("title") or e["name"]) for e in diagnostics)
        text = fill(f"diagnostics, counted apart: {counts['checks']} checks (" + ", ".join(
            f"{counts[v]} {v}" for v in VERDICT_COLOURS) + f") in {names}; with the config hashes and monotonicity "
            "counts on the diagnostics page", 150)
        fig.text(0.04, y, text, fontsize=9.5, va="top", color="0.2")
        y -= 0.022 * (text.count("\n") + 1) + 0.012
    return _evidence_lines(fig, mine, y)


def _overview_table(fig: Figure, summary: dict, rows: list[dict], y: float, fail_h: float, max_rows: int) -> None:
    """One row per section: what is compared, its checks and verdicts, its evidence; a diagnostic entry says so."""
    ordered = ordered_experiments(summary.get("experiments", []), rows)
    section = {e["name"]: i for i, e in enumerate(ordered, start=1)}
    overview = sorted(overview_rows(summary, rows), key=lambda o: section.get(o["name"], 0))
    header = ["#", "experiment", "kind", "what is compared", "checks", "consistent", "inconsistent", "inconclusive",
              "evidence"]
    cells, colours = [], []
    for o in overview[:max_rows]:
        mine = [r for r in rows if r.get("experiment") == o["name"]]
        diagnostic = any(r.get("diagnostic") for r in mine)
        cells.append([str(section.get(o["name"], o["index"])), o["experiment"],
                      o["kind"] + (" (diagnostic)" if diagnostic else ""), line_mathtext(o["compared"]),
                      str(o["checks"]), str(o["consistent"]), str(o["inconsistent"]), str(o["inconclusive"]),
                      evidence_text(mine) if o["checks"] else ""])
        colours.append([None] * 5 + [VERDICT_COLOURS[v] if o[v] else None
                                     for v in ("consistent", "inconsistent", "inconclusive")] + [None])
    widths = [0.03, 0.17, 0.09, 0.30, 0.05, 0.085, 0.095, 0.095, 0.085]
    ax = fig.add_axes((0.03, 0.07 + fail_h, 0.94, y - 0.07 - fail_h))
    cells = tables.fitted_cells(ax, cells, widths, 8, None)
    # whole rows only: as many as the page holds (a row grows to its tallest cell), the rest named under it
    shown = tables.rows_that_fit(ax.get_position().height * fig.get_figheight(), header, cells, 8)
    tables.draw_table(ax, header, cells[:shown], widths, fontsize=8, cell_colours=colours[:shown])
    if len(overview) > shown:
        rest = overview[shown:]
        fig.text(0.04, 0.055 + fail_h, fill(
            f"... and {len(rest)} more section{'s' if len(rest) > 1 else ''}: "
            + ", ".join(f"{section.get(o['name'])}. {o['name']} ({o['checks']} check{'s' if o['checks'] != 1 else ''})"
                        for o in rest) + "; their verdicts are in the summary of verdicts", 165),
            fontsize=8, va="top")


def title_page(summary: dict, rows: list[dict], max_rows: int = 16) -> Figure:
    """Title, provenance, the headline counts (experiments' checks and diagnostics apart), one overview row per
    section and any failed experiments."""
    prov = summary.get("provenance") or {}
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.04, 0.96, summary.get("title") or "recallkit report", fontsize=20, fontweight="bold", va="top")
        if summary.get("subtitle"):
            fig.text(0.04, 0.915, summary["subtitle"], fontsize=11, va="top", color="0.3")
        when = source_date() or summary_date(summary)
        fields = [
            ("code version", prov.get("code_version", "unknown")),
            ("date", when.strftime("%Y-%m-%d %H:%M UTC") if when else prov.get("date", "unknown")),
            ("device", f"{prov.get('device', 'unknown')}, {prov.get('threads', '?')} thread(s)"),
            ("torch", prov.get("torch_version", "n/a")),
            ("preset", prov.get("preset", "n/a")),
        ]
        # The run's wall time and how much came from the store stay in summary.json (run_wall_time_s,
        # notes): the PDF shows only what the stored results determine, so a re-run is byte-identical.
        y = 0.87
        for key, value in fields:
            fig.text(0.04, y, key, fontsize=9.5, color="0.35", va="top")
            fig.text(0.17, y, str(value), fontsize=9.5, va="top", family="DejaVu Sans Mono")
            y -= 0.028
        y = _headline(fig, summary, rows, y - 0.01)
        failures = [str(f) for f in summary.get("failures") or []]
        fail_text = ""
        if failures:
            fail_text = "\n".join(fill(f"- {f}", 150, subsequent_indent="  ") for f in failures[:8])
            if len(failures) > 8:
                fail_text += f"\n... and {len(failures) - 8} more (summary.json: failures)"
        fail_h = 0.0 if not fail_text else 0.05 + 0.022 * (fail_text.count("\n") + 1)
        _overview_table(fig, summary, rows, y, fail_h, max_rows)
        if fail_text:
            fig.text(0.04, 0.03 + fail_h, f"{len(failures)} experiment(s) failed and are not in this report:",
                     fontsize=10, fontweight="bold", va="top", color=PALETTE["vermillion"])
            fig.text(0.04, 0.03 + fail_h - 0.03, fail_text, fontsize=8.5, va="top")
    return fig


def diagnostics_page(table: list[list[str]]) -> Figure:
    """What the checks rest on, per section: runs, config hashes, monotonicity violations, budget-flagged points and
    the diagnostic checks' verdicts (``headline.diagnostics_table``), and whether they matter."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        y = write_text(fig, "Diagnostics: what the checks rest on", [DIAGNOSTICS_MATTER], bottom=0.4)
        ax = fig.add_axes((0.03, 0.05, 0.94, max(y - 0.07, 0.2)))
        tables.draw_table(ax, ["section", "runs", "config hashes\n(all in summary.json)", "monotonicity\nviolations",
                               "budget-\nflagged points", "diagnostic checks"], table[:22],
                          [0.3, 0.06, 0.19, 0.11, 0.11, 0.23], fontsize=8.5)
        if len(table) > 22:
            fig.text(0.03, 0.03, f"... {len(table) - 22} more sections in summary.json", fontsize=9)
    return fig


_PARA_FONT = 10.5
_PARA_LINE = _PARA_FONT * 1.25 / 72 / PAGE_LANDSCAPE[1]  # one text line, in figure height


def write_text(fig: Figure, title: str, paragraphs: Sequence[str], bottom: float = 0.08) -> float:
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


def text_page(title: str, paragraphs: Sequence[str]) -> Figure:
    """A page of a title and paragraphs only."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        write_text(fig, title, paragraphs)
    return fig


def section_page(title: str, paragraphs: Sequence[str], rows: list[dict], max_rows: int = 16) -> Figure:
    """A section's first page: what the experiment is, then its fitted-against-predicted table."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        # keep room for at least a few table rows under the text
        top = write_text(fig, title, paragraphs, bottom=0.30 if rows else 0.06) - 0.01
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


def error_page(stem: str, message: str) -> Figure:
    """Drawn in place of page ``stem`` when its builder failed on the summary, so one bad field does not cost the
    whole report."""
    return text_page(f"page {stem} could not be drawn", [message, "The numbers are in summary.json; this is a bug in "
                     "the report or a field missing from the summary, please report it."])


def lower_bound_gap_rows(diagram: dict) -> list[list[str]]:
    """One row per piece of a region where one lower bound is the strongest (``strongest_bound_gaps``; the table of
    ``recallkit theory bounds``): the required parameter-count exponent (upper bound), that bound, its exponent, the
    gap between them, each as base^(exponent) log(base)^(power), and where in the region it is the strongest. A
    failure condition of one estimator is no lower bound: no gap is taken to it."""
    base = diagram.get("base", "V")

    def power(exponent: str, log_power: str) -> str:
        return power_text(base, exponent, log_power)

    rows = []
    for region in diagram.get("regions", []):
        required = power(region["required_param_exponent"], region["log_power"])
        strongest = region.get("strongest_bound_gaps")
        if strongest is None:  # a summary written before the strongest bound was computed: every true lower bound
            strongest = [g for g in region.get("lower_bound_gaps", []) if g.get("kind", "lower-bound") == "lower-bound"]
        for gap in strongest:
            where = "; ".join(w.split("  [")[0] for w in gap.get("where") or []) or "the whole region"
            rows.append([region["dominant"], required, gap["name"], power(gap["exponent"], gap["log_power"]),
                         power(gap["gap_exponent"], gap["gap_log_power"]), where])
    return rows


def _covers(diagram: dict) -> str:
    """What each bound holds for: a lower bound its class; the failure conditions of one estimator are named apart,
    as what they are (the table takes no gap to them)."""
    bounds: dict[str, str] = {}
    failures: dict[str, str] = {}
    for region in diagram.get("regions", []):
        for gap in region.get("lower_bound_gaps", []):
            if gap.get("kind", "lower-bound") == "lower-bound":
                bounds[gap["name"]] = f"lower bound over {gap.get('class') or 'an unnamed class'}"
            else:
                failures[gap["name"]] = f"failure condition of one estimator ({gap.get('estimator', '')})"
    text = " ".join(f"{name}: {what}." for name, what in bounds.items())
    if failures:
        text += (" Not lower bounds, so no gap is taken to them: "
                 + " ".join(f"{name}: {what}, not a lower bound." for name, what in failures.items()))
    return text


def lower_bound_gap_page(diagram: dict, title: str) -> Figure:
    """The gap between what the theory requires (the upper bound) and the strongest lower bound, region by region."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.suptitle(wrap_title(title, 10.5, 14), x=0.04, ha="left")
        fig.text(0.04, 0.90, fill(
            f"Exponents in the free exponents of the scaling {diagram.get('scaling', '')}. required: the "
            f"parameter count {diagram.get('param_count', '')} that signal >= noise needs where that noise "
            "term dominates (upper bound); the strongest lower bound over a class there (where two apply, the "
            "region is split where each is the stronger); gap = required / that bound. A zero gap means the bound "
            "is tight there; each bound's provenance and assumptions are on the theory-terms page and in the "
            "derivation.", 140), fontsize=9, va="top", color="0.25")
        rows = lower_bound_gap_rows(diagram)
        # the table as tall as its rows need (two-line cells), then what each bound holds for right under it, so
        # that no row reads as a lower bound it is not
        height = min(0.62, 0.045 * (len(rows) + 1))
        ax = fig.add_axes([0.04, 0.80 - height, 0.92, height])
        tables.draw_table(ax, ["region (dominant)", "required count", "strongest lower bound", "its count",
                               "gap (required / bound)", "where in the region"], rows,
                          [0.14, 0.18, 0.16, 0.16, 0.16, 0.2], fontsize=8.5, wrap=[20, 24, 22, 22, 24, 28])
        fig.text(0.04, 0.78 - height, fill(_covers(diagram), 150), fontsize=8, va="top", color="0.25")
    return fig

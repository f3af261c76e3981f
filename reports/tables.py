"""Table figures: the slope/verdict table and the theory-term table (LaTeX through mathtext)."""
from __future__ import annotations

import re
from typing import Sequence

import sympy
from matplotlib.figure import Figure
from matplotlib.mathtext import MathTextParser

from recallkit.compare.schema import tested_and_asymptotic
from recallkit.reports.style import (PAGE_LANDSCAPE, VERDICT_COLOURS, cut_lines, fill, fit_width, new_figure,
                                     style_context, wrap_title)
from recallkit.reports.mathexpr import line_mathtext
from recallkit.theory.errors import InputError
from recallkit.theory.expr import parse_expression  # the whitelist parser of the theory stage
from recallkit.theory.symbols import EXPONENTS, VARIABLES

__all__ = ["wrap_widths", "fitted_cells", "rows_that_fit", "slope_table", "draw_slope_table", "draw_table", "chunk_rows", "slope_row_lines", "term_table", "mathtext_or_plain",
           "slope_rows", "claim_table", "claim_cells"]


def _ci(ci) -> str:
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return "n/a"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _num(v, fmt=".2f") -> str:
    return "n/a" if v is None else format(float(v), fmt)


def slope_rows(fits: Sequence[dict], dominant_of: dict | None = None) -> list[dict]:
    """Rows of the slope table from FitResult dicts; ``dominant_of[line or experiment]`` names the term."""
    dominant_of = dominant_of or {}
    rows = []
    for f in fits:
        line = f.get("line") or ""
        rows.append({
            "experiment": f.get("experiment", ""),
            "line": line,
            "threshold": f.get("threshold"),
            "threshold_relative": bool(f.get("threshold_relative")),
            "slope": f.get("slope"),
            "slope_ci": f.get("slope_ci"),
            "slope_ci_bootstrap": f.get("slope_ci_bootstrap"),
            "method": f.get("method"),
            "predicted_slope_asymptotic": tested_and_asymptotic(f)[1],
            "predicted_slope_tested": tested_and_asymptotic(f)[0],
            "dominant": f.get("dominant") or dominant_of.get(line) or dominant_of.get(f.get("experiment"), ""),
            "verdict": f.get("verdict") or "n/a",
            "evidence": f.get("evidence"),
        })
    return rows


_HEADER = ["experiment", "line", "thr.", "fitted\nslope", "95% CI\n(HC3)", "95% CI\n(bootstrap)",
           "tested\nprediction", "dominant\nterm", "verdict"]
_CI_COLUMN = 4  # its heading names the interval the rows carry: HC3 for a regression, seed curves for a curve fit
_WIDTHS = [0.165, 0.18, 0.05, 0.06, 0.10, 0.10, 0.095, 0.13, 0.12]
_CHAR_EM = 0.64  # the widest DejaVu Sans characters a table holds (digits, capitals) average under this many em


def wrap_widths(widths: Sequence[float], table_in: float, fontsize: float) -> list[int]:
    """Characters a line of each column holds: its share of the table's ``table_in`` inches, less the cell's
    padding, at ``fontsize`` points; so that a cell's text wraps inside its cell instead of running out of it."""
    return [max(int(w * table_in * 72 * (1 - 2 * 0.05) / (_CHAR_EM * fontsize)), 3) for w in widths]


_WRAP = wrap_widths(_WIDTHS, 0.94 * PAGE_LANDSCAPE[0], 8.5)
_WIDTH_PT = [w * 0.94 * PAGE_LANDSCAPE[0] * 72 * 0.9 for w in _WIDTHS]  # inside a cell's padding


def _header(rows: Sequence[dict]) -> list[str]:
    """The slope table's heading, its interval column named after what the rows' fits computed."""
    curves = {r.get("method") == "curve" for r in rows if r.get("kind") not in ("claim", "grid")}
    if curves == {True}:
        interval = "95% CI\n(seed curves)"
    elif curves == {True, False}:
        interval = "95% CI (HC3 or\nseed curves)"
    else:
        interval = _HEADER[_CI_COLUMN]
    return [interval if i == _CI_COLUMN else h for i, h in enumerate(_HEADER)]


def slope_table(rows: Sequence[dict], title: str = "Fitted against predicted slopes",
                size=PAGE_LANDSCAPE, max_rows: int = 22) -> Figure:
    """A table figure: one row per (experiment, line, threshold), verdict cell coloured.

    ``rows``: dicts as made by :func:`slope_rows`. Rows beyond ``max_rows`` are cut with a note;
    :func:`reports.pdf.build_report` splits long tables over pages instead.
    """
    with style_context():
        # placed by hand: row heights are computed from the axes' height, which a layout engine would
        # change afterwards (the table then ran off the page)
        fig = new_figure(size, layout=None)
        fig.text(0.03, 0.975, fill(title, 100), fontsize=13, va="top")
        ax = fig.add_axes(SLOPE_TABLE_AXES)
        draw_slope_table(ax, list(rows)[:max_rows])
        if len(rows) > max_rows:
            ax.text(0.0, 0.0, f"... {len(rows) - max_rows} more rows not shown", transform=ax.transAxes,
                    fontsize=9)
    return fig


def _interval(pair) -> str:
    """A one-sided interval with a null (open) end: "(-inf, 0.12]" / "[0.31, inf)"."""
    if not pair or len(pair) != 2 or (pair[0] is None and pair[1] is None):
        return "n/a"
    left = "(-inf" if pair[0] is None else f"[{pair[0]:.2f}"
    right = "inf)" if pair[1] is None else f"{pair[1]:.2f}]"
    return f"{left}, {right}"


def _claim_slope_cells(r: dict, shown: str) -> list[str]:
    """A comparative claim's row in the slope table: the difference, its one-sided interval and p."""
    op = str(r.get("relation") or " ").split()[-1]
    raw = [r.get("experiment", ""), r.get("line") or "", shown,
           "diff. " + _num(r.get("difference")), _interval(r.get("interval")),
           "p = " + ("n/a" if r.get("p") is None else f"{float(r['p']):.2g}"), f"A - B {op} 0",
           str(r.get("provenance") or ""), _verdict_cell(r)]
    return _wrapped(raw)


def _verdict_cell(r: dict) -> str:
    """The verdict, and under it its evidence label where it has one (confirmatory, conditional, exploratory)."""
    verdict = str(r.get("verdict") or "n/a")
    return f"{verdict}\n{r['evidence']}" if r.get("evidence") else verdict


def _slope_cells(r: dict) -> list[str]:
    thr = r.get("threshold")
    shown = "" if thr is None else f"{float(thr):g}" + (" x ceil." if r.get("threshold_relative") else "")
    if r.get("kind") == "claim":
        return _claim_slope_cells(r, shown)
    if r.get("kind") == "grid":  # a picture, not a fit: no slope, interval or prediction to show
        raw = [r.get("experiment", ""), line_mathtext(r.get("line") or ""), "", "", "", "", "", "",
               str(r.get("verdict") or "n/a")]
        return _wrapped(raw)
    line = line_mathtext(r.get("line") or "")
    if r.get("kind") == "law":  # no threshold: the check is the law's metric against one variable
        line = f"{line}; law {r.get('law')}: {r.get('metric')} against {r.get('variable')}"
    raw = [r.get("experiment", ""), line, shown,
           _num(r.get("slope")), _ci(r.get("slope_ci")), _ci(r.get("slope_ci_bootstrap")),
           _predicted(r), str(r.get("dominant") or ""), _verdict_cell(r)]
    return _wrapped(raw)


def _wrapped(raw: Sequence) -> list[str]:
    """Each cell wrapped to its column's width as drawn, a line break the cell asks for kept (a verdict over its
    evidence)."""
    return [fit_width(str(v), w, 8.5) for v, w in zip(raw, _WIDTH_PT)]


def _predicted(r: dict) -> str:
    """The prediction the verdict tested (finite-range with a log factor), and the asymptotic slope
    under it when the two differ: "1.695\n(asympt. 1.50)"."""
    tested, asymptotic = tested_and_asymptotic(r)
    if tested is None:
        return _num(asymptotic)
    text = _num(tested, ".3f")
    if asymptotic is not None and abs(float(tested) - float(asymptotic)) > 5e-4:
        text += f"\n(asympt. {float(asymptotic):.2f})"
    return text


def slope_row_lines(row: dict) -> int:
    """Text lines the slope table gives ``row`` (its height), for splitting long tables over pages."""
    return max(c.count("\n") + 1 for c in _slope_cells(row))


SLOPE_TABLE_AXES = (0.03, 0.03, 0.94, 0.89)  # where slope_table puts its table on the page
_LINE_PT = 11.5  # one text line of the slope table, in points (draw_slope_table's row unit)


def slope_table_budget(height_in: float) -> float:
    """Text lines of rows that fit in a slope table ``height_in`` inches tall (header and margin taken off)."""
    return height_in * 72 / _LINE_PT - 2.3 - 0.7


def chunk_rows(rows: Sequence[dict], budget: float, first_budget: float | None = None) -> list[list[dict]]:
    """Split slope-table rows into pages of at most ``budget`` text lines (each row costs its lines
    plus its padding); the first page may have a smaller ``first_budget``."""
    chunks: list[list[dict]] = [[]]
    used, limit = 0.0, budget if first_budget is None else first_budget
    for r in rows:
        cost = slope_row_lines(r) + 0.3
        if chunks[-1] and used + cost > limit:
            chunks.append([])
            used, limit = 0.0, budget
        chunks[-1].append(r)
        used += cost
    return [c for c in chunks if c]


def draw_slope_table(ax, rows: Sequence[dict]) -> None:
    """Draw the slope table on ``ax`` (axis turned off), verdict cells coloured."""
    ax.axis("off")
    cells = [_slope_cells(r) for r in rows]
    if not cells:
        ax.text(0.5, 0.5, "no fits to show", ha="center", va="center", transform=ax.transAxes)
        return
    table = ax.table(cellText=cells, colLabels=_header(rows), colWidths=_WIDTHS, loc="upper center",
                     cellLoc="left", colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(8.5)
    # row heights in axes units: one text line is ~ 14 pt at this font size
    line_h = _LINE_PT / 72 / max(ax.get_position().height * ax.figure.get_figheight(), 1e-3)
    for (row, col), cell in table.get_celld().items():
        n_lines = max(len(cells[row - 1][c].split("\n")) for c in range(len(_HEADER))) if row else 2
        cell.set_height(line_h * n_lines + 0.3 * line_h)
        cell.set_edgecolor("0.7")
        cell.PAD = 0.04
        if row == 0:
            cell.set_facecolor("0.92")
            cell.get_text().set_fontweight("bold")
        elif col == len(_HEADER) - 1:
            cell.set_facecolor(VERDICT_COLOURS.get(rows[row - 1].get("verdict"), "white"))


def draw_table(ax, header: Sequence[str], cells: Sequence[Sequence[str]], widths: Sequence[float],
               fontsize: float = 8.5, cell_colours: Sequence[Sequence[str | None]] | None = None,
               wrap: Sequence[int] | None = None) -> None:
    """A plain table on ``ax`` (axis off) in the slope table's look: bold grey header, grey rules.

    ``cell_colours[i][j]``: a facecolour for body cell (i, j) or None; ``wrap[j]``: wrap column j's
    text at that many characters (rows grow to the tallest cell).
    """
    ax.axis("off")
    if not cells:
        ax.text(0.5, 0.5, "no rows", ha="center", va="center", transform=ax.transAxes)
        return
    cells = fitted_cells(ax, cells, widths, fontsize, wrap)
    table = ax.table(cellText=[list(map(str, r)) for r in cells], colLabels=list(header), colWidths=list(widths),
                     loc="upper center", cellLoc="left", colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(fontsize)
    line_h = (fontsize + 3) / 72 / max(ax.get_position().height * ax.figure.get_figheight(), 1e-3)
    head_lines = max(str(h).count("\n") + 1 for h in header)
    for (row, col), cell in table.get_celld().items():
        n_lines = max(str(c).count("\n") + 1 for c in cells[row - 1]) if row else head_lines
        cell.set_height(line_h * n_lines + 0.3 * line_h)
        cell.set_edgecolor("0.7")
        cell.PAD = 0.04
        if row == 0:
            cell.set_facecolor("0.92")
            cell.get_text().set_fontweight("bold")
        elif cell_colours and cell_colours[row - 1][col]:
            cell.set_facecolor(cell_colours[row - 1][col])


def fitted_cells(ax, cells, widths: Sequence[float], fontsize: float, wrap: Sequence[int] | None) -> list[list[str]]:
    """Each cell wrapped at its column's ``wrap`` characters (when asked) and to the column's width as drawn."""
    table_pt = ax.get_position().width * ax.figure.get_figwidth() * 72 * 0.9
    asked = list(wrap or [0] * len(widths))
    return [[fit_width(fill(str(v), w) if w else str(v), f * table_pt, fontsize) for v, w, f in zip(row, asked, widths)]
            for row in cells]


def rows_that_fit(height_in: float, header: Sequence[str], cells: Sequence[Sequence[str]], fontsize: float = 8.5,
                  wrap: Sequence[int] | None = None) -> int:
    """How many of ``cells``' rows :func:`draw_table` draws inside an axes ``height_in`` inches tall (rows grow to
    their tallest wrapped cell), so that a page shows whole rows and says how many it left out."""
    line_in = (fontsize + 3) / 72
    used = line_in * (max(str(h).count("\n") + 1 for h in header) + 0.3)
    for n, row in enumerate(cells):
        texts = [fill(str(v), w) if wrap and w else str(v) for v, w in zip(row, wrap or [0] * len(row))]
        used += line_in * (max(t.count("\n") + 1 for t in texts) + 0.3)
        if used > height_in:
            return n
    return len(cells)


_CLAIM_HEADER = ["#", "claim", "side A", "side B", "thr.", "difference\nA - B", "one-sided\ninterval", "p",
                 "verdict", "reason (in full: appendix)"]
_CLAIM_WIDTHS = [0.03, 0.17, 0.12, 0.12, 0.05, 0.08, 0.09, 0.05, 0.08, 0.21]
_CLAIM_WRAP = [0, 30, 18, 18, 7, 12, 15, 8, 12, 33]
CLAIM_TABLE_ROWS = 8  # rows one page holds (a row is up to about six text lines)


def claim_cells(claim: dict) -> list[str]:
    """The cells of one claim (``compare.claims.ClaimResult.to_dict()``) in the claims table."""
    a, b = claim.get("a") or {}, claim.get("b") or {}

    def side(s: dict) -> str:
        own = s.get("experiment") == claim.get("experiment") or not claim.get("experiment")
        return (s.get("line") or "") + ("" if own else f" (in {s.get('experiment')})")

    thr = claim.get("threshold")
    shown = "" if thr is None else f"{float(thr):g}" + (" x ceil." if claim.get("threshold_relative") else "")
    diff = claim.get("difference")
    difference = "n/a" if diff is None else f"{diff:.3f}" + (
        "" if claim.get("se") is None else f"\nse {claim['se']:.3f}\ndf {claim.get('df') or 0:.3g}")
    check = claim.get("check")
    return [str(check) if check else "", f"{claim.get('id')}: {claim.get('claim')}. {claim.get('text') or ''} "
            f"[{claim.get('provenance') or ''}]", side(a), side(b), shown, difference, _interval(claim.get("interval")),
            "n/a" if claim.get("p") is None else f"{float(claim['p']):.2g}", str(claim.get("verdict") or "n/a"),
            cut_lines(str(claim.get("reason") or ""), _CLAIM_WRAP[-1], max_lines=7)]


def claim_table(claims: Sequence[dict], title: str = "Comparative claims", size=PAGE_LANDSCAPE) -> Figure:
    """A page with one row per comparative claim: the two sides, the difference with its one-sided interval and
    p, and the verdict (coloured) with the start of its reason. ``claims``: ``ClaimResult.to_dict()`` dicts
    (optionally with ``check``, the number of the claim's row in the summary of verdicts)."""
    with style_context():
        fig = new_figure(size, layout=None)
        fig.text(0.03, 0.965, wrap_title(title, size[0] * 0.94, 14, max_lines=1), fontsize=14, fontweight="bold",
                 va="top")
        fig.text(0.03, 0.915, fill(
            "Each claim compares two fitted lines: their slopes, or their levels (fitted log parameter count at "
            "matched base values, the middle of the common fitted range). One-sided test on the difference A - B, "
            "standard errors of both fits combined (HC3; curve fits: their seed-curve bootstrap), Student t with "
            "Welch-Satterthwaite df. consistent: the claimed ordering is significant at alpha; inconsistent: the "
            "opposite one is; 'not run': a side's line is not in this preset (no check).", 165),
            fontsize=8.5, va="top", color="0.25")
        ax = fig.add_axes((0.03, 0.05, 0.94, 0.80))
        # whole rows only, as many as the page holds: each row as drawn (wrapped to its column's measured width) grows
        # to its tallest cell; less room for the note under the table
        every = fitted_cells(ax, [claim_cells(c) for c in list(claims)[:CLAIM_TABLE_ROWS]], _CLAIM_WIDTHS, 7.5,
                             _CLAIM_WRAP)
        n = rows_that_fit(ax.get_position().height * fig.get_figheight() - 0.3, _CLAIM_HEADER, every, 7.5)
        shown, cells = list(claims)[:n], every[:n]
        colours = [[None] * 8 + [VERDICT_COLOURS.get(c.get("verdict"), "0.9")] + [None] for c in shown]
        draw_table(ax, _CLAIM_HEADER, cells, _CLAIM_WIDTHS, fontsize=7.5, cell_colours=colours, wrap=_CLAIM_WRAP)
        if len(claims) > len(shown):
            fig.text(0.03, 0.025, f"... {len(claims) - len(shown)} more claims in summary.json (experiments[].claims)",
                     fontsize=9)
    return fig


# sympy.latex constructs that mathtext lacks, with the mathtext spelling that means the same.
_LATEX_REWRITES = [
    (re.compile(r"\\operatorname\{Min\}"), r"\\min"),
    (re.compile(r"\\operatorname\{Max\}"), r"\\max"),
    (re.compile(r"\\displaystyle\s*"), ""),
    (re.compile(r"\\text\{"), r"\\mathrm{"),
    (re.compile(r"\\mathtt\{"), r"\\mathrm{"),
]


def mathtext_or_plain(latex: str, plain: str | None = None) -> tuple[str, bool]:
    """Return ``($latex$, True)`` if matplotlib's mathtext can render it, else ``(plain, False)``.

    sympy.latex emits some constructs mathtext does not know (``\\begin{cases}`` for Piecewise,
    ``\\operatorname{Min}`` in older matplotlib, ...); those fall back to the plain expression so a
    report never fails on a term, and the caller notes the fallback on the page.
    """
    text = latex.strip()
    for pattern, repl in _LATEX_REWRITES:
        text = pattern.sub(repl, text)
    candidate = f"${text}$"
    try:
        MathTextParser("path").parse(candidate)
    except (ValueError, RuntimeError):
        return (plain if plain is not None else latex), False
    return candidate, True


def term_latex(term: dict) -> str | None:
    """The term's LaTeX: its own ``latex`` field, else sympy.latex of theory's whitelist parse of ``expr``.

    ``expr`` is never given to sympify (that evaluates Python); only ``theory.expr.parse_expression``
    may parse it.
    """
    if term.get("latex"):
        return str(term["latex"])
    expr = term.get("expr")
    if not expr:
        return None
    try:
        return sympy.latex(parse_expression(str(expr), {**VARIABLES, **EXPONENTS}, where="term.expr"))
    except Exception:  # a term that fails to parse is shown as plain text, not a crashed report
        return None


_PROV_COLOURS = {"paper-verbatim": "#BFE5D8", "paper-reported": "#CFE3F3", "anchor": "#FBE7B5",
                 "derived-here": "#F6C9A8"}


def term_table(terms: Sequence[dict], title: str = "Theory terms", size=PAGE_LANDSCAPE) -> Figure:
    """One row per term: name, role, the formula in mathtext, its provenance label and reference.

    ``terms``: ``[{"name", "role", "expr", "latex"?, "provenance", "reference"?, "note"?}]``.
    A formula mathtext cannot render is shown as plain text with a footnote saying so.
    """
    for i, t in enumerate(terms):
        for key in ("name", "role", "provenance"):
            if key not in t:
                raise InputError(f"terms[{i}]: missing field '{key}'")
    n = max(len(terms), 1)
    row_h = min(0.085, 0.80 / n)
    fallback = False
    with style_context():
        fig = new_figure(size, layout=None)
        fig.text(0.04, 0.955, wrap_title(title, size[0] * 0.92, 14, max_lines=1), fontsize=14, fontweight="bold",
                 va="top")
        cols = [0.04, 0.20, 0.29, 0.62, 0.77]
        y = 0.88
        for x, head in zip(cols, ["term", "role", "formula", "provenance", "reference"]):
            fig.text(x, y, head, fontsize=10, fontweight="bold", va="center")
        y -= row_h * 0.8
        for t in terms:
            latex = term_latex(t)
            plain = str(t.get("expr") or latex or "")
            if latex:
                formula, ok = mathtext_or_plain(latex, plain=plain + "  *")
            else:
                formula, ok = plain, True
            fallback |= not ok
            fig.text(cols[0], y, fill(str(t["name"]), 20), fontsize=10, va="center")
            fig.text(cols[1], y, str(t["role"]), fontsize=10, va="center")
            fig.text(cols[2], y, formula, fontsize=15 if ok and latex else 10, va="center")
            prov = str(t["provenance"])
            fig.text(cols[3], y, prov, fontsize=9.5, va="center",
                     bbox=dict(boxstyle="round,pad=0.25", facecolor=_PROV_COLOURS.get(prov, "white"),
                               edgecolor="0.6"))
            ref = str(t.get("reference") or "")
            fig.text(cols[4], y, fill(ref, 40), fontsize=8, va="center")
            y -= row_h
        notes = ["Provenance: paper-verbatim = copied from the source; paper-reported = stated there in words; "
                 "anchor = earlier established result; derived-here = this project's derivation."]
        if fallback:
            notes.append("* LaTeX from sympy uses a construct matplotlib mathtext cannot draw; shown as plain text.")
        fig.text(0.04, 0.03, "\n".join(notes), fontsize=8.5, va="bottom", wrap=True)
    return fig

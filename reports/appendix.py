"""The appendix: every verdict's reason in full, one heading line per check (its number, section and what
is checked) with the wrapped reason under it, split over as many pages as it fills. Pages elsewhere cut
a reason to two lines and point here; summary.json holds the same text.
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

from matplotlib.figure import Figure

from recallkit.empirics.records import threshold_text
from recallkit.reports import render
from recallkit.reports.style import PAGE_LANDSCAPE, cut_lines, new_figure, style_context, wrap_lines

__all__ = ["appendix_items", "appendix_chunks", "appendix_page", "appendix_pages"]

_APPENDIX_FONT = 7.5
_APPENDIX_WIDTH = 195  # characters per line of the appendix (at 205 a long reason ran off the page's right edge)
_APPENDIX_LINES = 53  # (0.92 - 0.03) of the page at 7.5 pt x 1.3


def appendix_items(rows: Sequence[dict], section_of: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(heading, wrapped reason lines) of every check with a reason, numbered as in the summary table."""
    items = []
    for r in rows:
        reasons = []
        if r.get("verdict_reason"):
            by = f" by {r['decided_by']}" if r.get("decided_by") else ""
            reasons.append(f"{r.get('verdict')}{by}: {r['verdict_reason']}")
        if r.get("verdict_reason_drift_corrected"):
            reasons.append(f"drift-corrected, {r.get('verdict_drift_corrected')}: {r['verdict_reason_drift_corrected']}")
        if not reasons:
            continue
        thr = r.get("threshold")
        head = (f"[{r.get('check')}] {section_of.get(r['experiment'], r['experiment'])}: {r.get('line') or ''}"
                + (f", threshold {threshold_text(thr, bool(r.get('threshold_relative')))}" if thr is not None else "")
                + (f", {r.get('metric')} against {r['variable']}" if r.get("kind") == "law" and r.get("variable") else ""))
        body = [line for text in reasons for line in wrap_lines(text, _APPENDIX_WIDTH, initial_indent="    ",
                                                                 subsequent_indent="    ")]
        items.append((cut_lines(head, _APPENDIX_WIDTH - 10, max_lines=1), body))
    return items


def appendix_chunks(items: list[tuple[str, list[str]]]) -> list[list[tuple[str, list[str]]]]:
    """``items`` split into pages: as many whole items as a page's lines hold (one item never splits)."""
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


def appendix_page(chunk: list[tuple[str, list[str]]], title: str) -> Figure:
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


def appendix_pages(rows: Sequence[dict], section_of: dict[str, str]) -> list[render.Page]:
    """The appendix's pages for the numbered ``rows``; ``section_of``: experiment name -> its section head."""
    chunks = appendix_chunks(appendix_items(rows, section_of))
    pages = []
    for k, chunk in enumerate(chunks, start=1):
        part = f" ({k} of {len(chunks)})" if len(chunks) > 1 else ""
        title = f"Appendix: every verdict's reason in full{part} (numbered as the checks in the summary of verdicts)"
        pages.append(render.Page(f"99-appendix-{k}", partial(appendix_page, chunk, title),
                                 f"part {k} of {len(chunks)}" if len(chunks) > 1 else "all reasons",
                                 "Appendix: verdict reasons", [chunk, title]))
    return pages

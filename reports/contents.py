"""The contents pages: one line per section and per page with its page number, in columns, on as many
pages as they need (the contents count themselves, so :func:`contents_pages` finds how many first), and
the rectangle each line occupies, so the joined PDF can link each line to its page
(``reports.pdf_writer``). Drawing and links share the geometry below, which keeps them in step.
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

from matplotlib.figure import Figure

from recallkit.reports import render
from recallkit.reports.style import PAGE_LANDSCAPE, cut_lines, new_figure, style_context

__all__ = ["contents_entries", "contents_layout", "contents_page_count", "contents_page", "contents_links",
           "contents_pages"]

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


def contents_layout(entries: Sequence[dict]) -> list[list[list[dict]]]:
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


def contents_page(columns: list[list[dict]], part: str) -> Figure:
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
    """(rectangle in PDF points, 0-based target page) of each contents line, as :func:`contents_page` draws it."""
    width, height = PAGE_LANDSCAPE[0] * 72, PAGE_LANDSCAPE[1] * 72
    out = []
    for (left, right), column in zip(_CONTENTS_COLUMNS, columns):
        for k, e in enumerate(column):
            top = _CONTENTS_TOP * height - k * _CONTENTS_LINE
            out.append(((left * width, top - _CONTENTS_LINE, right * width, top), e["page"] - 1))
    return out



def contents_pages(title_page: render.Page, body: Sequence[render.Page]) -> list[render.Page]:
    """The contents pages that go between ``title_page`` and ``body``, numbered for that order."""
    # the contents come second and count themselves: find how many pages they take, then number
    n_contents = 1
    while True:
        counted = [render.Page(f"00-contents-{k + 1}", contents_page, "Contents") for k in range(n_contents)]
        layout = contents_layout(contents_entries([title_page, *counted, *body]))
        if len(layout) <= n_contents:
            break
        n_contents = len(layout)
    layout += [[] for _ in range(n_contents - len(layout))]
    pages = []
    for k, columns in enumerate(layout):
        part = f" ({k + 1} of {n_contents})" if n_contents > 1 else ""
        pages.append(render.Page(f"00-contents-{k + 1}", partial(contents_page, columns, part),
                                 "Contents" + part, "", [columns, part]))
    return pages

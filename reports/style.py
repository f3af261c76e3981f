"""House style of every recallkit figure, and the one place figures are written to disk.

Why a module of its own: the PDF must be byte-reproducible, so the rcParams that change bytes
(hash salt, fonts, metadata dates) are fixed here once, and every figure goes through
:func:`style_context` and :func:`save_figure`.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import os
import re
import textwrap
from pathlib import Path
from typing import Iterator

import matplotlib

matplotlib.use("Agg")  # reports never open a window; Agg is the deterministic raster backend

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from recallkit.reports.dates import source_date  # noqa: E402  (re-exported: the one reading of the date)

__all__ = ["font_to_fit", "ACCURACY_CMAP", "CREATOR", "cut_lines", "CYCLE", "FIG_SINGLE", "FIG_WIDE", "fill", "MARKERS",
           "new_figure", "PAGE_LANDSCAPE", "PAGE_PORTRAIT", "PALETTE", "pdf_metadata", "png_metadata", "RC",
           "save_figure", "source_date", "style_context", "fit_width", "VERDICT_COLOURS", "wrap_lines", "wrap_title"]


# Okabe-Ito: distinguishable under the common colour-vision deficiencies and in greyscale print.
PALETTE = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
CYCLE = [PALETTE[k] for k in ("blue", "vermillion", "green", "orange", "purple", "sky", "black")]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]

# Verdict cell colours: light tints so black text stays readable on them.
VERDICT_COLOURS = {
    "consistent": "#BFE5D8",    # light green (Okabe-Ito green tint)
    "inconsistent": "#F6C9A8",  # light vermillion
    "inconclusive": "#E6E6E6",  # grey
}

# A page that fits inside both A4 (8.27 x 11.69 in) and US letter (8.5 x 11 in).
PAGE_PORTRAIT = (8.27, 11.0)
PAGE_LANDSCAPE = (11.0, 8.27)
FIG_SINGLE = (6.0, 4.5)   # a figure on its own (PNG/PDF next to the report)
FIG_WIDE = (9.0, 4.8)

# Accuracy colour map: perceptually uniform and colour-blind safe.
ACCURACY_CMAP = "cividis"

CREATOR = "recallkit"
RC = {
    "font.family": "DejaVu Sans",  # ships with matplotlib: the same glyphs on every machine
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 9,
    "legend.framealpha": 0.9,
    "figure.titlesize": 14,
    "axes.prop_cycle": matplotlib.cycler(color=CYCLE),
    "axes.grid": False,
    "mathtext.fontset": "dejavusans",
    "savefig.dpi": 150,
    "figure.dpi": 100,
    # byte-reproducibility
    "svg.hashsalt": "recallkit",
    # Type 3 subsets: text stays selectable and searchable (pdftotext reads it), and embedding is ~3x
    # cheaper than Type 42, whose fontTools subsetting took a third of a 55-page report's build time
    "pdf.fonttype": 3,
    "pdf.compression": 6,
    "path.simplify": True,
}


@contextlib.contextmanager
def style_context() -> Iterator[None]:
    """Apply the house rcParams for the duration of a figure's construction and saving."""
    with matplotlib.rc_context(RC):
        yield


def pdf_metadata(title: str | None = None, fallback_date: _dt.datetime | None = None) -> dict:
    """Metadata for PDFs that depends only on the inputs: fixed Creator, dates from SOURCE_DATE_EPOCH.

    Without SOURCE_DATE_EPOCH the date falls back to ``fallback_date`` (the summary's own date),
    and without that the date keys are dropped, so the file never records the wall clock.
    """
    when = source_date() or fallback_date
    meta: dict = {"Creator": CREATOR, "Producer": f"{CREATOR} via matplotlib {matplotlib.__version__}",
                  "CreationDate": when, "ModDate": when}
    if title:
        meta["Title"] = title
    return meta


def png_metadata() -> dict:
    return {"Software": f"{CREATOR} via matplotlib {matplotlib.__version__}"}


def save_figure(fig: Figure, stem: str | os.PathLike, close: bool = False) -> list[Path]:
    """Write ``fig`` as ``stem.png`` and ``stem.pdf`` (creating the folder); return both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = stem.with_suffix(".png"), stem.with_suffix(".pdf")
    with style_context():
        fig.savefig(png, metadata=png_metadata())
        fig.savefig(pdf, metadata=pdf_metadata(title=stem.name))
    if close:
        plt.close(fig)
    return [png, pdf]


def new_figure(size: tuple[float, float] = FIG_SINGLE, layout: str | None = "constrained", **kwargs) -> Figure:
    """A figure in the house style, not registered with pyplot's global state (nothing leaks).

    ``layout=None`` for pages placed by hand (text blocks, tables at fixed positions).
    """
    with style_context():
        return Figure(figsize=size, layout=layout, **kwargs)


_MATH = re.compile(r"(\$[^$]+\$)")  # a mathtext span: never broken, however long


class _NameWrapper(textwrap.TextWrapper):
    """A TextWrapper that breaks between words, and inside a name only after an underscore, slash, comma or
    '=' (``geo_dmin_learned_`` / ``vs_frozen``), never in the middle of a word and never at a hyphen (a
    hyphenated word or name stays whole: "derived-here", "seed-curve"). A name that fits on a line is kept
    whole; one longer than the line with no such place overruns the line instead of being cut. A mathtext
    span (``$N = V^{1.5}$``) is one unbreakable chunk."""

    _inside = re.compile(r"(?<=[_/,=])(?=[^\s])")

    def _split(self, text: str) -> list[str]:
        chunks = []
        for part in _MATH.split(text):
            if _MATH.fullmatch(part):
                chunks.append(part)
                continue
            for chunk in super()._split(part) if part else []:
                if chunk.isspace() or len(chunk) <= self.width:  # a name that fits on a line stays whole
                    chunks.append(chunk)
                else:
                    chunks.extend(piece for piece in self._inside.split(chunk) if piece)
        return chunks


def wrap_lines(text: str, width: int, **kwargs) -> list[str]:
    """``text`` as lines of at most ``width`` characters, broken only at word or name boundaries
    (see :class:`_NameWrapper`); keyword arguments as for ``textwrap.TextWrapper``."""
    wrapper = _NameWrapper(width=max(int(width), 1), break_long_words=False, break_on_hyphens=False, **kwargs)
    out: list[str] = []
    for paragraph in str(text).split("\n"):  # explicit line breaks are kept
        out.extend(wrapper.wrap(paragraph) or [""])
    return out


def fill(text: str, width: int, **kwargs) -> str:
    """:func:`wrap_lines` joined with newlines: the one way report text is wrapped."""
    return "\n".join(wrap_lines(text, width, **kwargs))


def _width_pt(line: str, fontsize: float, bold: bool = False) -> float:
    """How wide ``line`` is drawn at ``fontsize`` points in the house font (mathtext measured as drawn)."""
    return _measured_width(line, float(fontsize), bool(bold), str(RC["font.family"]), str(RC["mathtext.fontset"]))


# the summary table wraps every cell by measuring it, line by line, at each trial width: 2.5 s of an unchanged
# main-job report went to measuring the same strings again (a width is a function of these arguments alone)
@functools.lru_cache(maxsize=1 << 14)
def _measured_width(line: str, fontsize: float, bold: bool, family: str, fontset: str) -> float:
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import text_to_path

    prop = FontProperties(family=family, size=fontsize, weight="bold" if bold else "normal")
    if line.count("$") < 2:  # plain text: the mathtext font set plays no part
        return text_to_path.get_text_width_height_descent(line, prop, ismath=False)[0]
    try:
        with matplotlib.rc_context({"mathtext.fontset": fontset}):
            return text_to_path.get_text_width_height_descent(line, prop, ismath=True)[0]
    except ValueError:  # mathtext it cannot parse: as plain text
        return text_to_path.get_text_width_height_descent(line, prop, ismath=False)[0]


def font_to_fit(text: str, width_pt: float, fontsize: float, smallest: float = 6.5) -> float:
    """The largest font size, at most ``fontsize`` and at least ``smallest``, at which every line of ``text`` is at most
    ``width_pt`` points wide (a panel's title over a narrow panel, which must not leave the page)."""
    widest = max((_width_pt(line, fontsize) for line in str(text).split("\n")), default=0.0)
    if widest <= width_pt or widest <= 0:
        return fontsize
    return max(smallest, fontsize * width_pt / widest)


def fit_width(text: str, width_pt: float, fontsize: float, bold: bool = False) -> str:
    """``text`` wrapped (at word and name boundaries, :func:`wrap_lines`) so that every line, as drawn at
    ``fontsize``, is at most ``width_pt`` points wide; a single word wider than that keeps its own line. Explicit
    line breaks are kept."""
    out = []
    for paragraph in str(text).split("\n"):
        chars = max(int(width_pt / (0.45 * fontsize)), 1)
        lines = wrap_lines(paragraph, chars)
        while chars > 3:
            wide = [line for line in lines if _width_pt(line, fontsize, bold) > width_pt]
            if not wide or all(" " not in line.strip() and not _BREAKS.search(line) for line in wide):
                break  # fits, or what is too wide is one word: it keeps its own line
            chars -= 1
            lines = wrap_lines(paragraph, chars)
        out.extend(lines)
    return "\n".join(out)


_BREAKS = re.compile(r"[_/,=]\S")  # where wrap_lines may break inside a name


def cut_lines(text: str, width: int, max_lines: int = 2, more: str = " ...") -> str:
    """``text`` wrapped to ``width`` characters and cut after ``max_lines`` lines, the last ending in ``more``
    (for a reason whose full text is elsewhere: say where in ``more``)."""
    lines = wrap_lines(text, width)
    if len(lines) <= max_lines:
        return "\n".join(lines)
    kept = lines[:max_lines]
    last = kept[-1]
    while last and len(last) + len(more) > width:
        cut = max(last.rfind(" "), 0)
        last = last[:cut].rstrip()
    kept[-1] = last.rstrip(" ,;:") + more
    return "\n".join(kept)


def wrap_title(text: str, width_in: float, fontsize: float = 14, max_lines: int = 2, bold: bool = False) -> str:
    """``text`` wrapped to a ``width_in``-inch line at ``fontsize`` (DejaVu Sans averages ~0.56 em per
    character, bold ~0.64), cut with " ..." after ``max_lines`` lines: a long experiment or line name
    never runs off the page, and is never broken in the middle of a word."""
    chars = max(int(width_in * 72 / ((0.64 if bold else 0.56) * fontsize)), 20)
    return cut_lines(text, chars, max_lines=max_lines)

"""Single figures for a paper: the report's data figures of one experiment, each alone, cut to its
drawing (tight bounding box), without page furniture (page titles, verdict captions, page numbers),
and with TrueType fonts embedded (PDF Type 42; text stays text that journals' checkers accept).

Drawn from a summary entry (``reports.pdf.experiment_entry``; ``recallkit figures`` makes one from the
store), so the numbers are the report's.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from recallkit import registry
from recallkit.empirics.files import atomic_path
from recallkit.reports import figures
from recallkit.reports.layout import heatmap_axes, line_metric, lines_of, slug
from recallkit.reports.law_pages import law_fit_page
from recallkit.reports.phase import draw_phase_diagram
from recallkit.reports.style import CREATOR, FIG_SINGLE, FIG_WIDE, png_metadata, style_context
from recallkit.reports.summary_rows import generic_fits, metric_direction, page_kinds
from recallkit.theory.errors import InputError, OutputError

__all__ = ["FORMATS", "STYLES", "paper_figures", "save_paper_figure"]

FORMATS = ("pdf", "svg", "png")
# what a journal's production wants: embedded TrueType (Type 42), not Type 3 bitmaps-of-outlines; the
# report keeps Type 3 only because subsetting 60 pages of Type 42 costs a third of its build time
PAPER_RC = {"pdf.fonttype": 42, "ps.fonttype": 42, "svg.fonttype": "path", "savefig.dpi": 300}


def save_paper_figure(fig: Figure, path: Path) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix: .pdf, .svg or .png) cut to its drawing; no
    dates in the file, so the same figure gives the same bytes. The file is whole or absent: drawn beside it and
    renamed into place (``empirics.files.atomic_path``); a write that fails (a read-only folder, a full disk, a
    file-size limit) is one OutputError naming ``path``."""
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    meta = {"pdf": {"Creator": CREATOR, "Producer": f"{CREATOR} via matplotlib {matplotlib.__version__}",
                    "CreationDate": None, "ModDate": None},
            "svg": {"Creator": CREATOR, "Date": None},
            "png": png_metadata()}[fmt]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    with atomic_path(path) as tmp, style_context(), matplotlib.rc_context(PAPER_RC):
        try:
            fig.savefig(tmp, format=fmt, bbox_inches="tight", pad_inches=0.03, metadata=meta)
        except Exception as exc:
            # matplotlib's PDF backend, when a write fails (a full disk, a file-size limit), fails again while
            # closing the file and raises that second error (an AttributeError) with the OSError as its context:
            # the OSError is what went wrong
            if not isinstance(exc, OSError) and isinstance(exc.__context__, OSError):
                raise exc.__context__ from None
            raise
    return path


def _without_furniture(fig: Figure, axes_title: bool = True) -> Figure:
    """Drop what belongs to a report page, not to the figure: the page title (suptitle or a single
    axes' title) and the verdict caption under it. Panel titles of several axes stay (they name panels)."""
    for attr in ("_suptitle", "_supxlabel"):
        text = getattr(fig, attr, None)
        if text is not None:
            text.set_text("")
    if axes_title and len([ax for ax in fig.axes if ax.get_label() != "<colorbar>"]) == 1:
        fig.axes[0].set_title("")
    return fig


STYLES = ("paper", "report")


def _styled(style: str):
    """What each figure becomes in ``style``: "paper" drops the page furniture (page title, the verdict in a single
    panel's title, captions and notes under the drawing); "report" keeps the figure as the report page draws it."""
    def paper(fig: Figure, axes_title: bool = True) -> Figure:
        fig = _without_furniture(fig, axes_title)
        for text in fig.texts:  # captions, verdict lines and notes written on the figure, not in an axes
            text.set_text("")
        return fig

    return paper if style == "paper" else (lambda fig, axes_title=True: fig)


def paper_figures(entry: dict, out_dir: str | Path, fmt: str = "pdf", style: str = "paper") -> list[Path]:
    """Every data figure of one experiment ``entry`` as its own file under ``out_dir``: the phase
    diagram with the experiment's lines, one accuracy heatmap per line, one fit per line and threshold,
    the capacity law, and the figures of a system's own kind of entry. Returns the paths, in that order.
    ``style``: "paper" (no captions, verdicts or notes: the drawing alone) or "report" (as the report draws it)."""
    if fmt not in FORMATS:
        raise InputError(f"--format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if style not in STYLES:
        raise InputError(f"--style: expected one of {', '.join(STYLES)}, got {style!r}")
    finish = _styled(style)  # the one treatment every figure below gets
    name = slug(entry.get("name", "experiment"))
    out_dir = Path(out_dir)
    made: list[tuple[str, Callable[[], Figure]]] = []
    if entry.get("regions"):
        made.append(("phase", lambda: finish(
            draw_phase_diagram(entry["regions"], lines=entry.get("phase_lines") or []))))
    fits = generic_fits(entry)
    if entry.get("kind") == "law":  # each line's law fit over its residuals; its runs have no size to map
        made += [(f"law-{slug(fit.get('line'))}", lambda fit=fit: law_fit_page([fit], size=(6.0, 5.6), reasons=False))
                 for fit in fits]
        fits = []
    predictions = {line.get("name"): line.get("prediction") or {} for line in lines_of(entry)}
    capacity = entry.get("kind") in ("capacity", "max_capacity")
    for line in lines_of(entry) if entry.get("kind") != "law" else []:
        lname = line.get("name")
        if line.get("heatmap"):
            x_key, y_key = heatmap_axes(entry, line["heatmap"])
            line_fits = [] if capacity else [f for f in fits if f.get("line") == lname]
            made.append((f"heatmap-{slug(lname)}", lambda line=line, lf=line_fits, x_key=x_key, y_key=y_key:
                         finish(figures.accuracy_heatmap(
                             line["heatmap"], line.get("boundary_points") or [], lf, x_key=x_key, y_key=y_key,
                             size=(7.0, 5.6), metric=line_metric(entry, line), search=entry.get("kind"),
                             direction=metric_direction(entry, line_metric(entry, line))
                             if entry.get("kind") == "grid" else None))))
    for fit in fits:
        fit = dict(fit, log_power=fit.get("log_power", predictions.get(fit.get("line"), {}).get("log_power")))
        thr = fit.get("threshold")
        stem = f"fit-{slug(fit.get('line'))}" + (f"-threshold-{slug(f'{thr:g}')}" if thr is not None else "")
        made.append((stem, lambda fit=fit: finish(figures.fit_plot(
            fit, title="" if style == "paper" else None, size=FIG_SINGLE))))
    fitted_lines = {f.get("line") for f in fits if f.get("slope") is not None}
    if not capacity and entry.get("claims") and len(fitted_lines) > 1:  # the picture the comparative claims are about
        together = [f for f in fits if f.get("line") in fitted_lines]
        made.append(("lines", lambda: finish(figures.lines_plot(
            together, entry["claims"], title="" if style == "paper" else "the lines together", size=FIG_WIDE))))
    if capacity and fits:
        labels = [str(f.get("line") or f.get("experiment")) for f in fits]
        made.append(("capacity", lambda: finish(figures.capacity_plot(fits, labels=labels))))
    own = page_kinds().get(entry.get("kind", ""))
    if own is not None:  # a system's own kind of entry: the figures its registered pages draw
        for stem, build, *_ in registry.load_object(own.pages)(entry, "", [entry]):
            made.append((stem, lambda build=build: finish(build(), axes_title=False)))
    if not made:
        raise InputError(f"{entry.get('name')}: nothing to draw (no fits, heatmap cells, phase diagram or d_min)")
    paths = []
    for stem, build in made:
        fig = build()
        paths.append(save_paper_figure(fig, out_dir / f"{name}-{stem}.{fmt}"))
        plt.close(fig)
    return paths

"""A law experiment's page: per line, log(metric) against log(base) with each seed's points, the fitted line with
its band, the predicted slope's line through the data centre and the verdict, and under it the residuals of the
fit, so a bend (a second term of the law taking over along the line) shows as a trend the slope alone hides.

Drawn from the fit dicts of a law entry (``compare.assertions.fit_law_points``: ``points`` as {x = log base,
y = log metric, seed}, ``kind`` "law", ``metric``, ``direction``, ``variable``), never with a parameter count.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.figure import Figure

from recallkit.reports.figures import (_major_labels_only, _points_xy, _verdict_box, fitted_line_with_band,
                                       short_reason, tested_prediction)
from recallkit.reports.style import PAGE_LANDSCAPE, PALETTE, new_figure, style_context, wrap_title
from recallkit.theory.errors import InputError

__all__ = ["law_fit_page", "law_y_label"]

# one colour a seed (Okabe-Ito, without black, which the prediction's line uses)
_SEED_COLOURS = [PALETTE[k] for k in ("blue", "orange", "green", "vermillion", "purple", "sky", "yellow")]


def law_y_label(fit: dict) -> str:
    """The y axis of a law fit: its metric and, under it, which way is better (``test_error\n(lower is better)``)."""
    metric = str(fit.get("metric") or "metric")
    # two lines: a panel of a page of several rows is short
    return metric + ("\n(lower is better)" if fit.get("direction") == "lower"
                     else "\n(higher is better)" if fit.get("direction") == "higher" else "")


def _draw_law_fit(ax, res_ax, fit: dict, panel: str, y_labels: bool, box_fontsize: float) -> None:
    """One line's fit on ``ax`` and its residuals on ``res_ax`` (both log x); the numbers go in the verdict box and
    the labels name the kind of element, for the page's one legend."""
    xs, ys, seeds = _points_xy(fit.get("points") or [], f"law fit '{fit.get('line')}'.points")
    ax.set_title(panel, fontsize=10)
    variable = str(fit.get("variable") or str(fit.get("x") or "base").removeprefix("log").strip())
    res_ax.set_xlabel(variable)
    if xs.size == 0:
        ax.text(0.5, 0.5, "no points", ha="center", va="center", transform=ax.transAxes)
        return
    span = max(xs.max() - xs.min(), 0.2)
    grid = np.linspace(xs.min() - 0.05 * span, xs.max() + 0.05 * span, 100)
    x_centre = float(xs.mean())
    line = fitted_line_with_band(ax, fit, grid, x_centre, band_colour="0.6", band_alpha=0.25)
    have_fit = line is not None
    slope, intercept = line or (None, None)
    order = sorted({s for s in seeds}, key=str)
    for k, seed in enumerate(order):
        mine = np.array([s == seed for s in seeds])
        colour = _SEED_COLOURS[k % len(_SEED_COLOURS)]
        ax.scatter(np.exp(xs[mine]), np.exp(ys[mine]), s=20, color=colour, alpha=0.8, edgecolors="none", zorder=3,
                   label=f"seed {seed}")
        if have_fit:
            res_ax.scatter(np.exp(xs[mine]), ys[mine] - (intercept + slope * xs[mine]), s=14, color=colour,
                           alpha=0.8, edgecolors="none", zorder=3)
    if have_fit:
        ax.plot(np.exp(grid), np.exp(intercept + slope * grid), color=PALETTE["blue"], lw=2,
                label="fitted line (numbers in the box)")
    tested, _ = tested_prediction(fit)
    if tested is not None:
        y_centre = intercept + slope * x_centre if have_fit else float(ys.mean())
        ax.plot(np.exp(grid), np.exp(y_centre + tested * (grid - x_centre)), color=PALETTE["black"], ls="--", lw=1.5,
                label="predicted slope, through the data centre")
    res_ax.axhline(0.0, color=PALETTE["blue"], lw=1.2)
    for a in (ax, res_ax):
        a.set_xscale("log")
        a.set_xlim(np.exp(grid[0]), np.exp(grid[-1]))
    ax.set_yscale("log")
    if y_labels:
        ax.set_ylabel(law_y_label(fit))
        res_ax.set_ylabel("residual (log)")
    ax.tick_params(labelbottom=False)
    _major_labels_only(ax)
    _major_labels_only(res_ax)
    # a falling line leaves the lower left free, a rising one the lower right
    _verdict_box(ax, fit, fontsize=box_fontsize, numbers=True, left=have_fit and slope < 0)


def law_fit_page(fits: Sequence[dict], title: str | None = None, size=PAGE_LANDSCAPE, reasons: bool = True) -> Figure:
    """One page of a law experiment's fits: a column per line (three a row), the fit over its residuals, and each
    verdict's reason (two lines; in full in the appendix) underneath (``reasons=False``: not, as in a paper's
    figure). Axes are labelled ``fit <line>`` and ``residuals <line>``."""
    if not fits:
        raise InputError("law page: expected at least one law fit dict")
    n = len(fits)
    cols = min(n, 3)
    rows = -(-n // cols)
    width_in, height_in = size
    with style_context():
        fig = new_figure(size, layout=None)
        wrapped = wrap_title(title, width_in * 0.95, 14) if title else ""
        top = 0.975 - (wrapped.count("\n") + 1) * 14 * 1.3 / 72 / height_in if title else 0.97
        if title:
            fig.text(0.5, 0.975, wrapped, ha="center", va="top", fontsize=14)
        line_h = 8 * 1.25 / 72 / height_in
        texts = [short_reason(f"({i + 1}) {fit.get('verdict', 'n/a')}: {fit['verdict_reason']}", fit,
                              int(width_in * 15)) for i, fit in enumerate(fits) if reasons and fit.get("verdict_reason")]
        reason_text = "\n".join(texts)
        if texts:
            fig.text(0.01, 0.012, reason_text, fontsize=8, ha="left", va="bottom", color="0.2", linespacing=1.25)
        bottom = 0.012 + ((reason_text.count("\n") + 1) * line_h if texts else 0.0) + 0.075
        # each line: its fit (3 parts) over its residuals (1 part), a gap between rows of lines
        ratios = [r for _ in range(rows) for r in (3.0, 1.0, 0.75)][:-1]
        seeds = {str(p.get("seed")) for fit in fits for p in fit.get("points") or []}
        # the seeds, the band and the two lines: on one row, or two (matplotlib fills a legend column by column)
        entries = len(seeds) + 3
        legend_cols = (entries if entries <= 8 else -(-entries // 2)) if width_in >= 10 else min(entries, 3)
        legend_h = (0.3 + 0.2 * -(-entries // legend_cols)) / height_in  # inches: the gap and each row of 8 pt
        grid = fig.add_gridspec(len(ratios), cols, height_ratios=ratios, left=0.1, right=0.985, top=top - legend_h,
                                bottom=bottom, wspace=0.22, hspace=0.08)
        handles: dict = {}
        for i, fit in enumerate(fits):
            row, col = divmod(i, cols)
            ax = fig.add_subplot(grid[3 * row, col], label=f"fit {fit.get('line')}")
            res_ax = fig.add_subplot(grid[3 * row + 1, col], sharex=ax, label=f"residuals {fit.get('line')}")
            _draw_law_fit(ax, res_ax, fit, f"({i + 1}) {fit.get('line')}", y_labels=col == 0,
                          box_fontsize=7.5 if rows == 1 else 6.5)
            fig.align_ylabels([ax, res_ax])  # clear of the wider of the two panels' tick labels
            for handle, label in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(label, handle)
        if handles:  # one legend for every panel, under the title
            fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=legend_cols,
                       bbox_to_anchor=(0.5, top + 0.005), fontsize=8, frameon=False, columnspacing=1.2)
    return fig

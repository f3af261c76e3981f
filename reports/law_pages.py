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

from recallkit.compare.schema import tested_and_asymptotic
from recallkit.reports.figures import (_limit_y_to_data, _major_labels_only, _page_title, _points_xy,
                                       fitted_line_with_band, panel_legend, short_reason, verdict_title)
from recallkit.reports.style import PAGE_LANDSCAPE, PALETTE, new_figure, style_context
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


def _draw_law_fit(ax, res_ax, fit: dict, panel: str, y_labels: bool, title_fontsize: float) -> None:
    """One line's fit on ``ax`` and its residuals on ``res_ax`` (both log x); the verdict and its numbers go in the
    panel's title and the labels name the kind of element, for the page's one legend."""
    xs, ys, seeds = _points_xy(fit.get("points") or [], f"law fit '{fit.get('line')}'.points")
    verdict_title(ax, panel, fit, fontsize=title_fontsize)
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
                label="fitted line (numbers in the title)")
    tested, _ = tested_and_asymptotic(fit)
    shown_y = list(ys) + ([intercept + slope * grid[0], intercept + slope * grid[-1]] if have_fit else [])
    if tested is not None:
        y_centre = intercept + slope * x_centre if have_fit else float(ys.mean())
        ax.plot(np.exp(grid), np.exp(y_centre + tested * (grid - x_centre)), color=PALETTE["black"], ls="--", lw=1.5,
                label="predicted slope, through the data centre")
        shown_y += [y_centre + tested * (grid[0] - x_centre), y_centre + tested * (grid[-1] - x_centre)]
    res_ax.axhline(0.0, color=PALETTE["blue"], lw=1.2)
    for a in (ax, res_ax):
        a.set_xscale("log")
        a.set_xlim(np.exp(grid[0]), np.exp(grid[-1]))
    ax.set_yscale("log")
    _limit_y_to_data(ax, np.exp(shown_y))
    if y_labels:
        ax.set_ylabel(law_y_label(fit))
        res_ax.set_ylabel("residual (log)")
    ax.tick_params(labelbottom=False)
    _major_labels_only(ax)
    _major_labels_only(res_ax)


def law_fit_page(fits: Sequence[dict], title: str | None = None, size=PAGE_LANDSCAPE, reasons: bool = True) -> Figure:
    """One page of a law experiment's fits: a column per line (three a row), the fit over its residuals, its verdict
    and numbers in its title, one legend under the page title, and each verdict's reason (one or two lines; in
    full in the appendix) underneath (``reasons=False``: not, as in a paper's figure). Axes are labelled
    ``fit <line>`` and ``residuals <line>``."""
    if not fits:
        raise InputError("law page: expected at least one law fit dict")
    n = len(fits)
    cols = min(n, 3)
    rows = -(-n // cols)
    width_in, height_in = size
    with style_context():
        fig = new_figure(size, layout=None)
        top = _page_title(fig, title) if title else 0.97
        texts = [short_reason(f"({i + 1}) {fit.get('verdict', 'n/a')}: {fit['verdict_reason']}", fit,
                              int(width_in * 14.5), lines=2 if n <= 3 else 1)
                 for i, fit in enumerate(fits) if reasons and fit.get("verdict_reason")]
        reason_text = "\n".join(texts)
        if texts:
            fig.text(0.01, 0.012, reason_text, fontsize=8, ha="left", va="bottom", color="0.2", linespacing=1.3)
        bottom = 0.012 + ((reason_text.count("\n") + 1) * 8 * 1.3 / 72 / height_in if texts else 0.0) + 0.6 / height_in
        title_fontsize = 9.5 if width_in >= 8 else 8.5
        title_h = 2 * title_fontsize * 1.45 / 72 / height_in + 0.01
        # each line: its fit (3 parts) over its residuals (1 part), a gap between rows of lines for the next title
        ratios = [r for _ in range(rows) for r in (3.0, 1.0, 1.1)][:-1]
        axes = []
        for i, fit in enumerate(fits):
            row, col = divmod(i, cols)
            axes.append((fig.add_subplot(len(ratios), cols, 3 * row * cols + col + 1, label=f"fit {fit.get('line')}"),
                         fig.add_subplot(len(ratios), cols, (3 * row + 1) * cols + col + 1,
                                         label=f"residuals {fit.get('line')}")))
            axes[-1][1].sharex(axes[-1][0])
            _draw_law_fit(*axes[-1], fit, f"({i + 1}) {fit.get('line')}", y_labels=col == 0,
                          title_fontsize=title_fontsize)
        legend_h = panel_legend(fig, [ax for ax, _ in axes], top, ncol=4 if width_in >= 8 else 2)
        grid = fig.add_gridspec(len(ratios), cols, height_ratios=ratios, left=0.1, right=0.985,
                                top=top - legend_h - title_h, bottom=bottom, wspace=0.22, hspace=0.08)
        for i, (ax, res_ax) in enumerate(axes):
            row, col = divmod(i, cols)
            ax.set_subplotspec(grid[3 * row, col])
            res_ax.set_subplotspec(grid[3 * row + 1, col])
            fig.align_ylabels([ax, res_ax])  # clear of the wider of the two panels' tick labels
    return fig

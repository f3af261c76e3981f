"""Data figures of the report, each built from plain dicts (the JSON shapes of docs/ARCHITECTURE.md).

Conventions taken from compare's FitResult dict: ``points[i].x`` and ``points[i].y`` are the natural
logs of the regressor (``fit["x"]``, e.g. "log V" or "log(N ln N)") and of the parameter count, so
``y = intercept + slope * x``. Censored points carry the search bound as their ``y`` (or ``x`` for a
capacity search): the truth lies beyond it, which the figures show with an open marker and an arrow.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np
from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import offset_copy

from recallkit.compare.schema import tested_and_asymptotic
from recallkit.reports.style import (
    VERDICT_COLOURS,
    font_to_fit,
    ACCURACY_CMAP,
    CYCLE,
    FIG_SINGLE,
    FIG_WIDE,
    MARKERS,
    PALETTE,
    new_figure,
    save_figure,
    cut_lines,
    fill,
    style_context,
    wrap_title,
)
from recallkit.empirics.records import CheckKey, threshold_text
from recallkit.reports.mathexpr import line_mathtext
from recallkit.theory.errors import InputError

__all__ = ["accuracy_heatmap", "fit_plot", "fit_grid", "draw_fit", "capacity_plot", "dmin_plot", "save_figure", "regressor_label",
           "prediction_label", "short_reason", "fitted_line_with_band", "verdict_title", "verdict_lines",
           "fit_numbers", "panel_legend", "lines_plot"]

# Marker colours for thresholds drawn over the cividis heatmap (dark blue .. yellow): these stay
# visible over both ends, and each also gets its own marker shape so colour is never the only cue.
THRESHOLD_COLOURS = [PALETTE["vermillion"], "#FFFFFF", PALETTE["purple"], PALETTE["sky"], PALETTE["orange"]]
_OUTLINE = [patheffects.withStroke(linewidth=3.2, foreground="black")]
UNPROBED_GREY = "0.85"  # heatmap background: cells the search never trained


def _require(d: dict, key: str, where: str):
    if key not in d:
        raise InputError(f"{where}: missing field '{key}'")
    return d[key]


def regressor_label(x_name: str | None) -> str:
    """Axis label for the regressor named in a fit dict ("log V" -> "vocabulary size V")."""
    name = (x_name or "log V").strip()
    if name.startswith("log(") and name.endswith(")"):
        inner = name[4:-1]
    elif name.startswith("log "):
        inner = name[4:]
    else:
        inner = name
    nice = {"V": "vocabulary size V", "N ln N": "N ln N  (facts x log facts)", "N": "number of facts N"}
    return nice.get(inner.strip(), inner.strip())


def _fmt_ci(ci: Sequence[float] | None) -> str:
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return "[n/a]"
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _points_xy(points: Iterable[dict], where: str) -> tuple[np.ndarray, np.ndarray, list]:
    xs, ys, seeds = [], [], []
    for i, p in enumerate(points):
        xs.append(float(_require(p, "x", f"{where}[{i}]")))
        ys.append(float(_require(p, "y", f"{where}[{i}]")))
        seeds.append(p.get("seed"))
    return np.asarray(xs), np.asarray(ys), seeds


def _seed_jitter(seeds: list, scale: float) -> np.ndarray:
    """Deterministic multiplicative jitter per seed so overlapping seeds stay visible."""
    uniq = sorted({s for s in seeds if s is not None}, key=str)
    if len(uniq) <= 1:
        return np.ones(len(seeds))
    pos = {s: i for i, s in enumerate(uniq)}
    offsets = np.array([pos.get(s, 0) for s in seeds], dtype=float)
    offsets = (offsets - (len(uniq) - 1) / 2) / max(len(uniq) - 1, 1)
    return np.exp(scale * offsets)


def _band(fit: dict, x_grid: np.ndarray, x_centre: float) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Confidence band on log y over ``x_grid``.

    Prefer compare's own band (``fit["confidence_band"] = {"x", "lo", "hi"}``, log units), which accounts for
    the slope/intercept covariance. Without it, pivot the slope interval about the data's centre,
    where the intercept uncertainty is smallest: the band of the slope alone, and labelled so.
    """
    band = fit.get("confidence_band")  # NB fit["band"] is the equivalence band pred +- delta, not this
    if band:
        bx, lo, hi = (np.asarray(band[k], dtype=float) for k in ("x", "lo", "hi"))
        return bx, lo, hi, "95% confidence band"
    ci = fit.get("slope_ci")
    if not ci or ci[0] is None:
        return None
    y_centre = fit["intercept"] + fit["slope"] * x_centre
    lo_line = y_centre + ci[0] * (x_grid - x_centre)
    hi_line = y_centre + ci[1] * (x_grid - x_centre)
    return x_grid, np.minimum(lo_line, hi_line), np.maximum(lo_line, hi_line), "slope CI (HC3), pivot at data centre"


def _censored_xy(fit: dict) -> list[tuple[float, float, str]]:
    """(log x, log y, arrow direction) of censored points, in the fit's own coordinates.

    compare lists censored points as raw boundary-point fields (V, N, d, m, seed, ...) at the search
    bound; x follows the fit's regressor and y = log(param_count), or log(m*d) / log(d^2) when the
    count is not given. A min-size search missed upwards (arrow up); a capacity search (x built
    from N) stored more than the bound (arrow right).
    """
    x_name = (fit.get("x") or "log V").replace(" ", "")
    capacity = "N" in x_name
    out = []
    for i, c in enumerate(fit.get("censored") or []):
        if not isinstance(c, dict):
            continue
        where = f"fit '{fit.get('experiment')}': censored[{i}]"
        if "x" not in c and "param_count" in c and c.get("param_count") is None and c.get("d") is None:
            continue  # censored where nothing was learned about the size (no bound to draw)
        try:
            if "x" in c and "y" in c:
                x, y = float(c["x"]), float(c["y"])
            else:
                if x_name == "log(NlnN)":
                    n = float(c["N"])
                    x = math.log(n * math.log(n))
                else:
                    x = math.log(float(c[x_name[3:].strip("()")]))
                if c.get("param_count"):
                    y = math.log(float(c["param_count"]))
                elif c.get("m") and c.get("d"):
                    y = math.log(float(c["m"]) * float(c["d"]))
                else:
                    y = 2 * math.log(float(c["d"]))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{where}: expected x/y, or the regressor's variable and param_count/d") from None
        out.append((x, y, c.get("direction", "right" if capacity else "up")))
    return out


def _draw_censored(ax, cens: list[tuple[float, float, str]], colour: str, label: str) -> None:
    if not cens:
        return
    xs = np.exp([c[0] for c in cens])
    ys = np.exp([c[1] for c in cens])
    ax.scatter(xs, ys, s=46, facecolors="white", edgecolors=colour, linewidths=1.5, zorder=4, label=label)
    for x, y, direction in cens:
        X, Y = math.exp(x), math.exp(y)
        end = (X, Y * 1.45) if direction == "up" else (X * 1.45, Y)
        ax.annotate("", xy=end, xytext=(X, Y), arrowprops=dict(arrowstyle="->", color=colour, lw=1.3), zorder=4)


def fit_plot(fit: dict, title: str | None = None, size=FIG_SINGLE, y_label: str = "parameter count") -> Figure:
    """Log-log fit: per-seed points, fitted line with band, predicted slope, censored points; the verdict in the
    title, the legend outside the axes (right), the numbers and the reason in the caption under the figure.

    A fit dict without a slope (compare found too few points) still gets its points, censored
    points and the verdict reason, so the page says why there is no line.
    """
    with style_context():
        fig = new_figure(size)
        draw_fit(fig.add_subplot(), fit, title=title, y_label=y_label, legend_fontsize=7.5)
        _caption(fig, fit)
    return fig


_CAPTION_PT = 8.0  # the caption under a page of panels


def _panel_captions(fits: Sequence[dict], chars: int) -> list[str]:
    """One caption line per panel (two when there are three panels or fewer): its verdict, the other readings
    compare made, and the start of its reason, pointing to the appendix for the rest; the notes the system
    attaches to its lines, once each."""
    lines = 2 if len(fits) <= 3 else 1
    reasons = [short_reason(f"({i + 1}) {fit.get('verdict', 'n/a')}{_evidence_suffix(fit)}{_readings_suffix(fit)}: "
                            f"{fit['verdict_reason']}", fit, chars, lines=lines)
               for i, fit in enumerate(fits) if fit.get("verdict_reason")]
    notes = dict.fromkeys(str(fit["prediction_note"]) for fit in fits if fit.get("prediction_note"))
    return reasons + [cut_lines(f"note: {note}", chars, max_lines=1) for note in notes]


def panel_legend(fig: Figure, axes: Sequence, top: float, fontsize: float = 8, ncol: int | None = None):
    """One legend for every panel (one entry per kind of element), centred under the page title at ``top``
    (figure fraction), outside every axes; returns its height in figure fraction (0 when nothing is labelled)."""
    handles: dict = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    if not handles:
        return 0.0
    ncol = ncol or min(len(handles), 3)
    rows = -(-len(handles) // ncol)
    fig.legend(list(handles.values()), [line_mathtext(k) for k in handles], loc="upper center", ncol=ncol,
               bbox_to_anchor=(0.5, top), fontsize=fontsize, frameon=False, columnspacing=1.5, handlelength=1.8,
               borderaxespad=0.2)
    return (rows * fontsize * 1.75 + 8) / 72 / fig.get_figheight()


def fit_grid(fits: Sequence[dict], title: str | None = None, size=FIG_WIDE,
             y_label: str = "parameter count") -> Figure:
    """The fits of one line side by side (one panel per threshold, three per row): each panel's verdict and its
    numbers in the panel's title (in the verdict's colour), nothing drawn over the data, one legend for all
    panels under the page title, and one caption line per panel (its verdict's reason, in full in the appendix).

    Placed by hand, not by a layout engine: the page's size is known, and constrained layout spent
    half of the page's drawing time (and squashed the panels when a label was long)."""
    if not fits:
        raise InputError("fit grid: expected at least one fit dict")
    n = len(fits)
    rows, cols = (1, n) if n <= 3 else ((n + 2) // 3, 3)
    width_in, height_in = fig_size = tuple(size)
    with style_context():
        fig = new_figure(fig_size, layout=None)
        top = _page_title(fig, title)
        caption = "\n".join(_panel_captions(fits, int(width_in * 14.5)))
        if caption:
            fig.text(0.01, 0.012, caption, fontsize=_CAPTION_PT, ha="left", va="bottom", color="0.2", linespacing=1.3)
        bottom = 0.012 + (caption.count("\n") + 1) * _CAPTION_PT * 1.3 / 72 / height_in + 0.7 / height_in
        axes = [fig.add_subplot(rows, cols, i + 1) for i in range(n)]
        several_lines = len({str(f.get("line")) for f in fits}) > 1
        for i, (ax, fit) in enumerate(zip(axes, fits)):
            panel = f"({i + 1})" + (f" {line_mathtext(fit.get('line'))}," if several_lines else "")
            panel += f" threshold {threshold_label(fit)}" if fit.get("threshold") is not None else ""
            draw_fit(ax, fit, title=panel, y_label=y_label if i % cols == 0 else "", legend=False,
                     x_label=i >= n - cols, title_fontsize=9.5)
        legend_h = panel_legend(fig, axes, top)
        title_h = 2 * 9.5 * 1.45 / 72 / height_in + 0.01  # each panel's two-line verdict title
        axes_top = top - legend_h - title_h
        gap = title_h + 0.04  # between rows: a title and the tick labels of the row above
        panel_h = max((axes_top - bottom - (rows - 1) * gap) / rows, 0.05)
        fig.subplots_adjust(left=0.085, right=0.985, top=axes_top, bottom=bottom, wspace=0.24, hspace=gap / panel_h)
    return fig


def _page_title(fig: Figure, title: str | None, fontsize: float = 14) -> float:
    """The page's title at the top, wrapped to the page; returns the figure fraction under it."""
    if not title:
        return 0.975
    wrapped = wrap_title(title, fig.get_figwidth() * 0.95, fontsize)
    fig.text(0.5, 0.975, wrapped, ha="center", va="top", fontsize=fontsize)
    return 0.975 - (wrapped.count("\n") + 1) * fontsize * 1.35 / 72 / fig.get_figheight() - 0.01


def _other_readings(fit: dict) -> list[tuple[str, str, float, str]]:
    """The predictions compare judged a check against beside the tested one, as (short name, long name, slope,
    verdict): the binding terms alone where the tested one is every term at once, and the level within the instance's
    ceiling (the other reading of a threshold when the ceiling is a cap). The fit grid gives the short names next to
    each verdict, a single fit's caption the long ones."""
    out = []
    if fit.get("verdict_binding_terms") is not None and fit.get("predicted_slope_finite_size") is not None:
        out.append(("binding terms alone",
                    "the binding terms alone (the finite-size form before every term was summed)",
                    float(fit["predicted_slope_finite_size"]), str(fit["verdict_binding_terms"])))
    if fit.get("predicted_slope_within_ceiling") is not None:
        out.append(("within the ceiling", "within the ceiling (the level as a fraction of each instance's ceiling)",
                    float(fit["predicted_slope_within_ceiling"]), str(fit.get("verdict_within_ceiling"))))
    if fit.get("predicted_slope_conditional") is not None:
        read = " and ".join(fit.get("conditional_reading_on") or ["measured quantities"])
        out.append(("conditional", f"conditional (the same form on the judged runs' own {read})",
                    float(fit["predicted_slope_conditional"]), str(fit.get("verdict_conditional"))))
    return out


def _censored_against_form(fit: dict) -> list[str]:
    """"censored V=1024: past d=8192, all terms 9886 (same side)" for each censored point compare set against the
    all-terms form, and which base values the runs did not reach (the tested prediction keeps them)."""
    out = [f"censored {b['base']}={b['base_value']}: {'past' if b['past'] else 'below'} {b['size']}={b['bound']:g}, "
           f"all terms {b['predicted']:.4g} ({'same side' if b['agrees'] else 'other side: against the form'})"
           for b in fit.get("censored_against_all_terms") or []]
    if fit.get("unreached"):
        base = next((b["base"] for b in fit.get("censored_against_all_terms") or []), "base value")
        out.append(f"unreached {base}: {', '.join(map(str, fit['unreached']))} (kept in the prediction)")
    return out


def _evidence_suffix(fit: dict) -> str:
    """", confirmatory" (the verdict's evidence label, compare.evidence) or ""."""
    return f", {fit['evidence']}" if fit.get("evidence") else ""


def _readings_suffix(fit: dict) -> str:
    """" (binding terms alone: 1.76, inconclusive; within the ceiling: 2.29, consistent)" or ""."""
    others = [f"{short}: {slope:.2f}, {verdict}" for short, _, slope, verdict in _other_readings(fit)]
    others += _censored_against_form(fit)
    return f" ({'; '.join(others)})" if others else ""


def threshold_label(fit: dict) -> str:
    """``0.1``, or ``0.5 x ceiling`` for a threshold relative to each instance's ceiling."""
    return CheckKey.of(fit).threshold_text


def draw_fit(ax, fit: dict, title: str | None = None, y_label: str = "parameter count",
             legend_fontsize: float | None = None, legend: bool = True, x_label: bool = True,
             title_fontsize: float = 10.5) -> None:
    """Draw one fit dict on ``ax`` (see :func:`fit_plot`): the verdict and its numbers in the axes' title, nothing
    over the data. ``legend=False``: the caller draws one legend for several panels, so the labels name the kind
    of element (the numbers are in the title); else the legend goes right of the axes."""
    where = f"fit '{fit.get('experiment', '?')}'"
    xs, ys, seeds = _points_xy(_require(fit, "points", where), f"{where}.points")
    cens = _censored_xy(fit)
    all_x = np.concatenate([xs, [c[0] for c in cens]]) if cens else xs
    head = title or f"{fit.get('experiment', '')}" + (
        f", threshold {threshold_label(fit)}" if fit.get("threshold") is not None else "")
    verdict_title(ax, head, fit, fontsize=title_fontsize)
    if all_x.size == 0:
        ax.text(0.5, 0.5, "no boundary points", ha="center", va="center", transform=ax.transAxes)
        return
    span = max(all_x.max() - all_x.min(), 0.2)
    grid = np.linspace(all_x.min() - 0.05 * span, all_x.max() + 0.05 * span, 100)
    x_centre = float(xs.mean()) if xs.size else float(all_x.mean())
    line = fitted_line_with_band(ax, fit, grid, x_centre, band_colour=PALETTE["blue"], band_alpha=0.18)
    slope, intercept = line or (fit.get("slope"), fit.get("intercept"))
    curve = fit.get("method") == "curve"
    if xs.size:
        ax.scatter(np.exp(xs) * _seed_jitter(seeds, 0.04), np.exp(ys), s=22, alpha=0.6,
                   color=PALETTE["blue"], edgecolors="none", zorder=3,
                   label=(f"boundaries of the {fit.get('n_seeds')}-seed mean curves" if curve
                          else f"boundary points ({len(set(seeds))} seeds, jittered)" if legend
                          else "boundary points (seeds jittered)"))
    shown_y = list(ys) + [c[1] for c in cens]
    if line is not None:
        ax.plot(np.exp(grid), np.exp(intercept + slope * grid), color=PALETTE["blue"], lw=2,
                label=f"fit: slope {slope:.2f}, {'seed-curve' if curve else 'HC3'} CI {_fmt_ci(fit.get('slope_ci'))}"
                if legend else "fitted line")
        shown_y += [intercept + slope * grid[0], intercept + slope * grid[-1]]
    shown_y += _draw_predictions(ax, fit, xs, ys, grid, x_centre, line, legend)
    _draw_censored(ax, cens, PALETTE["vermillion"], "censored: beyond the searched range")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(np.exp(grid[0]), np.exp(grid[-1]))
    _limit_y_to_data(ax, np.exp(shown_y))
    if x_label:
        ax.set_xlabel(regressor_label(fit.get("x")))
    ax.set_ylabel(y_label)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=legend_fontsize, borderaxespad=0.0)
    _major_labels_only(ax)


def _draw_predictions(ax, fit: dict, xs, ys, grid, x_centre: float, line, legend: bool) -> list[float]:
    """The tested prediction (dashed) and, when it differs, the asymptotic one (dotted), through the data centre;
    returns their end points' log y (the axes show them whole)."""
    tested, asymptotic = tested_and_asymptotic(fit)
    if tested is None or not xs.size:
        return []
    y_centre = line[1] + line[0] * x_centre if line is not None else float(ys.mean())
    ends = []
    ax.plot(np.exp(grid), np.exp(y_centre + tested * (grid - x_centre)), color=PALETTE["black"], ls="--", lw=1.5,
            label=prediction_label(fit) if legend else "tested prediction, through the data centre")
    ends += [y_centre + tested * (grid[0] - x_centre), y_centre + tested * (grid[-1] - x_centre)]
    if asymptotic is not None and abs(asymptotic - tested) > 5e-4:
        ax.plot(np.exp(grid), np.exp(y_centre + asymptotic * (grid - x_centre)), color=PALETTE["black"], ls=":",
                lw=1.2, label=f"asymptotic prediction: slope {asymptotic:.2f}" if legend
                else "asymptotic prediction (not tested)")
        ends += [y_centre + asymptotic * (grid[0] - x_centre), y_centre + asymptotic * (grid[-1] - x_centre)]
    return ends


def verdict_title(ax, head: str, fit: dict, fontsize: float = 10.5) -> None:
    """``head: verdict, evidence`` over the fitted slope against the tested prediction, as the axes' title on the
    verdict's colour: the verdict is read where the panel is named, and nothing covers the data."""
    verdict = fit.get("verdict")
    first = f"{head}: {verdict}{_evidence_suffix(fit)}" if verdict else head
    numbers = fit_numbers(fit)
    text = first + (f"\n{numbers}" if numbers else "")
    # no wider than its panel (and the gap beside it): the right-hand panel's title must not leave the page
    room = ax.get_position().width * ax.figure.get_figwidth() * 72 * 1.08
    ax.set_title(text, fontsize=font_to_fit(text, room, fontsize), linespacing=1.25,
                 bbox=dict(boxstyle="round,pad=0.25", facecolor=VERDICT_COLOURS.get(verdict, "white"), edgecolor="none")
                 if verdict else None)


def fit_numbers(fit: dict) -> str:
    """"slope 1.97 [1.75, 2.19] vs 1.76 $\\pm$ 0.25": the fitted slope with its interval against the tested
    prediction and its equivalence margin."""
    parts = []
    if fit.get("slope") is not None:
        parts.append(f"slope {float(fit['slope']):.2f} {_fmt_ci(fit.get('slope_ci'))}")
    tested, _ = tested_and_asymptotic(fit)
    if tested is not None:
        parts.append(f"vs {tested:.2f} $\\pm$ {float(fit.get('delta') or 0.25):g}")
    return " ".join(parts)


def fitted_line_with_band(ax, fit: dict, grid: np.ndarray, x_centre: float, band_colour, band_alpha: float
                          ) -> tuple[float, float] | None:
    """The fit's (slope, intercept) as floats, with its slope's band shaded on ``ax`` over ``grid`` (log x,
    log y) when the fit has one; None, and nothing drawn, when the fit has no line. Shared by the threshold
    fits' panels and the law fits' pages so both read a fit's line and band the same way."""
    slope, intercept = fit.get("slope"), fit.get("intercept")
    if slope is None or intercept is None:
        return None
    band = _band(fit, grid, x_centre)
    if band is not None:
        bx, lo, hi, blabel = band
        ax.fill_between(np.exp(bx), np.exp(lo), np.exp(hi), color=band_colour, alpha=band_alpha, lw=0, label=blabel)
    return float(slope), float(intercept)


def short_reason(text: str, fit: dict, width: int, lines: int = 2) -> str:
    """A verdict reason cut to ``lines`` lines for a page; the full text is in the report's appendix
    (check number ``fit["check"]`` when the report numbered it) and in summary.json."""
    where = f"appendix, check {fit['check']}" if fit.get("check") else "the appendix and summary.json"
    return cut_lines(str(text), width, max_lines=lines, more=f" ... [in full: {where}]")


def _caption(fig: Figure, fit: dict) -> None:
    """Under a single fit: what the verdict rests on (the numbers a box over the data once held), then its reason,
    the other readings and the system's note."""
    width = int(fig.get_figwidth() * 13)
    fig.get_layout_engine().set(h_pad=0.1)
    text = fill("; ".join(verdict_lines(fit)), width)
    if fit.get("verdict_reason"):
        text += "\n" + short_reason(fit["verdict_reason"], fit, width)
    for _, long, slope, verdict in _other_readings(fit):  # the predictions beside the tested one
        text += f"\n{long}: prediction {slope:.2f}, {verdict}"
    for line in _censored_against_form(fit):  # the censored points against the form, where compare set them
        text += f"\n{line}"
    if fit.get("prediction_note"):  # the effect the system names for this line
        text += "\n" + cut_lines(f"note: {fit['prediction_note']}", width, max_lines=2)
    if text.strip():
        fig.supxlabel(text.strip("\n"), fontsize=8, ha="center", color="0.25")



def _log_power_text(fit: dict) -> str:
    power = fit.get("log_power")
    return "" if power in (None, "") else f", log power {power}"


def _prediction_kind(fit: dict) -> str:
    """What the tested prediction is ("all terms", "finite size", "realised grid"; "finite-range" for the secant of
    a prediction with a log factor): the legend and the verdict box name it alike (the box once said "finite-range"
    for every kind)."""
    return fit.get("prediction_compared") or "finite-range"


def prediction_label(fit: dict, digits: int = 3) -> str:
    """"tested prediction: slope 1.695 (finite-range; asymptotic 1.500, log power 1)" - the one
    prediction the plot, the tables and the verdict share."""
    tested, asymptotic = tested_and_asymptotic(fit)
    if tested is None:
        return "no prediction"
    text = f"tested prediction: slope {tested:.{digits}f}"
    if asymptotic is not None and abs(tested - asymptotic) > 5e-4:
        text += f" ({_prediction_kind(fit)}; asymptotic {asymptotic:.{digits}f}{_log_power_text(fit)})"
    return text


def verdict_lines(fit: dict) -> list[str]:
    """The verdict and what it rests on, one item each: the fitted slope, the tested prediction +- delta (and the
    asymptotic one beside it), the equivalence band, TOST p, the bootstrap interval, R^2 and n."""
    verdict = fit.get("verdict")
    if not verdict:
        return []
    lines = [f"verdict: {verdict}{_evidence_suffix(fit)}"]
    if fit.get("slope") is not None:
        interval = "seed-curve" if fit.get("method") == "curve" else "HC3"
        lines.append(f"fitted slope {float(fit['slope']):.3f}, {interval} CI {_fmt_ci(fit.get('slope_ci'))}")
    tested, asymptotic = tested_and_asymptotic(fit)
    if tested is not None:
        lines.append(f"tested prediction {tested:.3f} +- {fit.get('delta', 0.25):g}")
        if asymptotic is not None and abs(tested - asymptotic) > 5e-4:
            lines[-1] += f" ({_prediction_kind(fit)}; asymptotic {asymptotic:.3f}{_log_power_text(fit)})"
    band = fit.get("band")  # the equivalence band tested prediction +- delta
    if band and band[0] is not None:
        lines.append(f"equivalence band {_fmt_ci(band)}, alpha = {fit.get('alpha', 0.05):g}")
    if fit.get("p_tost") is not None:
        lines.append(f"TOST p = {fit['p_tost']:.3g}")
    if fit.get("slope_ci_bootstrap"):
        lines.append(f"bootstrap CI {_fmt_ci(fit['slope_ci_bootstrap'])}")
    if fit.get("r2") is not None:
        lines.append(f"R² = {fit['r2']:.3f}, n = {fit.get('n_points', '?')}")
    return lines


def _tick_text(value: float, plain: bool = False) -> str:
    """A log-axis tick: as written (250) on a ``plain`` axis, else a power of ten as $10^{k}$ and any other value
    as $2.5\\times10^{k}$ (never 100000)."""
    if value <= 0 or not math.isfinite(value):
        return ""
    if plain:
        return f"{value:g}"
    exponent = math.floor(math.log10(value) + 1e-9)
    mantissa = value / 10 ** exponent
    if abs(mantissa - 1) < 1e-6:
        return f"$10^{{{exponent}}}$"
    return f"${mantissa:.2g}\\times10^{{{exponent}}}$"


def _major_labels_only(ax) -> None:
    """Readable log-axis labels, powers of ten as such: decades on long axes, 1-2-5 steps on short ones; an axis
    within 0.01 .. 10^4 and two decades reads as plain numbers (64, 128, 500), any other in powers of ten.

    matplotlib's default minor labels on a short log axis (3x10^1, 4x10^1, ...) run into each other.
    """
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        lo, hi = min(lo, hi), max(lo, hi)
        if axis.get_scale() != "log" or lo <= 0:
            continue
        decades = math.log10(hi / lo)
        subs = (1.0,) if decades > 3 else (1.0, 2.0, 5.0) if decades > 1 else (1.0, 1.5, 2.0, 3.0, 5.0, 7.0)
        plain = decades <= 2 and 1e-2 <= lo and hi < 1e4
        axis.set_major_locator(LogLocator(base=10, subs=subs))
        axis.set_major_formatter(FuncFormatter(lambda v, _pos, plain=plain: _tick_text(v, plain)))
        axis.set_minor_formatter(NullFormatter())


def _log_edges(values: np.ndarray) -> np.ndarray:
    """Cell edges halfway (in log) between sorted grid values, so each value sits in its cell centre."""
    lv = np.log(values)
    if len(lv) == 1:
        return np.exp(np.array([lv[0] - 0.5, lv[0] + 0.5]))
    mids = (lv[1:] + lv[:-1]) / 2
    return np.exp(np.concatenate([[2 * lv[0] - mids[0]], mids, [2 * lv[-1] - mids[-1]]]))


def _size_from_params(points: list[dict], size_key: str = "d") -> tuple[float, float]:
    """(u, w) with log d = u + w log(param_count), fitted on the boundary points.

    Exact when param_count = const * d^k (d^2, alpha d^2, d^3, ...), so the heatmap can draw the fitted
    parameter-count line in the (V, d) plane without knowing the model's formula.
    """
    pairs = [(math.log(p["param_count"]), math.log(p[size_key])) for p in points
             if p.get("param_count") and p.get(size_key)]
    if len({a for a, _ in pairs}) < 2:
        return 0.0, 0.5
    lp, ld = np.array(pairs).T
    w, u = np.polyfit(lp, ld, 1)
    return float(u), float(w)


def _mean_by_cell(cells: list[dict], x_key: str, y_key: str, metric: str) -> dict[tuple[float, float], float]:
    """The mean ``metric`` of each (x, y) cell over its entries (seeds); rows with an ``error`` or no metric
    (failed runs) are left out."""
    acc_sum: dict = defaultdict(float)
    acc_n: dict = defaultdict(int)
    for i, c in enumerate(cells):
        if c.get("error") is not None or (metric in c and c[metric] is None):
            continue
        key = (float(_require(c, x_key, f"heatmap.cells[{i}]")), float(_require(c, y_key, f"heatmap.cells[{i}]")))
        acc_sum[key] += float(_require(c, metric, f"heatmap.cells[{i}]"))
        acc_n[key] += 1
    if not acc_sum:
        raise InputError(f"heatmap.cells: no cell has a value for '{metric}' (all runs failed?)")
    return {key: total / acc_n[key] for key, total in acc_sum.items()}


def _draw_accuracy_strips(fig: Figure, ax, mean: dict, capacity: bool, metric: str, direction: str | None = None):
    """The heatmap tiles and their colour bar; returns (fixed values, their cell edges, lo, hi), where
    lo..hi spans the searched axis. ``direction`` (higher | lower), when given, goes on the colour bar with
    the seed mean the tiles show."""
    vmax = max(max(mean.values()), 1e-9)
    fixed = np.array(sorted({k[1 if capacity else 0] for k in mean}))
    fixed_edges = _log_edges(fixed)
    lo, hi = math.inf, 0.0
    # one strip per fixed value with its own cell edges: a bisection probes different sizes at each
    # value, and a shared grid would cut every strip into slivers with gaps between the probed sizes
    for j, value in enumerate(fixed):
        if capacity:
            probed = np.array(sorted(x for (x, y) in mean if y == value))
            edges = _log_edges(probed)
            mesh = ax.pcolormesh(edges, fixed_edges[j:j + 2], np.array([[mean[(x, value)] for x in probed]]),
                                 cmap=ACCURACY_CMAP, vmin=0.0, vmax=vmax, shading="flat")
        else:
            probed = np.array(sorted(y for (x, y) in mean if x == value))
            edges = _log_edges(probed)
            mesh = ax.pcolormesh(fixed_edges[j:j + 2], edges, np.array([[mean[(value, y)]] for y in probed]),
                                 cmap=ACCURACY_CMAP, vmin=0.0, vmax=vmax, shading="flat")
        lo, hi = min(lo, edges[0]), max(hi, edges[-1])
    cbar = fig.colorbar(mesh, ax=ax, pad=0.02)
    name = "accuracy on fresh samples" if metric == "accuracy" else metric
    cbar.set_label(name if direction is None else f"{name}, mean over seeds ({direction} is better)")
    return fixed, fixed_edges, lo, hi


def _draw_boundary(ax, pts: Sequence[dict], colour, marker, thr_text: str, capacity: bool, x_key: str,
                   y_key: str, metric: str = "accuracy") -> None:
    """One threshold's searched boundary: the median found value of the seeds at each fixed value, and each
    censored point as an open marker with an arrow pointing beyond the searched range. ``metric``: what the
    threshold is on, as the legend names it."""
    searched, other = (x_key, y_key) if capacity else (y_key, x_key)
    word = "largest" if capacity else "smallest"
    found: dict = defaultdict(list)
    for p in pts:
        if not p.get("censored"):
            found[float(p[other])].append(float(p[searched]))
    if found:
        keys = np.array(sorted(found))
        med = np.array([np.median(found[k]) for k in keys])
        xs_, ys_ = (med, keys) if capacity else (keys, med)
        ax.plot(xs_, ys_, ls="none", marker=marker, ms=7, mfc=colour, mec="black", mew=1.0, zorder=4,
                label=f"{word} {searched} with {metric} >= {thr_text} at each {other} (median of seeds)")
    cens = [p for p in pts if p.get("censored") and p.get(x_key) is not None and p.get(y_key) is not None]
    for p in cens:
        X, Y = float(p[x_key]), float(p[y_key])
        ax.plot([X], [Y], ls="none", marker=marker, ms=7, mfc="none", mec=colour, mew=1.5, zorder=4)
        ax.annotate("", xy=(X * 1.3, Y) if capacity else (X, Y * 1.3), xytext=(X, Y),
                    arrowprops=dict(arrowstyle="->", color=colour, lw=1.3), zorder=4)


def _frame_heatmap(fig: Figure, ax, boundary_points: Sequence[dict], fits: Sequence[dict], capacity: bool,
                   limits: tuple, x_key: str, y_key: str, title: str | None, legend: bool, drawn_fit: bool,
                   metric: str = "accuracy") -> None:
    """Legends, log axes, limits (``limits`` = fixed_edges, lo, hi of the strips), labels and title."""
    fixed_edges, lo, hi = limits
    searched = x_key if capacity else y_key
    if any(p.get("censored") for p in boundary_points):
        ax.plot([], [], ls="none", marker="o", mfc="none", mec="0.3",
                label=f"censored: no {searched} in the searched range reached the accuracy (arrow: beyond)"
                if metric == "accuracy" else
                f"censored: no {searched} in the searched range reached the {metric} threshold (arrow: beyond)")
    ax.add_artist(ax.legend(handles=[Patch(facecolor=UNPROBED_GREY, edgecolor="0.5",
                                           label="grey: not trained (the search never probed there)")],
                            loc="lower right", fontsize=7.5, framealpha=0.9))
    ax.set_xscale("log")
    ax.set_yscale("log")
    if capacity:
        ax.set_xlim(lo, hi)
        ax.set_ylim(fixed_edges[0], fixed_edges[-1])
    else:
        ax.set_xlim(fixed_edges[0], fixed_edges[-1])
        ax.set_ylim(lo, hi)
    _major_labels_only(ax)
    names = {"V": "vocabulary size V", "d": "embedding dimension d", "N": "number of facts N"}
    ax.set_xlabel(names.get(x_key, x_key))
    ax.set_ylabel(names.get(y_key, y_key))
    ax.set_title(wrap_title(title or "accuracy over (V, d)", fig.get_figwidth() * 0.75, 12))
    if legend:
        # outside the axes: over the heatmap a legend would hide the cells that matter
        fig.legend(loc="outside lower center", ncol=2, fontsize=8,
                   title=(f"slope = fitted slope of log(parameter count) against log {x_key}, 95% CI "
                          + ("(seed curves)" if any(f.get("method") == "curve" for f in fits) else "(HC3)")
                          if drawn_fit else None), title_fontsize=8)


def accuracy_heatmap(cells: list[dict], boundary_points: Sequence[dict] = (), fits: Sequence[dict] = (),
                     title: str | None = None, size=FIG_SINGLE, x_key: str = "V", y_key: str = "d",
                     metric: str = "accuracy", search: str | None = None, direction: str | None = None) -> Figure:
    """Accuracy over (V, d) on log axes, the searched boundary per threshold and the fitted line per threshold.

    ``search``: the experiment kind. A min-size search (default) finds the smallest ``y_key`` at each
    ``x_key`` and draws the fit; a capacity search (``"max_capacity"``) finds the largest ``x_key`` at each
    ``y_key`` (tiles run along x; its fit, against log(N ln N), is on the capacity page).

    ``cells``: ``[{"V", "d", "accuracy"}]`` (several entries for one cell, e.g. seeds, are averaged;
    each probed d fills its V column up to halfway, in log, to the next probed d);
    empirics' ``SweepResult.runs`` rows of one line fit as they are. Rows with an ``error`` or no
    metric (failed runs) are left out, so their cell stays grey like a cell never trained.
    ``boundary_points``: search.boundary_points dicts of this line. ``fits``: FitResult dicts of this
    line, one per threshold (legend gives the slope of log parameter count against log V). ``direction``:
    ``"higher"`` or ``"lower"`` is better, named on the colour bar with the seed mean, and the boundary's legend
    names the metric (None: the bar names the metric alone and the legend says accuracy, as the search kinds'
    pages always did).
    """
    if not cells:
        raise InputError("heatmap.cells: expected a non-empty list of {V, d, accuracy}")
    mean = _mean_by_cell(cells, x_key, y_key, metric)
    thresholds = sorted({float(p["threshold"]) for p in boundary_points if p.get("threshold") is not None}
                        | {float(f["threshold"]) for f in fits if f.get("threshold") is not None})
    u, w = _size_from_params(list(boundary_points), y_key)
    # a min-size search probes sizes (y) at each base value (x); a capacity search probes the number of
    # facts (x) at each size (y): tiles and points follow the searched direction
    capacity = search in ("max_capacity", "capacity")
    with style_context():
        fig = new_figure(size)
        ax = fig.add_subplot()
        ax.set_facecolor(UNPROBED_GREY)  # cells never trained show as plain grey, not as accuracy 0
        fixed, fixed_edges, lo, hi = _draw_accuracy_strips(fig, ax, mean, capacity, metric, direction)
        drawn_fit = False
        for i, thr in enumerate(thresholds):
            colour = THRESHOLD_COLOURS[i % len(THRESHOLD_COLOURS)]
            pts = [p for p in boundary_points if p.get("threshold") is not None and float(p["threshold"]) == thr]
            thr_text = threshold_text(thr, any(p.get("threshold_relative") for p in pts))
            # the search kinds' pages keep the word they always had (their metric's name is on the title)
            _draw_boundary(ax, pts, colour, MARKERS[i % len(MARKERS)], thr_text, capacity, x_key, y_key,
                           "accuracy" if direction is None else metric)
            fit = next((f for f in fits if f.get("threshold") is not None and float(f["threshold"]) == thr), None)
            if fit is not None and not capacity and fit.get("slope") is not None and fit.get("intercept") is not None:
                lv = np.linspace(np.log(fixed[0]), np.log(fixed[-1]), 50)
                log_d = u + w * (fit["intercept"] + fit["slope"] * lv)
                ax.plot(np.exp(lv), np.exp(log_d), color=colour, lw=1.8, path_effects=_OUTLINE, zorder=3,
                        label=f"fit, {metric} {thr_text}: slope {fit['slope']:.2f} {_fmt_ci(fit.get('slope_ci'))}")
                drawn_fit = True
        _frame_heatmap(fig, ax, boundary_points, fits, capacity, (fixed_edges, lo, hi), x_key, y_key, title,
                       bool(thresholds), drawn_fit, "accuracy" if direction is None else metric)
    return fig


def _invert_n_log_n(log_value: np.ndarray) -> np.ndarray:
    """N from log(N ln N) (principal branch of Lambert W: N ln N = y  <=>  N = y / W(y))."""
    # scipy.special takes about 0.15 s to import and only the capacity page needs it: not at module import
    from scipy.special import lambertw

    y = np.exp(np.asarray(log_value, dtype=float))
    return np.real(y / lambertw(y))


def capacity_plot(fits: Sequence[dict], labels: Sequence[str] | None = None, title: str | None = None,
                  size=FIG_SINGLE) -> Figure:
    """Capacity law: facts stored N against parameter count (d^2, m*d) with fit, band and the constant C.

    Each fit dict is one series, its x "log(N ln N)" or "log N" as its pack predicts (compare.assertions.regressor_for)
    and C drawn as C N ln N or C N to match; its ``points`` are per seed. The seeds' spread at one parameter count is
    drawn as a horizontal bar (min..max N) around the median.
    """
    if not fits:
        raise InputError("capacity: expected at least one fit dict")
    with style_context():
        fig = new_figure(size)
        ax = fig.add_subplot()
        for i, fit in enumerate(fits):
            where = f"capacity fit '{fit.get('experiment', i)}'"
            colour = CYCLE[i % len(CYCLE)]
            label = labels[i] if labels else str(fit.get("experiment", f"series {i}"))
            xs, ys, _ = _points_xy(_require(fit, "points", where), f"{where}.points")
            n_ln_n = fit.get("x", "log(N ln N)") == "log(N ln N)"
            to_n = _invert_n_log_n if n_ln_n else np.exp  # N from the fit's x
            Ns = to_n(xs)
            params = np.exp(ys)
            ax.scatter(Ns, params, s=14, alpha=0.35, color=colour, edgecolors="none", zorder=2)
            groups: dict = defaultdict(list)
            for n, p in zip(Ns, params):
                groups[round(float(p), 6)].append(n)
            gp = np.array(sorted(groups))
            med = np.array([np.median(groups[g]) for g in gp])
            lo = np.array([min(groups[g]) for g in gp])
            hi = np.array([max(groups[g]) for g in gp])
            ax.errorbar(med, gp, xerr=[med - lo, hi - med], fmt=MARKERS[i % len(MARKERS)], color=colour,
                        ms=6, capsize=3, lw=1.2, zorder=3, label=f"{label}: median and range over seeds")
            grid = np.linspace(xs.min() - 0.1, xs.max() + 0.1, 80)
            band = _band(fit, grid, float(xs.mean()))
            if band is not None:
                bx, blo, bhi, blabel = band
                ax.fill_between(to_n(bx), np.exp(blo), np.exp(bhi), color=colour, alpha=0.15, lw=0,
                                label=f"{label}: {blabel}")
            ax.plot(to_n(grid), np.exp(fit["intercept"] + fit["slope"] * grid), color=colour, lw=1.8,
                    label=f"{label}: fit slope {fit['slope']:.2f} {_fmt_ci(fit.get('slope_ci'))}")
            if fit.get("C") is not None:
                C = float(fit["C"])
                ax.plot(to_n(grid), C * np.exp(grid), color=colour, lw=1.2, ls="--",
                        label=f"{label}: C N{' ln N' if n_ln_n else ''}, C = {C:.3f} {_fmt_ci_g(fit.get('C_ci'))}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        _limit_y_to_data(ax, [math.exp(p["y"]) for f in fits for p in f.get("points", [])])
        ax.set_xlabel("facts stored N (largest N at accuracy threshold)")
        ax.set_ylabel("parameter count (d$^2$ or m$\\cdot$d)")
        ax.set_title(wrap_title(title or "associative-memory capacity", fig.get_figwidth() * 0.85, 12))
        ax.legend(loc="upper left", fontsize=8)
        _major_labels_only(ax)
    return fig


def _fmt_ci_g(ci) -> str:
    if not ci or len(ci) != 2 or ci[0] is None:
        return ""
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _limit_y_to_data(ax, y_values: Sequence[float]) -> None:
    """Keep the data readable when a band from few points spans decades: the band runs off the frame
    (visibly cut) instead of squashing the points into a line."""
    ys = [float(v) for v in y_values if v and v > 0]
    if not ys:
        return
    lo, hi = math.log(min(ys)), math.log(max(ys))
    pad = max(0.3 * (hi - lo), math.log(3.0))
    cur_lo, cur_hi = ax.get_ylim()
    ax.set_ylim(max(cur_lo, math.exp(lo - pad)), min(cur_hi, math.exp(hi + pad)))


def _draw_dmin_log_fit(ax, lf: dict, Ngrid: np.ndarray, fitted_N: np.ndarray, colour, band: bool) -> None:
    """The log form a + b log2 N of one group, with the b interval as a band when ``band``."""
    log_curve = lf["a"] + lf["b"] * np.log2(Ngrid)
    log_curve[log_curve <= 0] = np.nan  # a log axis cannot show d <= 0
    ax.plot(Ngrid, log_curve, color=colour, lw=1.6,
            label=f"   a + b log2 N: b = {lf['b']:.2f} {_fmt_ci(lf.get('b_ci'))}")
    ci = lf.get("b_ci")
    if ci and ci[0] is not None and band:
        # the b interval pivoted at the data's centre (no a-b covariance in the dict)
        x0 = float(np.mean(np.log2(fitted_N)))
        y0 = lf["a"] + lf["b"] * x0
        lo, hi = (y0 + c * (np.log2(Ngrid) - x0) for c in ci)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
        ax.fill_between(Ngrid, np.where(lo > 0, lo, np.nan), np.where(hi > 0, hi, np.nan),
                        color=colour, alpha=0.12, lw=0)


def _draw_dmin_power_fit(ax, pf: dict, Ngrid: np.ndarray, fitted_N: np.ndarray, colour, band: bool) -> None:
    """The power form c N^p of one group (dashed), with the p interval as a band when ``band``."""
    ax.plot(Ngrid, pf["c"] * Ngrid ** pf["p"], color=colour, lw=1.6, ls="--",
            label=f"   c N$^p$: p = {pf['p']:.2f} {_fmt_ci(pf.get('p_ci'))}")
    ci = pf.get("p_ci")
    if ci and ci[0] is not None and pf["c"] > 0 and band:
        x0 = float(np.mean(np.log(fitted_N)))
        y0 = math.log(pf["c"]) + pf["p"] * x0
        lo, hi = (np.exp(y0 + c * (np.log(Ngrid) - x0)) for c in ci)
        ax.fill_between(Ngrid, np.minimum(lo, hi), np.maximum(lo, hi), color=colour, alpha=0.12,
                        lw=0)


def _draw_dmin_group(ax, sel: list[dict], g: dict, R, colour, selection: dict, Ngrid: np.ndarray,
                     Ns: list[float]) -> bool:
    """One group (R) of a d_min panel: its points (censored ones open), both fitted forms and the band of
    the preferred one. Returns whether any point is censored."""
    size_key = selection.get("size_key", "d")
    ok = [p for p in sel if not p.get("censored") and p.get(size_key) is not None]
    pref = g.get("preferred")
    head = f"R = {R}" + ("" if not pref else ": no form preferred" if pref == "inconclusive"
                         else f": prefers {pref}")
    if g.get("delta_aic") is not None:
        head += f", AIC(power) - AIC(log) = {g['delta_aic']:.1f}"
    ax.scatter([p["N"] for p in ok], [p[size_key] for p in ok], s=20, alpha=0.6, color=colour,
               edgecolors="none", label=head)
    cens = [p for p in sel if p.get("censored") and p.get(size_key) is not None]
    if cens:
        ax.scatter([p["N"] for p in cens], [p[size_key] for p in cens], s=36, facecolors="white",
                   edgecolors=colour, linewidths=1.4)
    fitted_N = np.array([float(p["N"]) for p in ok]) if ok else np.array(Ns)
    # one band per group, on the form the data prefer (else the predicted one): two
    # overlapping bands, one of them for a form far off the data, hide the points
    band_form = pref if pref in ("log", "power") else selection.get("predicted") or g.get("predicted")
    if "log" in g:
        _draw_dmin_log_fit(ax, g["log"], Ngrid, fitted_N, colour, band_form == "log")
    if "power" in g:
        _draw_dmin_power_fit(ax, g["power"], Ngrid, fitted_N, colour, band_form == "power")
    return bool(cens)


def _draw_dmin_panel(fig: Figure, ax, entry: dict, kind: str, Rs: list, colour_of: dict) -> tuple[bool, list[float]]:
    """One panel (learned or frozen embeddings): every group, log-2 axes, the verdict in the title and the
    legend below the panel. Returns (whether any point is censored, the panel's d values)."""
    pts = entry["points"]
    selection = entry.get("selection") or {}
    size_key = selection.get("size_key", "d")
    group_key = selection.get("group_key", "R")
    groups = {g.get(group_key): g for g in selection.get("groups", [])}
    Ns = [float(p["N"]) for p in pts]
    Ngrid = np.geomspace(min(Ns), max(Ns), 60)
    any_censored = False
    for R in Rs:
        sel = [p for p in pts if p.get("R") == R]
        if sel:
            any_censored |= _draw_dmin_group(ax, sel, groups.get(R, {}), R, colour_of[R], selection, Ngrid, Ns)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    for axis in (ax.xaxis, ax.yaxis):  # plain numbers: 2^k in mathtext cost a parse per label
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("subjects N")
    verdict = selection.get("verdict")
    ax.set_title((entry.get("label") or f"{kind} subject embeddings")
                 + (f"\npredicted {selection['predicted']}: {verdict}" if verdict and selection.get("predicted")
                    else ""),
                 backgroundcolor=VERDICT_COLOURS.get(verdict, "none") if verdict else None)
    # below the panel: inside, it would hide the large-N points that decide log against power
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, 0.0),
              bbox_transform=offset_copy(ax.transAxes, fig=fig, y=-42, units="points"))
    return any_censored, [float(p[size_key]) for p in pts if p.get(size_key)]


def dmin_plot(dmin: dict, title: str | None = None, size=(9.0, 6.0)) -> Figure:
    """d_min against N, learned vs frozen embeddings (one panel each), log and power-law fits per R.

    ``dmin = {"learned": {"points": [...], "selection": {...}}, "frozen": {...}}``: ``points`` are
    boundary points (keys N, d, seed, R, censored) and ``selection`` is
    ``compare.model_selection.select_by_group(points, "R")`` (per group: log a + b log2 N and power
    c N^p fits with intervals and AIC, and the preferred form).
    """
    kinds = [k for k in ("learned", "frozen") if k in dmin]
    if not kinds:
        raise InputError("dmin: expected a 'learned' and/or 'frozen' entry")
    for kind in kinds:
        if not dmin[kind].get("points"):
            raise InputError(f"dmin.{kind}.points: expected a non-empty list of boundary points")
    Rs = sorted({p.get("R") for k in kinds for p in dmin[k]["points"]}, key=lambda r: (r is None, r))
    colour_of = {R: CYCLE[i % len(CYCLE)] for i, R in enumerate(Rs)}
    with style_context():
        fig = new_figure(size)
        axes = fig.subplots(1, len(kinds), sharey=True, squeeze=False)[0]
        any_censored = False
        y_lo, y_hi = math.inf, 0.0
        for ax, kind in zip(axes, kinds):
            censored, ys = _draw_dmin_panel(fig, ax, dmin[kind], kind, Rs, colour_of)
            any_censored |= censored
            y_lo = min(y_lo, min(ys) / 1.5)
            y_hi = max(y_hi, max(ys) * 1.5)  # a fit far off the data is cut, not the data
        axes[0].set_ylim(y_lo, y_hi)
        axes[0].set_ylabel("d$_{min}$ (100% of the N R facts)")
        notes = ["shaded: interval of b (log form) or p (power form) of the preferred form, pivoted at the data's centre"]
        if any_censored:
            notes.append("open markers: censored (no d in the searched range reached 100%)")
        fig.supxlabel("; ".join(notes), fontsize=8)
        fig.suptitle(wrap_title(title or "minimal dimension: solid = a + b log2 N fit, dashed = c N$^p$ fit",
                                fig.get_figwidth() * 0.95, 14))
    return fig


def _threshold_keys(fits: Sequence[dict]) -> list[tuple]:
    """(threshold, relative) of every fit once: absolute thresholds first, then relative, each ascending."""
    keys: list[tuple] = []
    for f in fits:
        key = (f.get("threshold"), bool(f.get("threshold_relative")))
        if key not in keys:
            keys.append(key)
    keys.sort(key=lambda k: (k[1], float("inf") if k[0] is None else float(k[0])))  # absolute, then relative
    return keys


def _claim_lines(keys: Sequence[tuple], claims: Sequence[dict], chars: int) -> list[str]:
    """One line per claim, in panel order: the panel's number, the claim, A - B and p, and its verdict."""
    out = []
    for i, key in enumerate(keys):
        for c in claims:
            if (c.get("threshold"), bool(c.get("threshold_relative"))) != key:
                continue
            numbers = "" if c.get("difference") is None else (
                f": A - B = {float(c['difference']):.2f}" + (f", p = {float(c['p']):.2g}" if c.get("p") is not None else ""))
            out.append(cut_lines(f"({i + 1}) claim {c.get('id')}, {c.get('claim', c.get('relation'))}"
                                 f"{numbers}: {c.get('verdict')}", chars, max_lines=1))
    return out


def _line_summary(f: dict, predicted: bool) -> str:
    """"slope 2.31 [1.87, 2.74], inconclusive (prediction 2.46)": one line's numbers in a lines-plot panel."""
    verdict = f.get("verdict", "n/a") if predicted else "reference"
    if f.get("slope") is None or f.get("intercept") is None:
        return f"no fit, {verdict}"
    text = f"slope {float(f['slope']):.2f} {_fmt_ci(f.get('slope_ci'))}, {verdict}"
    tested, _ = tested_and_asymptotic(f)
    return text + (f" (prediction {tested:.2f})" if tested is not None and predicted else "")


def _draw_line_in_panel(ax, f: dict, colour, marker, predicted: bool) -> list[float]:
    """One line of a lines-plot panel: its points, censored points, fitted line and (``predicted``) its
    tested prediction through the data centre. Returns the log-free y values the axes must show."""
    label = str(f.get("line"))
    xs, ys, _ = _points_xy(f.get("points") or [], f"fit '{f.get('experiment')}' line {label}")
    cens = _censored_xy(f)
    every_y = list(np.exp(ys)) + [math.exp(c[1]) for c in cens]
    all_x = np.concatenate([xs, [c[0] for c in cens]]) if cens else xs
    if xs.size:
        ax.scatter(np.exp(xs), np.exp(ys), s=26, color=colour, marker=marker, zorder=3, edgecolors="none", alpha=0.85)
    _draw_censored(ax, cens, colour, "_nolegend_")
    slope, intercept = f.get("slope"), f.get("intercept")
    if slope is None or intercept is None or not all_x.size:
        return every_y
    span = max(all_x.max() - all_x.min(), 0.2)
    g = np.linspace(all_x.min() - 0.04 * span, all_x.max() + 0.04 * span, 50)
    ax.plot(np.exp(g), np.exp(float(intercept) + float(slope) * g), color=colour, lw=2)
    every_y += [math.exp(float(intercept) + float(slope) * g[k]) for k in (0, -1)]
    tested, _ = tested_and_asymptotic(f)
    if tested is not None and predicted and xs.size:
        centre = float(xs.mean())
        y0 = float(intercept) + float(slope) * centre
        ax.plot(np.exp(g), np.exp(y0 + tested * (g - centre)), color=colour, ls="--", lw=1.3)
        every_y += [math.exp(y0 + tested * (g[k] - centre)) for k in (0, -1)]
    return every_y


def _draw_lines_panel(ax, shown: Sequence[dict], i: int, n: int, cols: int, colour: dict, marker: dict,
                      predicted: set, y_label: str) -> None:
    """Panel ``i`` of ``n`` (one threshold): every line in ``shown``, log axes; the numbers are in the caption."""
    thr_text = threshold_label(shown[0]) if shown and shown[0].get("threshold") is not None else ""
    ax.set_title(f"({i + 1}) threshold {thr_text}" if thr_text else f"({i + 1})", fontsize=11)
    every_y: list[float] = []
    for f in shown:
        label = str(f.get("line"))
        every_y += _draw_line_in_panel(ax, f, colour[label], marker[label], label in predicted)
    ax.set_xscale("log")
    ax.set_yscale("log")
    if every_y:
        _limit_y_to_data(ax, every_y)
    if i >= n - cols:
        ax.set_xlabel(regressor_label(shown[0].get("x") if shown else None))
    if i % cols == 0:
        ax.set_ylabel(y_label)
    _major_labels_only(ax)


def _lines_caption(keys: Sequence[tuple], fits: Sequence[dict], claims: Sequence[dict], predicted: set,
                   chars: int) -> list[str]:
    """Under the panels: each panel's lines with their slopes and verdicts, then the claims judged there."""
    out = []
    for i, key in enumerate(keys):
        shown = [f for f in fits if (f.get("threshold"), bool(f.get("threshold_relative"))) == key]
        out.append(cut_lines(f"({i + 1}) " + "; ".join(f"{line_mathtext(f.get('line'))}: "
                                                         f"{_line_summary(f, str(f.get('line')) in predicted)}"
                                                         for f in shown), chars, max_lines=2))
    claimed = _claim_lines(keys, claims, chars)
    return out + (["claims judged at each panel's threshold:"] + claimed if claimed else [])


def lines_plot(fits: Sequence[dict], claims: Sequence[dict] = (), title: str | None = None,
               size=FIG_WIDE, y_label: str = "parameter count") -> Figure:
    """Every line of one experiment on the same axes, one panel per threshold: each line's boundary points and
    fitted line in its own colour, the tested prediction of each line that has one (dashed, through that line's
    data centre), censored points as open markers with arrows; under the panels each line's slope, interval and
    verdict, and the comparative claims judged at that threshold. This is the picture the claims are about: where
    the lines sit against one another, not one line against its prediction."""
    if not fits:
        raise InputError("lines plot: expected at least one fit dict")
    keys = _threshold_keys(fits)
    labels = list(dict.fromkeys(str(f.get("line")) for f in fits))
    colour = {label: CYCLE[i % len(CYCLE)] for i, label in enumerate(labels)}
    marker = {label: MARKERS[i % len(MARKERS)] for i, label in enumerate(labels)}
    predicted = {str(f.get("line")) for f in fits if tested_and_asymptotic(f)[0] is not None}
    n = len(keys)
    width_in, height_in = tuple(size)
    with style_context():
        fig = new_figure(tuple(size), layout=None)
        top = _page_title(fig, title)
        handles = [Line2D([], [], color=colour[k], marker=marker[k], lw=2, label=line_mathtext(k) + (
            "  (dashed: its tested prediction)" if k in predicted else "  (no prediction tested)")) for k in labels]
        fig.legend(handles=handles, loc="upper center", ncol=min(len(labels), 2), bbox_to_anchor=(0.5, top),
                   fontsize=8.5, frameon=False, handlelength=2.2, borderaxespad=0.2)
        top -= (-(-len(labels) // 2) * 8.5 * 1.75 + 8) / 72 / height_in + 0.05
        caption = "\n".join(_lines_caption(keys, fits, claims, predicted, int(width_in * 14)))
        fig.text(0.01, 0.012, caption, fontsize=8, ha="left", va="bottom", color="0.15", linespacing=1.3)
        bottom = 0.012 + (caption.count("\n") + 1) * 8 * 1.3 / 72 / height_in + 0.7 / height_in
        rows, cols = (1, n) if n <= 3 else (-(-n // 3), 3)
        grid = fig.add_gridspec(rows, cols, left=0.09, right=0.985, top=top, bottom=bottom, wspace=0.25,
                                hspace=0.45 if rows > 1 else 0.2)
        for i, key in enumerate(keys):
            shown = [f for f in fits if (f.get("threshold"), bool(f.get("threshold_relative"))) == key]
            _draw_lines_panel(fig.add_subplot(grid[i // cols, i % cols]), shown, i, n, cols, colour, marker,
                              predicted, y_label)
    return fig

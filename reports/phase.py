"""The phase diagram: which noise term dominates where, and the parameter count each region needs.

Drawn from the plain dict of ``theory.RegionDiagram.to_dict()`` (the JSON that
``recallkit theory regions --json`` prints), so callers need no theory objects. Experiment lines can
be overlaid: ``lines=[{"label": "Fig 2, L ~ V^0.5", "points": [[1, 0.5], [1.5, 0.5]]}]`` (one point
is drawn as a marker, several as a line).

Two axes: each region is a filled polygon labelled with its dominant term and required count
``count ~ base^(exponent) log^(power) base``; the domain boundary is the thick outline.
One axis: regions are bands along the axis and the required exponent is drawn as a curve
(the pack's lower bounds dashed, each with the class it holds for; an estimator's failure condition is
labelled as such), since the exponent is the quantity to read off. Each region's legend entry carries its
gap to the strongest lower bound over a class.
"""
from __future__ import annotations

from textwrap import fill
from typing import Any, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.mathtext import MathTextParser
from matplotlib.patches import Polygon

from recallkit.reports.style import CYCLE, FIG_SINGLE, PAGE_LANDSCAPE, new_figure, style_context, wrap_title
from recallkit.theory.errors import InputError
from recallkit.theory.expr import parse_expression
from recallkit.theory.scaling import power_text
from recallkit.theory.symbols import EXPONENTS

__all__ = ["draw_phase_diagram", "count_label", "gap_label", "law_label", "phase_page"]

_REGION_COLOURS = CYCLE[:6]


def _mathtext_ok(text: str) -> bool:
    """Whether matplotlib's mathtext can typeset ``text`` (sympy.latex can emit unsupported macros)."""
    try:
        MathTextParser("path").parse(text)
        return True
    except ValueError:
        return False


def power_label(base: str, exponent: str, exponent_latex: str, log_power: str, log_power_latex: str,
                prefix: str = "", plain_prefix: str = "") -> str:
    """``$prefix V^{c + 1}\\,\\log V$`` in mathtext, or plain text if mathtext cannot typeset it."""
    if log_power == "0":
        log_part = ""
    elif log_power == "1":
        log_part = rf"\,\log {base}"
    else:
        log_part = rf"\,\log^{{{log_power_latex}}} {base}"
    text = rf"${prefix}{base}^{{{exponent_latex}}}{log_part}$"
    if _mathtext_ok(text):
        return text
    return f"{plain_prefix}{power_text(base, exponent, log_power)}"


def count_label(diagram: dict[str, Any], region: dict[str, Any]) -> str:
    """``$d^{2} \\sim V^{c + 1}\\,\\log V$`` for a region, or a plain-text fallback."""
    count = diagram.get("param_count_latex") or diagram["param_count"]
    return power_label(diagram["base"], region["required_param_exponent"], region["required_param_exponent_latex"],
                       region["log_power"], region.get("log_power_latex", region["log_power"]),
                       prefix=rf"{count} \sim ", plain_prefix=f"{diagram['param_count']} ~ ")


def gap_label(diagram: dict[str, Any], region: dict[str, Any]) -> str:
    """``gap to counting: V^{c}`` for each piece of the region with its own strongest lower bound ("" if none)."""
    parts = []
    for piece in region.get("strongest_bound_gaps") or []:
        power = power_label(diagram["base"], piece["gap_exponent"], piece.get("gap_exponent_latex", piece["gap_exponent"]),
                            piece["gap_log_power"], piece.get("gap_log_power_latex", piece["gap_log_power"]))
        parts.append(f"gap to {piece['name']}: {power}")
    return "; ".join(parts)


def _bound_label(diagram: dict[str, Any], gap: dict[str, Any], bound_label: str) -> str:
    """A dashed curve's legend: a lower bound with its class, or one estimator's failure condition, never mixed."""
    count = _pretty(diagram["param_count"])
    if gap.get("kind", "lower-bound") == "lower-bound":
        text = f"lower bound on {count} ({gap['name']}): {bound_label}; holds for {gap.get('class') or 'a class not named'}"
    else:
        text = f"failure condition of one estimator ({gap['name']}, not a lower bound): {bound_label}"
    return fill(text, 110)


def _pretty(expression: str) -> str:
    return expression.replace("**", "^")


def _require(diagram: dict[str, Any]) -> None:
    for key in ("pack", "axes", "axis_labels", "regions", "box_float", "base", "param_count"):
        if key not in diagram:
            raise InputError(f"phase diagram: missing field {key!r} (expected RegionDiagram.to_dict())")


def _polygon_area(points: Sequence[Sequence[float]]) -> float:
    return abs(sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(points, list(points[1:]) + [points[0]]))) / 2


def _evaluate(expression: str, axis: str, values: Sequence[float]) -> list[float]:
    expr = parse_expression(expression, EXPONENTS, "phase diagram")
    symbol = EXPONENTS[axis]
    return [float(expr.subs(symbol, value)) for value in values]


def law_label(diagram: dict[str, Any], region: dict[str, Any]) -> str:
    """``$error \\sim d^{-1}$``: the metric's power of the base where the region's term dominates (a law's region,
    ``theory.laws.law_regions``), or a plain-text fallback."""
    metric = diagram["metric"]
    typeset = metric.replace("_", r"\_")  # mathtext reads a bare _ as a subscript
    return power_label(diagram["base"], region["exponent"], region["exponent_latex"], region["log_power"],
                       region.get("log_power_latex", region["log_power"]),
                       prefix=rf"\mathrm{{{typeset}}} \sim ", plain_prefix=f"{metric} ~ ")


def draw_phase_diagram(diagram: dict[str, Any], lines: Sequence[dict[str, Any]] | None = None,
                       ax: Axes | None = None) -> Figure:
    """Draw ``RegionDiagram.to_dict()`` (one or two axes), optionally with experiment lines; a law's regions
    (``theory.laws.law_regions``, a dict with ``law``) are drawn the same way, each labelled with its term and the
    metric's power of the base there instead of a required count."""
    if "law" in diagram:
        return _draw_law(diagram, lines, ax)
    _require(diagram)
    with style_context():
        if ax is None:
            fig = new_figure(FIG_SINGLE if len(diagram["axes"]) == 2 else (6.4, 4.5))
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        if len(diagram["axes"]) == 2:
            _draw_2d(ax, diagram)
        else:
            _draw_1d(ax, diagram)
        for index, line in enumerate(lines or []):
            _draw_line(ax, line, index, two_axes=len(diagram["axes"]) == 2)
        ax.set_title(f"{diagram['pack']}: dominant noise term and required {_pretty(diagram['param_count'])}\n"
                     f"scaling {_pretty(diagram['scaling'])}", fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False,
                      fontsize=8)
    return fig


def _draw_law(diagram: dict[str, Any], lines: Sequence[dict[str, Any]] | None, ax: Axes | None) -> Figure:
    for key in ("pack", "law", "metric", "axes", "axis_labels", "regions", "box_float", "base", "scaling"):
        if key not in diagram:
            raise InputError(f"law regions: missing field {key!r} (expected theory.laws.law_regions)")
    two_axes = len(diagram["axes"]) == 2
    with style_context():
        if ax is None:
            fig = new_figure(FIG_SINGLE if two_axes else (6.4, 4.5))
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        if two_axes:
            _draw_2d(ax, diagram, label_of=law_label)
        else:
            _draw_law_1d(ax, diagram)
        for index, line in enumerate(lines or []):
            _draw_line(ax, line, index, two_axes=two_axes)
        ax.set_title(f"{diagram['pack']}: which term of law {diagram['law']} ({diagram['metric']}, "
                     f"{diagram.get('combine', 'sum')} of terms) dominates\nscaling {_pretty(diagram['scaling'])}",
                     fontsize=10)
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False,
                      fontsize=8)
    return fig


def _bands(ax: Axes, diagram: dict[str, Any], key: str):
    """A one-axis diagram's regions, each shaded as a band: (region, colour, (low, high), xs, the exponent ``key``
    at xs, the ties' text)."""
    axis = diagram["axes"][0]
    for index, region in enumerate(diagram["regions"]):
        colour = _REGION_COLOURS[index % len(_REGION_COLOURS)]
        (low,), (high,) = region["vertices_float"][0], region["vertices_float"][-1]
        ax.axvspan(low, high, color=colour, alpha=0.15, linewidth=0)
        xs = [low + (high - low) * i / 60 for i in range(61)]
        tied = f" (= {', '.join(region['tied_with'])})" if region.get("tied_with") else ""
        yield region, colour, (low, high), xs, _evaluate(region[key], axis, xs), tied


def _draw_law_1d(ax: Axes, diagram: dict[str, Any]) -> None:
    """A band per dominant term along the axis, named with the metric's power of the base there, and that power's
    exponent drawn as a curve: the slope a measurement along a line at that point tests."""
    (x0, x1), = diagram["box_float"]
    ys_all: list[float] = []
    for region, colour, (low, high), xs, ys, tied in _bands(ax, diagram, "exponent"):
        ys_all.extend(ys)
        label = law_label(diagram, region)
        against = ", ".join(f"{name}: {power['exponent']}" for name, power in region.get("variables", {}).items())
        ax.plot(xs, ys, color=colour, linewidth=2.2, label=f"{region['dominant']}{tied} dominant: {label}"
                + (f"; against {against}" if against else ""))
        ax.text((low + high) / 2, 0.97, f"{region['dominant']}{tied}\n{label}", transform=ax.get_xaxis_transform(),
                ha="center", va="top", fontsize=9, bbox={"boxstyle": "round,pad=0.2", "facecolor": "white",
                                                         "alpha": 0.8, "edgecolor": colour})
    # room above the curve for the region names at the top
    _finish_1d(ax, diagram, (x0, x1), ys_all, ys_all, 3,
               f"exponent of {diagram['base']} in {diagram['metric']} (log factors aside)")


def _finish_1d(ax: Axes, diagram: dict[str, Any], span: tuple[float, float], lows: list, highs: list,
               headroom: float, y_label: str) -> None:
    """A one-axis diagram's domain edges, limits and labels (``headroom`` pads above the highest curve)."""
    x0, x1 = span
    domain = diagram.get("domain_vertices_float") or []
    if domain:
        for (value,) in (domain[0], domain[-1]):
            if x0 < value < x1:
                ax.axvline(value, color="black", linewidth=2.0)
    low_y, high_y = (min(lows), max(highs)) if lows else (0.0, 1.0)
    pad = max(0.25, 0.15 * (high_y - low_y))
    ax.set_ylim(low_y - pad, high_y + headroom * pad)
    ax.set_xlim(x0, x1)
    ax.set_xlabel(diagram["axis_labels"][0])
    ax.set_ylabel(y_label)


def _draw_2d(ax: Axes, diagram: dict[str, Any], label_of=count_label) -> None:
    (x0, x1), (y0, y1) = diagram["box_float"]
    box_area = (x1 - x0) * (y1 - y0)
    # outside the domain: hatched, so white never reads as "a region"
    domain_area = _polygon_area(diagram["domain_vertices_float"]) if diagram.get("domain_vertices_float") else box_area
    ax.add_patch(Polygon([(x0, y0), (x1, y0), (x1, y1), (x0, y1)], closed=True, facecolor="white",
                         edgecolor="0.75", hatch="///", linewidth=0, zorder=0,
                         label="outside the domain" if domain_area < box_area * (1 - 1e-9) else None))
    if diagram.get("domain_vertices_float"):
        ax.add_patch(Polygon(diagram["domain_vertices_float"], closed=True, facecolor="white", linewidth=0, zorder=0.5))
    for index, region in enumerate(diagram["regions"]):
        colour = _REGION_COLOURS[index % len(_REGION_COLOURS)]
        vertices = region["vertices_float"]
        label = label_of(diagram, region)
        tied = f" (= {', '.join(region['tied_with'])})" if region.get("tied_with") else ""
        gap = gap_label(diagram, region)
        ax.add_patch(Polygon(vertices, closed=True, facecolor=colour, alpha=0.28, edgecolor=colour, linewidth=1.0,
                             label=f"{region['dominant']}{tied}: {label}" + (f"; {gap}" if gap else "")))
        if _polygon_area(vertices) > 0.04 * box_area:  # small regions are named in the legend only
            cx, cy = region["label_point"]
            ax.text(cx, cy, f"{region['dominant']}{tied}\n{label}", ha="center", va="center", fontsize=9,
                    bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "alpha": 0.8, "edgecolor": colour})
    domain = diagram.get("domain_vertices_float") or []
    if domain:
        ax.add_patch(Polygon(domain, closed=True, fill=False, edgecolor="black", linewidth=2.0,
                             label="domain: " + ("; ".join(diagram.get("domain", [])) or "box")))
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    ax.set_xlabel(diagram["axis_labels"][0])
    ax.set_ylabel(diagram["axis_labels"][1])


def _draw_1d(ax: Axes, diagram: dict[str, Any]) -> None:
    axis = diagram["axes"][0]
    (x0, x1), = diagram["box_float"]
    lows, highs = [], []
    bounds_drawn: set[str] = set()
    for region, colour, (low, high), xs, ys, tied in _bands(ax, diagram, "required_param_exponent"):
        gap = gap_label(diagram, region)
        ax.plot(xs, ys, color=colour, linewidth=2.2, label=f"required, {region['dominant']}{tied} dominant: "
                f"{count_label(diagram, region)}" + (f"; {gap}" if gap else ""))
        size_ys = _evaluate(region["size_exponent"], axis, xs)
        size_label = power_label(diagram["base"], region["size_exponent"],
                                 region.get("size_exponent_latex", region["size_exponent"]), region["size_log_power"],
                                 region.get("size_log_power_latex", region["size_log_power"]),
                                 prefix=rf"{diagram.get('size', 'size')} \sim ",
                                 plain_prefix=f"{diagram.get('size', 'size')} ~ ")
        ax.plot(xs, size_ys, color=colour, linewidth=1.4, linestyle="-.", label=f"size needed: {size_label}")
        lows.extend(ys + size_ys)
        highs.extend(ys + size_ys)
        for gap in region.get("lower_bound_gaps", []):
            bound_ys = _evaluate(gap["exponent"], axis, xs)
            name = gap["name"]
            bound_label = power_label(diagram["base"], gap["exponent"], gap.get("exponent_latex", gap["exponent"]),
                                      gap["log_power"], gap.get("log_power_latex", gap["log_power"]))
            ax.plot(xs, bound_ys, color="0.25", linestyle="--", linewidth=1.4, zorder=3,
                    label=None if name in bounds_drawn else _bound_label(diagram, gap, bound_label))
            bounds_drawn.add(name)
            lows.extend(bound_ys)
            highs.extend(bound_ys)
        ax.text((low + high) / 2, 0.97, region["dominant"], transform=ax.get_xaxis_transform(), ha="center",
                va="top", fontsize=9, bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "alpha": 0.8,
                                            "edgecolor": colour})
    _finish_1d(ax, diagram, (x0, x1), lows, highs, 2, f"exponent of {diagram['base']} (log factors aside)")


def _draw_line(ax: Axes, line: dict[str, Any], index: int, two_axes: bool) -> None:
    if "points" in line:
        points = line["points"]
    elif "point" in line:
        points = [line["point"]]
    else:
        raise InputError(f"phase diagram: lines[{index}]: expected 'points' or 'point'")
    label = line.get("label", f"line {index + 1}")
    marker = "os^Dv"[index % 5]
    if two_axes:
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        ax.plot(xs, ys, color="black", marker=marker, markersize=7, markerfacecolor="white",
                linewidth=1.6 if len(points) > 1 else 0, label=label, zorder=5)
    else:
        for position, point in enumerate(points):
            ax.axvline(point[0], color="black", linestyle=":", linewidth=1.4, label=label if position == 0 else None)


def phase_page(regions: dict, phase_lines: list, head: str) -> Figure:
    """The report's page of an experiment's phase diagram (``regions``) with its ``phase_lines``."""
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE)
        draw_phase_diagram(regions, lines=phase_lines, ax=fig.add_subplot())
        fig.suptitle(wrap_title(f"{head}: phase diagram with the experiment's lines", 10.5, 14))
    return fig

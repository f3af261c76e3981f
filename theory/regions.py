"""Phase regions: where in the plane (or on the line) of free exponents each noise term binds.

For a pack, a scaling with one or two free exponents (the axes) and ``size = base**x``, each noise
term i demands ``x >= x_i(axes)`` (theory.analysis). Term i dominates on
``{x_i >= x_j for every j} ∩ domain``. The boundaries ``x_i = x_j`` are linear in the axes (checked;
a nonlinear boundary is an error), so every region is a convex polygon (an interval on one axis).
The polygons are computed exactly: the bounding box is clipped by each half-plane with rational
arithmetic (``fractions.Fraction``), so the vertices are exact rationals.

The domain is the pack's ``domain`` plus any extra constraints, inside a bounding box (the pack's
``[defaults] box``, else [0, 2] per axis); strict inequalities are drawn closed. Constraints on
exponents that are not axes are skipped and listed in ``notes``. Size-independent terms add their
feasibility condition (the signal must beat them at every size) to the domain.

Where two terms have identical size exponents everywhere, the one with the larger log power
dominates; if the log powers are also equal they are reported as ``tied_with``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import sympy as sp

from recallkit.theory.analysis import Analysis, analyse, as_scaling
from recallkit.theory.errors import InputError
from recallkit.theory.expr import bounded_work, parse_linear_constraints
from recallkit.theory.pack import LowerBound, Pack
from recallkit.theory.scaling import Scaling, free_exponents
from recallkit.theory.symbols import EXPONENTS

__all__ = ["clip", "compute_regions", "DEFAULT_BOX", "dominance_regions", "exponent_domain", "exponent_latex",
           "HalfSpace", "linear_halfspace", "measure", "parse_box", "Point", "Region", "RegionDiagram"]


DEFAULT_BOX = (Fraction(0), Fraction(2))

Point = tuple[Fraction, ...]


@dataclass(frozen=True)
class HalfSpace:
    """``sum(coefficients[i] * axis_i) + constant >= 0``."""

    coefficients: tuple[Fraction, ...]
    constant: Fraction
    text: str

    def value(self, point: Point) -> Fraction:
        return sum((c * p for c, p in zip(self.coefficients, point)), self.constant)


def exponent_latex(value: sp.Expr) -> str:
    """LaTeX for an exponent: short fractions inline (3 c / 2), which stay legible in a superscript."""
    return sp.latex(value, fold_short_frac=True)


def _fraction(value: sp.Expr, where: str) -> Fraction:
    value = sp.nsimplify(value) if isinstance(value, sp.Float) else value
    if not value.is_Rational:
        raise InputError(f"{where}: coefficient {sp.sstr(value)} is not a rational number")
    return Fraction(int(value.p), int(value.q))


def _to_fraction(number: float | int | Fraction) -> Fraction:
    return number if isinstance(number, Fraction) else Fraction(str(number))


def linear_halfspace(expr: sp.Expr, axes: Sequence[sp.Symbol], text: str, where: str) -> HalfSpace:
    """``expr >= 0`` as a HalfSpace; ``expr`` must be linear in ``axes`` with rational coefficients."""
    expr = sp.expand(expr)
    extra = expr.free_symbols - set(axes)
    if extra:
        raise InputError(f"{where}: {sp.sstr(expr)} depends on {', '.join(sorted(s.name for s in extra))}, "
                         f"not only on the axes {', '.join(a.name for a in axes)}")
    poly = sp.Poly(expr, *axes)
    if poly.total_degree() > 1:
        raise InputError(f"{where}: boundary {sp.sstr(expr)} = 0 is not linear in the axes")
    coefficients = tuple(_fraction(poly.coeff_monomial(axis), where) for axis in axes)
    constant = _fraction(poly.coeff_monomial(1), where)
    return HalfSpace(coefficients, constant, text)


def clip(polygon: list[Point], half: HalfSpace) -> list[Point]:
    """Exact Sutherland-Hodgman clip of a convex polygon (2-D) or interval (1-D) by a half-space."""
    if not polygon:
        return []
    if len(polygon[0]) == 1:
        (coef,) = half.coefficients
        low, high = polygon[0][0], polygon[-1][0]
        if coef == 0:
            return polygon if half.constant >= 0 else []
        cut = -half.constant / coef
        if coef > 0:
            low = max(low, cut)
        else:
            high = min(high, cut)
        return [(low,), (high,)] if low <= high else []
    result: list[Point] = []
    for i, current in enumerate(polygon):
        following = polygon[(i + 1) % len(polygon)]
        f_current, f_following = half.value(current), half.value(following)
        if f_current >= 0:
            result.append(current)
        if (f_current > 0 > f_following) or (f_current < 0 < f_following):
            t = f_current / (f_current - f_following)
            result.append(tuple(a + t * (b - a) for a, b in zip(current, following)))
    deduplicated: list[Point] = []
    for point in result:
        if not deduplicated or deduplicated[-1] != point:
            deduplicated.append(point)
    if len(deduplicated) > 1 and deduplicated[0] == deduplicated[-1]:
        deduplicated.pop()
    return deduplicated


def measure(polygon: list[Point]) -> Fraction:
    """Area of a polygon (2-D) or length of an interval (1-D); 0 for a degenerate one."""
    if len(polygon) < 2:
        return Fraction(0)
    if len(polygon[0]) == 1:
        return polygon[-1][0] - polygon[0][0]
    if len(polygon) < 3:
        return Fraction(0)
    twice = sum(p[0] * q[1] - q[0] * p[1] for p, q in zip(polygon, polygon[1:] + polygon[:1]))
    return abs(twice) / 2


@dataclass
class Region:
    dominant: str
    tied_with: list[str]
    inequalities: list[str]
    vertices: list[Point]
    required_param_exponent: sp.Expr
    log_power: sp.Expr
    size_exponent: sp.Expr
    size_log_power: sp.Expr
    lower_bound_gaps: list[dict[str, str]]
    # the region cut where each lower bound over a class is the strongest one, with the gap of the required count
    # to it there (an estimator's failure condition is never one of them)
    strongest_bound_gaps: list[dict[str, Any]] = field(default_factory=list)
    strongest_bound_note: str = ""

    def label_point(self) -> list[float]:
        count = len(self.vertices)
        return [float(sum(v[i] for v in self.vertices) / count) for i in range(len(self.vertices[0]))]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dominant": self.dominant, "tied_with": self.tied_with, "inequalities": self.inequalities,
            "vertices": [[str(coordinate) for coordinate in vertex] for vertex in self.vertices],
            "vertices_float": [[float(coordinate) for coordinate in vertex] for vertex in self.vertices],
            "label_point": self.label_point(),
            "required_param_exponent": sp.sstr(self.required_param_exponent),
            "required_param_exponent_latex": exponent_latex(self.required_param_exponent),
            "log_power": sp.sstr(self.log_power), "log_power_latex": exponent_latex(self.log_power),
            "size_exponent": sp.sstr(self.size_exponent), "size_exponent_latex": exponent_latex(self.size_exponent),
            "size_log_power": sp.sstr(self.size_log_power), "size_log_power_latex": exponent_latex(self.size_log_power),
            "lower_bound_gaps": self.lower_bound_gaps,
            "strongest_bound_gaps": self.strongest_bound_gaps, "strongest_bound_note": self.strongest_bound_note,
        }


@dataclass
class RegionDiagram:
    pack: str
    scaling: str
    axes: tuple[str, ...]
    axis_labels: list[str]
    base: str
    size: str
    param_count: str
    domain: list[str]
    box: list[list[str]]
    regions: list[Region]
    domain_vertices: list[Point] = field(default_factory=list)
    param_count_latex: str = ""
    feasibility: list[dict[str, str]] = field(default_factory=list)
    corollary_check: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def corollary_agrees(self) -> bool | None:
        """None if nothing was checked, else whether every stated exponent agreed."""
        checked = [entry["agrees"] for entry in self.corollary_check if entry["agrees"] is not None]
        return None if not checked else all(checked)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pack": self.pack, "scaling": self.scaling, "axes": list(self.axes), "axis_labels": self.axis_labels,
            "base": self.base, "size": self.size, "param_count": self.param_count, "domain": self.domain,
            "box": self.box, "box_float": [[float(Fraction(v)) for v in pair] for pair in self.box],
            "param_count_latex": self.param_count_latex,
            "domain_vertices": [[str(v) for v in vertex] for vertex in self.domain_vertices],
            "domain_vertices_float": [[float(v) for v in vertex] for vertex in self.domain_vertices],
            "regions": [region.to_dict() for region in self.regions], "feasibility": self.feasibility,
            "corollary_check": self.corollary_check, "corollary_agrees": self.corollary_agrees,
            "notes": self.notes,
        }


def _box(pack: Pack, axes: Sequence[str], box: dict[str, Sequence[float]] | None) -> list[tuple[Fraction, Fraction]]:
    intervals = []
    for axis in axes:
        if box and axis in box:
            low, high = (_to_fraction(v) for v in box[axis])
        elif axis in pack.default_box:
            low, high = (_to_fraction(v) for v in pack.default_box[axis])
        else:
            low, high = DEFAULT_BOX
        if not low < high:
            raise InputError(f"--box: {axis}: expected low < high, got {low}:{high}")
        intervals.append((low, high))
    return intervals


def parse_box(text: str, where: str = "--box") -> dict[str, tuple[Fraction, Fraction]]:
    """``"a=1:2, c=0:1"`` -> {"a": (1, 2), "c": (0, 1)}."""
    result = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, interval = part.partition("=")
        name = name.strip()
        low, sep, high = interval.partition(":")
        if name not in EXPONENTS or not sep:
            raise InputError(f"{where}: expected entries like 'a=1:2' with an exponent name, got {part!r}")
        try:
            low_f, high_f = Fraction(low.strip()), Fraction(high.strip())
            if not (abs(low_f) <= 1000 and abs(high_f) <= 1000 and low_f < high_f):
                raise ValueError
        except (ValueError, ZeroDivisionError, OverflowError):
            raise InputError(f"{where}: {name}: expected two numbers low:high with low < high within "
                             f"[-1000, 1000], got {interval!r}") from None
        result[name] = (low_f, high_f)
    return result


def _region_polygon(start: list[Point], halves: list[HalfSpace]) -> list[Point]:
    polygon = start
    for half in halves:
        polygon = clip(polygon, half)
        if not polygon:
            break
    return polygon


def _is_zero(expr: sp.Expr) -> bool:
    """Whether a rational function of the exponents is identically zero: the expanded numerator of its
    single-fraction form (exact, and far cheaper than ``simplify``, which dominated at many terms)."""
    return sp.expand(sp.fraction(sp.together(expr))[0]) == 0


def compute_regions(
    pack: Pack,
    scaling: Scaling | str | None = None,
    axes: Sequence[str] | str | None = None,
    box: dict[str, Sequence[float]] | None = None,
    domain: Sequence[str] = (),
) -> RegionDiagram:
    """Exact phase regions of ``pack`` under ``scaling`` over one or two free exponents ``axes``.

    ``scaling`` and ``axes`` default to the pack's ``[defaults]``. ``box`` maps an axis to
    (low, high) for the drawn window; ``domain`` adds constraints such as ``"a <= 1.5"``. The work runs under the
    symbolic-work budget (theory.expr.bounded_work).
    """
    with bounded_work(f"{pack.path}: regions", str(scaling if scaling is not None else pack.default_scaling)):
        return _compute_regions(pack, scaling, axes, box, domain)


def _compute_regions(pack: Pack, scaling: Scaling | str | None, axes: Sequence[str] | str | None,
                     box: dict[str, Sequence[float]] | None, domain: Sequence[str]) -> RegionDiagram:
    scaling = as_scaling(pack, scaling)
    axes = _axes(pack, axes)
    axis_symbols = [EXPONENTS[axis] for axis in axes]
    analysis = analyse(pack, scaling)
    notes = _axis_notes(analysis, axes)
    intervals = _box(pack, axes, box)
    domain_halves, domain_texts = _domain_halves(pack, domain, axis_symbols, notes)
    feasibility, feasibility_halves = _feasibility(pack, analysis, axis_symbols)
    domain_polygon = _region_polygon(_box_polygon(intervals), domain_halves + feasibility_halves)
    if measure(domain_polygon) == 0:
        raise InputError(f"the domain ({'; '.join(domain_texts) or 'box'}) is empty inside the box "
                         f"{[[str(v) for v in pair] for pair in intervals]}")
    solvable = [t for t in analysis.thresholds.values() if not t.size_independent]
    _check_size_helps(pack, axes, axis_symbols, solvable, domain_polygon)
    representatives = _representatives(solvable, axis_symbols, domain_polygon)
    regions = []
    for top, tied in representatives:
        region = _region(pack, analysis, axis_symbols, domain_polygon, representatives, top, tied)
        if region is not None:
            regions.append(region)
    diagram = RegionDiagram(
        pack=pack.name, scaling=str(scaling), axes=axes, axis_labels=_axis_labels(scaling, axes), base=pack.base,
        size=pack.size, param_count=sp.sstr(pack.param_count), domain=domain_texts,
        box=[[str(low), str(high)] for low, high in intervals], regions=regions, domain_vertices=domain_polygon,
        param_count_latex=sp.latex(pack.param_count), feasibility=feasibility,
        notes=notes)
    diagram.corollary_check = _check_corollary(pack, scaling, axes, analysis, regions)
    return diagram


def _axes(pack: Pack, axes: Sequence[str] | str | None) -> tuple[str, ...]:
    """The axes as a tuple of one or two distinct exponent names (the pack's default axes when None)."""
    if axes is None:
        axes = pack.default_axes
    if isinstance(axes, str):
        axes = [part.strip() for part in axes.split(",") if part.strip()]
    if not axes or not 1 <= len(axes) <= 2 or len(set(axes)) != len(axes):
        raise InputError(f"--axes: expected one or two distinct exponent names such as 'a,c', got {axes!r}")
    for axis in axes:
        if axis not in EXPONENTS:
            raise InputError(f"--axes: unknown exponent {axis!r} (allowed: {', '.join(EXPONENTS)})")
    return tuple(axes)


def _axis_notes(analysis: Analysis, axes: tuple[str, ...]) -> list[str]:
    """Refuse a scaling with free exponents that are not axes; the diagram's notes on axes no term uses."""
    monomials = dict(analysis.noise, signal=analysis.signal, param_count=analysis.param, **analysis.lower_bounds)
    free = free_exponents(monomials)
    missing = sorted(free - set(axes))
    if missing:
        raise InputError(f"--axes: exponent(s) {', '.join(missing)} are free in the scaling but not axes; "
                         f"fix them in --scaling or choose them as axes")
    notes = []
    unused = sorted(set(axes) - free)
    if unused:
        notes.append(f"axis {', '.join(unused)} does not appear in any term under this scaling")
    return notes


def _box_polygon(intervals: list[tuple[Fraction, Fraction]]) -> list[Point]:
    """The bounding box as an interval (one axis) or a counter-clockwise rectangle (two)."""
    if len(intervals) == 1:
        return [(intervals[0][0],), (intervals[0][1],)]
    (a0, a1), (c0, c1) = intervals
    return [(a0, c0), (a1, c0), (a1, c1), (a0, c1)]


def _domain_halves(pack: Pack, domain: Sequence[str], axis_symbols: list[sp.Symbol],
                   notes: list[str]) -> tuple[list[HalfSpace], list[str]]:
    """The pack's domain and the extra constraints as half-spaces, with the texts of those kept. A constraint
    on exponents that are not axes is skipped, with a line in ``notes``."""
    halves: list[HalfSpace] = []
    texts: list[str] = []
    sources = [(text, f"{pack.path}: pack.domain[{i}]") for i, text in enumerate(pack.domain)]
    sources += [(text, f"--domain[{i}]") for i, text in enumerate(domain)]
    for text, where in sources:
        constraints = parse_linear_constraints(text, EXPONENTS, where)
        symbols = set().union(*(expr.free_symbols for expr, _ in constraints))
        if not symbols <= set(axis_symbols):
            notes.append(f"domain constraint {text!r} skipped: it involves exponents that are not axes")
            continue
        texts.append(text)
        for expr, op in constraints:
            signed = expr if op in (">=", ">") else -expr
            halves.append(linear_halfspace(signed, axis_symbols, text, where))
    return halves, texts


def _feasibility(pack: Pack, analysis: Analysis,
                 axis_symbols: list[sp.Symbol]) -> tuple[list[dict[str, str]], list[HalfSpace]]:
    """The conditions of the size-independent terms (the signal must beat them at every size): their
    descriptions and their half-spaces, which bound the domain."""
    feasibility, halves = [], []
    for name, threshold in analysis.thresholds.items():
        if threshold.size_independent:
            text = f"{sp.sstr(threshold.offset)} >= 0"
            feasibility.append({"term": name, "condition": text,
                                "meaning": f"signal outgrows {name} at every size only where {text}"})
            halves.append(linear_halfspace(threshold.offset, axis_symbols, text, f"{pack.path}: {name}"))
    return feasibility, halves


def _at(vertex: Point, axis_symbols: list[sp.Symbol]) -> dict[sp.Symbol, sp.Rational]:
    """The substitution that puts the axes at ``vertex`` (exact rationals)."""
    return dict(zip(axis_symbols, (sp.Rational(v.numerator, v.denominator) for v in vertex)))


def _check_size_helps(pack: Pack, axes: tuple[str, ...], axis_symbols: list[sp.Symbol], solvable: list,
                      domain_polygon: list[Point]) -> None:
    """Refuse a term the size does not help against at some vertex of the domain: the size must help against
    every term everywhere in it (the boundaries are linear, so the vertices decide)."""
    for t in solvable:
        for vertex in domain_polygon:
            value = t.slope.xreplace(_at(vertex, axis_symbols))
            if not value > 0:
                raise InputError(f"{pack.path}: noise term {t.name!r} does not shrink relative to the signal as "
                                 f"{pack.size} grows at {axes}={tuple(str(v) for v in vertex)}")


def _representatives(solvable: list, axis_symbols: list[sp.Symbol], domain_polygon: list[Point]) -> list[tuple]:
    """Terms grouped by identical size exponents, each group as (the term with the largest log power at the
    domain's centre, the names of the others tied with it in log power too)."""
    groups: list[list] = []
    for t in solvable:
        for group in groups:
            if _is_zero(group[0].size_exponent - t.size_exponent):
                group.append(t)
                break
        else:
            groups.append([t])
    centre = dict(zip(axis_symbols, _centre(domain_polygon)))
    representatives = []
    for group in groups:
        group.sort(key=lambda t: float(t.size_log_power.xreplace(centre)), reverse=True)
        top = group[0]
        tied = [t.name for t in group[1:] if _is_zero(t.size_log_power - top.size_log_power)]
        representatives.append((top, tied))
    return representatives


def _boundary(pack: Pack, axis_symbols: list[sp.Symbol], domain_polygon: list[Point], top,
              other) -> tuple[str, HalfSpace]:
    """``x(top) >= x(other)`` as a half-space and its text. The difference of the two size exponents is a ratio
    whose denominator must keep one sign over the domain; multiplied by that sign the numerator is linear."""
    numerator, denominator = sp.fraction(sp.together(top.size_exponent - other.size_exponent))
    signs = {sp.sign(denominator.xreplace(_at(vertex, axis_symbols))) for vertex in domain_polygon}
    if len(signs) != 1 or 0 in signs:
        raise InputError(f"{pack.path}: boundary between {top.name!r} and {other.name!r} is singular in the domain")
    sign = signs.pop()
    text = (f"{sp.sstr(top.size_exponent)} >= {sp.sstr(other.size_exponent)}"
            if not denominator.free_symbols else f"{sp.sstr(sign * numerator)} >= 0")
    return text, linear_halfspace(sign * numerator, axis_symbols, text, f"{pack.path}: {top.name}")


def _region(pack: Pack, analysis: Analysis, axis_symbols: list[sp.Symbol], domain_polygon: list[Point],
            representatives: list[tuple], top, tied: list[str]) -> Region | None:
    """Where ``top`` binds: the domain clipped by ``x(top) >= x(other)`` for every other representative; None
    where that leaves no area (no length, on one axis)."""
    polygon, texts = _dominated(pack, axis_symbols, domain_polygon, representatives, top, "x")
    if not polygon:
        return None
    exponent, log_power = analysis.required(top.name)
    region = Region(top.name, tied, texts, polygon, exponent, log_power, top.size_exponent, top.size_log_power,
                    _lower_bound_gaps(pack, analysis, exponent, log_power))
    try:
        region.strongest_bound_gaps = _strongest_bound_gaps(pack, analysis, axis_symbols, polygon, exponent, log_power)
    except InputError as exc:  # two bounds crossing on a curve: the gaps to each bound above still stand
        region.strongest_bound_note = f"strongest lower bound not determined: {exc}"
    return region


def _dominated(pack: Pack, axis_symbols: list[sp.Symbol], domain_polygon: list[Point], representatives: list[tuple],
               top, label: str) -> tuple[list[Point], list[str]]:
    """The domain clipped by ``label(top) >= label(other)`` for every other representative, with the comparisons
    that bound it; ([], []) where that leaves no area (no length, on one axis)."""
    halves, texts = [], []
    for other, _ in representatives:
        if other is top:
            continue
        text, half = _boundary(pack, axis_symbols, domain_polygon, top, other)
        texts.append(f"{text}  [{label}({top.name}) >= {label}({other.name})]")
        halves.append(half)
    polygon = _region_polygon(domain_polygon, halves)
    if measure(polygon) == 0:
        return [], []
    # list only the comparisons that bound the region (a redundant one touches it in < 2 vertices)
    needed = 1 if len(axis_symbols) == 1 else 2
    return polygon, [text for text, half in zip(texts, halves)
                     if sum(half.value(vertex) == 0 for vertex in polygon) >= needed]


def exponent_domain(pack: Pack, axes: Sequence[str] | str | None, box: dict[str, Sequence[float]] | None = None,
                    domain: Sequence[str] = ()) -> tuple[tuple[str, ...], list[tuple[Fraction, Fraction]],
                                                         list[Point], list[str], list[str]]:
    """The window of one or two free exponents as :func:`compute_regions` draws it, without a condition's
    feasibility: (axes, box intervals, the domain's polygon, the domain's constraint texts, notes)."""
    axes = _axes(pack, axes)
    axis_symbols = [EXPONENTS[axis] for axis in axes]
    notes: list[str] = []
    intervals = _box(pack, axes, box)
    halves, texts = _domain_halves(pack, domain, axis_symbols, notes)
    polygon = _region_polygon(_box_polygon(intervals), halves)
    if measure(polygon) == 0:
        raise InputError(f"the domain ({'; '.join(texts) or 'box'}) is empty inside the box "
                         f"{[[str(v) for v in pair] for pair in intervals]}")
    return axes, intervals, polygon, texts, notes


def dominance_regions(pack: Pack, items: Sequence, axes: Sequence[str], domain_polygon: list[Point],
                      label: str = "E") -> list[tuple[Any, list[str], list[Point], list[str]]]:
    """Where each of ``items`` is the largest: the region solver of the noise terms, for any terms whose growth
    is ``base**size_exponent * log(base)**size_log_power`` (a law's terms: their exponent in the base). One
    (item, names tied with it, polygon, bounding comparisons) per item that dominates somewhere in the domain."""
    axis_symbols = [EXPONENTS[axis] for axis in axes]
    representatives = _representatives(list(items), axis_symbols, domain_polygon)
    found = []
    for top, tied in representatives:
        polygon, texts = _dominated(pack, axis_symbols, domain_polygon, representatives, top, label)
        if polygon:
            found.append((top, tied, polygon, texts))
    return found


def _gap(bound: LowerBound, monomial, exponent: sp.Expr, log_power: sp.Expr) -> dict[str, str]:
    """The bound (with what it covers) and how far the required count ``base^exponent log^log_power`` lies above it."""
    gap_exponent, gap_log_power = sp.simplify(exponent - monomial.exponent), sp.simplify(log_power - monomial.log_power)
    return {"name": bound.name, "kind": bound.kind, "class": bound.bound_class, "estimator": bound.estimator,
            "exponent": sp.sstr(monomial.exponent), "exponent_latex": exponent_latex(monomial.exponent),
            "log_power": sp.sstr(monomial.log_power), "log_power_latex": exponent_latex(monomial.log_power),
            "gap_exponent": sp.sstr(gap_exponent), "gap_exponent_latex": exponent_latex(gap_exponent),
            "gap_log_power": sp.sstr(gap_log_power), "gap_log_power_latex": exponent_latex(gap_log_power)}


def _lower_bound_gaps(pack: Pack, analysis: Analysis, exponent: sp.Expr, log_power: sp.Expr) -> list[dict[str, str]]:
    """How far a region's required parameter count lies above each entry of the pack's lower_bounds, each entry
    with its kind (a lower bound over a class, or one estimator's failure condition)."""
    return [_gap(bound, analysis.lower_bounds[bound.name], exponent, log_power) for bound in pack.lower_bounds]


def _strongest_bound_gaps(pack: Pack, analysis: Analysis, axis_symbols: list[sp.Symbol], polygon: list[Point],
                          exponent: sp.Expr, log_power: sp.Expr) -> list[dict[str, Any]]:
    """The gap to the strongest lower bound over a class, piece by piece: ``polygon`` cut by ``x(b) >= x(other)``
    for each bound b. Bounds with identical exponents count once (the larger log power at the region's centre,
    else the first listed). The gap to a weaker bound overstates how far the upper bound is from what is known."""
    centre = dict(zip(axis_symbols, _centre(polygon)))
    representatives: list[tuple[LowerBound, Any]] = []
    for bound in pack.lower_bounds:
        if not bound.is_lower_bound:
            continue
        monomial = analysis.lower_bounds[bound.name]
        for index, (_, other) in enumerate(representatives):
            if _is_zero(other.exponent - monomial.exponent):
                if float(monomial.log_power.xreplace(centre)) > float(other.log_power.xreplace(centre)):
                    representatives[index] = (bound, monomial)
                break
        else:
            representatives.append((bound, monomial))
    needed = 1 if len(axis_symbols) == 1 else 2
    pieces = []
    for bound, monomial in representatives:
        halves = [linear_halfspace(monomial.exponent - other.exponent, axis_symbols,
                                   f"{sp.sstr(monomial.exponent)} >= {sp.sstr(other.exponent)}  "
                                   f"[{bound.name} >= {other_bound.name}]",
                                   f"{pack.path}: lower bounds {bound.name!r} and {other_bound.name!r}")
                  for other_bound, other in representatives if other_bound is not bound]
        piece = _region_polygon(polygon, halves)
        if measure(piece) == 0:
            continue
        entry: dict[str, Any] = _gap(bound, monomial, exponent, log_power)
        entry.update({"where": [half.text for half in halves
                                if sum(half.value(vertex) == 0 for vertex in piece) >= needed],
                      "vertices": [[str(v) for v in vertex] for vertex in piece],
                      "vertices_float": [[float(v) for v in vertex] for vertex in piece]})
        pieces.append(entry)
    return pieces


def _axis_labels(scaling: Scaling, axes: tuple[str, ...]) -> list[str]:
    """Each axis with what it means under the scaling, e.g. ``a  (N = V^a)``."""
    labels = []
    for axis in axes:
        meaning = scaling.meaning_of(axis)
        labels.append(f"{axis}  ({meaning})" if meaning else axis)
    return labels


def _centre(polygon: list[Point]) -> list[sp.Rational]:
    count = len(polygon)
    return [sp.Rational(sum((p[i] for p in polygon), Fraction(0)) / count) for i in range(len(polygon[0]))]


def _check_corollary(pack: Pack, scaling: Scaling, axes: tuple[str, ...], analysis: Analysis,
                     regions: list[Region]) -> list[dict[str, Any]]:
    """Compare the pack's hand-stated corollary with the computed regions (when it applies)."""
    corollary = pack.corollary
    if corollary is None:
        return []
    stated_scaling = as_scaling(pack, corollary.scaling, f"{pack.path}: corollary.scaling") \
        if corollary.scaling is not None else as_scaling(pack, None)
    if stated_scaling.as_dict() != scaling.as_dict() or (corollary.axes and tuple(corollary.axes) != axes):
        return [{"region": name, "stated": sp.sstr(expr), "computed": None, "agrees": None,
                 "reason": "the corollary is stated for a different scaling or axes"}
                for name, expr in corollary.exponents.items()]
    by_name = {region.dominant: region for region in regions}
    checks = []
    for name, stated in corollary.exponents.items():
        if name in by_name:
            computed = by_name[name].required_param_exponent
            agrees = _is_zero(stated - computed)
            checks.append({"region": name, "stated": sp.sstr(stated), "computed": sp.sstr(computed), "agrees": agrees,
                           "reason": "" if agrees else "stated and computed exponents differ"})
        else:
            checks.append({"region": name, "stated": sp.sstr(stated), "computed": None, "agrees": False,
                           "reason": f"no region of the diagram is dominated by {name}"})
    return checks

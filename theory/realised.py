"""The prediction along the grid that was actually run (the realised grid), beside the asymptotic one.

:func:`theory.predict` gives the slope of log(parameter count) against log(base) for a line written
with exact powers (``L=V**0.25``). An experiment floors the sizes it runs (``L = floor(V**0.25)`` is 2, 3,
4 at V = 64, 128, 256: an effective exponent near 1/2, not 1/4) and runs a finite range of the base,
where the pack's powers of log(base) bend the line. :func:`realised_prediction` evaluates the binding
term(s) of the asymptotic prediction at the realised sizes themselves: at each base value it solves
signal = noise for the searched size (constants of the pack taken as 1; sizes tied to the searched one,
such as ``m = d**2``, follow the line's scaling, and pack constants the line gives a value, such as ``h=3``,
take it), takes the largest requirement over the tied terms,
and fits the least-squares slope of log(parameter count) on log(base) over the grid. Which term binds
is the asymptotic prediction's: the unknown constants cannot say which one binds at a finite size.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.pack import Pack
from recallkit.theory.predict import predict
from recallkit.theory.scaling import Scaling, parse_scaling
from recallkit.theory.symbols import constant_symbol, vocabulary

__all__ = ["realised_prediction"]


def _solve_log(f, lo: float = -20.0, hi: float = 40.0) -> float | None:
    """The root in log(size) of a decreasing f (noise / signal - 1 on log scale), by bisection."""
    f_lo, f_hi = f(lo), f(hi)
    if not (math.isfinite(f_lo) and math.isfinite(f_hi)) or f_lo * f_hi > 0:
        return None
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        f_mid = f(mid)
        if (f_mid > 0) == (f_lo > 0):
            lo, f_lo = mid, f_mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


_NOTE = ("binding terms of the asymptotic prediction evaluated at the realised sizes (floored counts, "
        "log factors included, the pack's constants taken as 1); least-squares slope over the grid")


def realised_prediction(pack: Pack, scaling: Scaling | str, rows: Sequence[Mapping[str, float]],
                        terms: Sequence[str] | None = None,
                        factors: Callable[[str, Mapping[str, Any]], float | None] | None = None) -> dict[str, Any]:
    """The prediction at realised sizes: ``rows`` hold the base value and every other variable the grid
    fixed (e.g. ``{"V": 64, "N": 512, "L": 2}``); variables the line ties to the searched size (``m=d**2``)
    follow it. ``terms``: the binding terms (default: the asymptotic prediction's dominant and tied terms).
    ``factors(term name, row)``: a multiplier of each term's value at a row (a finite-size form of the term;
    a row may carry extra keys for it); None from it for any term makes the whole prediction None.

    Returns ``{"slope", "terms", "points": [{base, ..., size, "param_count", "term"}], "note"}``; slope is
    None with fewer than 2 solvable rows.
    """
    if isinstance(scaling, str):
        scaling = parse_scaling(scaling, variables=pack.variables)
    if terms is None:
        prediction = predict(pack, scaling)
        terms = [prediction.dominant, *prediction.tied_with]
    line = _NumericLine(pack, scaling, terms)
    scale: dict[tuple[int, str], float] = {}
    if factors is not None:
        scale, lacking = _finite_size_scales(rows, [line.signal_name, *terms], factors)
        if lacking is not None:
            name, row = lacking
            return {"slope": None, "terms": list(terms), "points": [],
                    "note": f"no finite-size form of term {name} at {dict(row)}"}
    points = []
    for index, row in enumerate(rows):
        point = line.solve(row, {name: scale.get((index, name), 1.0) for name in [line.signal_name, *terms]})
        if point is not None:
            points.append(point)
    return {"slope": _least_squares_slope(points, pack.base), "terms": list(terms), "points": points, "note": _NOTE}


class _NumericLine:
    """A pack's signal, parameter count and binding terms as float functions of its variables along a
    scaling, with the sizes the scaling ties to the searched one (``m=d**2``) following it."""

    def __init__(self, pack: Pack, scaling: Scaling, terms: Sequence[str]):
        by_name = {t.name: t for t in pack.terms}
        signal = next((t for t in pack.terms if t.role == "signal"), None)
        if signal is None:
            raise InputError(f"pack {pack.name}: no signal term to solve against")
        unknown = [name for name in terms if name not in by_name]
        if unknown:
            raise InputError(f"pack {pack.name}: no term named {', '.join(unknown)}")
        self.size = pack.size
        # the built-in variables and the pack's declared ones (n = V**2 is a tied size like m = d**2)
        known = vocabulary(pack.variables)
        size_symbol = known[self.size]
        # a pack constant the line gives a value (``h=3``) is part of the line, as in the asymptotic prediction;
        # entries may refer to each other, so the values are substituted into each other first
        given = {constant_symbol(name): expr for name, expr in scaling.entries
                 if name in pack.constants and name not in known}
        for _ in range(len(given)):
            given = {symbol: expr.xreplace(given) for symbol, expr in given.items()}

        def with_constants(expr: sp.Expr) -> sp.Expr:
            return expr.xreplace(given) if given else expr

        tied = {name: with_constants(expr) for name, expr in scaling.as_dict().items()
                if name in known and size_symbol in with_constants(expr).free_symbols}
        self.variables = list(pack.variables)
        symbols = [known[v] for v in self.variables]

        def numeric(expr: sp.Expr):
            return sp.lambdify(symbols, with_constants(expr), "math")

        count = with_constants(pack.param_count)
        unknown = sorted(s.name for s in count.free_symbols if s.name not in known)
        if unknown:
            # the count is what the slope is of: with a symbol left in it there is no number to fit
            raise InputError(f"pack {pack.name}: param_count has constant {', '.join(unknown)} with no value on "
                             f"this line; give it one in the line's scaling (e.g. '{unknown[0]}=2')")
        self.signal_name = signal.name
        self.signal = numeric(signal.expr)
        self.count = numeric(pack.param_count)
        self.tied = {name: numeric(expr) for name, expr in tied.items()}
        self.noise = {name: numeric(by_name[name].expr) for name in terms}

    def values_at(self, row: Mapping[str, float], log_size: float) -> list[float]:
        """Every variable, in the pack's order, at ``row`` with the searched size exp(``log_size``)."""
        env = {v: float(row[v]) for v in self.variables if v != self.size and v not in self.tied}
        env[self.size] = math.exp(log_size)
        for name, f in self.tied.items():
            env[name] = f(*[env.get(v, 1.0) for v in self.variables])
        return [env[v] for v in self.variables]

    def solve(self, row: Mapping[str, float], scale: Mapping[str, float]) -> dict[str, Any] | None:
        """The row's point: the size where signal = noise for each binding term (each term's value times its
        ``scale``), the one needing the largest parameter count; None where no term can be solved."""
        missing = [v for v in self.variables if v != self.size and v not in self.tied and v not in row]
        if missing:
            raise InputError(f"realised prediction: row {dict(row)} lacks {', '.join(missing)}")
        best = None
        for name, f in self.noise.items():
            shift = math.log(scale[name]) - math.log(scale[self.signal_name])

            def gap(log_size, f=f, shift=shift):
                vals = self.values_at(row, log_size)
                try:
                    return math.log(f(*vals)) - math.log(self.signal(*vals)) + shift
                except (ValueError, ZeroDivisionError, OverflowError, TypeError):
                    # TypeError: a term that stays symbolic at this row (a pack constant with no number) has no
                    # numeric gap; no root is found for it, and the line keeps its asymptotic prediction
                    return math.nan
            root = _solve_log(gap)
            if root is None:
                continue
            count = self.count(*self.values_at(row, root))
            if best is None or count > best[1]:
                best = (root, count, name)
        if best is None:
            return None
        return {**{k: row[k] for k in row if k in self.variables}, self.size: math.exp(best[0]),
                "param_count": best[1], "term": best[2]}


def _finite_size_scales(rows: Sequence[Mapping[str, Any]], names: list[str],
                        factors: Callable[[str, Mapping[str, Any]], float | None]
                        ) -> tuple[dict[tuple[int, str], float], tuple[str, Mapping[str, Any]] | None]:
    """``factors`` of every term at every row, keyed by (row index, term); with the first (term, row) it
    gives no positive finite factor for (then the prediction has no finite-size form), else None."""
    scale: dict[tuple[int, str], float] = {}
    for index, row in enumerate(rows):
        for name in names:
            factor = factors(name, row)
            if factor is None or not (factor > 0 and math.isfinite(factor)):
                return scale, (name, row)
            scale[(index, name)] = factor
    return scale, None


def _least_squares_slope(points: list[dict[str, Any]], base: str) -> float | None:
    """The least-squares slope of log(parameter count) on log(base); None with fewer than two base values."""
    if len({p[base] for p in points}) < 2:
        return None
    xs = [math.log(p[base]) for p in points]
    ys = [math.log(p["param_count"]) for p in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / sxx

"""Solve a pack's success condition for the size exponent, term by term (shared by regions and predict).

With ``size = base**x`` every term reduces to ``coef * base**E * log(base)**P`` (theory.scaling).
Success needs ``signal >= C * noise_i`` for each noise term i. Writing the margin exponent
``E_signal - E_i = A_i * x + B_i``:

* ``A_i > 0``: the size helps; success needs ``x >= x_i = -B_i / A_i``, and at leading order
  ``size ~ base**x_i * log(base)**l_i`` with ``l_i = (P_i - P_signal) / A_i`` (the log power a
  size must carry to beat the log factors of the noise).
* ``A_i == 0``: the term does not change with the size: a feasibility condition ``B_i >= 0``
  (if ``B_i == 0`` the log powers decide). Success is impossible where it fails, whatever the size.
* ``A_i < 0``: the size hurts; rejected as outside what the engine can solve.

The binding noise term is the one with the largest ``x_i``; on a tie of ``x_i`` the larger ``l_i``
wins (``base**x * log**l`` grows faster with larger ``l``); equal ``x_i`` and ``l_i`` are reported as tied.

The parameter count reduces to ``base**(g*x + h) * log(base)**P_param``, so the required count
exponent where term i binds is ``g*x_i + h`` with log power ``P_param + g*l_i``.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.expr import bounded_work
from recallkit.theory.pack import Pack
from recallkit.theory.scaling import Monomial, Scaling, parse_scaling, reduce_term
from recallkit.theory.symbols import SIZE_EXPONENT

__all__ = ["analyse", "Analysis", "as_scaling", "float_or_none", "Threshold"]


@dataclass(frozen=True)
class Threshold:
    """What one noise term demands of the size exponent."""

    name: str
    slope: sp.Expr             # A_i: d(margin exponent)/dx
    offset: sp.Expr            # B_i
    size_exponent: sp.Expr     # x_i = -B_i / A_i   (nan if A_i == 0: size-independent)
    size_log_power: sp.Expr    # l_i
    log_margin: sp.Expr        # P_signal - P_i (decides a size-independent tie)

    @property
    def size_independent(self) -> bool:
        return self.slope == 0


@dataclass(frozen=True)
class Analysis:
    pack: Pack
    scaling: Scaling
    signal: Monomial
    noise: dict[str, Monomial]
    param: Monomial
    param_slope: sp.Expr       # g: coefficient of x in the param-count exponent
    param_offset: sp.Expr      # h
    thresholds: dict[str, Threshold]
    lower_bounds: dict[str, Monomial]

    def required(self, name: str) -> tuple[sp.Expr, sp.Expr]:
        """(param-count exponent, log power) required where noise term ``name`` binds."""
        threshold = self.thresholds[name]
        exponent = sp.simplify(self.param_slope * threshold.size_exponent + self.param_offset)
        log_power = sp.simplify(self.param.log_power + self.param_slope * threshold.size_log_power)
        return exponent, log_power


def as_scaling(pack: Pack, scaling: Scaling | str | None, where: str = "--scaling") -> Scaling:
    """Accept a Scaling, a scaling string, or None (the pack's [defaults] scaling)."""
    if scaling is None:
        scaling = pack.default_scaling or ""
        where = f"{pack.path}: defaults.scaling"
    if isinstance(scaling, str):
        return parse_scaling(scaling, where, constants=pack.constants, variables=pack.variables)
    return scaling


def _linear_in_x(expr: sp.Expr, where: str) -> tuple[sp.Expr, sp.Expr]:
    expr = sp.expand(expr)
    slope = sp.expand(expr.coeff(SIZE_EXPONENT, 1))
    offset = sp.expand(expr - slope * SIZE_EXPONENT)
    if SIZE_EXPONENT in slope.free_symbols or SIZE_EXPONENT in offset.free_symbols:
        raise InputError(f"{where}: exponent {sp.sstr(expr)} is not linear in the size exponent")
    return slope, offset


def analyse(pack: Pack, scaling: Scaling | str | None = None) -> Analysis:
    """Reduce every term under ``scaling`` and solve each noise term's condition for the size exponent (under the
    symbolic-work budget: a runaway names the term it was working on)."""
    if not pack.terms:  # a pack of laws only: nothing to solve for (theory.laws reads its laws)
        raise InputError(f"{pack.path}: states no success condition ([[terms]]), only laws "
                         f"({', '.join(law.name for law in pack.laws)}); 'recallkit theory predict' gives their "
                         f"exponents")
    scaling = as_scaling(pack, scaling)
    with bounded_work(f"{pack.path}: scaling", str(scaling)):
        return _analyse(pack, scaling)


def _analyse(pack: Pack, scaling: Scaling) -> Analysis:
    index = {term.name: i for i, term in enumerate(pack.terms)}
    # the text as written names the expression in a message (a pack built in code may have none)
    sources = {f"terms[{i}].expr": term.source or sp.sstr(term.expr) for i, term in enumerate(pack.terms)}
    sources.update({f"lower_bounds[{i}].expr": bound.source or sp.sstr(bound.expr)
                    for i, bound in enumerate(pack.lower_bounds)})

    def reduce(expr: sp.Expr, where: str) -> Monomial:
        with bounded_work(f"{pack.path}: {where}", sources.get(where) or sp.sstr(expr)):
            monomial = reduce_term(expr, scaling, pack.base, pack.size, pack.constants, f"{pack.path}: {where}",
                                   pack.variables)
            nonpositive = monomial.coefficient.is_extended_nonpositive
        if nonpositive:  # e.g. -d or log(1/N): not a size of anything
            raise InputError(f"{pack.path}: {where}: leading coefficient {sp.sstr(monomial.coefficient)} is not "
                             f"positive under the scaling; terms must be positive quantities")
        return monomial

    signal = reduce(pack.signal.expr, f"terms[{index[pack.signal.name]}].expr")
    noise = {term.name: reduce(term.expr, f"terms[{index[term.name]}].expr") for term in pack.noise_terms}
    param = reduce(pack.param_count, "pack.param_count")
    param_slope, param_offset = _linear_in_x(param.exponent, f"{pack.path}: pack.param_count")
    bounds = {}
    for i, bound in enumerate(pack.lower_bounds):
        monomial = reduce(bound.expr, f"lower_bounds[{i}].expr")
        if SIZE_EXPONENT in monomial.exponent.free_symbols:
            raise InputError(f"{pack.path}: lower_bounds[{i}].expr: a lower bound on the parameter count must "
                             f"not depend on the size variable {pack.size}")
        bounds[bound.name] = monomial

    thresholds = {}
    for name, monomial in noise.items():
        where = f"{pack.path}: terms[{index[name]}]"
        with bounded_work(f"{where}.expr", sources[f"terms[{index[name]}].expr"]):
            thresholds[name] = _threshold(pack, name, where, signal, monomial)
    if all(t.size_independent for t in thresholds.values()):
        raise InputError(f"{pack.path}: no noise term depends on the size variable {pack.size} relative to the "
                         f"signal; nothing to solve for")
    return Analysis(pack, scaling, signal, noise, param, param_slope, param_offset, thresholds, bounds)


def _threshold(pack: Pack, name: str, where: str, signal: Monomial, monomial: Monomial) -> Threshold:
    """What noise term ``name`` demands of the size exponent, against the signal."""
    slope, offset = _linear_in_x(signal.exponent - monomial.exponent, where)
    log_margin = sp.simplify(signal.log_power - monomial.log_power)
    if slope == 0:
        return Threshold(name, slope, offset, sp.nan, sp.nan, log_margin)
    if slope.is_number and slope < 0:
        raise InputError(f"{where}: noise term {name!r} grows faster with {pack.size} than the signal; "
                         f"the success condition cannot be solved for {pack.size}")
    return Threshold(name, slope, offset, sp.simplify(-offset / slope), sp.simplify(-log_margin / slope), log_margin)


def float_or_none(value: sp.Expr) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None

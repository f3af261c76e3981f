"""Predicted slope of log(parameter count) against log(base) along a fully specified line.

A line is a scaling with no free exponent left, e.g. ``N=V*log(V), L=V**0.5, m=d**2``. Along it
the required parameter count is ``base**slope * log(base)**log_power`` (leading order), where the
binding noise term is the one demanding the largest size exponent (ties broken by log power; see
theory.analysis). A fit of log(count) on log(base) over a finite range sees roughly
``slope + log_power / log(base)``; the log power is reported so the comparison can account for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from recallkit.theory.analysis import analyse, float_or_none
from recallkit.theory.errors import InputError
from recallkit.theory.expr import bounded_work
from recallkit.theory.laws import law_exponents
from recallkit.theory.pack import Pack
from recallkit.theory.scaling import Scaling, free_exponents

__all__ = ["predict", "Prediction"]


@dataclass(frozen=True)
class Prediction:
    pack: str
    scaling: str
    base: str
    size: str
    param_count: str
    dominant: str
    tied_with: tuple[str, ...]
    slope: sp.Expr
    log_power: sp.Expr
    size_exponent: sp.Expr
    size_log_power: sp.Expr
    thresholds: list[dict[str, Any]] = field(default_factory=list)
    lower_bounds: list[dict[str, Any]] = field(default_factory=list)
    infeasible: list[str] = field(default_factory=list)
    # the lower bound over a class that is largest on this line, with the gap to it (None: the pack has none)
    strongest_bound: dict[str, Any] | None = None
    # each law of the pack along the same line (theory.laws.law_exponents); a law the line does not determine (it
    # leaves two of its variables free) has an "error" instead
    laws: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pack": self.pack, "scaling": self.scaling, "base": self.base, "size": self.size,
            "param_count": self.param_count,
            "slope": float(self.slope), "slope_exact": sp.sstr(self.slope),
            "log_power": sp.sstr(self.log_power), "log_power_float": float_or_none(self.log_power),
            "dominant": self.dominant, "tied_with": list(self.tied_with),
            "size_exponent": sp.sstr(self.size_exponent), "size_exponent_float": float(self.size_exponent),
            "size_log_power": sp.sstr(self.size_log_power),
            "size_log_power_float": float_or_none(self.size_log_power),
            "thresholds": self.thresholds, "lower_bounds": self.lower_bounds, "infeasible": self.infeasible,
            "strongest_bound": self.strongest_bound,
            # only where there are some: the documents of packs without laws stay as they were
            **({"laws": self.laws} if self.laws else {}),
        }


def predict(pack: Pack, scaling: Scaling | str | None = None) -> Prediction:
    """Predicted slope, binding term and log power along a fully specified line (under the symbolic-work
    budget, see theory.expr.bounded_work)."""
    with bounded_work(f"{pack.path}: predict", str(scaling if scaling is not None else pack.default_scaling)):
        return _predict(pack, scaling)


def _predict(pack: Pack, scaling: Scaling | str | None) -> Prediction:
    analysis = analyse(pack, scaling)
    monomials = dict(analysis.noise, signal=analysis.signal, param_count=analysis.param, **analysis.lower_bounds)
    free = sorted(free_exponents(monomials))
    if free:
        raise InputError(f"--scaling: free exponent(s) {', '.join(free)} left in {analysis.scaling.text!r}; "
                         f"predict needs a fully specified line, e.g. 'N=V*log(V), L=V**0.5'")

    solvable = [t for t in analysis.thresholds.values() if not t.size_independent]
    # largest size exponent binds; on equal exponents the larger log power does
    ranked = sorted(solvable, key=lambda t: (t.size_exponent, t.size_log_power), reverse=True)
    top = ranked[0]
    tied = tuple(t.name for t in ranked[1:]
                 if t.size_exponent == top.size_exponent and t.size_log_power == top.size_log_power)
    slope, log_power = analysis.required(top.name)

    infeasible = [t.name for t in analysis.thresholds.values() if t.size_independent
                  and (t.offset < 0 or (t.offset == 0 and t.log_margin < 0))]
    thresholds = []
    for t in analysis.thresholds.values():
        entry = {"name": t.name, "size_independent": t.size_independent}
        if t.size_independent:
            entry.update({"margin_exponent": sp.sstr(t.offset), "margin_log_power": sp.sstr(t.log_margin)})
        else:
            entry.update({"size_exponent": sp.sstr(t.size_exponent), "size_log_power": sp.sstr(t.size_log_power)})
        thresholds.append(entry)
    bounds = []
    strongest, strongest_key = None, None
    for bound in pack.lower_bounds:
        monomial = analysis.lower_bounds[bound.name]
        gap = sp.simplify(slope - monomial.exponent)
        log_gap = sp.simplify(log_power - monomial.log_power)
        entry = {"name": bound.name, "exponent": sp.sstr(monomial.exponent), "log_power": sp.sstr(monomial.log_power),
                 "gap_exponent": sp.sstr(gap), "gap_log_power": sp.sstr(log_gap), "kind": bound.kind,
                 "class": bound.bound_class, "estimator": bound.estimator}
        bounds.append(entry)
        # one estimator's failure condition bounds nothing else, so it never counts as the strongest bound
        key = (monomial.exponent, monomial.log_power)
        if bound.is_lower_bound and (strongest_key is None or key > strongest_key):
            strongest, strongest_key = entry, key
    return Prediction(
        pack=pack.name, scaling=str(analysis.scaling), base=pack.base, size=pack.size,
        param_count=sp.sstr(pack.param_count), dominant=top.name, tied_with=tied, slope=slope,
        log_power=log_power, size_exponent=top.size_exponent, size_log_power=top.size_log_power,
        thresholds=thresholds, lower_bounds=bounds, infeasible=infeasible, strongest_bound=strongest,
        laws=_laws(pack, analysis.scaling))


def _laws(pack: Pack, scaling: Scaling) -> list[dict[str, Any]]:
    laws = []
    for law in pack.laws:
        try:
            laws.append(law_exponents(pack, law, scaling))
        except InputError as exc:  # the condition's prediction stands; the law says why it has none on this line
            laws.append({"law": law.name, "metric": law.metric, "combine": law.combine, "error": str(exc)})
    return laws

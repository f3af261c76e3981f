"""A pack's laws along a scaling: which term of a metric dominates where, and the metric's exponents there.

A law (``[[laws]]`` in a pack) states a measured quantity as the sum, or the maximum, of power-law terms in the
pack's variables, e.g. error ~ d^-1 + n^-(1/2). Along a scaling (``n=d**a``) every variable but one is set; that one
is the base, and each term reduces to ``coef * base**E_i * log(base)**P_i`` (theory.scaling). Asymptotically the
sum and the maximum alike follow the term with the largest ``E_i`` (ties broken by ``P_i``), so the regions of the
scaling's free exponents where each term dominates are those of the noise terms' region solver
(:func:`theory.regions.dominance_regions`), with ``E_i`` in place of the size exponent.

In each region the metric scales like its dominant term: ``base**E`` along the line, and against each variable v of
the law (the others held fixed) with the dominant term's own exponent in v. That per-variable exponent is what a
measurement of the metric against one variable tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Sequence

import sympy as sp

from recallkit.theory.analysis import as_scaling, float_or_none
from recallkit.theory.errors import InputError
from recallkit.theory.expr import bounded_work
from recallkit.theory.pack import Law, Pack
from recallkit.theory.regions import dominance_regions, exponent_domain, exponent_latex
from recallkit.theory.scaling import Monomial, Scaling, free_exponents, reduce_term, to_monomial
from recallkit.theory.symbols import EXPONENTS, constant_symbol, vocabulary

__all__ = ["law_exponents", "law_regions", "predict_laws"]


@dataclass(frozen=True)
class _Ranked:
    """A law term as the region solver reads a term: its name and its growth in the base."""

    name: str
    size_exponent: sp.Expr
    size_log_power: sp.Expr


def predict_laws(pack: Pack, scaling: Scaling | str | None = None, axes: Sequence[str] | str | None = None,
                 box: dict[str, Sequence[float]] | None = None, domain: Sequence[str] = ()) -> list[dict[str, Any]]:
    """:func:`law_exponents` of every law of ``pack`` (an empty list for a pack without laws)."""
    return [law_exponents(pack, law, scaling, axes, box, domain) for law in pack.laws]


def law_exponents(pack: Pack, law: Law | str, scaling: Scaling | str | None = None,
                  axes: Sequence[str] | str | None = None, box: dict[str, Sequence[float]] | None = None,
                  domain: Sequence[str] = ()) -> dict[str, Any]:
    """The theory of one law along ``scaling`` (default: the pack's), as a JSON-able dict.

    Keys (docs/adding-a-system.md, "Laws", has them as a table):

    - ``law``, ``metric``, ``combine``, ``pack``, ``scaling``: the law and the line as given; ``base``: the one
      variable of the law the scaling leaves free; ``variables``: the law's variables with an exponent against them
      (one that sits in an exponent, such as alpha in p**(-alpha), has none: ``notes`` says so);
    - ``terms``: per term ``name``, ``expr``, ``provenance``, ``reference``; the term along the line is
      ~ base**``exponent`` * log(base)**``log_power``, each also as ``*_float`` (None while it holds a free
      exponent) and ``*_latex``; ``variables``: ``{v: {"exponent", "log_power"}}``, its exponents against each
      variable, the others held fixed, with each variable the line sets to a number substituted (``1 - alpha``
      along a line with alpha = 1/2 is ``1/2``);
    - ``axes``, ``axis_labels``, ``box``, ``domain``: the free exponents and their window (``axes``: the free
      exponents by default; ``box`` and ``domain`` as for theory.compute_regions), empty for a fully set line;
    - ``regions``: one per term that dominates somewhere in the window: ``dominant``, ``tied_with``,
      ``inequalities``, ``vertices``, ``vertices_float``, and the metric there under the ``terms`` keys
      (``exponent``, ``exponent_float``, ``log_power``, ..., ``variables``). A fully specified line has one region
      with no vertices; ``empirics.plan.law_prediction`` names its ``exponent_float`` ``slope`` (and
      ``exponent`` ``slope_exact``), as a fit's prediction does;
    - ``notes``: what was left out, one line each.
    """
    law = _find(pack, law)
    scaling = as_scaling(pack, scaling)
    index = pack.laws.index(law)
    with bounded_work(f"{pack.path}: laws[{index}]", str(scaling)):
        return _law_exponents(pack, law, index, scaling, axes, box, domain)


def law_regions(pack: Pack, law: Law | str | None = None, scaling: Scaling | str | None = None,
                axes: Sequence[str] | str | None = None, box: dict[str, Sequence[float]] | None = None,
                domain: Sequence[str] = ()) -> dict[str, Any]:
    """:func:`law_exponents` with what a drawing of its regions needs beside it, in the keys the phase diagram's
    dict uses (``box_float``, ``domain_vertices_float`` and each region's ``label_point``). ``law``: the pack's only
    law by default. A drawing needs one or two free exponents: a fully set scaling is refused."""
    if law is None:
        if not pack.laws:
            raise InputError(f"--law: pack {pack.name} has no [[laws]] to draw")
        if len(pack.laws) > 1:
            raise InputError(f"--law: pack {pack.name} has laws {', '.join(c.name for c in pack.laws)}; "
                             f"name the one to draw")
        law = pack.laws[0]
    elif isinstance(law, str) and law not in [candidate.name for candidate in pack.laws]:
        raise InputError(f"--law: {_find_error(pack, law)}")
    document = law_exponents(pack, law, scaling, axes, box, domain)
    if not document["axes"]:
        raise InputError(f"--scaling: {document['scaling']!r} leaves no free exponent for law {document['law']}; "
                         f"leave one or two free exponents (such as a) to draw its regions")
    _, _, polygon, _, _ = exponent_domain(pack, document["axes"], box, domain)
    document["box_float"] = [[float(Fraction(value)) for value in pair] for pair in document["box"]]
    document["domain_vertices_float"] = [[float(v) for v in vertex] for vertex in polygon]
    for region in document["regions"]:
        vertices = region["vertices_float"]
        region["label_point"] = [sum(v[i] for v in vertices) / len(vertices) for i in range(len(vertices[0]))]
    return document


def _find_error(pack: Pack, law: str) -> str:
    names = ", ".join(candidate.name for candidate in pack.laws) or "none"
    return f"law {law!r}: not a law of pack {pack.name} (its laws: {names})"


def _find(pack: Pack, law: Law | str) -> Law:
    if isinstance(law, Law):
        return law
    for candidate in pack.laws:
        if candidate.name == law:
            return candidate
    raise InputError(_find_error(pack, law))


def _law_exponents(pack: Pack, law: Law, index: int, scaling: Scaling, axes: Sequence[str] | str | None,
                   box: dict[str, Sequence[float]] | None, domain: Sequence[str]) -> dict[str, Any]:
    where = f"{pack.path}: laws[{index}]"
    base = _base(pack, law, scaling, where)
    along = {term.name: _reduce(pack, term.expr, scaling, base, f"{where}.terms[{i}].expr")
             for i, term in enumerate(law.terms)}
    variables, against, notes = _against(pack, law, where, scaling)
    free = sorted(free_exponents(along))
    document: dict[str, Any] = {
        "law": law.name, "metric": law.metric, "combine": law.combine, "pack": pack.name, "scaling": str(scaling),
        "base": base, "variables": variables,
        "terms": [{"name": term.name, "expr": sp.sstr(term.expr), "provenance": term.provenance,
                   "reference": term.reference, **_power(along[term.name]), "variables": against[term.name]}
                  for term in law.terms],
    }
    ranked = [_Ranked(name, monomial.exponent, monomial.log_power) for name, monomial in along.items()]
    if not free and axes is None:
        top = max(ranked, key=lambda t: (t.size_exponent, t.size_log_power))
        tied = [t.name for t in ranked if t is not top and (t.size_exponent, t.size_log_power) == (
            top.size_exponent, top.size_log_power)]
        document.update(axes=[], axis_labels=[], box=[], domain=[],
                        regions=[_region(law, top, tied, [], [], along, against)], notes=notes)
        return document
    if axes is None:
        if len(free) > 2:
            raise InputError(f"--scaling: free exponents {', '.join(free)} in {scaling.text!r}: law {law.name} "
                             f"draws regions over one or two; fix the others")
        axes = free
    axes, intervals, polygon, texts, window_notes = exponent_domain(pack, axes, box, domain)
    missing = sorted(set(free) - set(axes))
    if missing:
        raise InputError(f"--axes: exponent(s) {', '.join(missing)} are free in the scaling but not axes; "
                         f"fix them in --scaling or choose them as axes")
    regions = [_region(law, top, tied, polygon, inequalities, along, against)
               for top, tied, polygon, inequalities in dominance_regions(pack, ranked, axes, polygon)]
    document.update(axes=list(axes), axis_labels=[_axis_label(scaling, axis) for axis in axes],
                    box=[[str(low), str(high)] for low, high in intervals], domain=texts, regions=regions,
                    notes=notes + window_notes)
    return document


def _base(pack: Pack, law: Law, scaling: Scaling, where: str) -> str:
    """The one variable of the law that the scaling leaves free."""
    known = vocabulary(pack.variables)
    mapping = {known.get(name) or constant_symbol(name): value for name, value in scaling.entries}
    left: list[str] = []
    for term in law.terms:
        expr = term.expr
        for _ in range(len(mapping) + 1):  # entries may name each other; a cycle is refused by reduce_term
            expr = expr.xreplace(mapping)
        left.extend(symbol.name for symbol in sorted(expr.free_symbols, key=lambda s: s.name)
                    if symbol.name in known and symbol.name not in left)
    if not left:
        raise InputError(f"{where}: the scaling {str(scaling)!r} sets every variable of law {law.name}; leave one "
                         f"free as the base")
    if len(left) > 1:
        raise InputError(f"{where}: variables {', '.join(left)} of law {law.name} are all left free by the scaling "
                         f"{str(scaling)!r}; scale all but one, e.g. '{left[1]}={left[0]}**a'")
    return left[0]


def _reduce(pack: Pack, expr: sp.Expr, scaling: Scaling, base: str, where: str) -> Monomial:
    monomial = reduce_term(expr, scaling, base, None, pack.constants, where, pack.variables)
    if monomial.coefficient.is_extended_nonpositive:
        raise InputError(f"{where}: leading coefficient {sp.sstr(monomial.coefficient)} is not positive under the "
                         f"scaling; a law's terms must be positive quantities")
    return monomial


def _against(pack: Pack, law: Law, where: str, scaling: Scaling | None = None
             ) -> tuple[list[str], dict[str, dict[str, dict[str, str]]], list[str]]:
    """The law's variables, each term's exponent and log power against each of them (the others held fixed), and
    notes on a variable left out because it sits in an exponent (e.g. alpha in d**-alpha): no power law in it. A
    variable the line sets to a number is that number in the exponents (1 - alpha at alpha = 1/2 is 1/2)."""
    fixed = {pack.variables[name]: value for name, value in (scaling.entries if scaling is not None else ())
             if name in pack.variables and getattr(value, "is_number", False)}
    used = set().union(*(term.expr.free_symbols for term in law.terms))
    names = [name for name, symbol in pack.variables.items() if symbol in used]
    variables, notes = [], []
    against: dict[str, dict[str, dict[str, str]]] = {term.name: {} for term in law.terms}
    for name in names:
        try:
            powers = {term.name: to_monomial(term.expr, name, where, pack.variables) for term in law.terms}
        except InputError:
            notes.append(f"law {law.name}: {name} appears in an exponent; no exponent against it is given")
            continue
        variables.append(name)
        for term_name, monomial in powers.items():
            against[term_name][name] = {"exponent": sp.sstr(sp.expand(monomial.exponent.xreplace(fixed))),
                                        "log_power": sp.sstr(sp.expand(monomial.log_power.xreplace(fixed)))}
    return variables, against, notes


def _power(monomial: Monomial) -> dict[str, Any]:
    return {"exponent": sp.sstr(monomial.exponent), "exponent_latex": exponent_latex(monomial.exponent),
            "exponent_float": float_or_none(monomial.exponent),
            "log_power": sp.sstr(monomial.log_power), "log_power_latex": exponent_latex(monomial.log_power),
            "log_power_float": float_or_none(monomial.log_power)}


def _region(law: Law, top: _Ranked, tied: list[str], polygon: list, inequalities: list[str],
            along: dict[str, Monomial], against: dict[str, dict[str, dict[str, str]]]) -> dict[str, Any]:
    """Where ``top`` dominates, the metric scales as it does: along the line and against each variable."""
    return {"dominant": top.name, "tied_with": list(tied), "inequalities": list(inequalities),
            "vertices": [[str(v) for v in vertex] for vertex in polygon],
            "vertices_float": [[float(v) for v in vertex] for vertex in polygon],
            **_power(along[top.name]), "variables": against[top.name]}


def _axis_label(scaling: Scaling, axis: str) -> str:
    meaning = scaling.meaning_of(axis) if axis in EXPONENTS else None
    return f"{axis}  ({meaning})" if meaning else axis

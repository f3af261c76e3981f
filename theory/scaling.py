"""Scalings (``"N=V*log(V), L=V**c, m=d**2"``) and the reduction of a term to a monomial in the base.

After substituting a scaling and writing the size variable as ``size = base**x``, every term must
become, to leading order,

    coefficient * base**(exponent) * log(base)**(log_power)

with ``exponent`` a polynomial in the free exponents and ``x`` (linear in ``x``), ``log_power`` an
expression in the same, and ``coefficient`` free of the base. The engine keeps the log power.

Leading order of logarithms (documented rule): ``log(c * B**E * log(B)**P) = E*log(B) + log(c) +
P*log(log(B))``, and for ``E != 0`` only ``E*log(B)`` is kept, because ``log(c)`` is a constant and
``log(log(B)) = o(log(B))``. For example with ``N = V*log(V)``: ``log(N) ~ log(V)`` and
``N*log(N) ~ V * log(V)**2``. A term whose logarithm has ``E = 0`` but ``P != 0`` (a bare
``log(log(V))``) is rejected, as is a sum, ``Min``/``Max`` (write one noise term per branch:
``signal >= Max(A, B)`` is the same condition as two noise terms ``A`` and ``B``), or the base
inside an exponent or ``exp``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping

import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.expr import check_numbers, parse_expression
from recallkit.theory.symbols import (EXPONENTS, RESERVED_NAMES, SIZE_EXPONENT, VARIABLES, constant_symbol,
                                      variable_symbol, vocabulary)

__all__ = ["free_exponents", "Monomial", "parse_scaling", "power_text", "reduce_term", "Scaling", "split_assignments",
           "substitute", "to_monomial"]


_ENTRY_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*)\s*=(?!=)(.*)$", re.S)


@dataclass(frozen=True)
class Scaling:
    """An ordered map variable name -> expression in the other variables and free exponents."""

    text: str
    entries: tuple[tuple[str, sp.Expr], ...]

    def as_dict(self) -> dict[str, sp.Expr]:
        return dict(self.entries)

    def __str__(self) -> str:
        return ", ".join(f"{name}={sp.sstr(value)}" for name, value in self.entries)

    def meaning_of(self, exponent: str) -> str | None:
        """Which entry an exponent parametrises, e.g. ``"N = V^a"`` for ``a``; None if none."""
        symbol = EXPONENTS.get(exponent)
        for name, value in self.entries:
            if symbol is not None and symbol in value.free_symbols:
                return f"{name} = {sp.sstr(value).replace('**', '^')}"
        return None


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses (``log(N, 2)`` stays whole)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def parse_scaling(text: str, where: str = "--scaling", constants: Iterable[str] = (),
                  variables: Mapping[str, sp.Symbol] | None = None) -> Scaling:
    """Parse ``"N=V*log(V), L=V**c, m=d**2"``; right-hand sides use variables, exponents, ``constants``.

    The left-hand side is a model variable or a pack constant (e.g. ``h=2`` for a hop count).
    ``variables``: a pack's (``pack.variables``), whose declared ones (``n=V**2``) are then known beside the
    built-in ones. An empty text is the empty scaling.
    """
    if not isinstance(text, str):
        raise InputError(f"{where}: expected a string like 'N=V**a, L=V**c', got {type(text).__name__}")
    constants = tuple(constants)
    known = vocabulary(variables)
    symbols: dict[str, sp.Basic] = dict(known)
    symbols.update(EXPONENTS)
    symbols.update({name: constant_symbol(name) for name in constants})
    entries: list[tuple[str, sp.Expr]] = []
    if not text.strip():
        return Scaling(text="", entries=())
    for index, (name, rhs) in enumerate(split_assignments(text, where)):
        if name in EXPONENTS or (name in RESERVED_NAMES and name not in VARIABLES):
            raise InputError(f"{where}: entry {index + 1}: {name!r} is not a variable that can be scaled "
                             f"(variables: {', '.join(known)})")
        if any(name == existing for existing, _ in entries):
            raise InputError(f"{where}: {name!r} is given twice")
        value = parse_expression(rhs, symbols, f"{where}: {name}")
        if (known.get(name) or constant_symbol(name)) in value.free_symbols:
            raise InputError(f"{where}: {name} is defined in terms of itself")
        entries.append((name, value))
    return Scaling(text=text, entries=tuple(entries))


@dataclass(frozen=True)
class Monomial:
    """``coefficient * base**exponent * log(base)**log_power`` (leading order)."""

    coefficient: sp.Expr
    exponent: sp.Expr
    log_power: sp.Expr

    def __mul__(self, other: "Monomial") -> "Monomial":
        return Monomial(self.coefficient * other.coefficient, self.exponent + other.exponent,
                        self.log_power + other.log_power)

    def __pow__(self, power: sp.Expr) -> "Monomial":
        return Monomial(self.coefficient ** power, self.exponent * power, self.log_power * power)


def substitute(expr: sp.Expr, scaling: Scaling, base: str, size: str | None, constants: Iterable[str] = (),
               where: str = "term", variables: Mapping[str, sp.Symbol] | None = None) -> sp.Expr:
    """Apply the scaling (repeatedly, so entries may refer to each other) and set size = base**x.
    ``variables``: the pack's (see :func:`parse_scaling`); a declared one left free is named as a variable."""
    known = vocabulary(variables)
    base_symbol = variable_symbol(base, known)
    mapping: dict[sp.Symbol, sp.Expr] = {}
    for name, value in scaling.entries:
        if name == base:
            raise InputError(f"{where}: the scaling sets the base variable {base}; it must stay free")
        if name == size:
            raise InputError(f"{where}: the scaling sets the size variable {size}; it is solved for, not given")
        mapping[known.get(name) or constant_symbol(name)] = value
    check_numbers(expr, mapping, where)
    result = expr
    for _ in range(len(mapping) + 1):
        replaced = result.xreplace(mapping)
        if replaced == result:
            break
        result = replaced
    else:
        raise InputError(f"{where}: the scaling entries refer to each other in a cycle")
    if size is not None:
        result = result.xreplace({variable_symbol(size, known): base_symbol ** SIZE_EXPONENT})
    allowed_constants = {constant_symbol(name) for name in constants}
    for symbol in sorted(result.free_symbols, key=lambda s: s.name):
        if symbol.name in known and symbol != base_symbol:
            raise InputError(f"{where}: variable {symbol.name} has no scaling; add e.g. "
                             f"'{symbol.name}={base}**c' or '{symbol.name}=1' to the scaling")
        if symbol not in allowed_constants and symbol.name not in EXPONENTS and symbol not in (
                base_symbol, SIZE_EXPONENT):
            raise InputError(f"{where}: unknown symbol {symbol.name}")
    return result


def to_monomial(expr: sp.Expr, base: str, where: str = "term",
                variables: Mapping[str, sp.Symbol] | None = None) -> Monomial:
    """Reduce an expression in the base variable to its leading-order monomial (see module doc)."""
    return _decompose(expr, variable_symbol(base, variables), where)


def _decompose(expr: sp.Expr, base: sp.Symbol, where: str) -> Monomial:
    if base not in expr.free_symbols:
        return Monomial(expr, sp.Integer(0), sp.Integer(0))
    if expr == base:
        return Monomial(sp.Integer(1), sp.Integer(1), sp.Integer(0))
    if isinstance(expr, sp.Mul):
        result = Monomial(sp.Integer(1), sp.Integer(0), sp.Integer(0))
        for factor in expr.args:
            result = result * _decompose(factor, base, where)
        return result
    if isinstance(expr, sp.Pow):
        power_base, power = expr.as_base_exp()
        if base in power.free_symbols:
            raise InputError(f"{where}: {base} appears in an exponent ({sp.sstr(expr)}); only powers that "
                             f"do not depend on {base} are supported")
        return _decompose(power_base, base, where) ** power
    if isinstance(expr, sp.log):
        inner = _decompose(expr.args[0], base, where)
        exponent = sp.expand(inner.exponent)
        if exponent != 0:
            # log(c B^E log^P B) = E log B + log c + P log log B ~ E log B at leading order
            return Monomial(exponent, sp.Integer(0), sp.Integer(1))
        if sp.simplify(inner.log_power) != 0:
            raise InputError(f"{where}: {sp.sstr(expr)} is a log(log({base})) term; not supported")
        return Monomial(sp.log(inner.coefficient), sp.Integer(0), sp.Integer(0))
    if isinstance(expr, sp.Add):
        raise InputError(f"{where}: {sp.sstr(expr)} is a sum after substitution; split it into separate "
                         f"terms (each term must be a product of powers and logs)")
    if isinstance(expr, (sp.Min, sp.Max)):
        raise InputError(f"{where}: {type(expr).__name__} is not supported in a term; write one noise term "
                         f"per branch (signal >= Max(A, B) is the same condition as noise terms A and B)")
    if isinstance(expr, sp.exp):
        raise InputError(f"{where}: exp({sp.sstr(expr.args[0])}) depends on {base}; not a power law")
    raise InputError(f"{where}: cannot reduce {sp.sstr(expr)} to a power of {base} times a power of log({base})")


def reduce_term(expr: sp.Expr, scaling: Scaling, base: str, size: str | None, constants: Iterable[str] = (),
                where: str = "term", variables: Mapping[str, sp.Symbol] | None = None) -> Monomial:
    """substitute() then to_monomial(), with exponent and log power expanded."""
    monomial = to_monomial(substitute(expr, scaling, base, size, constants, where, variables), base, where,
                           variables)
    for part in (monomial.exponent, monomial.log_power):
        leftover = sorted(s.name for s in part.free_symbols if s.name not in EXPONENTS and s != SIZE_EXPONENT)
        if leftover:
            raise InputError(f"{where}: constant {', '.join(leftover)} appears in an exponent of {base}; "
                             f"give it a number in the scaling, e.g. '{leftover[0]}=2'")
    return Monomial(sp.simplify(monomial.coefficient), sp.expand(monomial.exponent), sp.expand(monomial.log_power))


def free_exponents(monomials: Mapping[str, Monomial]) -> set[str]:
    """Names of the scaling exponents (not x) that appear in any exponent or log power."""
    names = set()
    for monomial in monomials.values():
        for symbol in (monomial.exponent.free_symbols | monomial.log_power.free_symbols):
            if symbol.name in EXPONENTS:
                names.add(symbol.name)
    return names


def power_text(base: str, exponent, log_power) -> str:
    """The one plain-text form of ``base**exponent * log(base)**log_power`` that the CLI, the phase
    diagram and the PDF all print: ``V^(3/2) * log(V)^(1)`` (the log factor is left out when its power is 0
    )."""
    return f"{base}^({exponent})" + ("" if str(log_power) == "0" else f" * log({base})^({log_power})")


def split_assignments(text: str, where: str) -> list[tuple[str, str]]:
    """``"N=V*log(V), L=Max(2, V**0.25)"`` -> ``[("N", "V*log(V)"), ("L", "Max(2, V**0.25)")]``: the one
    splitter of scaling lines (commas inside parentheses do not split), for theory scalings and experiment
    lines alike."""
    out: list[tuple[str, str]] = []
    if not text.strip():
        return out
    for index, part in enumerate(_split_top_level(text)):
        match = _ENTRY_RE.match(part)
        if match is None:
            raise InputError(f"{where}: entry {index + 1} {part.strip()!r}: expected NAME=EXPRESSION, e.g. 'L=V**c'")
        out.append((match.group(1), match.group(2).strip()))
    return out

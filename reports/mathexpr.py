"""Expressions typeset the same way in every label, title and table: ``N=V**1.5, L=V**0.5`` becomes
``$N=V^{1.5}$, $L=V^{0.5}$`` (mathtext, drawn by matplotlib without LaTeX).

Each ``name=expression`` part is parsed by the theory stage's whitelist parser (``theory.expr.parse_expression``:
nothing is evaluated, only the listed functions and the names written in the text are allowed) and printed with
``sympy.latex``; a rational exponent is shown as the decimal it was written as (``V^{1.5}``, not ``V^{3/2}``). A
part that does not parse, or whose LaTeX mathtext cannot draw, stays as it was written, so a label never fails.
"""
from __future__ import annotations

import functools
import re

import sympy
from matplotlib.mathtext import MathTextParser

from recallkit.theory.expr import parse_expression

__all__ = ["expression_mathtext", "line_mathtext", "plain_of"]

_FUNCTIONS = {"log", "sqrt", "exp", "floor", "ceil", "Min", "Max", "min", "max"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PART = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=|~)\s*(.+?)\s*$")
_COMMAND_SPACE = re.compile(r"(\\[A-Za-z]+) (?=[A-Za-z0-9])")


def _decimal_exponents(expr: sympy.Expr) -> sympy.Expr:
    """``V**(3/2)`` as ``V**1.5`` and ``sqrt(V)`` as ``V**0.5``: the exponents as the experiment files write them."""
    def is_fraction(e) -> bool:
        return e.is_Pow and e.exp.is_Rational and not e.exp.is_Integer and e.exp.q in (2, 4, 5, 8, 10)

    expr = expr.replace(is_fraction, lambda e: sympy.Pow(e.base, sympy.Float(float(e.exp), 3), evaluate=False))
    return sympy.Float(float(expr), 4) if expr.is_Rational and not expr.is_Integer else expr


@functools.lru_cache(maxsize=1024)
def expression_mathtext(text: str) -> str | None:
    """The LaTeX body (no ``$``) of one expression, or None when it does not parse or mathtext cannot draw it."""
    names = {n for n in _NAME.findall(text) if n not in _FUNCTIONS}
    try:
        expr = parse_expression(text.replace("^", "**"), {n: sympy.Symbol(n, positive=True) for n in names}, where="label")
        latex = sympy.latex(_decimal_exponents(expr), full_prec=False, mul_symbol=None)
    except Exception:  # noqa: BLE001 - a label that does not parse is shown as written
        return None
    latex = _COMMAND_SPACE.sub(r"\1{}", latex).replace(" ", "")
    latex = re.sub(r"\\left|\\right", "", latex).replace(r"\log{(", r"\log(").replace(")}", ")")
    latex = re.sub(r"(?<=[A-Za-z0-9}])\\log", r"\\,\\log", latex)  # V log(V): a thin space before the operator
    try:
        MathTextParser("path").parse(f"${latex}$")
    except (ValueError, RuntimeError):
        return None
    return latex


@functools.lru_cache(maxsize=1024)
def line_mathtext(label: str) -> str:
    """A line's label with each ``name=expression`` part (comma-separated) typeset: ``N=V*log(V), L=V**0.5`` ->
    ``$N=V\\log(V)$, $L=V^{0.5}$``. Other text, and a part that does not parse, is kept as written."""
    text = str(label)
    if "$" in text:
        return text
    parts = []
    for part in text.split(","):
        match = _PART.match(part)
        body = expression_mathtext(match.group(3)) if match else None
        if body is None:
            parts.append(part.strip())
            continue
        sign = "=" if match.group(2) == "=" else r"\sim{}"
        parts.append(f"${match.group(1)}{sign}{body}$")
    return ", ".join(parts)


def plain_of(text: str) -> str:
    """``text`` without mathtext markup (for a file name or a length estimate)."""
    return re.sub(r"[${}\\]", "", str(text))

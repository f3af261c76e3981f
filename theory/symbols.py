"""The symbols every pack and scaling is written in.

Model variables: V vocabulary, N number of facts/samples, d embedding dimension,
L sequence length, m MLP width, R number of relations, eta and gamma step sizes.
Exponent variables (the scaling conventions): N = V**a, L = V**c, m = d**k, R = N**r, ...
All are declared positive so that sympy may combine powers and split logs of products
(log(V**a) = a*log(V) only holds for positive V).

These are the built-in vocabulary every pack may use without declaring it. A pack may declare more variables of
its own (``[[variables]]``, e.g. a sample count ``n``); their symbols are :func:`variable_symbol` of their name.
"""
from __future__ import annotations

from collections.abc import Mapping

import sympy as sp

from recallkit.theory.sizes import SIZE_SYMBOLS

__all__ = ["constant_symbol", "EXPONENTS", "RESERVED_NAMES", "SIZE_EXPONENT", "SIZE_SYMBOLS", "VARIABLES",
           "variable_symbol", "vocabulary"]


V, N, d, L, m, R, eta, gamma = sp.symbols("V N d L m R eta gamma", positive=True)

#: model variables a pack may state its terms in, by name
VARIABLES: dict[str, sp.Symbol] = {s.name: s for s in (V, N, d, L, m, R, eta, gamma)}

#: the size symbols, re-exported from theory.sizes (written there without sympy, for the stages' import time): these
#: variables but the step sizes eta and gamma (tests/unit/theory/test_size_symbols.py checks it)

a, b, c, k, q, r, s, t, u, w = sp.symbols("a b c k q r s t u w", positive=True)

#: free exponents of scalings (N = V**a, L = V**c, m = d**k, R = N**r, ...)
EXPONENTS: dict[str, sp.Symbol] = {sym.name: sym for sym in (a, b, c, k, q, r, s, t, u, w)}

#: the exponent of the size variable (d = base**x) the success condition is solved for;
#: not in EXPONENTS, so no user expression can name it.
SIZE_EXPONENT = sp.Symbol("x", positive=True)

#: names that may not be used for pack constants (variables, exponents, functions, the size exponent)
RESERVED_NAMES = frozenset(VARIABLES) | frozenset(EXPONENTS) | {"x", "log", "sqrt", "exp", "Min", "Max"}


def constant_symbol(name: str) -> sp.Symbol:
    """A positive symbol for a pack-declared constant such as p (bits per parameter)."""
    return sp.Symbol(name, positive=True)


def variable_symbol(name: str, variables: Mapping[str, sp.Symbol] | None = None) -> sp.Symbol:
    """The symbol of variable ``name``: a pack's (``variables``, e.g. ``pack.variables``), else the built-in one,
    else the positive symbol of that name, which is what a declared variable's symbol is: code that is handed only
    a variable's name (``pack.base``) finds a declared one without the pack's table."""
    if variables is not None and name in variables:
        return variables[name]
    return VARIABLES.get(name) or sp.Symbol(name, positive=True)


def vocabulary(variables: Mapping[str, sp.Symbol] | None = None) -> dict[str, sp.Symbol]:
    """The variables a scaling may name: the built-in ones and a pack's own (``variables``; None: none)."""
    return {**VARIABLES, **variables} if variables else dict(VARIABLES)

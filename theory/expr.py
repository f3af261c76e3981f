"""A whitelist expression parser that builds sympy objects directly.

User text (pack terms, scalings, domain constraints, experiment parameters) never reaches
``eval``, ``exec``, ``sympify`` or ``parse_expr``: it is tokenised here and parsed by recursive
descent into sympy objects built by hand. Accepted: the names passed in ``symbols``, numbers
(``3``, ``0.5``, ``1e7``; kept exact as Rationals), ``+ - * / **``, unary minus, parentheses and
the functions ``log`` (natural; ``log(x, 2)`` for base 2), ``sqrt``, ``exp``, ``Min``, ``Max``.
Everything else is rejected with one line naming where (``where``) and the offending token.

Grammar (``**`` binds tighter than unary minus and is right-associative, as in Python)::

    expr  := term (('+' | '-') term)*
    term  := unary (('*' | '/') unary)*
    unary := ('+' | '-') unary | power
    power := atom ('**' unary)?
    atom  := NUMBER | NAME | FUNC '(' expr (',' expr)* ')' | '(' expr ')'
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

import sympy as sp

from recallkit.theory.errors import InputError

MAX_LENGTH = 2000        # characters of one expression
MAX_DEPTH = 40           # nesting of parentheses / unary operators / powers
MAX_NUMBER_DIGITS = 30   # digits of one literal
MAX_INT_EXPONENT = 64    # |n| in number**n, so that 10**10**10 cannot exhaust memory

_FUNCTION_ARITY = {"log": (1, 2), "sqrt": (1, 1), "exp": (1, 1), "Min": (2, 16), "Max": (2, 16)}

_TOKEN_RE = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|[-+*/(),])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str   # number | name | op | end
    text: str
    pos: int


def tokenize(text: str, where: str = "expression") -> list[Token]:
    """Split ``text`` into tokens; any character outside the whitelist is an error."""
    if not isinstance(text, str):
        raise InputError(f"{where}: expected an expression string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise InputError(f"{where}: expression is {len(text)} characters long (limit {MAX_LENGTH})")
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if match is None:
            char = text[pos]
            hint = " (use ** for powers)" if char == "^" else ""
            raise InputError(f"{where}: unexpected character {char!r} at position {pos}{hint}")
        kind = match.lastgroup
        if kind != "space":
            tokens.append(Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, symbols: Mapping[str, sp.Basic], where: str):
        self.text = text
        self.symbols = symbols
        self.where = where
        self.tokens = tokenize(text, where)
        self.index = 0
        self.depth = 0

    # -- helpers -------------------------------------------------------------------------
    def error(self, message: str, token: Token | None = None) -> InputError:
        token = token or self.peek()
        shown = "end of expression" if token.kind == "end" else repr(token.text)
        return InputError(f"{self.where}: {message} at {shown} (position {token.pos})")

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept(self, text: str) -> bool:
        if self.peek().kind == "op" and self.peek().text == text:
            self.index += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.accept(text):
            raise self.error(f"expected {text!r}")

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression nested deeper than {MAX_DEPTH} levels")

    # -- grammar -------------------------------------------------------------------------
    def parse(self) -> sp.Expr:
        if self.peek().kind == "end":
            raise InputError(f"{self.where}: empty expression")
        result = self.expr()
        if self.peek().kind != "end":
            raise self.error("unexpected token")
        return result

    def expr(self) -> sp.Expr:
        result = self.term()
        while True:
            if self.accept("+"):
                result = result + self.term()
            elif self.accept("-"):
                result = result - self.term()
            else:
                return result

    def term(self) -> sp.Expr:
        result = self.unary()
        while True:
            if self.accept("*"):
                result = result * self.unary()
            elif self.peek().kind == "op" and self.peek().text == "/":
                token = self.take()
                divisor = self.unary()
                if divisor == 0:
                    raise self.error("division by zero", token)
                result = result / divisor
            else:
                return result

    def unary(self) -> sp.Expr:
        self.enter()
        try:
            if self.accept("-"):
                return -self.unary()
            if self.accept("+"):
                return self.unary()
            return self.power()
        finally:
            self.depth -= 1

    def power(self) -> sp.Expr:
        base = self.atom()
        if self.peek().kind == "op" and self.peek().text == "**":
            token = self.take()
            self.enter()
            try:
                exponent = self.unary()
            finally:
                self.depth -= 1
            if base.is_number and exponent.is_number:
                if not exponent.is_Rational or abs(exponent) > MAX_INT_EXPONENT:
                    raise self.error(f"numeric power with exponent beyond +-{MAX_INT_EXPONENT}", token)
                if base == 0 and exponent.is_negative:
                    raise self.error("division by zero", token)
            result = sp.Pow(base, exponent)
            if result.is_Rational and max(abs(result.p), result.q).bit_length() > 4096:
                raise self.error("numeric power too large", token)
            return result
        return base

    def atom(self) -> sp.Expr:
        token = self.take()
        if token.kind == "number":
            return self.number(token)
        if token.kind == "name":
            if token.text in _FUNCTION_ARITY:
                return self.call(token)
            if token.text in self.symbols:
                return self.symbols[token.text]
            allowed = ", ".join(sorted(self.symbols)) or "none"
            raise InputError(
                f"{self.where}: unknown symbol {token.text!r} at position {token.pos} (allowed: {allowed}; "
                f"functions: {', '.join(_FUNCTION_ARITY)})"
            )
        if token.kind == "op" and token.text == "(":
            self.enter()
            try:
                inner = self.expr()
            finally:
                self.depth -= 1
            self.expect(")")
            return inner
        self.index -= 1
        raise self.error("expected a number, symbol, function or '('")

    def number(self, token: Token) -> sp.Expr:
        digits = sum(ch.isdigit() for ch in token.text)
        if digits > MAX_NUMBER_DIGITS:
            raise self.error(f"number with more than {MAX_NUMBER_DIGITS} digits", token)
        mantissa_exponent = re.search(r"[eE]([+-]?\d+)$", token.text)
        if mantissa_exponent and abs(int(mantissa_exponent.group(1))) > 300:
            raise self.error("number exponent beyond 1e+-300", token)
        value = Fraction(token.text)
        return sp.Rational(value.numerator, value.denominator)

    def call(self, name_token: Token) -> sp.Expr:
        if not (self.peek().kind == "op" and self.peek().text == "("):
            raise self.error(f"function {name_token.text!r} must be called with '('")
        self.take()
        self.enter()
        try:
            args = [self.expr()]
            while self.accept(","):
                args.append(self.expr())
        finally:
            self.depth -= 1
        self.expect(")")
        low, high = _FUNCTION_ARITY[name_token.text]
        if not low <= len(args) <= high:
            raise self.error(f"{name_token.text} takes {low}..{high} arguments, got {len(args)}", name_token)
        name = name_token.text
        if name == "log":
            if len(args) == 2:
                return sp.log(args[0]) / sp.log(args[1])
            return sp.log(args[0])
        if name == "sqrt":
            return sp.sqrt(args[0])
        if name == "exp":
            return sp.exp(args[0])
        if name == "Min":
            return sp.Min(*args)
        return sp.Max(*args)


def parse_expression(text: str, symbols: Mapping[str, sp.Basic], where: str = "expression") -> sp.Expr:
    """Parse ``text`` into a sympy expression using only ``symbols`` (name -> sympy object).

    Raises :class:`theory.errors.InputError` with a one-line message that starts with ``where``
    (e.g. ``packs/x.toml: terms[2].expr``) and names the offending token.
    """
    return _Parser(text, symbols, where).parse()


_COMPARISON_RE = re.compile(r"(>=|<=|>|<|==)")


def parse_linear_constraints(
    text: str, symbols: Mapping[str, sp.Basic], where: str = "constraint"
) -> list[tuple[sp.Expr, str]]:
    """Parse ``"a >= 1"`` or a chain ``"0 < c < 1"`` into ``[(lhs - rhs, op), ...]``.

    Each returned pair means ``expr op 0`` with op in ``>=, >, <=, <``; ``expr`` is checked to be
    linear in the given symbols (no products or powers of them).
    """
    parts = _COMPARISON_RE.split(text)
    if len(parts) < 3:
        raise InputError(f"{where}: expected a comparison such as 'a >= 1' or '0 < c < 1', got {text!r}")
    sides = [parse_expression(part, symbols, where) for part in parts[0::2]]
    operators = parts[1::2]
    constraints = []
    for left, op, right in zip(sides, operators, sides[1:]):
        if op == "==":
            raise InputError(f"{where}: equality constraints are not supported, got {text!r}")
        difference = sp.expand(left - right)
        variables = [sym for sym in symbols.values() if isinstance(sym, sp.Symbol)]
        try:
            poly = sp.Poly(difference, *variables) if variables else None
        except sp.PolynomialError:
            poly = None
        if difference.free_symbols and (poly is None or poly.total_degree() > 1):
            raise InputError(f"{where}: constraint must be linear in {', '.join(sorted(symbols))}, got {text!r}")
        constraints.append((difference, op))
    return constraints

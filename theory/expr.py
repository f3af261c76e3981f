"""A whitelist expression parser that builds sympy objects directly.

User text (pack terms, scalings, domain constraints, experiment parameters) never reaches
``eval``, ``exec``, ``sympify`` or ``parse_expr``: it is tokenised here and parsed by recursive
descent into sympy objects built by hand. Accepted: the names passed in ``symbols``, numbers
(``3``, ``0.5``, ``1e7``; kept exact as Rationals), ``+ - * / **``, unary minus, parentheses and
the functions ``log`` (natural; ``log(x, 2)`` for base 2), ``sqrt``, ``exp``, ``floor``, ``ceil``,
``Min``, ``Max`` (``min`` and ``max`` are the same functions). Everything else is rejected with one
line naming where (``where``) and the offending token.

Bounded work: the parser refuses, before sympy computes anything, a number above its limits (digits, exact
powers), a ``log`` to a base that is not a positive number other than 1, and any character outside ASCII
letters, digits, operators, spaces, tabs and newlines (named by code point and position). A symbolic parse also
refuses an infinite or undefined value and an expression that ``sympy.expand`` would multiply out to more than
``MAX_EXPANDED_TERMS`` terms. :func:`check_numbers` bounds the numbers a term's powers and ``exp`` become (under
a scaling) before the theory computes with them, and :func:`bounded_work` runs sympy's work (parsing,
constraints, the theory's reductions and regions) under a CPU-time budget, turning a runaway, an overflow or a
recursion too deep into one :class:`InputError` line naming the field and the expression.

This is the one expression language of recallkit: theory packs and scalings use the sympy objects
(:func:`parse_expression`); run configs and experiment files evaluate the same parse in floats
(:class:`NumericExpression`, :func:`compile_numeric`), which walks the tree itself with guards on
powers, ``exp`` and overflow, so no input can make it compute with huge integers or run away.

Grammar (``**`` binds tighter than unary minus and is right-associative, as in Python)::

    expr  := term (('+' | '-') term)*
    term  := unary (('*' | '/') unary)*
    unary := ('+' | '-') unary | power
    power := atom ('**' unary)?
    atom  := NUMBER | NAME | FUNC '(' expr (',' expr)* ')' | '(' expr ')'
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import signal
import threading
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Iterator, Mapping

import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.schema import describe_character

__all__ = ["bounded_work", "check_numbers", "compile_numeric", "FUNCTIONS", "MAX_DEPTH", "MAX_EVAL_EXPONENT",
           "MAX_EXPANDED_TERMS", "MAX_INT_EXPONENT", "MAX_LENGTH", "MAX_MAGNITUDE", "MAX_NUMBER_DIGITS",
           "MAX_POWER_BITS", "MAX_SYMBOLIC_SECONDS", "NumericExpression", "parse_expression",
           "parse_linear_constraints", "SECONDS_VARIABLE", "symbolic_seconds", "Token", "tokenize"]


MAX_LENGTH = 2000        # characters of one expression
MAX_DEPTH = 40           # nesting of parentheses / unary operators / powers
MAX_NUMBER_DIGITS = 30   # digits of one literal
MAX_INT_EXPONENT = 64    # |n| in number**n, so that 10**10**10 cannot exhaust memory
MAX_POWER_BITS = 4096    # bits of an exact number built by number**n
MAX_MAGNITUDE = 1e300    # numeric evaluation: a power or exp above this is refused, not computed
MAX_EVAL_EXPONENT = 1e9  # numeric evaluation: |exponent| of a power (above every size limit)
# a symbolic parse: terms sympy.expand may multiply the expression out to (an upper bound is checked; a shipped
# pack's largest has a handful, and expand takes about 0.4 ms a term)
MAX_EXPANDED_TERMS = 1000
# CPU seconds one piece of symbolic work may take (a pack's regions take about 1 s, 100 terms about 6 s);
# the environment variable SECONDS_VARIABLE overrides it
MAX_SYMBOLIC_SECONDS = 60.0
SECONDS_VARIABLE = "RECALLKIT_SYMBOLIC_SECONDS"
SHOWN_LENGTH = 60        # characters of an expression quoted in a message

_FUNCTION_ARITY = {
    "log": (1, 2), "sqrt": (1, 1), "exp": (1, 1), "floor": (1, 1), "ceil": (1, 1),
    "Min": (2, 16), "Max": (2, 16), "min": (2, 16), "max": (2, 16),
}
#: the function names the parser knows (a name a pack declares must not be one of them)
FUNCTIONS = frozenset(_FUNCTION_ARITY)

# ASCII only: \d would take any Unicode digit (a fullwidth 2) and \s a no-break space, both invisible in a
# file that looks right; spaces, tabs and newlines (a TOML multi-line string) separate tokens
_TOKEN_RE = re.compile(
    r"""
    (?P<space>[ \t\r\n]+)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\*\*|[-+*/(),])
    """,
    re.VERBOSE | re.ASCII,
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
            raise InputError(f"{where}: unexpected character {describe_character(char)} at position {pos}{hint}")
        kind = match.lastgroup
        if kind != "space":
            tokens.append(Token(kind, match.group(), pos))
        pos = match.end()
    tokens.append(Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str, symbols: Mapping[str, sp.Basic], where: str, symbolic: bool = True):
        self.text = text
        self.symbols = symbols
        self.where = where
        self.symbolic = symbolic  # sympy will compute with the result (numeric evaluation walks it in floats)
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
        with bounded_work(self.where, self.text):  # sympy folds numbers as it builds (e.g. Min of constants)
            try:
                result = self.expr()
            except InputError:
                raise
            except (ArithmeticError, ValueError, RecursionError) as exc:
                # sympy folding numbers (e.g. comparing two huge constants in Max) may overflow
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise InputError(f"{self.where}: cannot build {self.text!r}: {reason}") from None
        if self.peek().kind != "end":
            raise self.error("unexpected token")
        if self.symbolic:
            if result.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
                raise InputError(f"{self.where}: {_shorten(self.text)} is infinite or undefined (e.g. log(0))")
            try:
                _expanded_terms(result)
            except _TooLarge:
                raise InputError(f"{self.where}: {_shorten(self.text)} expands to more than {MAX_EXPANDED_TERMS} "
                                 f"terms (a power or product of sums); write it in a smaller form") from None
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
                # sympy computes number**n exactly: refuse before it builds a huge integer, also
                # when the number hides in a product such as (3**2000*log(2))**64
                bits = max((max(abs(a.p).bit_length(), a.q.bit_length()) for a in base.atoms(sp.Rational)), default=1)
                if bits * abs(float(exponent)) > MAX_POWER_BITS:
                    raise self.error("numeric power too large", token)
            result = sp.Pow(base, exponent)
            if result.is_Rational and max(abs(result.p), result.q).bit_length() > MAX_POWER_BITS:
                raise self.error("numeric power too large", token)
            return result
        return base

    def atom(self) -> sp.Expr:
        token = self.take()
        if token.kind == "number":
            return self.number(token)
        if token.kind == "name":
            called = self.peek().kind == "op" and self.peek().text == "("
            if token.text in _FUNCTION_ARITY and (called or token.text not in self.symbols):
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
                base = args[1]
                # log(x, 1) would divide by log(1) = 0, which sympy folds into a silent zoo
                if base.is_number and not (base.is_positive and sp.log(base) != 0):
                    raise self.error(f"log to base {sp.sstr(base)}: expected a base that is a positive number "
                                     f"other than 1", name_token)
                return sp.log(args[0]) / sp.log(base)
            return sp.log(args[0])
        if name == "sqrt":
            return sp.sqrt(args[0])
        if name == "exp":
            return sp.exp(args[0])
        if name in ("floor", "ceil"):
            function = sp.floor if name == "floor" else sp.ceiling
            # sympy folds floor(number) by evaluating the number to enough digits, which for
            # floor(exp(exp(exp(3)))) never ends: only exact rationals are folded here
            return function(args[0], evaluate=bool(args[0].is_Rational or not args[0].is_number))
        if name in ("Min", "min"):
            return sp.Min(*args)
        return sp.Max(*args)


def parse_expression(text: str, symbols: Mapping[str, sp.Basic], where: str = "expression") -> sp.Expr:
    """Parse ``text`` into a sympy expression using only ``symbols`` (name -> sympy object).

    Raises :class:`theory.errors.InputError` with a one-line message that starts with ``where``
    (e.g. ``packs/x.toml: terms[2].expr``) and names the offending token.
    """
    return _Parser(text, symbols, where).parse()


# ------------------------------------------------------------------------- bounded symbolic work


def _shorten(text: str) -> str:
    """``text`` quoted for a message, cut to SHOWN_LENGTH characters (repr: no control character gets through)."""
    text = text.rstrip()
    return repr(text if len(text) <= SHOWN_LENGTH else text[:SHOWN_LENGTH - 3] + "...")


class _TooLarge(Exception):
    pass


def _expanded_terms(node: sp.Basic) -> int:
    """An upper bound on the terms of ``sympy.expand(node)``; _TooLarge once the bound of a part exceeds
    MAX_EXPANDED_TERMS.

    A sum has its terms' total, a product their product, an integer power n of a sum of k terms the
    multinomial count C(k+n-1, n) (the integer part of a fractional power); a function or a symbolic power is
    one term, whose arguments expand inside it."""
    if not node.args:
        return 1
    inner = [_expanded_terms(arg) for arg in node.args]
    if node.is_Add:
        count = sum(inner)
    elif node.is_Mul:
        count = math.prod(inner)
    elif node.is_Pow and node.exp.is_Rational and inner[0] > 1:
        n = abs(int(node.exp))
        # C(k+n-1, n) > n: a huge n is refused without computing the binomial
        count = math.comb(inner[0] + n - 1, n) if n <= MAX_EXPANDED_TERMS else MAX_EXPANDED_TERMS + 1
    else:
        count = 1
    if count > MAX_EXPANDED_TERMS:
        raise _TooLarge
    return count


def check_numbers(expr: sp.Expr, mapping: Mapping[sp.Symbol, sp.Expr], where: str) -> None:
    """Refuse a power or ``exp`` in ``expr`` that is a number above MAX_MAGNITUDE, or that substituting ``mapping``
    (symbol -> expression) would make one, before sympy computes it. sympy computes such a number exactly or to
    every digit of its exponent when asked its sign: ``exp(exp(exp(exp(9))))`` overflows, ``floor(exp(exp(exp(3))))``
    never ends, and ``p**p**p`` at p = 9 is an exact integer of 370 million digits (no timer interrupts that). The
    parser leaves such numbers alone (it builds them without evaluating them); here they are bounded in floats."""
    walker = _ConstantWalk()
    known: dict[sp.Symbol, float] = {}
    refused: dict[sp.Symbol, str] = {}
    for _ in range(len(mapping)):  # entries may be numbers through others (q=p**2, p=3)
        for symbol, value in mapping.items():
            if symbol in known or symbol in refused or not value.free_symbols <= known.keys():
                continue
            try:
                known[symbol] = walker._eval(value, {str(s): v for s, v in known.items()})
            except (ArithmeticError, ValueError) as exc:
                refused[symbol] = str(exc) or type(exc).__name__
    values = {str(symbol): value for symbol, value in known.items()}
    numbers = known.keys() | refused.keys()
    for node in sp.preorder_traversal(expr):
        if not (node.is_Pow or isinstance(node, sp.exp)) or not node.free_symbols <= numbers:
            continue
        bad = [symbol for symbol in node.free_symbols if symbol in refused]
        if bad:
            reason = f"{bad[0]}: {refused[bad[0]]}"
        else:
            try:
                value = walker._eval(node, values)
            except (ArithmeticError, ValueError) as exc:
                reason = str(exc) or type(exc).__name__
            else:
                if abs(value) <= MAX_MAGNITUDE:
                    continue
                reason = f"above {MAX_MAGNITUDE:g}"
        shown = ", ".join(f"{symbol}={sp.sstr(mapping[symbol])}" for symbol in sorted(node.free_symbols, key=str))
        raise InputError(f"{where}: {_shorten(sp.sstr(node))}{' at ' + shown if shown else ''} cannot be computed: "
                         f"{reason}")


class _OutOfTime(BaseException):
    """Raised by the CPU timer in the middle of sympy's work. A BaseException, so that no ``except Exception``
    inside sympy takes it for a failed attempt and carries on."""


class _Budget:
    """The budget of the main thread: how many bounded_work blocks are open, the outermost's seconds, and
    whether the timer may still interrupt (cleared as soon as one block has turned it into an error)."""

    depth = 0
    seconds = MAX_SYMBOLIC_SECONDS
    armed = False


def _on_timer(signum: int, frame: object) -> None:
    if _Budget.armed:
        raise _OutOfTime


def symbolic_seconds() -> float:
    """The CPU seconds a piece of symbolic work may take: SECONDS_VARIABLE if set, else MAX_SYMBOLIC_SECONDS."""
    text = os.environ.get(SECONDS_VARIABLE, "").strip()
    if not text:
        return MAX_SYMBOLIC_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"{SECONDS_VARIABLE}: expected a positive number of CPU seconds, got {text!r}")
    return seconds


@contextlib.contextmanager
def bounded_work(where: str, text: str) -> Iterator[None]:
    """Run the block's symbolic work on the expression ``text`` (the field ``where``) under the CPU-time budget.

    Running out of time, an OverflowError, a MemoryError or a RecursionError inside the block becomes one
    InputError line naming ``where`` and ``text`` (shortened). Blocks nest: the outermost one sets the timer
    (``ITIMER_PROF``, process CPU time, so a loaded machine does not shorten it), and the innermost one open when
    it fires names the expression. The timer is signal-based, so it runs only in the main thread; elsewhere the
    parser's size limits alone bound the work."""
    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
    outermost = main and _Budget.depth == 0
    if outermost:
        _Budget.seconds = symbolic_seconds()
        previous_handler = signal.signal(signal.SIGPROF, _on_timer)
        # fires again every half second, should anything inside sympy swallow the first interruption
        previous_timer = signal.setitimer(signal.ITIMER_PROF, _Budget.seconds, 0.5)
        _Budget.armed = True
    if main:
        _Budget.depth += 1
    try:
        yield
    except _OutOfTime:
        _Budget.armed = False
        raise InputError(f"{where}: {_shorten(text)}: symbolic work stopped after {_Budget.seconds:g} s of CPU time "
                         f"(the limit; the environment variable {SECONDS_VARIABLE} sets it)") from None
    except RecursionError:
        raise InputError(f"{where}: {_shorten(text)}: nested too deeply to compute with") from None
    except OverflowError as exc:
        raise InputError(f"{where}: {_shorten(text)}: a number in it is too large to compute with "
                         f"({str(exc) or 'overflow'})") from None
    except MemoryError:
        raise InputError(f"{where}: {_shorten(text)}: out of memory computing with it") from None
    finally:
        if main:
            _Budget.depth -= 1
        if outermost:
            _Budget.armed = False
            signal.setitimer(signal.ITIMER_PROF, *previous_timer)
            # None: the previous handler was not set from Python, and cannot be put back from it
            signal.signal(signal.SIGPROF, signal.SIG_DFL if previous_handler is None else previous_handler)


# ------------------------------------------------------------------------- numeric evaluation


class NumericExpression:
    """An expression of the language above, evaluated in Python floats at given symbol values.

    ``text`` is parsed by the same whitelist parser (same limits on length, nesting, digits and
    powers); :meth:`evaluate` then walks the sympy tree itself. Nothing is executed and sympy never
    evaluates anything numerically: a power or ``exp`` whose value would exceed ``MAX_MAGNITUDE``
    (or whose exponent exceeds ``MAX_EVAL_EXPONENT``), a division by zero, the log of a number
    <= 0, a complex value or an infinite one is a one-line :class:`InputError` naming ``where``,
    the text and the values.

    ``symbols`` are the names the text may use; :attr:`symbols` holds the ones it does use.
    """

    def __init__(self, text: str, symbols: Iterable[str], where: str = "expression"):
        allowed = {name: sp.Symbol(name) for name in symbols}
        parser = _Parser(text, allowed, where, symbolic=False)
        self.text: str = text
        self.where: str = where
        self.expr: sp.Expr = parser.parse()
        self.symbols: frozenset[str] = frozenset(
            t.text for t in parser.tokens if t.kind == "name" and t.text in allowed
            and not (t.text in _FUNCTION_ARITY and _called(parser.tokens, t))
        )
        self._names = {symbol: name for name, symbol in allowed.items()}

    def __repr__(self) -> str:
        return f"NumericExpression({self.text!r})"

    def _values(self, env: Mapping[str, float]) -> str:
        shown = ", ".join(f"{name}={env[name]}" for name in sorted(self.symbols) if name in env)
        return f" at {shown}" if shown else ""

    def evaluate(self, env: Mapping[str, float]) -> float:
        """The value at ``env`` (symbol name -> number) as a finite float."""
        try:
            value = self._eval(self.expr, env)
        except _Refused as exc:
            raise InputError(f"{self.where}: {self.text!r} cannot be evaluated{self._values(env)}: {exc}") from None
        except ZeroDivisionError:
            raise InputError(f"{self.where}: {self.text!r} cannot be evaluated{self._values(env)}: division by zero") from None
        except OverflowError:
            raise InputError(f"{self.where}: {self.text!r} cannot be evaluated{self._values(env)}: overflow") from None
        except RecursionError:
            raise InputError(f"{self.where}: {self.text!r} cannot be evaluated: nested too deeply") from None
        except InputError:
            raise
        except ValueError as exc:  # math domain errors
            raise InputError(f"{self.where}: {self.text!r} cannot be evaluated{self._values(env)}: {exc}") from None
        if not math.isfinite(value):
            raise InputError(f"{self.where}: {self.text!r} is not finite{self._values(env)}")
        return value

    # -- the tree walk ---------------------------------------------------------------------
    def _eval(self, node: sp.Basic, env: Mapping[str, float]) -> float:
        if node.is_Symbol:
            name = self._names.get(node, str(node))
            if name not in env:
                known = ", ".join(sorted(env)) or "none"
                raise InputError(f"{self.where}: symbol {name!r} has no value here (known: {known})")
            value = env[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"{self.where}: symbol {name!r} must be a finite number, got {value!r}")
            return float(value)
        if node.is_Rational:
            return _rational(node)
        if node.is_Add:
            return _finite(math.fsum(self._eval(arg, env) for arg in node.args))
        if node.is_Mul:
            # numerator and denominator apart, so that N/16 is N/16.0 as written, not N*0.0625
            numerator, denominator = 1.0, 1.0
            for factor in node.args:
                if factor.is_Rational:
                    numerator *= float(factor.p)  # OverflowError past 1.8e308, never inf
                    denominator *= float(factor.q)
                elif factor.is_Pow and factor.exp.is_Rational and factor.exp.is_negative:
                    denominator *= _power(self._eval(factor.base, env), -_rational(factor.exp))
                else:
                    numerator *= self._eval(factor, env)
            if denominator == 0:
                raise ZeroDivisionError
            return _finite(numerator / denominator)
        if node.is_Pow:
            return _power(self._eval(node.base, env), self._eval(node.exp, env))
        if isinstance(node, sp.exp):
            argument = self._eval(node.args[0], env)
            if argument > math.log(MAX_MAGNITUDE):
                raise _Refused(f"exp({argument:g}) is above {MAX_MAGNITUDE:g}")
            return math.exp(argument)
        if isinstance(node, sp.log):
            argument = self._eval(node.args[0], env)
            if argument <= 0:
                raise _Refused(f"log({argument:g}) of a number <= 0")
            return math.log(argument)
        if isinstance(node, (sp.Min, sp.Max)):
            values = [self._eval(arg, env) for arg in node.args]
            return min(values) if isinstance(node, sp.Min) else max(values)
        if isinstance(node, sp.floor):
            return float(math.floor(_finite(self._eval(node.args[0], env))))
        if isinstance(node, sp.ceiling):
            return float(math.ceil(_finite(self._eval(node.args[0], env))))
        if isinstance(node, sp.Abs):
            return abs(self._eval(node.args[0], env))
        if node is sp.E:
            return math.e
        if node is sp.pi:
            return math.pi
        if node.is_Float:
            return float(node)
        if node is sp.oo or node is sp.S.NegativeInfinity or node is sp.zoo or node is sp.nan:
            raise _Refused("infinite or undefined (e.g. log(0))")
        if node.has(sp.I):
            raise _Refused("complex value")
        raise _Refused(f"no numeric rule for {type(node).__name__}")


class _ConstantWalk(NumericExpression):
    """The float walk of NumericExpression, over numbers and the symbols given values (check_numbers uses it)."""

    def __init__(self) -> None:
        self.where, self._names = "constant", {}


class _Refused(ArithmeticError):
    """A value the numeric evaluation will not compute (too large, complex, undefined)."""


def _called(tokens: list[Token], token: Token) -> bool:
    index = tokens.index(token)
    following = tokens[index + 1]
    return following.kind == "op" and following.text == "("


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise _Refused("overflow (a value is not finite)")
    return value


def _rational(number: sp.Rational) -> float:
    # int / int is correctly rounded and raises OverflowError instead of building inf
    return int(number.p) / int(number.q)


_LOG_MAX = math.log(MAX_MAGNITUDE)


def _power(base: float, exponent: float) -> float:
    """``base ** exponent`` in floats, refusing results above MAX_MAGNITUDE before computing them."""
    if not (math.isfinite(base) and math.isfinite(exponent)):
        raise _Refused("power of a value that is not finite")
    if exponent == 0:
        return 1.0
    if abs(exponent) > MAX_EVAL_EXPONENT:
        raise _Refused(f"exponent {exponent:g} beyond +-{MAX_EVAL_EXPONENT:g}")
    if base == 0:
        if exponent < 0:
            raise ZeroDivisionError
        return 0.0
    if base < 0 and not float(exponent).is_integer():
        raise _Refused(f"complex value: negative base {base:g} to the power {exponent:g}")
    if exponent * math.log(abs(base)) > _LOG_MAX:
        raise _Refused(f"power {base:g}**{exponent:g} is above {MAX_MAGNITUDE:g}")
    if exponent == 0.5:
        return math.sqrt(base)
    return math.pow(base, exponent)


@functools.lru_cache(maxsize=4096)
def _compile_cached(text: str, symbols: tuple[str, ...], where: str) -> NumericExpression:
    return NumericExpression(text, symbols, where)


def compile_numeric(text: str, symbols: Iterable[str], where: str = "expression") -> NumericExpression:
    """A (cached) :class:`NumericExpression` for ``text`` in the names ``symbols``."""
    if not isinstance(text, str):
        raise InputError(f"{where}: expected an expression string, got {type(text).__name__}")
    return _compile_cached(text, tuple(sorted(set(symbols))), where)


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
        with bounded_work(where, text):
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

"""The whitelist parser: what it accepts, and hostile input that must be rejected without running."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.expr import MAX_DEPTH, MAX_LENGTH, parse_expression, parse_linear_constraints
from recallkit.theory.symbols import EXPONENTS, VARIABLES, L, N, V, d, m

WHERE = "my.toml: terms[2].expr"


def parse(text: str) -> sp.Expr:
    return parse_expression(text, VARIABLES, WHERE)


def test_accepts_the_whitelist_and_builds_exact_sympy():
    assert parse("N*log(N)") == N * sp.log(N)
    assert parse("d**2 / 3 - -m") == d**2 / 3 + m
    assert parse("0.5*sqrt(L)") == sp.Rational(1, 2) * sp.sqrt(L)
    assert parse("1e7") == sp.Integer(10**7)
    assert parse("2.5e-1") == sp.Rational(1, 4)
    assert parse("log(N, 2)") == sp.log(N) / sp.log(2)
    assert parse("Max(d, m) + Min(V, N)") == sp.Max(d, m) + sp.Min(V, N)
    assert parse("exp(1)") == sp.E


def test_power_binds_tighter_than_unary_minus_and_is_right_associative():
    assert parse("-d**2") == -(d**2)
    assert parse("2**3**2") == 2**9
    assert parse("V**-1") == 1 / V


@pytest.mark.parametrize(
    "text, token",
    [
        ("__import__('os').system('x')", "'"),
        ("d.__class__", "'.'"),
        ("lambda: 0", "':'"),
        ("'abc'", "'"),
        ("2^3", "'^'"),
        ("Q + 1", "'Q'"),
        ("open", "'open'"),
        ("eval", "'eval'"),
        ("log d", "'d'"),
        ("d,", "','"),
        ("d +", "end of expression"),
        ("(d", "end of expression"),
        ("log(d, 2, 3)", "log"),
        ("9" * 40, "more than 30 digits"),
        ("10**10**10", "'**'"),
        ("d/0", "division by zero"),
    ],
)
def test_rejects_with_one_line_naming_place_and_token(text, token):
    with pytest.raises(InputError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(WHERE + ":")
    assert token in message


def test_rejects_very_long_and_deeply_nested_expressions():
    with pytest.raises(InputError, match="characters long"):
        parse("d+" * (MAX_LENGTH // 2) + "d")
    with pytest.raises(InputError, match="nested deeper"):
        parse("(" * (MAX_DEPTH + 5) + "d" + ")" * (MAX_DEPTH + 5))
    with pytest.raises(InputError, match="nested deeper"):
        parse("-" * (MAX_DEPTH + 5) + "d")
    with pytest.raises(InputError, match="nested deeper"):
        parse("log(" * (MAX_DEPTH + 5) + "d" + ")" * (MAX_DEPTH + 5))


def test_hostile_payloads_run_nothing(tmp_path):
    """Each payload would create a marker file if it were executed by eval/sympify; none may."""
    marker = tmp_path / "MARKER"
    payloads = [
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        f"().__class__.__bases__[0].__subclasses__()",
        f"exec(\"open('{marker}','w')\")",
        f"Symbol('x').__class__.__init__.__globals__['os'].system('touch {marker}')",
    ]
    for payload in payloads:
        with pytest.raises(InputError):
            parse(payload)
    assert not marker.exists()

    # control: the same kind of payload through Python's eval really would create it, so the check can fail
    subprocess.run([sys.executable, "-c", f"eval(\"open({str(marker)!r}, 'w')\")"], check=True)
    assert marker.exists()
    os.remove(marker)


def test_only_the_given_symbols_are_in_scope():
    with pytest.raises(InputError, match="unknown symbol 'a'"):
        parse("N**a")
    assert parse_expression("V**a", {"V": V, **EXPONENTS}) == V ** EXPONENTS["a"]


def test_linear_constraints_chain_and_linearity():
    constraints = parse_linear_constraints("0 < c < 1", EXPONENTS, "pack.domain[0]")
    c = EXPONENTS["c"]
    assert constraints == [(-c, "<"), (c - 1, "<")]
    with pytest.raises(InputError, match="linear"):
        parse_linear_constraints("a*c >= 1", EXPONENTS, "pack.domain[1]")
    with pytest.raises(InputError, match="comparison"):
        parse_linear_constraints("a + 1", EXPONENTS, "pack.domain[2]")

"""Property-based tests (hypothesis): whatever text or table a user or an attacker writes, parsing ends in
a value or one InputError (a one-line message); nothing else escapes (no RecursionError, OverflowError,
MemoryError or sympy error) and nothing is executed. A hang is left to pytest's timeout: how long the
worst of these inputs take is measured in benchmarks/bounded_work.py, not asserted here."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallkit.theory.errors import InputError
from recallkit.theory.expr import compile_numeric, parse_expression
from recallkit.theory.symbols import VARIABLES

SYMBOLS = {name: VARIABLES[name] for name in ("V", "N", "d", "L", "m")}
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# pieces of the expression language and of things that are not in it
ATOMS = ["V", "N", "d", "L", "m", "2", "0", "1.5", "1e3", "64", "10**10", "x", "__import__", "os", "'s'", "lambda"]
OPERATORS = ["+", "-", "*", "/", "**", " ", "(", ")", ",", ".", "[", "]", "=", ";", ":"]
FUNCTIONS = ["log(", "sqrt(", "exp(", "floor(", "ceil(", "Min(", "Max(", "min(", "max(", "eval(", "open("]
fragments = st.lists(st.sampled_from(ATOMS + OPERATORS + FUNCTIONS), min_size=1, max_size=60).map("".join)


def _nested_power(depth: int, base: str) -> str:
    text = base
    for _ in range(depth):
        text = f"{base}**({text})"
    return text


adversarial = st.one_of(
    st.integers(1, 80).map(lambda n: _nested_power(n, "V")),
    st.integers(1, 3000).map(lambda n: "+".join(["V"] * n)),
    st.integers(1, 200).map(lambda n: "(" * n + "V" + ")" * n),
    st.integers(1, 50).map(lambda n: "9" * n + "**" + "9" * n),
    st.integers(1, 30).map(lambda n: "exp(" * n + "V" + ")" * n),
    st.text(max_size=300),
)


def _bounded(call):
    try:
        value = call()
    except InputError as exc:
        message = str(exc)
        assert message and "\n" not in message
        value = None
    return value


@PROPERTY
@given(st.one_of(fragments, adversarial))
def test_parser_gives_a_value_or_one_input_error(text):
    _bounded(lambda: parse_expression(text, SYMBOLS, where="x"))


@PROPERTY
@given(st.one_of(fragments, adversarial),
       st.fixed_dictionaries({k: st.integers(1, 10**7) for k in ("V", "N", "d", "L", "m")}))
def test_numeric_evaluation_gives_a_finite_number_or_one_input_error(text, sizes):
    def run():
        value = compile_numeric(text, tuple(SYMBOLS), where="x").evaluate(sizes)
        assert isinstance(value, float)
        assert value == value and abs(value) != float("inf")
        return value

    _bounded(run)


toml_scalars = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                         st.text(max_size=40), st.booleans(), st.sampled_from(["V**V**V", "d**2", "N*log(N)", "__import__('os')"]))
toml_values = st.recursive(toml_scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(st.text(max_size=12), children, max_size=4)), max_leaves=12)


def _pack_like(draw_terms):
    return {"pack": {"name": "p", "title": "t", "reference": "r", "variables": ["V", "N", "d"], "base": "V",
                     "size": "d", "param_count": "d**2"}, "terms": draw_terms}


@PROPERTY
@given(st.one_of(
    st.dictionaries(st.sampled_from(["pack", "terms", "lower_bounds", "facts", "corollary", "defaults", "x"]),
                    toml_values, max_size=6),
    st.lists(st.dictionaries(st.sampled_from(["name", "role", "expr", "provenance", "note"]), toml_scalars,
                             max_size=5), max_size=5).map(_pack_like),
))
def test_pack_loader_gives_a_pack_or_one_input_error(raw):
    from recallkit.theory.pack import pack_from_dict

    _bounded(lambda: pack_from_dict(raw, "p.toml"))


EXPERIMENT_KEYS = ["name", "description", "pack", "task", "model", "trainer", "kind", "base", "size", "metric",
                   "thresholds", "lines", "fixed", "search", "verdict", "presets", "x"]


@PROPERTY
@given(st.dictionaries(st.sampled_from(EXPERIMENT_KEYS), toml_values, max_size=10))
def test_experiment_loader_gives_an_experiment_or_one_input_error(raw):
    from recallkit.empirics.experiment import experiment_from_dict

    _bounded(lambda: experiment_from_dict(raw, "x.toml"))


@PROPERTY
@given(st.sampled_from(["lr", "eta", "gamma", "batch_size"]), st.one_of(fragments, adversarial, toml_scalars))
def test_run_config_values_give_a_config_or_one_input_error(key, value):
    from recallkit.empirics.config import parse_config

    base = dict(task="assoc_memory", model="linear", trainer="adamw", N=64, d=8, lr=0.1, steps=4)
    if key in ("eta", "gamma"):
        base = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=64, d=8, L=4, N=100,
                    eta=1.0, gamma=1.0)
    _bounded(lambda: parse_config({**base, key: value}))


def test_the_properties_can_fail():
    """The helper really fails on an escaping exception and on an InputError that is not one line (else every
    property is vacuous)."""
    def refuse(message):
        raise InputError(message)

    with pytest.raises(ZeroDivisionError):
        _bounded(lambda: 1 / 0)
    for message in ("x: first line\nsecond line", ""):
        with pytest.raises(AssertionError):
            _bounded(lambda: refuse(message))
    assert _bounded(lambda: refuse("x: one line")) is None and _bounded(lambda: 3) == 3

"""The one expression language evaluated in floats: theory.expr's NumericExpression, and the
experiment-file and run-config wrappers over it. Hostile and runaway input is a one-line InputError."""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.expr import MAX_DEPTH, NumericExpression, compile_numeric, parse_expression
from recallkit.theory.symbols import VARIABLES

SIZES = ("V", "N", "d", "L", "m", "R")
WHERE = "x.toml: fixed.gamma"


def value(text: str, **env: float) -> float:
    return compile_numeric(text, SIZES, WHERE).evaluate(env)


def refused(text: str, **env: float) -> str:
    with pytest.raises(InputError) as info:
        value(text, **env)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(WHERE + ":"), message
    return message


# ------------------------------------------------------------------------------ floor / ceil


def test_floor_and_ceil_parse_to_sympy_functions():
    N, V = VARIABLES["N"], VARIABLES["V"]
    assert parse_expression("floor(N/16)", VARIABLES) == sp.floor(N / 16)
    assert parse_expression("ceil(V**0.5)", VARIABLES) == sp.ceiling(sp.sqrt(V))
    assert parse_expression("floor(7/2) + ceil(7/2)", VARIABLES) == 7
    assert parse_expression("min(V, N)", VARIABLES) == sp.Min(V, N)
    assert parse_expression("max(V, N)", VARIABLES) == sp.Max(V, N)


def test_floor_and_ceil_evaluate():
    assert value("floor(N/16)", N=3194) == 199
    assert value("ceil(N/16)", N=3194) == 200
    assert value("floor(N/16)", N=3200) == value("ceil(N/16)", N=3200) == 200
    assert value("floor(-1/2)") == -1 and value("ceil(-1/2)") == 0
    assert value("floor(sqrt(2)*1000)") == 1414


def test_floor_of_a_huge_constant_is_not_folded_by_sympy():
    # sympy would evaluate floor(exp(exp(exp(3)))) to ~10**(2.3e8) digits; the parser leaves it alone
    # (how long it takes is measured in benchmarks/bounded_work.py)
    expr = parse_expression("floor(exp(exp(exp(3))))", VARIABLES)
    assert isinstance(expr, sp.floor)
    assert "exp(" in refused("floor(exp(exp(exp(3))))")


# ------------------------------------------------------------------ agreement with the old paths


@pytest.mark.parametrize("text, env", [
    ("V*log(V)", {"V": 512}),
    ("V**1.5", {"V": 300}),
    ("floor(N/16)", {"N": 3194}),
    ("4*d", {"d": 48}),
    ("sqrt(V)", {"V": 256}),
    ("Max(2, floor(V**0.25))", {"V": 1000}),
    ("0.1/sqrt(d)", {"d": 16}),
    ("1000.0*4*d*L**2/(m*(1/V + 1/N))", {"d": 64, "L": 8, "m": 32, "V": 512, "N": 4096}),
    ("4*log(N)", {"N": 3194}),
    ("d**2/3", {"d": 7}),
    ("log(N, 2)", {"N": 1024}),
    ("1e7", {}),
])
def test_numbers_agree_with_sympy_evalf(text, env):
    """The old run-config path: parse_expression with the positive VARIABLES, subs, evalf."""
    expr = parse_expression(text, VARIABLES)
    expected = float(expr.subs({VARIABLES[k]: v for k, v in env.items()}).evalf())
    assert value(text, **env) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("text, env, expected", [
    ("V*log(V)", {"V": 512}, 512 * math.log(512)),
    ("V**1.5", {"V": 300}, 300**1.5),
    ("floor(N/16)", {"N": 3194}, math.floor(3194 / 16)),
    ("N/16", {"N": 3200}, 200.0),
    ("N/3", {"N": 3 * 12345}, 12345.0),
    ("4*d", {"d": 48}, 192.0),
    ("sqrt(V)", {"V": 256}, 16.0),
    ("V**0.5", {"V": 256}, 16.0),
    ("Max(2, floor(V**0.25))", {"V": 1000}, max(2, math.floor(1000**0.25))),
    ("min(V, 3) + max(d, 2)", {"V": 5, "d": 1}, 5.0),
    ("exp(1)", {}, math.e),
    ("-d**2", {"d": 3}, -9.0),
    ("2**3**2", {}, 512.0),
    ("V**-1", {"V": 4}, 0.25),
])
def test_numbers_agree_with_python_floats(text, env, expected):
    """The old experiment-file path: Python float arithmetic on the same text (exact for these)."""
    assert value(text, **env) == expected


def test_symbols_text_and_where():
    expr = compile_numeric("floor(N/16) + V*log(V)", SIZES, "here")
    assert isinstance(expr, NumericExpression)
    assert expr.symbols == {"N", "V"}
    assert expr.text == "floor(N/16) + V*log(V)" and expr.where == "here"
    assert compile_numeric("2*3", SIZES).symbols == frozenset()
    # a function name that is also a declared symbol is the symbol unless it is called
    assert NumericExpression("max*2 + max(1, 2)", ["max"]).evaluate({"max": 5}) == 12


def test_safe_expression_is_the_same_language():
    from recallkit.empirics.experiment import SafeExpression

    expr = SafeExpression("floor(N/16) + Max(d, 2)**2 - log(V) + ceil(1/3) + min(1, 2) + max(0, 1) + exp(0) + sqrt(4)",
                          {"N", "d", "V"}, "here")
    assert expr.symbols == {"N", "d", "V"} and expr.text.startswith("floor") and expr.where == "here"
    assert expr.evaluate({"N": 100, "d": 3, "V": math.e}) == 6 + 9 - 1 + 1 + 1 + 1 + 1 + 2
    with pytest.raises(InputError, match="^here: 'N/d' cannot be evaluated at N=1, d=0: division by zero$"):
        SafeExpression("N/d", {"N", "d"}, "here").evaluate({"N": 1, "d": 0})
    with pytest.raises(InputError, match="^here: symbol 'd' has no value here"):
        SafeExpression("N/d", {"N", "d"}, "here").evaluate({"N": 1})


def test_run_config_batch_size_floors_and_takes_floor():
    from recallkit.empirics.config import AdamConfig, evaluate

    sizes = {"V": 64, "N": 3194, "d": 8, "L": 4}
    plain = AdamConfig(lr=0.01, epochs=1, batch_size="N/16")
    floored = AdamConfig(lr=0.01, epochs=1, batch_size="floor(N/16)")
    assert plain.resolved_batch_size(sizes, 3194) == floored.resolved_batch_size(sizes, 3194) == 199
    assert evaluate("0.1/sqrt(d)", "lr", sizes) == pytest.approx(0.1 / math.sqrt(8))
    with pytest.raises(InputError, match=r"^gamma: 'V\*\*V\*\*V' cannot be evaluated at V=64: "):
        evaluate("V**V**V", "gamma", sizes)
    with pytest.raises(InputError, match=r"^lr: expression '1-1' evaluates to 0.0, expected a positive number$"):
        evaluate("1-1", "lr", sizes)


# ----------------------------------------------------------------------------- bad values


@pytest.mark.parametrize("text, env, fragment", [
    ("V/(d-8)", {"V": 1, "d": 8}, "at V=1, d=8: division by zero"),
    ("log(d-8)", {"d": 8}, "<= 0"),
    ("log(0)", {}, "infinite or undefined"),
    ("sqrt(-1)", {}, "complex"),
    ("(d-9)**0.5", {"d": 8}, "complex"),
    ("1e300*1e300", {}, "overflow"),
    ("exp(V)", {"V": 1000}, "above 1e+300"),
    ("V**d", {"V": 10, "d": 400}, "above 1e+300"),
    ("2**(2**V)", {"V": 64}, "beyond"),
])
def test_values_that_are_not_finite_real_numbers_are_refused(text, env, fragment):
    message = refused(text, **env)
    assert repr(text) in message and fragment in message, message


# ---------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize("text", [
    "__import__('os').system('touch PWNED')",
    "d.__class__",
    "N.real",
    "lambda: 1",
    "(lambda: 1)()",
    "'abc'",
    "[N]",
    "N if N else 1",
    "N < 3",
    "open('PWNED', 'w')",
    "eval('1')",
    "exec('1')",
    "getattr(d, 'x')",
    "floor",
    "floor(d, 2)",
])
def test_hostile_input_is_an_input_error_and_runs_nothing(text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        compile_numeric(text, SIZES, WHERE).evaluate({name: 2 for name in SIZES})
    assert "\n" not in str(info.value) and str(info.value).startswith(WHERE + ":")
    assert not (tmp_path / "PWNED").exists()


# ---------------------------------------------------------------------------- runaway input


# also timed, case by case, by benchmarks/bounded_work.py
RUNAWAY_INPUTS = [
    ("V**V**V", {"V": 1e6}),
    ("V**V**V", {"V": 64}),
    ("V**V**V**V", {"V": 3}),
    ("9**9**9**9", {}),
    ("10**10**10", {}),
    ("+".join(["V"] * 3000), {"V": 2}),
    ("+".join(["V"] * 999), {"V": 2}),
    ("(" * 50 + "V" + ")" * 50, {"V": 2}),
    ("-" * 50 + "V", {"V": 2}),
    ("sqrt(" * 50 + "V" + ")" * 50, {"V": 2}),
    ("exp(exp(exp(exp(V))))", {"V": 3}),
    ("(" + "*".join(["(3**64)**39"] * 100) + ")**64", {}),
    ("((((3**64)**39*log(2))**64*log(2))**64*log(2))**64", {}),
    ("*".join(["(3**64)**40"] * 160), {}),
    ("Max(exp(exp(exp(9))), 2*exp(exp(exp(8))))", {}),
    ("9" * 31, {}),
    ("1e999", {}),
]


@pytest.mark.parametrize("text, env", RUNAWAY_INPUTS)
def test_runaway_input_is_refused_or_evaluated(text, env):
    # a runaway that got through would hang here until pytest's timeout; benchmarks/bounded_work.py times each
    try:
        result = compile_numeric(text, SIZES, WHERE).evaluate(env)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(WHERE + ":")
    else:
        assert math.isfinite(result)


def test_nesting_limit_applies():
    ok = "(" * (MAX_DEPTH // 4) + "V" + ")" * (MAX_DEPTH // 4)  # a parenthesis costs two levels
    assert value(ok, V=3) == 3
    assert "nested deeper" in refused("(" * 50 + "V" + ")" * 50, V=3)
    assert "characters long" in refused("+".join(["V"] * 3000), V=3)


# ----------------------------------------------------------------------- the command line


def test_train_cli_with_a_runaway_gamma_is_one_line_exit_2():
    """It used to climb past 4 GB in sympy; now the guarded float walk refuses it at once."""
    script = Path(sys.executable).parent / "recallkit"
    command = [str(script)] if script.exists() else ([shutil.which("recallkit")] if shutil.which("recallkit") else None)
    if command is None:
        command = [sys.executable, "-m", "recallkit.cli"]
    args = ["train", "token_retrieval", "--model", "attention-only", "--trainer", "three_step",
            "--set", "V=64", "--set", "d=8", "--set", "L=4", "--set", "N=300", "--set", "eta=1",
            "--set", "gamma=V**V**V"]

    def limit_memory():  # 2 GiB of address space: a huge integer would fail, not swap
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run(command + args, capture_output=True, text=True, env=env, timeout=120,
                         preexec_fn=limit_memory if sys.platform.startswith("linux") else None)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "gamma" in lines[0] and "V**V**V" in lines[0]

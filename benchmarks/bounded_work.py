"""How long the inputs the tests call hostile or runaway take to be refused (or evaluated), each next to a
plain input of the same kind measured in the same run.

The tests check what happens to these inputs (a value, or a one-line InputError); how long that takes is
measured here instead, because a wall-clock bound inside a test fails on a loaded machine and passes on a
fast one whatever the code does. A ratio near 1 means the guard refuses a hostile input as cheaply as the
parser handles a plain one; a ratio in the thousands means real work was done.

Groups (the tests each one comes from):
- ``numeric``: tests/unit/theory/test_numeric_expr.py's runaway inputs and floor(exp(exp(exp(3)))), through
  ``compile_numeric(...).evaluate``; baseline ``V*log(V)`` at V = 512.
- ``parse``: the extremes of tests/unit/theory/test_properties.py's adversarial strategies, through
  ``parse_expression`` and ``compile_numeric(...).evaluate`` at sizes 10^7; baseline ``V*log(V)``.
- ``regions``: tests/unit/theory/test_theory_regions.py's pack of 100 random noise terms through
  ``compute_regions``; baseline the same generator with 3 terms.
- ``cli``: ``recallkit train ... --set gamma=V**V**V`` (tests/unit/theory/test_numeric_expr.py); baseline the
  same command with ``gamma=V**`` (a syntax error, refused by the same path). CPU time of the child process.

Time is CPU time (``time.process_time``, or ``RUSAGE_CHILDREN`` for the command line), not wall time, which on
a shared machine mostly measures waiting; best of ``repeats``. A fast call is repeated until one measurement
takes at least 20 ms, and the time per call is reported.
Run: python benchmarks/bounded_work.py [repeats]
"""
from __future__ import annotations

import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from recallkit import theory
from recallkit.theory.errors import InputError
from recallkit.theory.expr import compile_numeric, parse_expression
from recallkit.theory.symbols import VARIABLES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the tests' own inputs
from tests.unit.theory.test_numeric_expr import RUNAWAY_INPUTS  # noqa: E402

__all__ = ["main"]

SIZES = ("V", "N", "d", "L", "m", "R")
WHERE = "x.toml: fixed.gamma"
MIN_MEASURE_S = 0.02

RUNAWAY = [*RUNAWAY_INPUTS, ("floor(exp(exp(exp(3))))", {})]


def _nested_power(depth: int, base: str) -> str:
    text = base
    for _ in range(depth):
        text = f"{base}**({text})"
    return text


# the largest draw of each adversarial strategy in test_properties.py
ADVERSARIAL = [
    _nested_power(80, "V"),
    "+".join(["V"] * 3000),
    "(" * 200 + "V" + ")" * 200,
    "9" * 50 + "**" + "9" * 50,
    "exp(" * 30 + "V" + ")" * 30,
]
PROPERTY_SYMBOLS = {name: VARIABLES[name] for name in ("V", "N", "d", "L", "m")}
PROPERTY_SIZES = {name: 10**7 for name in PROPERTY_SYMBOLS}


def _refused_or_value(call):
    try:
        return call()
    except InputError:
        return None


def _cpu_per_call(call, repeats: int) -> float:
    """Best of ``repeats`` CPU times per call, each over enough calls to take MIN_MEASURE_S."""
    calls, best = 1, float("inf")
    for _ in range(repeats):
        while True:
            started = time.process_time()
            for _ in range(calls):
                _refused_or_value(call)
            spent = time.process_time() - started
            if spent >= MIN_MEASURE_S or calls >= 1 << 16:
                break
            calls *= 4
        best = min(best, spent / calls)
    return best


def _child_cpu(args: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(args, capture_output=True, text=True, timeout=300)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def _many_terms(n: int) -> dict:
    rng = random.Random(0)
    terms = [{"name": "signal", "role": "signal", "expr": "d**2", "provenance": "derived-here"}]
    for i in range(n):
        powers = (rng.randint(0, 4), rng.randint(0, 3), rng.randint(0, 1), rng.randint(1, 2))
        terms.append({"name": f"n{i}", "role": "noise", "provenance": "derived-here",
                      "expr": "V**{}*L**{}*d**{}/N**{}".format(*powers)})
    return {"pack": {"name": "big", "title": "t", "reference": "r", "variables": ["V", "N", "d", "L"], "base": "V",
                     "size": "d", "param_count": "d**2"},
            "terms": terms,
            "defaults": {"scaling": "N=V**a, L=V**c", "axes": ["a", "c"], "box": {"a": [1, 3], "c": [0, 1]}}}


def _show(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else f"{text[:limit - 12]}... ({len(text)} chars)"


def _report(group: str, label: str, seconds: float, baseline: float) -> None:
    print(f"{group:8s} {label:72s} {seconds * 1e3:10.3f} ms CPU  ratio {seconds / baseline:9.1f}")


def main(repeats: int = 3) -> None:
    print(f"CPU time per call, best of {repeats}; ratio against the group's baseline measured just before")

    plain = _cpu_per_call(lambda: compile_numeric("V*log(V)", SIZES, WHERE).evaluate({"V": 512}), repeats)
    _report("numeric", "baseline V*log(V) at V=512", plain, plain)
    for text, env in RUNAWAY:
        spent = _cpu_per_call(lambda: compile_numeric(text, SIZES, WHERE).evaluate(env), repeats)
        _report("numeric", _show(text) + (f" at {env}" if env else ""), spent, plain)

    plain = _cpu_per_call(lambda: parse_expression("V*log(V)", PROPERTY_SYMBOLS, where="x"), repeats)
    _report("parse", "baseline parse_expression V*log(V)", plain, plain)
    for text in ADVERSARIAL:
        spent = _cpu_per_call(lambda: parse_expression(text, PROPERTY_SYMBOLS, where="x"), repeats)
        _report("parse", "parse_expression " + _show(text, 40), spent, plain)
    plain = _cpu_per_call(lambda: compile_numeric("V*log(V)", tuple(PROPERTY_SYMBOLS), where="x")
                          .evaluate(PROPERTY_SIZES), repeats)
    _report("parse", "baseline evaluate V*log(V) at sizes 10^7", plain, plain)
    for text in ADVERSARIAL:
        spent = _cpu_per_call(lambda: compile_numeric(text, tuple(PROPERTY_SYMBOLS), where="x")
                              .evaluate(PROPERTY_SIZES), repeats)
        _report("parse", "evaluate " + _show(text, 48), spent, plain)

    small, big = (theory.pack_from_dict(_many_terms(n), "big.toml") for n in (3, 100))
    plain = _cpu_per_call(lambda: theory.compute_regions(small), repeats)
    _report("regions", "baseline compute_regions, 3 noise terms", plain, plain)
    _report("regions", "compute_regions, 100 noise terms",
            _cpu_per_call(lambda: theory.compute_regions(big), repeats), plain)

    script = Path(sys.executable).parent / "recallkit"
    command = [str(script)] if script.exists() else [shutil.which("recallkit") or "recallkit"]
    train = command + ["train", "token_retrieval", "--model", "attention-only", "--trainer", "three_step",
                       "--set", "V=64", "--set", "d=8", "--set", "L=4", "--set", "N=300", "--set", "eta=1"]
    plain = _child_cpu(train + ["--set", "gamma=V**"], repeats)
    _report("cli", "baseline recallkit train --set gamma=V** (refused)", plain, plain)
    _report("cli", "recallkit train --set gamma=V**V**V (refused)", _child_cpu(train + ["--set", "gamma=V**V**V"],
                                                                                repeats), plain)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)

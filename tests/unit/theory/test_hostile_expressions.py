"""Hostile packs and expressions: each is refused by one InputError line naming the file, the field and what
was wrong, before it can overflow, recurse, print terminal escapes or run sympy for minutes."""
from __future__ import annotations

import re
import signal
import threading

import pytest
import sympy as sp
from recallkit.theory.errors import InputError
from recallkit.theory.expr import parse_expression, parse_linear_constraints
from recallkit.theory.symbols import EXPONENTS, VARIABLES, L, N, V

from recallkit import theory
from tests.pack_texts import MINIMAL_PACK

GOOD = MINIMAL_PACK
WHERE = "my.toml: terms[1].expr"


def write(tmp_path, text: str):
    path = tmp_path / "mine.toml"
    path.write_text(text, encoding="utf-8")
    return path


def one_line_error(call) -> str:
    with pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert message and "\n" not in message, message
    return message


def load_error(tmp_path, text: str) -> str:
    path = write(tmp_path, text)
    message = one_line_error(lambda: theory.load_pack(path))
    assert message.startswith(f"{path}: "), message
    return message


def with_term(expr: str, constants: str = "") -> str:
    text = GOOD.replace('"V*L*log(V)"', f'"{expr}"')
    return text.replace('base = "V"', f'base = "V"\nconstants = [{constants}]') if constants else text


def parse(text: str) -> sp.Expr:
    return parse_expression(text, VARIABLES, WHERE)


# ------------------------------------------------------------------------------- exp towers


@pytest.mark.parametrize("term", ["exp(exp(exp(exp(9))))", "V*L*floor(exp(exp(exp(3))))"])
def test_a_tower_of_numbers_in_a_pack_is_refused_naming_field_and_expression(tmp_path, term):
    pack = theory.load_pack(write(tmp_path, with_term(term)))  # the parser builds it without evaluating it
    message = one_line_error(lambda: theory.predict(pack, "N=V, L=V"))
    assert "terms[1].expr: 'exp(exp(exp(" in message and "cannot be computed" in message, message
    assert "above 1e+300" in message, message


def test_a_long_expression_is_shortened_in_the_message(tmp_path):
    text = "exp(" + "+".join(f"exp(exp({i}))" for i in range(2, 40)) + ")*V"
    pack = theory.load_pack(write(tmp_path, with_term(text)))
    message = one_line_error(lambda: theory.compute_regions(pack, "N=V**a, L=V", "a"))
    assert "terms[1].expr: 'exp(exp(exp(2)) + exp(exp(3))" in message and "...'" in message, message
    assert len(message) < len(text), message


@pytest.mark.parametrize("term, scaling, shown", [
    ("exp(exp(exp(exp(p))))", "N=V, L=V, p=9", "'exp(exp(exp(exp(p))))' at p=9"),
    ("V*L*floor(exp(exp(exp(p))))", "N=V, L=V, p=3", "'exp(exp(exp(p)))' at p=3"),
    ("V*L*p**p**p", "N=V, L=V, p=9", "'p**(p**p)' at p=9"),
    ("V*L*h**h", "N=V, L=V, p=9, h=p**p**p", "'h**h' at h=p**(p**p)"),
], ids=["exp-tower", "floor-exp-tower", "power-tower", "tower-in-the-scaling"])
def test_a_tower_reached_through_the_scaling_is_refused_before_sympy_computes_it(tmp_path, term, scaling, shown):
    pack = theory.load_pack(write(tmp_path, with_term(term, '"p", "h"')))
    message = one_line_error(lambda: theory.predict(pack, scaling))
    assert f"terms[1].expr: {shown} cannot be computed" in message, message


def test_moderate_numbers_still_compute(tmp_path):
    pack = theory.load_pack(write(tmp_path, with_term("exp(690)*exp(-exp(9))*2**0.5*V*L*log(V)")))
    prediction = theory.predict(pack, "N=V**2, L=V")  # d**2 >= c V**2 log(V): d**2 ~ V**2 log(V)
    assert (prediction.slope, prediction.log_power) == (2, 1)


# ------------------------------------------------------------------------------- TOML nesting


DEPTH = 100_000


@pytest.mark.parametrize("document", [
    "x = " + "[" * DEPTH + "]" * DEPTH + "\n",
    "x = " + "{a=" * DEPTH + "1" + "}" * DEPTH + "\n",
    "[pack]\ntitle." + ".".join(["a"] * DEPTH) + " = 1\n",
    "[" + ".".join(["a"] * DEPTH) + "]\nx = 1\n",
], ids=["arrays", "inline-tables", "dotted-key", "table-header"])
def test_deeply_nested_toml_is_refused_before_parsing(tmp_path, document):
    message = load_error(tmp_path, document)
    assert "nested deeper than" in message and re.search(r"at line \d", message), message


def test_nesting_inside_strings_and_comments_does_not_count(tmp_path):
    text = GOOD.replace('title = "a plain title"', 'title = "' + "[{" * 200 + "a." * 200 + '"  # ' + "[" * 200)
    assert theory.load_pack(write(tmp_path, text)).title.startswith("[{[{")


# ------------------------------------------------------------------------------- log base and unicode


@pytest.mark.parametrize("text", ["log(N, 1)", "log(N, 1.0)", "log(N, 2 - 1)", "log(N, 0)", "log(N, -2)"])
def test_log_to_a_base_that_is_not_a_positive_number_other_than_one_is_refused(text):
    message = one_line_error(lambda: parse(text))
    assert message.startswith(WHERE + ":") and "base" in message, message


def test_log_to_a_base_one_in_a_pack_is_refused(tmp_path):
    message = load_error(tmp_path, with_term("V*log(L, 1)"))
    assert "terms[1].expr" in message and "base" in message


def test_logs_to_a_proper_base_still_parse():
    assert parse("log(N, 2)") == sp.log(N) / sp.log(2)
    assert parse("log(N, V)") == sp.log(N) / sp.log(V)


@pytest.mark.parametrize("char", ["\u00a0", "\u2003", "\u3000", "\u200b", "\u2028", "\x0b", "\x0c", "\uff12",
                                  "\u0663", "\x1b"])
def test_unusual_whitespace_and_unicode_are_refused_naming_character_and_position(char):
    message = one_line_error(lambda: parse("V*L" + char + "*log(V)"))
    assert message.startswith(WHERE + ":") and f"U+{ord(char):04X}" in message and "position 3" in message, message
    assert char not in message


def test_unicode_in_a_pack_expression_is_refused(tmp_path):
    message = load_error(tmp_path, with_term("V*L\u00a0*log(V)"))
    assert "terms[1].expr" in message and "U+00A0" in message and "position 3" in message


def test_ascii_spaces_tabs_and_newlines_still_separate_tokens():
    assert parse("V *\tL\n* log( V )") == V * L * sp.log(V)


# ------------------------------------------------------------------------------- control characters in text


HEAD, TERM = 'title = "a plain title"', 'expr = "V*L*log(V)"'


@pytest.mark.parametrize("field, place, line", [
    ("pack.title", HEAD, 'title = "\\u001b[31mRED"'),
    ("pack.reference", HEAD, 'reference = "see \\u001b]0;pwned\\u0007"'),
    ("pack.description", HEAD, 'description = "x\\u009b31m"'),
    ("terms[1].note", TERM, 'note = "\\u202eevil"'),
    ("terms[1].reference", TERM, 'reference = "\\r overwrite"'),
    ("facts[0].text", None, '[[facts]]\ntext = "\\u001b[2J"\nprovenance = "anchor"'),
    ("defaults.scaling", None, '[defaults]\nscaling = "N=V\\u001b[8m"'),
])
def test_control_characters_in_pack_text_are_refused(tmp_path, field, place, line):
    # a field of [pack] takes the title's line, a field of the term goes below its expression, a table at the end
    if place is None:
        text = f"{GOOD}\n{line}\n"
    else:
        text = GOOD.replace(place, line if place == HEAD else f"{place}\n{line}")
    message = load_error(tmp_path, text)
    assert field in message and "U+" in message and "control" in message, message
    assert not any(ord(ch) < 32 or 0x7f <= ord(ch) < 0xa0 or ch == "\u202e" for ch in message), repr(message)


def test_printable_text_with_newlines_tabs_and_unicode_letters_still_loads(tmp_path):
    text = GOOD.replace('title = "a plain title"', 'title = "Théorème 2 §3"\ndescription = "two\\nlines\\tand a tab"')
    pack = theory.load_pack(write(tmp_path, text))
    assert pack.title == "Théorème 2 §3" and pack.description == "two\nlines\tand a tab"


# ------------------------------------------------------------------------------- runaway symbolic work


def test_a_huge_power_of_a_sum_in_a_constraint_is_refused_at_once():
    message = one_line_error(lambda: parse_linear_constraints("(a+c+1)**10000 >= 1", EXPONENTS, "--domain[0]"))
    assert message.startswith("--domain[0]:") and "(a+c+1)**10000" in message and "terms" in message, message


def test_an_expand_bomb_is_refused_at_parse_time():
    message = one_line_error(lambda: parse_expression("(a+b+c+k+q+r)**30", EXPONENTS, "--scaling: N"))
    assert message.startswith("--scaling: N:") and "terms" in message, message


def test_an_expand_bomb_in_a_pack_domain_is_refused(tmp_path):
    message = load_error(tmp_path, GOOD.replace('"a >= 1"', '"(a+b+c+k+q+r)**30 >= 0"'))
    assert "pack.domain[0]" in message and "terms" in message


def test_small_powers_of_sums_still_expand():
    a, c = EXPONENTS["a"], EXPONENTS["c"]
    assert parse_linear_constraints("(a+c)**2 - a**2 - c**2 - 2*a*c + a >= 1", EXPONENTS, "x") == [(a - 1, ">=")]


def many_terms(count: int) -> str:
    """A pack of ``count`` noise terms whose regions take seconds to compute (their boundaries all differ)."""
    noise = "".join(f'\n[[terms]]\nname = "n{i}"\nrole = "noise"\nprovenance = "derived-here"\n'
                    f'expr = "V**{i % 5}*L**{i % 4}*d**{i % 2}/N**{1 + i % 3}"\n' for i in range(count))
    return GOOD.split("\n[[terms]]\nname = \"crosstalk\"")[0] + noise + (
        '\n[defaults]\nscaling = "N=V**a, L=V**c"\naxes = ["a", "c"]\nbox = { a = [1, 3], c = [0, 1] }\n')


def test_symbolic_work_past_the_budget_stops_with_one_line(tmp_path, monkeypatch):
    pack = theory.load_pack(write(tmp_path, many_terms(100)))
    monkeypatch.setenv("RECALLKIT_SYMBOLIC_SECONDS", "0.2")
    message = one_line_error(lambda: theory.compute_regions(pack))
    assert "0.2 s of CPU time" in message and "RECALLKIT_SYMBOLIC_SECONDS" in message, message
    monkeypatch.delenv("RECALLKIT_SYMBOLIC_SECONDS")
    assert theory.compute_regions(pack).regions  # the same work within the default budget


def test_the_budget_must_be_a_positive_number(monkeypatch):
    monkeypatch.setenv("RECALLKIT_SYMBOLIC_SECONDS", "soon")
    message = one_line_error(lambda: theory.predict(theory.load_pack("example"), "N=V*log(V), L=V**0.5"))
    assert message.startswith("RECALLKIT_SYMBOLIC_SECONDS:") and "'soon'" in message


def test_the_budget_leaves_no_timer_or_handler_behind():
    before = signal.getsignal(signal.SIGPROF)
    prediction = theory.predict(theory.load_pack("example"), "N=V*log(V), L=V**0.5")
    assert prediction.slope == 2
    assert signal.getsignal(signal.SIGPROF) == before
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_symbolic_work_outside_the_main_thread_still_runs():
    results = []
    worker = threading.Thread(target=lambda: results.append(
        theory.predict(theory.load_pack("example"), "N=V*log(V), L=V**0.5").slope))
    worker.start()
    worker.join(120)
    assert results == [2]

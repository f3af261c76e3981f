"""Hostile packs and flags through the installed ``recallkit theory`` command: exit 2 and exactly one line on
stderr that names the file, field or flag and what was wrong; no traceback, no terminal escape echoed, no
runaway computation."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.pack_texts import MINIMAL_PACK

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")

GOOD = MINIMAL_PACK


def with_term(expr: str, constants: str = "") -> str:
    text = GOOD.replace('"V*L*log(V)"', f'"{expr}"')
    return text.replace('base = "V"', f'base = "V"\nconstants = [{constants}]') if constants else text


def refused(tmp_path, args: list[str], text: str | None = None, env: dict | None = None) -> str:
    """Run ``recallkit theory ARGS`` (with mine.toml holding ``text``); the one stderr line after 'error: '."""
    assert RECALLKIT, "the recallkit command is not installed"
    if text is not None:
        (tmp_path / "mine.toml").write_text(text, encoding="utf-8")
    result = subprocess.run([RECALLKIT, "theory", *args], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, env={**os.environ, **(env or {})})
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and result.stdout == "", result.stderr[-2000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-2000:]
    return lines[0][len("error: "):]


@pytest.mark.parametrize("args", [["predict", "mine.toml", "--scaling", "N=V, L=V"],
                                  ["regions", "mine.toml", "--scaling", "N=V**a, L=V", "--axes", "a"]])
def test_an_exp_tower_is_one_line_naming_file_field_and_expression(tmp_path, args):
    line = refused(tmp_path, args, with_term("exp(exp(exp(exp(9))))"))
    assert line.startswith("mine.toml: terms[1].expr: 'exp(exp(exp(exp(9))))' cannot be computed"), line


def test_an_exp_tower_through_the_scaling_is_one_line(tmp_path):
    line = refused(tmp_path, ["predict", "mine.toml", "--scaling", "N=V, L=V, p=9"],
                   with_term("exp(exp(exp(exp(p))))", '"p"'))
    assert line.startswith("mine.toml: terms[1].expr: 'exp(exp(exp(exp(p))))' at p=9 cannot be computed"), line


@pytest.mark.parametrize("document", [
    "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "x = " + "{a=" * 100_000 + "1" + "}" * 100_000 + "\n",
], ids=["arrays", "inline-tables"])
def test_deeply_nested_toml_is_one_line_naming_the_file(tmp_path, document):
    line = refused(tmp_path, ["show", "mine.toml"], document)
    assert line.startswith("mine.toml: malformed TOML:") and "nested deeper than" in line, line


def test_log_to_base_one_is_one_line(tmp_path):
    line = refused(tmp_path, ["show", "mine.toml"], with_term("V*log(L, 1)"))
    assert line.startswith("mine.toml: terms[1].expr:") and "base" in line, line


def test_a_no_break_space_is_one_line_naming_the_character_and_position(tmp_path):
    line = refused(tmp_path, ["show", "mine.toml"], with_term("V*L\u00a0*log(V)"))
    assert line.startswith("mine.toml: terms[1].expr:") and "U+00A0" in line and "position 3" in line, line


@pytest.mark.parametrize("args", [["show", "mine.toml"],
                                  ["regions", "mine.toml", "--scaling", "N=V**a, L=V**0.5", "--axes", "a"]])
def test_an_escape_sequence_in_the_title_is_refused_not_printed(tmp_path, args):
    text = GOOD.replace('title = "a plain title"', 'title = "\\u001b[31mRED\\u001b[0m"')
    line = refused(tmp_path, args, text)
    assert line.startswith("mine.toml: pack.title:") and "U+001B" in line and "\x1b" not in line, line


def test_a_huge_power_in_a_domain_flag_stops_at_once(tmp_path):
    line = refused(tmp_path, ["regions", "example", "--domain", "(a+c+1)**10000 >= 1"])
    assert line.startswith("--domain[0]:") and "(a+c+1)**10000" in line and "terms" in line, line


def test_an_expand_bomb_in_a_pack_is_one_line(tmp_path):
    line = refused(tmp_path, ["show", "mine.toml"], GOOD.replace('"a >= 1"', '"(a+b+c+k+q+r)**30 >= 0"'))
    assert line.startswith("mine.toml: pack.domain[0]:") and "terms" in line, line


def test_a_floor_tower_through_the_scaling_is_one_line_naming_the_term(tmp_path):
    line = refused(tmp_path, ["predict", "mine.toml", "--scaling", "N=V, L=V, p=3"],
                   with_term("V*L*floor(exp(exp(exp(p))))", '"p"'))
    assert line.startswith("mine.toml: terms[1].expr: 'exp(exp(exp(p)))' at p=3 cannot be computed"), line


def test_symbolic_work_past_the_budget_is_one_line(tmp_path):
    noise = "".join(f'\n[[terms]]\nname = "n{i}"\nrole = "noise"\nprovenance = "derived-here"\n'
                    f'expr = "V**{i % 5}*L**{i % 4}*d**{i % 2}/N**{1 + i % 3}"\n' for i in range(100))
    text = GOOD.split("\n[[terms]]\nname = \"crosstalk\"")[0] + noise
    line = refused(tmp_path, ["regions", "mine.toml", "--scaling", "N=V**a, L=V**c", "--axes", "a,c"], text,
                   env={"RECALLKIT_SYMBOLIC_SECONDS": "0.2"})
    assert line.startswith("mine.toml: ") and "0.2 s of CPU time" in line and "RECALLKIT_SYMBOLIC_SECONDS" in line, line

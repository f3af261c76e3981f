"""``recallkit.env_check``: one table of every ``RECALLKIT_*`` variable the code reads, each checked once when the
command line starts; a bad value is one line naming the variable and what was expected."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from recallkit import env_check
from recallkit.theory.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("theory", "empirics", "compare", "reports", "recallkit", "systems")


def _variables_read() -> set[str]:
    """Every RECALLKIT_* name the shipped code mentions (benchmarks and tests aside)."""
    found: set[str] = set()
    for top in SOURCES:
        for path in (ROOT / top).rglob("*.py"):
            found |= set(re.findall(r"\bRECALLKIT_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    return found


def test_the_table_names_every_variable_the_code_reads():
    missing = _variables_read() - set(env_check.VARIABLES)
    assert not missing, f"RECALLKIT_* variables read but not checked at start: {sorted(missing)}"
    assert "RECALLKIT_CACHE_KEY_FILE" in env_check.VARIABLES


def test_unset_and_empty_values_are_fine(tmp_path):
    assert env_check.problems({}) == []
    assert env_check.problems({name: "" for name in env_check.VARIABLES}) == []


def test_good_values_are_fine(tmp_path):
    key = tmp_path / "key"
    key.write_text("secret")
    good = {"RECALLKIT_CACHE": str(tmp_path / "cache"), "RECALLKIT_CACHE_MB": "0.5", "RECALLKIT_KEEP_HEAP": "1",
            "RECALLKIT_MAX_COST": "inf", "RECALLKIT_MAX_RUNS": "10", "RECALLKIT_REPORT_JOBS": "1",
            "RECALLKIT_STORE": str(tmp_path / "s.db"), "RECALLKIT_SYMBOLIC_SECONDS": "0.2",
            "RECALLKIT_CACHE_KEY_FILE": str(key)}
    assert env_check.problems(good) == []
    assert env_check.problems({"RECALLKIT_CACHE": "OFF", "RECALLKIT_MAX_COST": "30m"}) == []


@pytest.mark.parametrize("name,value,expected", [
    ("RECALLKIT_CACHE_MB", "inf", "a finite number >= 0"),
    ("RECALLKIT_CACHE_MB", "nan", "a finite number >= 0"),
    ("RECALLKIT_CACHE_MB", "1e308", "a finite number >= 0"),  # finite, but not once in bytes
    ("RECALLKIT_KEEP_HEAP", "true", "1"),
    ("RECALLKIT_CACHE_STRICT", "yes", "1 (a value"),
    ("RECALLKIT_MAX_COST", "0h", "duration"),
    ("RECALLKIT_MAX_RUNS", "-3", "positive integer"),
    ("RECALLKIT_MAX_RUNS", "\u0663", "positive integer"),  # a digit to str.isdigit, not to int() everywhere
    ("RECALLKIT_REPORT_JOBS", "many", "an integer from 1 to"),
    ("RECALLKIT_SYMBOLIC_SECONDS", "inf", "positive number"),
    ("RECALLKIT_SYMBOLIC_SECONDS", "-1", "positive number"),
])
def test_a_bad_value_is_one_line_naming_the_variable(name, value, expected):
    found = env_check.problems({name: value})
    assert len(found) == 1, found
    line = found[0]
    assert line.startswith(f"{name}: expected ") and expected in line and repr(value) in line, line
    assert "\n" not in line
    with pytest.raises(InputError, match=re.escape(name)):
        env_check.check_environment({name: value})


def test_paths_are_checked_for_what_they_must_be(tmp_path):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert env_check.problems({"RECALLKIT_CACHE": str(a_file)})  # a file where the cache's folder goes
    assert env_check.problems({"RECALLKIT_STORE": str(tmp_path)})  # a folder where the store's file goes
    assert env_check.problems({"RECALLKIT_CACHE_KEY_FILE": str(tmp_path)})  # a folder, not a file
    assert env_check.problems({"RECALLKIT_CACHE_KEY_FILE": str(a_file / "key")})  # cannot be made under a file
    assert env_check.problems({"RECALLKIT_CACHE_KEY_FILE": str(tmp_path / "new" / "key")}) == []  # made on first use
    assert env_check.problems({"RECALLKIT_CACHE": str(a_file / "cache")})
    assert env_check.problems({"RECALLKIT_CACHE_KEY_FILE": "/dev/null"})  # a device, not a file
    assert env_check.problems({"RECALLKIT_CACHE_KEY_FILE": str(a_file)}) == []


def test_the_first_bad_variable_is_the_error_and_every_one_is_listed():
    environ = {"RECALLKIT_MAX_RUNS": "x", "RECALLKIT_CACHE_MB": "inf"}
    assert len(env_check.problems(environ)) == 2
    with pytest.raises(InputError) as raised:
        env_check.check_environment(environ)
    assert str(raised.value).startswith(next(iter(name for name in env_check.VARIABLES if name in environ)))

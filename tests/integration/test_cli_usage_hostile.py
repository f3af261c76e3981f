"""Careless and hostile command lines and environments, through the installed ``recallkit`` command: each ends
in one line on stderr naming the flag or variable and what was expected, with exit 2 and no traceback; the
help is printed once, its paragraphs re-flowed and no metavar after a flag. Every command here stops at
argument or environment checks, before anything is trained or drawn."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from recallkit.cli_sweep import MAX_PROCESSES, MAX_THREADS

pytestmark = pytest.mark.integration

__all__: list[str] = []

RECALLKIT = shutil.which("recallkit")
# the variables under test are set per test only; the page cache is off so that nothing is written outside tmp_path
ENV = {**{k: v for k, v in os.environ.items() if k not in ("SOURCE_DATE_EPOCH", "RECALLKIT_REPORT_JOBS", "COLUMNS")},
       "MPLBACKEND": "Agg", "RECALLKIT_CACHE": "off", "PYTHONUNBUFFERED": "1"}
HUGE = "99999999999999999999"  # more than a C long: torch.set_num_threads raised OverflowError on it


def run(args: list[str], cwd, env: dict | None = None) -> subprocess.CompletedProcess:
    assert RECALLKIT, "the recallkit console script is not installed"
    return subprocess.run([RECALLKIT, *args], cwd=cwd, env={**ENV, **(env or {})}, capture_output=True, text=True,
                          timeout=60)


def one_line_error(result: subprocess.CompletedProcess, *expected: str) -> str:
    """The one stderr line of a bad-input exit (2, no traceback), checked to contain each of ``expected``."""
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr + result.stdout, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith("error: "), lines[0]
    missing = [text for text in expected if text not in lines[0]]
    assert not missing, (missing, lines[0])
    return lines[0]


# The count must be refused before anything else is looked at. Beside HUGE the rest of the line is valid or names
# no experiment (unchecked, HUGE reached torch.set_num_threads: an OverflowError before any thread starts);
# 100000 comes with another bad argument, so that a command which does not check it stops there instead of
# starting 100000 threads on the machine running the tests.
@pytest.mark.parametrize("args", [
    ["train", "assoc_memory", "--model", "linear", "--trainer", "adam", "--threads", HUGE],
    ["probe", "no_such_system", "--no-store", "--threads", HUGE],
    ["sweep", "no_such_experiment", "--threads", HUGE],
    ["train", "assoc_memory", "--model", "linear", "--trainer", "adam", "--set", "nokey", "--threads", "100000"],
    ["sweep", "no_such_experiment", "--threads", "100000"],
    ["report", "--threads", "100000", "--fail-on", "maybe"],
], ids=lambda a: " ".join(a))
def test_threads_beyond_the_cap_is_one_line(args, tmp_path):
    one_line_error(run(args, tmp_path), "--threads", str(MAX_THREADS))


@pytest.mark.parametrize("args, flag", [
    (["sweep", "no_such_experiment", "--workers", "100000"], "--workers"),
    (["report", "--workers", "100000", "--fail-on", "maybe"], "--workers"),
    (["report", "--jobs", "100000", "--fail-on", "maybe"], "--jobs"),
    (["sweep", "no_such_experiment", "--dask-local", "100000"], "--dask-local"),
], ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_process_counts_beyond_the_cap_are_one_line(args, flag, tmp_path):
    one_line_error(run(args, tmp_path), flag, str(MAX_PROCESSES))


def test_the_caps_themselves_are_allowed(tmp_path):
    """The largest counts pass the check: the command goes on to the experiment, which does not exist."""
    result = run(["sweep", "no_such_experiment", "--threads", str(MAX_THREADS), "--workers", str(MAX_PROCESSES)],
                 tmp_path)
    one_line_error(result, "no_such_experiment")
    assert "--threads" not in result.stderr and "--workers" not in result.stderr


@pytest.mark.parametrize("args, presets", [
    (["report"], ["quick", "paper"]),  # the shipped set: every experiment failed alone and a report of failures came out
    (["report", "assoc_memory_linear"], ["medium", "paper", "quick"]),
], ids=lambda a: " ".join(a))
def test_report_preset_no_experiment_has_is_one_line(args, presets, tmp_path):
    result = run([*args, "--preset", "nosuch", "--out", str(tmp_path / "out"), "--store", str(tmp_path / "s.db")],
                 tmp_path)
    line = one_line_error(result, "--preset", "'nosuch'", *presets)
    assert not (tmp_path / "out").exists(), line


@pytest.mark.parametrize("command", ["sweep", "fit", "results"])
def test_search_preset_that_does_not_exist_is_one_line(command, tmp_path):
    one_line_error(run([command, "assoc_memory_linear", "--preset", "nosuch", "--store", str(tmp_path / "s.db")],
                       tmp_path), "'nosuch'", "medium, paper, quick")


@pytest.mark.parametrize("args, expected", [
    (["--version", "extra"], "'extra'"),
    (["--version", "train"], "--version"),
])
def test_version_with_more_arguments_is_a_usage_error(args, expected, tmp_path):
    one_line_error(run(args, tmp_path), expected)


def test_version_alone_prints_it(tmp_path):
    from recallkit import __version__

    result = run(["--version"], tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"recallkit {__version__}\n", "")


def test_no_arguments_prints_the_help_once(tmp_path):
    result = run([], tmp_path)
    one_line_error(result, "no command given")
    assert result.stdout.count("Usage: recallkit") == 1, result.stdout


def _description_paragraphs(help_text: str) -> list[list[str]]:
    """The paragraphs of a command's description in its --help: the lines after the usage block and before the
    first panel or section (arguments, options), split at blank lines."""
    lines = [line.rstrip() for line in help_text.splitlines()]
    start = next(i for i, line in enumerate(lines) if "Usage:" in line)
    start = next(i for i in range(start, len(lines)) if not lines[i].strip())  # the usage may take two lines
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:]:
        if re.match(r"\s*(╭|Arguments|Options)", line):
            break
        if line.strip():
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def _short_breaks(paragraphs: list[list[str]]) -> list[tuple[str, str]]:
    """(line, next word) wherever a paragraph's line ends although the next line's first word would still have
    fitted: a filled (re-flowed) paragraph has none; a docstring's own line breaks, kept, leave them."""
    width = max(len(line) for p in paragraphs for line in p)
    return [(a.strip(), b.split()[0]) for p in paragraphs for a, b in zip(p, p[1:])
            if len(a) + 1 + len(b.split()[0]) <= width]


@pytest.mark.parametrize("command", ["report", "fit", "probe"])
def test_help_paragraphs_are_reflowed(command, tmp_path):
    result = run([command, "--help"], tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    paragraphs = _description_paragraphs(result.stdout)
    assert sum(len(p) for p in paragraphs) >= 3, result.stdout  # a description that wraps, as the docstrings do
    assert max(len(line) for p in paragraphs for line in p) <= 80
    assert not _short_breaks(paragraphs), _short_breaks(paragraphs)


def test_command_list_is_reflowed(tmp_path):
    """In ``recallkit --help`` each command's summary is filled too (fit's, probe's and diff's kept the breaks
    of their docstrings)."""
    result = run(["--help"], tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = [line.strip("│ ").rstrip() for line in result.stdout.splitlines()]
    start = next(i for i, line in enumerate(lines) if "Commands" in line)
    names = ("train", "sweep", "results", "fit", "report", "figures", "probe", "diff", "theory")
    entries: list[list[str]] = []
    for raw, line in zip(result.stdout.splitlines()[start + 1:], lines[start + 1:]):
        if not line or line.startswith("╰"):
            continue
        if line.split()[0] in names:
            entries.append([raw.strip("│").rstrip(" │").rstrip()])
        elif entries:
            entries[-1].append(raw.strip("│").rstrip(" │").rstrip())
    assert len(entries) == len(names), result.stdout
    assert not _short_breaks(entries), _short_breaks(entries)


@pytest.mark.parametrize("command", ["train", "sweep", "report"])
def test_help_shows_no_metavar_after_a_flag(command, tmp_path):
    result = run([command, "--help"], tmp_path, env={"COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    assert "<bool>" not in result.stdout, result.stdout
    json_rows = [line for line in result.stdout.splitlines() if "--json" in line or "--png" in line]
    assert json_rows and not [row for row in json_rows if "<" in row], json_rows


# fit: its first import (scipy) loads numpy's f2py, which read SOURCE_DATE_EPOCH with int() and raised
@pytest.mark.parametrize("value", ["yesterday", "1e9", str(10 ** 30)])
@pytest.mark.parametrize("args", [["fit", "no_such_experiment"], ["report", "no_such_experiment", "--out", "o", "--store", "s.db"]],
                         ids=lambda a: a[0])
def test_bad_source_date_epoch_is_one_line(args, value, tmp_path):
    one_line_error(run(args, tmp_path, env={"SOURCE_DATE_EPOCH": value}), "SOURCE_DATE_EPOCH", repr(value))


@pytest.mark.parametrize("value", ["", "  "])
def test_blank_source_date_epoch_is_unset(value, tmp_path):
    one_line_error(run(["fit", "no_such_experiment"], tmp_path, env={"SOURCE_DATE_EPOCH": value}),
                   "no_such_experiment")


@pytest.mark.parametrize("value", ["abc", "0", "100000"])
def test_bad_report_jobs_variable_is_one_line_before_anything_runs(tmp_path, value):
    """Checked before the experiments are even looked up (it used to be read once the pages were drawn, after
    every experiment had run); 0 and below were taken as 1, and 100000 started that many processes."""
    result = run(["report", "no_such_experiment", "--out", "o", "--store", "s.db"], tmp_path,
                 env={"RECALLKIT_REPORT_JOBS": value})
    one_line_error(result, "RECALLKIT_REPORT_JOBS", f"'{value}'", "expected an integer from 1 to")

"""Outputs that cannot be written, and work that failed, through the installed ``recallkit`` command.

An ``--out`` that cannot be written (a path under a regular file, which stops root too, or under /sys), a file-size
limit (``ulimit -f``), standard output into a full device (/dev/full) or into a closed pipe: each is one line on
stderr naming what could not be written, exit 3 (the status for failed work), no traceback and no line claiming
success before it. An invalid ``MPLBACKEND`` does not matter to the command line (it draws into files). A sweep whose
every run failed exits 3 and says how many; no JSON output holds a bare ``NaN``. A bad ``RECALLKIT_*`` variable is
one line naming it, exit 2, whichever command is run.

Every case runs on the committed small store (copied) or on the theory alone, so the file takes about a minute.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.experiment_texts import linear_memory_grid

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "tests" / "fixtures" / "small_store" / "store.sqlite"
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("RECALLKIT_") and k != "SOURCE_DATE_EPOCH"},
       "MPLBACKEND": "Agg", "RECALLKIT_CACHE": "off", "PYTHONUNBUFFERED": "1"}
# what a line claiming that an output exists looks like (figures prints the paths it wrote)
SUCCESS = re.compile(r"^(wrote|saved|report:|summary:)|\.(pdf|png|svg)$", re.M)
SYS_DIR = Path("/sys")


def _cannot_make(path: Path) -> bool:
    try:
        path.mkdir()
    except OSError:
        return True
    path.rmdir()
    return False


UNDER_SYS = SYS_DIR.is_dir() and _cannot_make(SYS_DIR / "recallkit-test-probe")  # sysfs refuses a folder to root


def _strict_json(text: str):
    """``text`` parsed as JSON that holds no NaN or infinity (Python's parser takes them; a reader's does not)."""
    def refuse(name: str):
        raise AssertionError(f"bare {name} in a JSON output")
    return json.loads(text, parse_constant=refuse)


def run(args: list[str], cwd: Path, env: dict | None = None, shell_prefix: str | None = None,
        stdout=subprocess.PIPE, timeout: float = 120) -> subprocess.CompletedProcess:
    """The installed command; with ``shell_prefix`` (e.g. ``ulimit -f 100``) through bash."""
    assert RECALLKIT, "the recallkit console script is not installed"
    command: list[str] = [RECALLKIT, *args]
    if shell_prefix is not None:
        command = ["bash", "-c", f'{shell_prefix}; exec "$@"', "bash", *command]
    return subprocess.run(command, cwd=cwd, env={**ENV, **(env or {})}, stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


def failed_once(result: subprocess.CompletedProcess, code: int, *expected: str, alone: bool = True) -> str:
    """The error line of a command that failed with ``code``: no traceback, no line claiming success on stdout or
    stderr, the error last on stderr and (``alone``) the only line there. Returns it."""
    stderr = result.stderr or ""
    stdout = result.stdout or ""
    assert result.returncode == code, (result.returncode, stderr[-3000:])
    assert "Traceback" not in stderr + stdout, stderr[-3000:]
    lines = [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    assert lines, "no error line"
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], stderr[-3000:]
    if alone:
        assert len(lines) == 1, stderr[-3000:]
    assert not SUCCESS.search(stdout) and not SUCCESS.search("\n".join(lines[:-1])), (stdout[-2000:], stderr[-2000:])
    missing = [text for text in expected if text not in lines[-1]]
    assert not missing, (missing, lines[-1])
    return lines[-1]


@pytest.fixture()
def store(tmp_path) -> Path:
    """A copy of the small store (never the committed one) in the test's folder."""
    copy = tmp_path / "store.sqlite"
    shutil.copyfile(STORE, copy)
    return copy


@pytest.fixture()
def a_file(tmp_path) -> Path:
    """A regular file: a path under it cannot be made or written, by root either."""
    path = tmp_path / "file"
    path.write_text("not a folder")
    return path


def _figures(store: Path, out: Path, *extra: str) -> list[str]:
    return ["figures", "assoc_memory_linear", "--store", str(store), "--out", str(out), *extra]


def _fit(store: Path) -> list[str]:
    return ["fit", "assoc_memory_linear", "--store", str(store), "--no-run", "--json"]


# ------------------------------------------------------------------------------------------- an unwritable --out
def test_figures_into_a_folder_under_a_file_is_one_line_exit_3(tmp_path, store, a_file):
    result = run(_figures(store, a_file / "sub"), tmp_path)
    failed_once(result, 3, "--out", str(a_file / "sub"))


@pytest.mark.skipif(not UNDER_SYS, reason="no /sys")
def test_figures_into_sys_is_one_line_exit_3(tmp_path, store):
    result = run(_figures(store, SYS_DIR / "recallkit-test-figures"), tmp_path)
    failed_once(result, 3, "--out", "/sys/recallkit-test-figures")


@pytest.mark.parametrize("where", ["file", "sys"])
def test_theory_regions_out_that_cannot_be_written_is_one_line_exit_3(tmp_path, a_file, where):
    if where == "sys" and not UNDER_SYS:
        pytest.skip("no /sys")
    out = (a_file / "sub" / "phase.pdf") if where == "file" else SYS_DIR / "recallkit-test-phase.pdf"
    result = run(["theory", "regions", "example", "--out", str(out)], tmp_path)
    failed_once(result, 3, "--out", str(out))
    assert result.stdout == ""  # the diagram's text is not printed when its figure cannot be written


def test_report_into_a_folder_under_a_file_is_one_line_exit_3_before_anything_runs(tmp_path, store, a_file):
    result = run(["report", "assoc_memory_linear", "--store", str(store), "--out", str(a_file / "out"),
                  "--no-probes", "--jobs", "1"], tmp_path)
    failed_once(result, 3, "--out", str(a_file / "out"))


# ------------------------------------------------------------------------------------------ a file-size limit
def test_figures_past_a_file_size_limit_is_one_line_exit_3_and_leaves_no_part(tmp_path, store):
    out = tmp_path / "figs"
    result = run(_figures(store, out, "--format", "png"), tmp_path, shell_prefix="ulimit -f 100")
    line = failed_once(result, 3, "cannot write", alone=False)  # after the store's counts (reused / computed)
    assert "File too large" in line, line
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert all(p.endswith(".png") for p in left), left  # no temporary file is left behind
    assert all((out / p).stat().st_size < 100 * 1024 for p in left)


def test_theory_regions_past_a_file_size_limit_is_one_line_exit_3(tmp_path):
    out = tmp_path / "phase.png"  # about 170 kB at 300 dpi
    result = run(["theory", "regions", "example", "--out", str(out)], tmp_path, shell_prefix="ulimit -f 100")
    line = failed_once(result, 3, "cannot write", str(out))
    assert "File too large" in line, line
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file either


# ------------------------------------------------------------------------------- standard output that is full
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("which", ["fit --json", "theory regions --json", "theory regions", "figures"])
def test_stdout_into_a_full_device_is_one_line_exit_3(tmp_path, store, which):
    args = {"fit --json": _fit(store), "theory regions --json": ["theory", "regions", "example", "--json"],
            "theory regions": ["theory", "regions", "example"],
            "figures": _figures(store, tmp_path / "figs")}[which]
    with open("/dev/full", "w") as full:
        result = run(args, tmp_path, stdout=full)
    failed_once(result, 3, "standard output", "No space left on device", alone=which != "figures")


def test_fit_json_cut_by_a_file_size_limit_is_one_line_exit_3(tmp_path, store):
    """fit --json is about 6 kB: a limit of 2 kB cuts it. Python's buffered writer returns the count of the short
    write and drops the rest, which exited 0 with the document cut."""
    with open(tmp_path / "fits.json", "w") as fits:
        result = run(_fit(store), tmp_path, stdout=fits, shell_prefix="ulimit -f 2")
    failed_once(result, 3, "standard output", "File too large")


@pytest.mark.parametrize("which", ["fit --json", "theory regions --json"])
def test_stdout_into_a_closed_pipe_is_one_line_exit_3(tmp_path, store, which):
    """The reader is gone before the command writes (``recallkit ... | head -c 0``): exit 3, one line, and no
    'Exception ignored' from the interpreter's last flush."""
    args = {"fit --json": _fit(store), "theory regions --json": ["theory", "regions", "example", "--json"]}[which]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = run(args, tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    line = failed_once(result, 3, "standard output")
    assert "Exception ignored" not in result.stderr and "Broken pipe" in line, result.stderr


# ------------------------------------------------------------------------------------------ a bad MPLBACKEND
def test_a_bad_mplbackend_does_not_stop_theory_regions(tmp_path):
    out = tmp_path / "phase.pdf"
    result = run(["theory", "regions", "example", "--out", str(out)], tmp_path, env={"MPLBACKEND": "nonsense"})
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert out.read_bytes().startswith(b"%PDF")


def test_a_bad_mplbackend_does_not_stop_figures_or_fit(tmp_path, store):
    out = tmp_path / "figs"
    drawn = run(_figures(store, out), tmp_path, env={"MPLBACKEND": "nonsense"})
    assert drawn.returncode == 0 and "Traceback" not in drawn.stderr, drawn.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(line).name for line in drawn.stdout.split())
    fitted = run(_fit(store), tmp_path, env={"MPLBACKEND": "nonsense"})
    assert fitted.returncode == 0 and "Traceback" not in fitted.stderr, fitted.stderr[-3000:]
    assert _strict_json(fitted.stdout)["experiment"] == "assoc_memory_linear"


# ------------------------------------------------------------------------------------------------ failed work
def test_a_sweep_whose_every_run_failed_exits_3_and_says_so(tmp_path):
    """lr = 3e38 overflows at the first step: every run's loss is NaN (its accuracy is a guess's)."""
    (tmp_path / "grid.toml").write_text(linear_memory_grid("all_fail", "every run diverges", "accuracy"))
    result = run(["sweep", "grid.toml", "--store", "s.db", "--set", "fixed.lr=3e38", "--no-progress", "--json"],
                 tmp_path)
    line = failed_once(result, 3, "8 of 8 runs failed", alone=False)
    assert "loss" in line, line
    doc = _strict_json(result.stdout)  # the sweep's document is still printed, with no bare NaN
    assert doc["experiment"] == "all_fail"
    text = run(["sweep", "grid.toml", "--store", "s.db", "--set", "fixed.lr=3e38", "--no-progress"], tmp_path)
    failed_once(text, 3, "8 of 8 runs failed", alone=False)


def test_train_json_with_a_non_finite_loss_holds_null_and_exits_3(tmp_path):
    result = run(["train", "assoc_memory", "--model", "linear", "--trainer", "adam", "--set", "N=16", "--set", "d=8",
                  "--set", "steps=20", "--set", "lr=3e38", "--json"], tmp_path)
    doc = _strict_json(result.stdout)
    assert doc["loss"] is None and doc["nonfinite"] == {"loss": "nan"}, doc
    assert isinstance(doc["accuracy"], float)
    failed_once(result, 3, "non-finite", "loss")


# --------------------------------------------------------------------------------- the environment, at start
BAD_ENVIRONMENT = [
    ("RECALLKIT_CACHE_MB", "inf", "a finite number >= 0"),
    ("RECALLKIT_CACHE_MB", "-1", "a finite number >= 0"),
    ("RECALLKIT_CACHE_MB", "1e308", "a finite number >= 0"),
    ("RECALLKIT_CACHE", "{file}", "folder"),
    ("RECALLKIT_KEEP_HEAP", "yes", "1"),
    ("RECALLKIT_MAX_COST", "soon", "duration"),
    ("RECALLKIT_MAX_RUNS", "0", "positive integer"),
    ("RECALLKIT_MAX_RUNS", "\u00b2", "positive integer"),
    ("RECALLKIT_REPORT_JOBS", "0", "an integer from 1 to"),
    ("RECALLKIT_STORE", "{folder}", "results store"),
    ("RECALLKIT_SYMBOLIC_SECONDS", "nan", "positive number"),
    ("RECALLKIT_CACHE_KEY_FILE", "{file}/key", "file"),
    ("RECALLKIT_CACHE_KEY_FILE", "{folder}", "file"),
]


@pytest.mark.parametrize("name,value,expected", BAD_ENVIRONMENT, ids=lambda v: str(v)[:24])
def test_a_bad_variable_is_one_line_exit_2_whatever_the_command(tmp_path, a_file, name, value, expected):
    value = value.format(file=a_file, folder=tmp_path)
    result = run(["schema"], tmp_path, env={name: value})  # a command that reads none of them
    failed_once(result, 2, name, expected, repr(value))
    assert result.stdout == ""

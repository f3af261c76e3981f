"""Failing safely, through the installed ``recallkit`` command as a user runs it: every usage error is one
line with exit 2 and no traceback; Ctrl-C is exit 130 with a line saying what is kept; a report that is
interrupted or killed while it writes leaves the previous complete report untouched; --out and --store
are checked before anything is trained."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0", "PYTHONUNBUFFERED": "1"}

# the construction experiment draws a real report in a few seconds and trains nothing
from tests.integration.test_report_pipeline import CONSTRUCTION  # noqa: E402


def run(args, cwd, timeout=120, **kwargs):
    assert RECALLKIT, "the recallkit console script is not installed"
    return subprocess.run([RECALLKIT, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout,
                          **kwargs)


USAGE_ERRORS = [
    [],
    ["nosuchcommand"],
    ["--no-such-flag"],
    ["train", "assoc_memory"],
    ["train", "assoc_memory", "--model", "linear", "--trainer", "adam", "--seed", "abc"],
    ["fit"],
    ["sweep"],
    ["report", "--no-such-flag"],
    ["report", "--threads", "many"],
    ["theory", "regions"],
    ["theory", "nosuch"],
    ["probe", "--preset"],
    ["results"],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a) or "(no arguments)")
def test_usage_error_is_one_line_with_exit_2(args, tmp_path):
    result = run(args, tmp_path, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "--help" in lines[0]


def test_bad_input_is_one_line_with_exit_2(tmp_path):
    (tmp_path / "latin1.toml").write_bytes("name = 'caf\xe9'\n".encode("latin-1"))
    for args, expected in (
        (["fit", "no_such_experiment"], "no such experiment"),
        (["train", "assoc_memory", "--model", "linear", "--trainer", "three_step", "--set", "N=4", "--set", "d=2",
          "--set", "eta=1", "--set", "gamma=1"], "three_step does not apply"),
        (["fit", "assoc_memory_linear", "--store", str(tmp_path / "none.db"), "--no-run", "--threshold", "nan"],
         "--threshold: nan is not a threshold of assoc_memory_linear"),
        (["theory", "regions", "token_retrieval_attn", "--box", "a=-inf:inf"], "--box: a: expected two numbers"),
        (["report", "assoc_memory_linear", "--store", str(tmp_path), "--out", str(tmp_path / "o")],
         "is a directory"),
    ):
        result = run(args, tmp_path, timeout=60)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr
        assert expected in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_bad_experiment_file_is_a_failure_and_the_report_goes_on(tmp_path):
    """A non-UTF-8 file and a missing name beside a good experiment: both are failures in summary.json and on
    the title page, the good one is reported, and the command exits 3 (asked-for work failed) with one line saying so."""
    (tmp_path / "latin1.toml").write_bytes("name = 'caf\xe9'\n".encode("latin-1"))
    (tmp_path / "tiny_construction.toml").write_text(CONSTRUCTION)
    result = run(["report", str(tmp_path / "latin1.toml"), "no_such_experiment", str(tmp_path / "tiny_construction.toml"),
                  "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / "out"), "--no-probes"], tmp_path, timeout=300)
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [e["name"] for e in summary["experiments"]] == ["tiny_construction"]
    assert len(summary["failures"]) == 2
    assert any(f.startswith("latin1.toml: ") and "not UTF-8" in f for f in summary["failures"])
    assert any(f.startswith("no_such_experiment: ") and "no such experiment" in f for f in summary["failures"])
    assert result.stderr.strip().splitlines()[-1].startswith("error: 2 of 3 experiments failed")
    assert (tmp_path / "out" / "recallkit-report.pdf").stat().st_size > 10_000


def test_an_expression_that_fails_mid_sweep_keeps_the_rows_and_names_the_point(tmp_path):
    """lr is fine at the search's corners (N = 2 and 4096) but zero at N = 9, which the search reaches after
    some rounds: one line naming the line and the point, exit 2, every earlier row kept."""
    from tests.experiment_texts import TINY_LINEAR_MEMORY as CAPACITY

    (tmp_path / "mid.toml").write_text(CAPACITY.replace("lr = 0.1", 'lr = "0.001*(N-9)**2"'))
    result = run(["sweep", "mid.toml", "--store", "s.db"], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    last = result.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert last.startswith("error: mid.toml: line 'linear' at d=") and ", N=9: lr: expected a positive number" in last
    assert "runs stored so far are kept" in last
    assert _rows(tmp_path / "s.db") > 0


def test_out_and_store_are_checked_before_training(tmp_path):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "a_dir").mkdir()
    started = time.perf_counter()
    out_is_file = run(["report", "assoc_memory_linear", "--out", str(tmp_path / "a_file"),
                       "--store", str(tmp_path / "s.db")], tmp_path)
    store_is_dir = run(["report", "assoc_memory_linear", "--out", str(tmp_path / "out"),
                        "--store", str(tmp_path / "a_dir")], tmp_path)
    elapsed = time.perf_counter() - started
    assert out_is_file.returncode == 2 and "--out" in out_is_file.stderr and "is a file" in out_is_file.stderr
    assert store_is_dir.returncode == 2 and "--store" in store_is_dir.stderr and "directory" in store_is_dir.stderr
    assert "Traceback" not in out_is_file.stderr + store_is_dir.stderr
    # nothing was trained: the real experiment takes tens of seconds
    assert elapsed < 30, elapsed
    assert not (tmp_path / "s.db").exists() or _rows(tmp_path / "s.db") == 0


def _rows(store: Path) -> int:
    try:
        with sqlite3.connect(store) as db:
            return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    except sqlite3.OperationalError:  # created but its tables not committed yet
        return 0


def _popen(args, cwd):
    # a child of a non-interactive shell may inherit SIGINT ignored: restore the default handler
    return subprocess.Popen([RECALLKIT, *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_ctrl_c_exits_130_and_says_how_many_rows_are_kept(tmp_path):
    store = tmp_path / "s.db"
    proc = _popen(["sweep", "assoc_memory_linear", "--store", str(store)], tmp_path)
    deadline = time.time() + 60
    while time.time() < deadline and (not store.exists() or _rows(store) == 0):
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    kept = _rows(store)
    assert kept > 0
    last = err.strip().splitlines()[-1]
    assert f"interrupted: {kept} rows are stored in" in last and "rerun" in last, last


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(_content(p)).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _content(path: Path) -> bytes:
    # summary.json records how long the experiments took (run_wall_time_s): the one value a rerun of the
    # same results does not reproduce, by design (the PDF leaves it out); everything else must match
    if path.name == "summary.json":
        try:
            doc = json.loads(path.read_text())
        except ValueError:  # a torn file must count as different
            return path.read_bytes()
        doc.pop("run_wall_time_s", None)
        return json.dumps(doc, sort_keys=True).encode()
    return path.read_bytes()


@pytest.fixture(scope="module")
def previous_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("atomic")
    (root / "tiny_construction.toml").write_text(CONSTRUCTION)
    result = run(["report", str(root / "tiny_construction.toml"), "--store", str(root / "s.db"),
                  "--out", str(root / "out"), "--no-probes"], root, timeout=300)
    assert result.returncode == 0, result.stderr
    return root


def test_interrupted_report_keeps_the_previous_one(previous_report):
    root = previous_report
    before = _digest(root / "out")
    assert "recallkit-report.pdf" in before and "summary.json" in before
    script = (
        "import sys\n"
        "import recallkit.reports.pdf as pdf\n"
        "drawn = []\n"
        "original = pdf._number\n"
        "def interrupt_on_page_two(fig, page, total, title):\n"
        "    if page == 2:\n"
        "        raise KeyboardInterrupt\n"
        "    original(fig, page, total, title)\n"
        "pdf._number = interrupt_on_page_two\n"
        "from recallkit.cli import main\n"
        "sys.argv = ['recallkit'] + sys.argv[1:]\n"
        "main()\n")
    # --redraw: an unchanged report would copy the joined PDF in place and never reach the interrupted join
    result = subprocess.run([sys.executable, "-c", script, "report", str(root / "tiny_construction.toml"),
                             "--store", str(root / "s.db"), "--out", str(root / "out"), "--no-probes", "--redraw"],
                            cwd=root, env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 130, result.stderr
    assert "Traceback" not in result.stderr
    assert _digest(root / "out") == before


# killed while training (1.5 s) in the default run; killed at the start and while drawing in the slow run
@pytest.mark.parametrize("delay", [pytest.param(0.5, marks=pytest.mark.slow), 1.5, pytest.param(3.0, marks=pytest.mark.slow)])
def test_killed_report_keeps_the_previous_one(previous_report, delay):
    root = previous_report
    before = _digest(root / "out")
    proc = _popen(["report", str(root / "tiny_construction.toml"), "--store", str(root / "s.db"),
                   "--out", str(root / "out"), "--no-probes"], root)
    time.sleep(delay)
    proc.kill()
    proc.communicate(timeout=60)
    after = _digest(root / "out")
    # whatever moment the kill hit, the report a reader opens is a complete one: the previous one, or
    # (if the kill came after the last move) the new one, which is byte-identical under SOURCE_DATE_EPOCH
    leftovers = [k for k in after if k not in before]
    assert all(k.startswith(".recallkit-staging-") for k in leftovers), leftovers
    assert {k: v for k, v in after.items() if k in before} == before
    # the next report cleans the staging folder a killed one left behind
    result = run(["report", str(root / "tiny_construction.toml"), "--store", str(root / "s.db"),
                  "--out", str(root / "out"), "--no-probes"], root, timeout=300)
    assert result.returncode == 0, result.stderr
    assert _digest(root / "out") == before

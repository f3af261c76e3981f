"""Store rows and store files that were not written by recallkit, through the installed command: JSON nested
100 000 deep in a row, NaN and infinities in a row, columns of the wrong type, a trigger that refuses every
insert, and ``--store`` (or ``RECALLKIT_STORE``) naming a FIFO or a link to /dev/zero. Each gives the row left out
with one warning line naming its rowid, a value read as null, or a one-line error; never a traceback, never a
hang.

Every test works on a copy of the committed small store (tests/fixtures/small_store); the second case of each kind runs with -m slow (each is a
fit of 972 stored runs: the default run keeps one of a kind); nothing is trained except
where a sweep has to try a write."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import resource
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from recallkit.compare.results import as_points, fit_points
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.files import loads_json
from recallkit.empirics.search import boundary_points
from recallkit.empirics.store import ResultStore

from tests.experiment_texts import TINY_LINEAR_MEMORY

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg"}
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SMALL_STORE = FIXTURES / "small_store" / "store.sqlite"
SUMMARY = FIXTURES / "report" / "summary.json"
EXP = "assoc_memory_linear"  # 50 rows in the small store; its fit replays in about a second
STORED = 1110  # rows in the small store
DEEP = 100_000
LIMIT_S = 10  # what the issue allows a hostile input, start-up included


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _recallkit(*args: str, cwd: Path, env: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """The command's result and the CPU seconds it took: on a loaded 2-core machine its wall time says more about
    the other processes than about it (a hang is caught by the timeout, and where it matters by the wall time)."""
    before = _cpu_of_children()
    result = subprocess.run([RECALLKIT, *args], cwd=cwd, env=env or ENV, capture_output=True, text=True,
                            timeout=6 * LIMIT_S)
    return result, _cpu_of_children() - before


def _lines(stderr: str) -> list[str]:
    return [line for line in stderr.replace("\r", "\n").splitlines() if line.strip()]


def _warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in _lines(result.stderr) if line.startswith("warning: ")]


@pytest.fixture
def store(tmp_path) -> Path:
    shutil.copy(SMALL_STORE, tmp_path / "s.db")
    return tmp_path / "s.db"


def _boundary_row(store: Path) -> tuple[int, str]:
    """(rowid, config hash) of a run that answers one of the experiment's boundary points: a value there is a
    measurement the fit uses."""
    with ResultStore(store, readonly=True) as opened:
        point = boundary_points(load_experiment(EXP, preset="quick"), opened)[0]
        rowid = opened._db.execute("SELECT rowid FROM runs WHERE config_hash = ?", (point["config_hash"],)).fetchone()[0]
    return rowid, point["config_hash"]


def _edit(store: Path, rowid: int, column: str, value) -> None:
    with sqlite3.connect(store) as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE rowid = ?", (value, rowid))
    db.close()


def _edit_metric(store: Path, rowid: int, key: str, text: str) -> None:
    """Set one metric of a row to ``text`` as written in its JSON (``NaN`` stays a bare NaN token)."""
    with sqlite3.connect(store) as db:
        metrics = json.loads(db.execute("SELECT metrics_json FROM runs WHERE rowid = ?", (rowid,)).fetchone()[0])
        metrics[key] = "@@"
        db.execute("UPDATE runs SET metrics_json = ? WHERE rowid = ?", (json.dumps(metrics).replace('"@@"', text), rowid))
    db.close()


def _fit_document(result: subprocess.CompletedProcess) -> dict:
    """``fit --json``'s document, parsed strictly (a bare NaN or Infinity is refused). A fit whose stored runs gave
    non-finite metrics may exit 3 after printing it, with one line saying how many runs failed."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if result.returncode != 0:
        assert result.returncode == 3, result.stderr[-3000:]
        assert re.fullmatch(r"error: .*runs failed \(.*non-finite.*\)", _lines(result.stderr)[-1]), result.stderr
    return loads_json(result.stdout)


def _check_left_out(result: subprocess.CompletedProcess, elapsed: float, rowid: int, config_hash: str, why: str):
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if result.returncode == 3:  # the fit's count of failed runs may count the run left out (as not stored)
        assert re.fullmatch(r"error: \d+ of \d+ runs failed \(.*\)", _lines(result.stderr)[-1]), result.stderr
    else:
        assert result.returncode == 0, result.stderr[-3000:]
    found = _warnings(result)
    assert len(found) == 1, result.stderr[-3000:]  # named once, though the fit reads the row more than once
    assert f"rowid {rowid} (config_hash {config_hash})" in found[0] and why in found[0], found[0]
    assert elapsed < LIMIT_S, f"took {elapsed:.1f} s"


# ---------------------------------------------------------------------------------------------- 1. deep JSON
@pytest.mark.parametrize("column", ["metrics_json", pytest.param("config_json", marks=pytest.mark.slow)])
def test_fit_leaves_out_a_row_nested_100000_deep(store, column):
    rowid, config_hash = _boundary_row(store)
    _edit(store, rowid, column, "[" * DEEP + "]" * DEEP)
    result, elapsed = _recallkit("fit", EXP, "--store", store.name, "--no-run", cwd=store.parent)
    _check_left_out(result, elapsed, rowid, config_hash, f"{column}: JSON nested deeper than 64")
    assert re.search(r"reused \d+ / computed 0 / missing [1-9]", result.stderr), result.stderr
    assert "linear" in result.stdout


def test_diff_leaves_out_a_row_nested_100000_deep(store):
    rowid, config_hash = _boundary_row(store)
    shutil.copy(store, store.parent / "clean.db")
    _edit(store, rowid, "metrics_json", '{"a": ' * DEEP + "1" + "}" * DEEP)
    result, elapsed = _recallkit("diff", store.name, "clean.db", "--exp", EXP, cwd=store.parent)
    _check_left_out(result, elapsed, rowid, config_hash, "metrics_json: JSON nested deeper than 64")
    assert "1 checks in 1 experiments" in result.stdout, result.stdout
    assert f"A: 1 stored row left out (rowid {rowid}): it does not validate" in result.stdout.splitlines()
    assert not any(line.startswith("B: 1 stored") for line in result.stdout.splitlines())


def test_results_csv_leaves_out_a_row_nested_100000_deep(store):
    rowid, config_hash = _boundary_row(store)
    _edit(store, rowid, "config_json", "[" * DEEP + "]" * DEEP)
    result, elapsed = _recallkit("results", EXP, "--store", store.name, "--csv", cwd=store.parent)
    _check_left_out(result, elapsed, rowid, config_hash, "config_json: JSON nested deeper than 64")
    assert len(result.stdout.splitlines()) == 1 + 50 - 1 and config_hash not in result.stdout


# ---------------------------------------------------------------------------------------------- 2. NaN, infinities
@pytest.mark.parametrize("text", ["NaN", pytest.param("Infinity", marks=pytest.mark.slow)])
def test_a_non_finite_accuracy_is_no_measurement(store, text):
    rowid, config_hash = _boundary_row(store)
    _edit_metric(store, rowid, "accuracy", text)
    result, elapsed = _recallkit("fit", EXP, "--store", store.name, "--no-run", "--json", cwd=store.parent)
    doc = _fit_document(result)
    assert elapsed < LIMIT_S
    with ResultStore(store, readonly=True) as opened:
        read = opened.get([config_hash])[config_hash]["metrics"]
    assert read["accuracy"] is None and read["nonfinite"] == {"accuracy": "nan" if text == "NaN" else "inf"}
    # the probe is a failure, not an accuracy that reaches the threshold
    reasons = [c["censor_reason"] for f in doc["fits"] for c in f["censored"]]
    assert any("missing or not finite" in r for r in reasons), reasons


def test_a_non_finite_parameter_count_is_left_out_of_the_fit(store):
    rowid, _ = _boundary_row(store)
    _edit_metric(store, rowid, "param_count", "Infinity")
    result, elapsed = _recallkit("fit", EXP, "--store", store.name, "--no-run", "--json", cwd=store.parent)
    doc = _fit_document(result)
    assert elapsed < LIMIT_S
    reasons = [c["censor_reason"] for f in doc["fits"] for c in f["censored"]]
    assert any(r.startswith("left out of the fit: param_count") for r in reasons), reasons


def test_results_csv_writes_no_bare_nan(store):
    rowid, config_hash = _boundary_row(store)
    _edit_metric(store, rowid, "accuracy", "NaN")
    _edit_metric(store, rowid + 1, "train_accuracy", "-Infinity")
    result, _ = _recallkit("results", EXP, "--store", store.name, "--csv", cwd=store.parent)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 50
    values = [(column, value) for row in rows for column, value in row.items()
              if not column.startswith("metrics.nonfinite.")]  # the reasons say "nan", "-inf"
    assert not [cell for cell in values if re.fullmatch(r"-?(nan|inf|NaN|Infinity)", cell[1] or "")], values
    [row] = [r for r in rows if r["config_hash"] == config_hash]
    assert row["metrics.accuracy"] == "" and row["metrics.nonfinite.accuracy"] == "nan"
    assert sorted(r["metrics.nonfinite.train_accuracy"] for r in rows if r["metrics.nonfinite.train_accuracy"]) == ["-inf"]


def test_diff_refuses_a_summary_holding_nan_in_one_line(tmp_path):
    doc = json.loads(SUMMARY.read_text())
    fit = next(f for e in doc["experiments"] for f in e.get("fits") or () if f.get("slope") is not None)
    fit["slope"] = float("nan")
    (tmp_path / "a.json").write_text(json.dumps(doc))
    shutil.copy(SUMMARY, tmp_path / "b.json")
    result, _ = _recallkit("diff", "a.json", "b.json", "--json", cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert _lines(result.stderr) == ["error: STORE_A a.json: not a readable summary.json (NaN is not JSON)"]


# ---------------------------------------------------------------------------------------------- 3. refused writes
def test_a_trigger_that_aborts_every_insert_is_one_line_and_keeps_the_rows(store):
    (store.parent / "tiny.toml").write_text(TINY_LINEAR_MEMORY)
    with sqlite3.connect(store) as db:
        db.execute("CREATE TRIGGER t BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'no'); END")
    db.close()
    result, _ = _recallkit("sweep", "tiny.toml", "--store", store.name, "--no-progress", cwd=store.parent)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert _lines(result.stderr)[-1] == (f"error: {store.name}: cannot write to the results store (the store refused "
                                         f"the write: no); the {STORED} rows stored before are kept")
    with ResultStore(store, readonly=True) as opened:
        assert opened.count() == STORED and len(opened.rows(EXP)) == 50 and opened.skipped_rows == []


# ---------------------------------------------------------------------------------------------- 4. the store file
@pytest.mark.parametrize("command", ["results", pytest.param("sweep", marks=pytest.mark.slow)])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_store_that_is_a_fifo_or_a_device_is_refused_unopened(tmp_path, kind, command):
    """Refused before anything opens it (it used to be read as "no results store here", or written to until SQLite
    gave up with a disk I/O error). A folder and a file that is not SQLite: tests/unit/empirics/test_store.py and
    test_store_faults.py; ``RECALLKIT_STORE`` naming one is checked when the command starts (recallkit.env_check)."""
    (tmp_path / "tiny.toml").write_text(TINY_LINEAR_MEMORY)
    target = tmp_path / "s.db"
    if kind == "fifo":
        os.mkfifo(target)
        what = "a FIFO (named pipe)"
    else:
        target.symlink_to("/dev/zero")
        what = "a symbolic link to /dev/zero, a character device"
    args = [command, "tiny.toml", "--store", "s.db"] + (["--no-progress"] if command == "sweep" else [])
    started = time.perf_counter()
    result, _ = _recallkit(*args, cwd=tmp_path)
    elapsed = time.perf_counter() - started  # nothing may wait on the FIFO: wall time, start-up included
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert _lines(result.stderr) == [f"error: s.db: {what}, not a regular file; expected a results store file "
                                     f"(SQLite); refusing to touch it"]
    assert elapsed < LIMIT_S, f"took {elapsed:.1f} s"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db", "tiny.toml"]


# ---------------------------------------------------------------------------------------------- 5. typed columns
@pytest.mark.parametrize("column, value, why", [
    ("seed", "abc", "seed: expected an integer, got 'abc'"),
    pytest.param("accuracy", "high", "accuracy: expected a number, got 'high'", marks=pytest.mark.slow),
    ("metrics_json", '{"accuracy": 1.0, "param_count": "121"}', "metrics_json: param_count: expected a number"),
])  # a config_json or metrics_json that is not a JSON object: test_store_hostile.py
def test_fit_leaves_out_a_row_of_the_wrong_types(store, column, value, why):
    rowid, config_hash = _boundary_row(store)
    _edit(store, rowid, column, value)
    result, elapsed = _recallkit("fit", EXP, "--store", store.name, "--no-run", cwd=store.parent)
    _check_left_out(result, elapsed, rowid, config_hash, why)
    assert "skipped 1 stored row that does not validate" in _warnings(result)[0]
    with ResultStore(store, readonly=True) as opened:
        assert len(opened.rows(EXP)) == 49
        assert [s.rowid for s in opened.skipped_rows] == [rowid]
        assert opened.left_out_text() == f"1 stored row left out (rowid {rowid}): it does not validate"


def test_a_point_without_a_finite_parameter_count_is_listed_not_raised():
    """How a fit reads a run whose parameter count was stored as null (it was NaN): the search's point is left out
    of the fit and listed with the censored ones, with the reason; the other points are fitted. (A point written
    by hand without it still raises: tests/unit/compare/test_compare_fits.py.)"""
    points = as_points([{"experiment": "e", "line": "l", "threshold": 0.5, "seed": seed, "V": V, "N": V, "d": V,
                         "param_count": None if (seed, V) == (0, 64) else V * V, "censored": False}
                        for seed in (0, 1) for V in (16, 32, 64, 128)], "V")
    result = fit_points(points, predicted_slope=2.0, x="log V", grid_key="V", n_bootstrap=50)
    assert len(result.points) == 7 and result.fit is not None and abs(result.slope - 2.0) < 1e-9
    [left_out] = result.censored
    assert left_out["V"] == 64 and left_out["seed"] == 0
    assert left_out["censor_reason"] == "left out of the fit: param_count: expected a positive finite number, got None"

"""Store rows read as typed records: JSON nested 100 000 deep, NaN and infinities, columns of the wrong type,
NULLs, a store file that is a FIFO or a device, and a database that refuses a write (a trigger)."""
from __future__ import annotations

import json
import math
import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest

from recallkit.empirics.records import stored_run_problem
from recallkit.empirics.store import ResultStore, SkippedRow, finite_json, flatten_row
from recallkit.theory.errors import InputError, RecallkitError

DEEP = 100_000


def _add(store: ResultStore, n: int = 3) -> list[str]:
    configs = [{"task": "t", "seed": i, "d": 8 + i} for i in range(n)]
    hashes = [f"h{i:04d}" for i in range(n)]
    metrics = [{"accuracy": i / 10, "param_count": 64 + i, "wall_time_s": 0.5, "device": "cpu", "threads": 1}
               for i in range(n)]
    store.add("exp", configs, hashes, metrics, code_version="0.1.0+gabc", torch_version="2.x")
    return hashes


@pytest.fixture
def path(tmp_path) -> Path:
    with ResultStore(tmp_path / "r.db") as store:
        _add(store)
    return tmp_path / "r.db"


def _set(path: Path, column: str, value, rowid: int = 2) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE rowid = ?", (value, rowid))
    db.close()


# ---------------------------------------------------------------------------------------------- deep JSON
@pytest.mark.parametrize("column", ["metrics_json", "config_json"])
@pytest.mark.parametrize("deep", ["[" * DEEP + "]" * DEEP, '{"a": ' * DEEP + "1" + "}" * DEEP],
                         ids=["list", "object"])
def test_json_nested_100000_deep_is_a_row_left_out_by_id(path, column, deep, capsys):
    _set(path, column, deep)
    started = time.perf_counter()
    with ResultStore(path, readonly=True) as store:
        rows = store.rows()
        got = store.get(["h0001", "h0002"])
        skipped = store.skipped_rows
    assert time.perf_counter() - started < 5
    assert [r["config_hash"] for r in rows] == ["h0000", "h0002"] and sorted(got) == ["h0002"]
    assert skipped == [SkippedRow(2, "h0001", f"{column}: JSON nested deeper than 64")]
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 1 and "rowid 2 (config_hash h0001)" in warnings[0], warnings  # once, though read twice
    assert "nested deeper than 64" in warnings[0]


def test_a_deep_freeze_document_is_no_freeze(path):
    with ResultStore(path) as store:
        store.add_freeze("f1", "exp", "quick", "2026-01-01T00:00:00+00:00", "[" * DEEP + "]" * DEEP)
        store.add_freeze("f2", "exp", "quick", "2026-01-02T00:00:00+00:00", '{"x": 1}')
        assert [f["hash"] for f in store.freezes("exp", "quick")] == ["f2"]


# ---------------------------------------------------------------------------------------------- NaN and infinities
@pytest.mark.parametrize("text, reason", [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf")])
def test_a_bare_nan_in_a_stored_row_is_read_as_null_with_its_reason(path, text, reason):
    _set(path, "metrics_json", f'{{"accuracy": {text}, "param_count": 65, "curve": [1.0, {text}]}}')
    with ResultStore(path, readonly=True) as store:
        metrics = store.get(["h0001"])["h0001"]["metrics"]
        assert store.nonfinite_rows == {2: {"accuracy": reason, "curve[1]": reason}}
        assert store.skipped_rows == []
    assert metrics == {"accuracy": None, "param_count": 65, "curve": [1.0, None],
                       "nonfinite": {"accuracy": reason, "curve[1]": reason}}


def test_an_infinity_in_a_real_column_is_read_as_null(path):
    _set(path, "accuracy", float("inf"))
    _set(path, "wall_time_s", float("-inf"))
    with ResultStore(path, readonly=True) as store:
        row = store.get(["h0001"])["h0001"]
        assert store.nonfinite_rows == {2: {"accuracy": "inf", "wall_time_s": "-inf"}}
    assert row["accuracy"] is None and row["wall_time_s"] is None


def test_a_diverged_run_is_stored_as_null_with_the_reason_and_never_as_bare_nan(tmp_path):
    metrics = {"accuracy": 0.5, "loss": float("nan"), "eval_loss": np.float32("inf"), "param_count": np.int64(64),
               "losses": np.array([1.0, -np.inf]), "wall_time_s": 0.1}
    with ResultStore(tmp_path / "r.db") as store:
        stored = store.add("exp", [{"task": "t", "seed": 0}], ["h"], [metrics], "v", None)
        read = store.get(["h"])["h"]["metrics"]
    expected = {"accuracy": 0.5, "loss": None, "eval_loss": None, "param_count": 64, "losses": [1.0, None],
                "wall_time_s": 0.1, "nonfinite": {"loss": "nan", "eval_loss": "inf", "losses[1]": "-inf"}}
    assert stored == [expected] and read == expected  # what a sweep keeps is what a rerun reads
    with sqlite3.connect(tmp_path / "r.db") as db:
        text = db.execute("SELECT metrics_json FROM runs").fetchone()[0]
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["nonfinite"] == expected["nonfinite"]


def test_finite_json_merges_with_reasons_already_there():
    assert finite_json({"a": float("nan"), "nonfinite": {"b": "inf"}}) == {"a": None,
                                                                            "nonfinite": {"b": "inf", "a": "nan"}}
    assert finite_json({"a": 1}) == {"a": 1}


def test_a_config_with_nan_is_refused_in_one_line_and_nothing_is_written(path):
    with ResultStore(path) as store:
        with pytest.raises(RecallkitError, match=r"cannot store the config of run hx \(Out of range float values"):
            store.add("exp", [{"task": "t", "eta": float("nan")}], ["hx"], [{"accuracy": 1.0}], "v", None)
        assert store.count() == 3


def test_flatten_row_spreads_the_reasons():
    row = {"config_hash": "h", "config": {"d": 1}, "metrics": {"loss": None, "nonfinite": {"loss": "nan"}}}
    assert flatten_row(row) == {"config_hash": "h", "config.d": 1, "metrics.loss": None,
                                "metrics.nonfinite.loss": "nan"}


# ---------------------------------------------------------------------------------------------- typed columns
@pytest.mark.parametrize("column, value, reason", [
    ("seed", "abc", "seed: expected an integer, got 'abc'"),
    ("accuracy", "high", "accuracy: expected a number, got 'high'"),
    ("threads", 1.5, "threads: expected an integer, got 1.5"),
    ("device", b"cpu", "device: expected text, got b'cpu'"),  # TEXT affinity keeps a BLOB
    ("metrics_json", '{"param_count": "64"}', "metrics_json: param_count: expected a number, got '64'"),
    ("metrics_json", '{"accuracy": true}', "metrics_json: accuracy: expected a number, got True"),
    ("metrics_json", "[]", "metrics_json is [], expected a JSON object"),
    ("config_json", '"text"', 'config_json is "text", expected a JSON object'),
    ("config_json", '{"eta": NaN}', "config_json holds nan (not JSON)"),
    ("metrics_json", b'{"loss": "\xff"}', "metrics_json: not UTF-8: invalid start byte"),
])
def test_a_row_that_does_not_validate_is_left_out_and_counted(path, column, value, reason, capsys):
    _set(path, column, value)
    with ResultStore(path, readonly=True) as store:
        assert [r["config_hash"] for r in store.rows("exp")] == ["h0000", "h0002"]
        assert store.skipped_rows == [SkippedRow(2, "h0001", reason)]
        assert store.left_out_text() == "1 stored row left out (rowid 2): it does not validate"
    assert reason in capsys.readouterr().err


def _without_not_null(path: Path) -> None:
    """The runs table as a store written by something else might have it: no NOT NULL on its columns."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA writable_schema = ON")
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()[0]
    db.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'runs'", (sql.replace(" NOT NULL", ""),))
    db.commit()
    db.close()


@pytest.mark.parametrize("column", ["created_at", "experiment", "config_hash", "config_json"])
def test_a_row_missing_a_field_is_left_out(path, column):
    _without_not_null(path)
    _set(path, column, None, rowid=3)
    with ResultStore(path, readonly=True) as store:
        assert len(store.rows()) == 2
        [skipped] = store.skipped_rows
    assert skipped.rowid == 3 and skipped.reason.startswith(column) and "missing" in skipped.reason


def test_every_row_left_out_is_counted_for_the_report(path):
    for rowid in (1, 3):
        _set(path, "seed", "x", rowid=rowid)
    with ResultStore(path, readonly=True) as store:
        assert store.get(["h0000", "h0001", "h0002"]).keys() == {"h0001"}
        assert [s.rowid for s in store.skipped_rows] == [1, 3]
        assert store.left_out_text() == "2 stored rows left out (rowids 1, 3): they do not validate"


def test_a_sweep_replaces_a_row_that_did_not_validate(path):
    _set(path, "seed", "x")
    with ResultStore(path) as store:
        assert store.get(["h0001"]) == {}
        store.add("exp", [{"task": "t", "seed": 1}], ["h0001"], [{"accuracy": 0.3}], "v", None)
        assert store.get(["h0001"])["h0001"]["seed"] == 1


@pytest.mark.parametrize("row, problem", [
    ({}, "rowid: missing"),
    ({"rowid": 1, "config_hash": "h", "experiment": "e", "created_at": "t", "config": {}, "metrics": {}}, None),
    ({"rowid": 1, "config_hash": "", "experiment": "e", "created_at": "t", "config": {}, "metrics": {}},
     "config_hash: expected text that is not empty, got ''"),
])
def test_stored_run_problem(row, problem):
    found = stored_run_problem(row)
    assert found == problem or (problem is not None and found.startswith(problem))


# ---------------------------------------------------------------------------------------------- the store file
class _Hang(Exception):
    pass


def _within(seconds: int):
    def fail(*_):
        raise _Hang(f"took more than {seconds} s")
    previous = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    return previous


@pytest.mark.parametrize("readonly", [False, True], ids=["writing", "reading"])
@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero", "link to nothing"])
def test_a_store_path_that_is_no_file_is_one_line(tmp_path, kind, readonly):
    target = tmp_path / "s.db"
    if kind == "fifo":
        os.mkfifo(target)
        expected = "a FIFO (named pipe), not a regular file"
    elif kind == "link to /dev/zero":
        target.symlink_to("/dev/zero")
        expected = "a symbolic link to /dev/zero, a character device, not a regular file"
    else:
        target.symlink_to(tmp_path / "gone.db")
        expected = "which does not exist"
    previous = _within(10)
    try:
        with pytest.raises(InputError, match=re.escape(expected)) as info:
            ResultStore(target, readonly=readonly)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]  # nothing built beside it


def test_a_link_to_a_store_is_a_store(path):
    link = path.parent / "link.db"
    link.symlink_to(path)
    with ResultStore(link, readonly=True) as store:
        assert store.count() == 3


# ---------------------------------------------------------------------------------------------- refused writes
@pytest.mark.parametrize("table, action, reason", [
    ("runs", "RAISE(ABORT, 'no')", r"the store refused the write: no"),
    ("runs", "RAISE(FAIL, 'no')", r"the store refused the write: no"),
    ("runs", "RAISE(ROLLBACK, 'rolled')", r"the store refused the write: rolled"),
    ("experiment_runs", "RAISE(ABORT, 'links')", r"the store refused the write: links"),
    ("runs", "RAISE(IGNORE)", r"it kept 0 of the 2 rows of the batch: a trigger or constraint in the store dropped "
                              r"the others"),
])
def test_a_trigger_that_refuses_a_write_is_one_line_and_the_rows_stay(path, table, action, reason):
    with sqlite3.connect(path) as db:
        db.execute(f"CREATE TRIGGER t BEFORE INSERT ON {table} BEGIN SELECT {action}; END")
    db.close()
    with ResultStore(path) as store:
        with pytest.raises(RecallkitError, match=rf"r\.db: cannot write to the results store \({reason}\); the 3 rows "
                                                 r"stored before are kept$"):
            store.add("exp", [{"seed": 8}, {"seed": 9}], ["n1", "n2"], [{"accuracy": 1.0}] * 2, "v", None)
        assert store.count() == 3 and len(store.rows("exp")) == 3
    with ResultStore(path, readonly=True) as store:
        assert sorted(store.get(["h0000", "h0001", "h0002", "n1"])) == ["h0000", "h0001", "h0002"]


def test_rows_that_are_fine_are_read_as_before(path):
    with ResultStore(path, readonly=True) as store:
        row = store.get(["h0002"])["h0002"]
        assert store.skipped_rows == [] and store.nonfinite_rows == {} and store.left_out_text() is None
    assert row["metrics"] == {"accuracy": 0.2, "param_count": 66, "wall_time_s": 0.5, "device": "cpu", "threads": 1}
    assert row["seed"] == 2 and row["config"] == {"task": "t", "seed": 2, "d": 10}
    assert not math.isnan(row["accuracy"])

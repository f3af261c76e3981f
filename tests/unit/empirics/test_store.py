"""Results store: rows round-trip, WAL readers, foreign/corrupted files are refused and left untouched."""
from __future__ import annotations

import csv
import hashlib
import io
import sqlite3

import pytest

from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError


def _add(store, n, start=0, experiment="exp"):
    configs = [{"task": "t", "seed": i, "d": 8 + i} for i in range(start, start + n)]
    hashes = [f"h{i:04d}" for i in range(start, start + n)]
    metrics = [{"accuracy": i / 10, "wall_time_s": 0.5, "device": "cpu", "threads": 1} for i in range(start, start + n)]
    store.add(experiment, configs, hashes, metrics, code_version="0.1.0+gabc", torch_version="2.x")
    return hashes


def test_rows_round_trip_and_link(tmp_path):
    with ResultStore(tmp_path / "r.db") as store:
        hashes = _add(store, 3)
        got = store.get(hashes + ["missing"])
        assert sorted(got) == hashes
        assert got["h0002"]["config"] == {"task": "t", "seed": 2, "d": 10}
        assert got["h0002"]["metrics"]["accuracy"] == 0.2
        assert got["h0002"]["accuracy"] == 0.2 and got["h0002"]["code_version"] == "0.1.0+gabc"
        assert got["h0002"]["device"] == "cpu" and got["h0002"]["threads"] == 1 and got["h0002"]["created_at"]
        store.link("other", hashes[:2])
        assert [r["config_hash"] for r in store.rows("other")] == hashes[:2]
        assert len(store.rows()) == 3 and store.count() == 3
        _add(store, 1)  # the same config again: one row per trained model, not duplicated
        assert store.count() == 3
        assert store.code_versions("exp") == {"0.1.0+gabc": 3}


def test_wal_mode_and_reader_during_write(tmp_path):
    path = tmp_path / "r.db"
    writer = ResultStore(path)
    _add(writer, 2)
    assert writer._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reader = ResultStore(path, readonly=True)
    assert reader.count() == 2
    _add(writer, 2, start=2)
    assert reader.count() == 4
    with pytest.raises(Exception):
        _add(reader, 1, start=9)
    reader.close()
    writer.close()


def test_csv_export_flattens_config_and_metrics(tmp_path):
    with ResultStore(tmp_path / "r.db") as store:
        _add(store, 2)
        rows = list(csv.DictReader(io.StringIO(store.to_csv("exp"))))
    assert [r["config.d"] for r in rows] == ["8", "9"]
    assert rows[1]["metrics.accuracy"] == "0.1" and rows[1]["config_hash"] == "h0001"


def test_parquet_needs_pyarrow(tmp_path):
    pytest.importorskip("pandas")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with ResultStore(tmp_path / "r.db") as store:
            with pytest.raises(InputError, match="--parquet: needs pandas and pyarrow"):
                store.to_parquet(tmp_path / "x.parquet")
        return
    with ResultStore(tmp_path / "r.db") as store:
        _add(store, 2)
        store.to_parquet(tmp_path / "x.parquet")
    import pandas as pd

    assert list(pd.read_parquet(tmp_path / "x.parquet")["config.d"]) == [8, 9]


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_foreign_sqlite_database_is_refused_and_untouched(tmp_path):
    path = tmp_path / "foreign.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (name TEXT)")
    db.execute("INSERT INTO customers VALUES ('ada')")
    db.commit()
    db.close()
    before = _digest(path)
    with pytest.raises(InputError, match=r"foreign.db: a SQLite database that is not a recallkit results store"):
        ResultStore(path)
    assert _digest(path) == before


def test_non_sqlite_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("my precious notes\n" * 100)
    before = _digest(path)
    with pytest.raises(InputError, match=r"notes.db: not a recallkit results store \(not a SQLite database\)"):
        ResultStore(path)
    assert _digest(path) == before


def test_corrupted_store_is_refused_and_untouched(tmp_path):
    path = tmp_path / "r.db"
    with ResultStore(path) as store:
        _add(store, 50)
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    assert len(data) >= 3 * 4096
    data[4096:3 * 4096] = b"\xff" * (2 * 4096)  # keep the header page, smash the tables' pages
    path.write_bytes(bytes(data))
    before = _digest(path)
    with pytest.raises(InputError) as info:
        ResultStore(path)
    assert "r.db" in str(info.value) and "\n" not in str(info.value)
    assert _digest(path) == before


def test_other_schema_version_is_refused(tmp_path):
    path = tmp_path / "r.db"
    ResultStore(path).close()
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(InputError, match="schema version 99"):
        ResultStore(path)


def test_readonly_on_missing_store(tmp_path):
    with pytest.raises(InputError, match="no results store here"):
        ResultStore(tmp_path / "none.db", readonly=True)
    assert not (tmp_path / "none.db").exists()


def test_get_or_compute_stores_a_document_once_and_reads_it_back(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"b": (1, 2), "a": 0.5}

    with ResultStore(tmp_path / "s.db") as store:
        first, wall = store.get_or_compute("check", {"check": "x"}, "ck-1", compute, "0.1.0")
        again, reused = store.get_or_compute("check", {"check": "x"}, "ck-1", compute, "0.1.0")
    assert calls == [1] and wall is not None and wall >= 0 and reused is None
    assert first == again == {"a": 0.5, "b": [1, 2]}  # what the store holds, as a rerun reads it

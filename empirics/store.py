"""The results store: one SQLite row per trained model, so every number can be traced and reused.

Layout (schema version 1)::

    meta(key, value)            -- application = 'recallkit-results', schema_version = '1'
    runs(config_hash UNIQUE, config_json, experiment, seed, metrics_json, accuracy,
         wall_time_s, device, threads, torch_version, code_version, created_at)
    experiment_runs(experiment, config_hash)   -- which experiments asked for which config

A config is trained once and reused by every experiment that asks for it (a run's result depends
only on its config: the engine guarantees that batching does not change it), so resume is a lookup
by config hash. The code version is recorded with each row, not part of the key; see
``code_versions()``. The database runs in WAL mode: one writer (the sweep driver, one transaction
per batch) and any number of readers while it runs. A file that is not a SQLite database, or a
SQLite database that is not ours, is refused with a one-line error and never written to.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import io
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Sequence

from recallkit.theory.errors import InputError, RecallkitError

__all__ = ["default_store_path", "APPLICATION", "DEFAULT_STORE", "flatten_row", "json_default", "ResultStore", "ROW_COLUMNS",
           "SCHEMA_VERSION", "SQLITE_HEADER"]


APPLICATION = "recallkit-results"
SCHEMA_VERSION = 1
SQLITE_HEADER = b"SQLite format 3\x00"
DEFAULT_STORE = "results/recallkit.db"


def default_store_path() -> str:
    """The results store every command uses without ``--store``: $RECALLKIT_STORE, else :data:`DEFAULT_STORE`."""
    return os.environ.get("RECALLKIT_STORE") or DEFAULT_STORE

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    config_hash   TEXT PRIMARY KEY,
    config_json   TEXT NOT NULL,
    experiment    TEXT NOT NULL,
    seed          INTEGER,
    metrics_json  TEXT NOT NULL,
    accuracy      REAL,
    wall_time_s   REAL,
    device        TEXT,
    threads       INTEGER,
    torch_version TEXT,
    code_version  TEXT,
    created_at    TEXT NOT NULL
);
CREATE TABLE experiment_runs (
    experiment  TEXT NOT NULL,
    config_hash TEXT NOT NULL REFERENCES runs(config_hash),
    PRIMARY KEY (experiment, config_hash)
);
"""

ROW_COLUMNS = ("config_hash", "experiment", "seed", "accuracy", "wall_time_s", "device", "threads",
               "torch_version", "code_version", "created_at", "config_json", "metrics_json")


class ResultStore:
    """Open (or create) the store at ``path``. ``readonly=True`` never creates or writes.

    A file is checked (ours, this schema, intact) through a read-only connection before anything is
    written, so a refused file gets no ``-wal``/``-shm`` files beside it. A store on read-only media
    (or a file without write permission) opens for reading: ``results``, ``fit`` and a report that
    trains nothing work from it, and the first write says why it cannot write, in one line."""

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self.write_refused: str | None = None
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a directory, expected a results store file (SQLite)")
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists:
            try:
                with open(self.path, "rb") as fh:
                    header = fh.read(len(SQLITE_HEADER))
            except OSError as exc:
                raise InputError(f"{self.path}: cannot read the results store ({exc.strerror or exc})") from None
            if header != SQLITE_HEADER:
                raise InputError(f"{self.path}: not a recallkit results store (not a SQLite database); refusing to touch it")
        elif readonly:
            raise InputError(f"{self.path}: no results store here (run 'recallkit sweep' first or pass --store)")
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise InputError(f"{self.path}: cannot create the results store here ({exc.strerror or exc})") from None
        try:
            if exists:
                self._db = self._connect_readonly()
                try:
                    self._check_or_create(exists)  # validated before any write
                except sqlite3.OperationalError:
                    # a WAL-mode file whose index SQLite may not create here: read it as an immutable file
                    self._db.close()
                    self._db = self._connect_readonly(immutable=True)
                    self._check_or_create(exists)
                if not readonly:
                    self._reopen_for_writing()
            else:
                self._db = sqlite3.connect(self.path, timeout=30)
                self._check_or_create(exists)
        except sqlite3.DatabaseError as exc:
            if not exists:
                raise InputError(f"{self.path}: cannot create the results store ({exc})") from None
            raise InputError(f"{self.path}: unreadable results store ({exc}); refusing to touch it") from None

    def _connect_readonly(self, immutable: bool = False) -> sqlite3.Connection:
        """Read-only, and on read-only media (where SQLite cannot create the WAL index) as an immutable
        file: the store is only read, so nothing else can be writing it at the same time."""
        uri = self.path.resolve().as_uri()
        if immutable or not Path(f"{self.path}-wal").exists():
            # no write-ahead log beside it: the file alone is the whole database, and reading it as
            # immutable creates no -wal/-shm files (a refused file is left exactly as it was)
            return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=30)
        try:
            db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, timeout=30)

    def _reopen_for_writing(self) -> None:
        try:
            db = sqlite3.connect(self.path, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            # read-only media or permissions: keep the read-only connection; writing says why
            self.readonly = True
            self.write_refused = str(exc)
            return
        self._db.close()
        self._db = db

    def _check_or_create(self, exists: bool) -> None:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.readonly:
                raise InputError(f"{self.path}: empty database, not a recallkit results store")
            self._db.execute("PRAGMA journal_mode=WAL")
            with self._db:
                self._db.executescript(_SCHEMA)
                self._db.executemany("INSERT INTO meta VALUES (?, ?)",
                                     [("application", APPLICATION), ("schema_version", str(SCHEMA_VERSION))])
            return
        if "meta" not in tables:
            raise InputError(f"{self.path}: a SQLite database that is not a recallkit results store (no meta table); refusing to touch it")
        meta = dict(self._db.execute("SELECT key, value FROM meta"))
        if meta.get("application") != APPLICATION:
            raise InputError(f"{self.path}: a SQLite database of another application ({meta.get('application')!r}); refusing to touch it")
        if meta.get("schema_version") != str(SCHEMA_VERSION):
            raise InputError(
                f"{self.path}: results store schema version {meta.get('schema_version')}, this recallkit reads {SCHEMA_VERSION}"
            )
        integrity = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if integrity != "ok":
            raise InputError(f"{self.path}: results store is corrupted ({integrity}); refusing to touch it")

    # ------------------------------------------------------------------ reading
    def get(self, hashes: Iterable[str]) -> dict[str, dict]:
        """Stored rows for the given config hashes (missing ones are absent), as dicts."""
        hashes = list(dict.fromkeys(hashes))
        found: dict[str, dict] = {}
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            cursor = self._db.execute(f"SELECT {', '.join(ROW_COLUMNS)} FROM runs WHERE config_hash IN ({marks})", chunk)
            for row in cursor:
                record = _row_dict(row)
                found[record["config_hash"]] = record
        return found

    def rows(self, experiment: str | None = None) -> list[dict]:
        """All rows (or those an experiment asked for), oldest first."""
        cols = ", ".join(f"r.{c}" for c in ROW_COLUMNS)
        if experiment is None:
            cursor = self._db.execute(f"SELECT {cols} FROM runs r ORDER BY r.rowid")
        else:
            cursor = self._db.execute(
                f"SELECT {cols} FROM runs r JOIN experiment_runs e ON e.config_hash = r.config_hash "
                "WHERE e.experiment = ? ORDER BY r.rowid", (experiment,))
        return [_row_dict(row) for row in cursor]

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def code_versions(self, experiment: str | None = None) -> dict[str, int]:
        """How many rows each code version produced (a store that mixes versions is worth knowing about)."""
        counts: dict[str, int] = {}
        for row in self.rows(experiment):
            counts[row["code_version"]] = counts.get(row["code_version"], 0) + 1
        return counts

    # ------------------------------------------------------------------ writing
    def add(self, experiment: str, configs: Sequence[dict], hashes: Sequence[str], metrics: Sequence[dict],
            code_version: str, torch_version: str | None) -> None:
        """Insert one batch of trained models in one transaction (a crash loses at most this batch)."""
        self._check_writable()
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        records = []
        for cfg, h, m in zip(configs, hashes, metrics, strict=True):
            records.append((
                h, json.dumps(cfg, sort_keys=True), experiment, cfg.get("seed"), json.dumps(m, sort_keys=True),
                m.get("accuracy"), m.get("wall_time_s"), m.get("device"), m.get("threads"),
                torch_version, code_version, now,
            ))
        with self._writing():
            self._db.executemany(
                "INSERT OR IGNORE INTO runs (config_hash, config_json, experiment, seed, metrics_json, accuracy, "
                "wall_time_s, device, threads, torch_version, code_version, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                records,
            )
            self._db.executemany("INSERT OR IGNORE INTO experiment_runs VALUES (?, ?)", [(experiment, h) for h in hashes])

    def link(self, experiment: str, hashes: Iterable[str]) -> None:
        """Record that ``experiment`` uses already-stored rows (so 'results' lists them)."""
        if self.readonly:
            return
        with self._writing():
            self._db.executemany("INSERT OR IGNORE INTO experiment_runs VALUES (?, ?)", [(experiment, h) for h in hashes])

    def _check_writable(self) -> None:
        if self.readonly:
            why = f" ({self.write_refused})" if self.write_refused else " (opened read-only)"
            raise RecallkitError(f"{self.path}: cannot write to the results store{why}; the {self.count()} rows "
                                 f"stored before are kept")

    @contextlib.contextmanager
    def _writing(self):
        """One transaction; a full disk, read-only media or a locked file becomes one line that says the
        rows committed before are kept (the transaction itself is rolled back as a whole)."""
        try:
            with self._db:
                yield
        except sqlite3.OperationalError as exc:
            try:
                kept = self.count()
            except sqlite3.Error:
                kept = "all"
            raise RecallkitError(f"{self.path}: cannot write to the results store ({exc}); the {kept} rows "
                                 f"stored before are kept") from None

    # ------------------------------------------------------------------ export
    def to_csv(self, experiment: str | None = None) -> str:
        """CSV text: one line per row; config and metrics keys flattened into config.* / metrics.* columns."""
        records = [flatten_row(r) for r in self.rows(experiment)]
        columns: list[str] = []
        for record in records:
            columns.extend(k for k in record if k not in columns)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        return buffer.getvalue()

    def to_parquet(self, path: str | Path, experiment: str | None = None) -> None:
        try:
            import pandas as pd  # the export extra, which may be missing (0.25 s to import)
            import pyarrow  # noqa: F401  (pandas needs it for parquet)
        except ImportError:
            raise InputError("--parquet: needs pandas and pyarrow (pip install 'recallkit[export]'); use --csv instead") from None
        try:
            pd.DataFrame([flatten_row(r) for r in self.rows(experiment)]).to_parquet(path, index=False)
        except OSError as exc:
            raise InputError(f"--parquet {path}: cannot write there ({exc.strerror or exc})") from None

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _row_dict(row: Sequence) -> dict:
    record = dict(zip(ROW_COLUMNS, row))
    record["config"] = json.loads(record.pop("config_json"))
    record["metrics"] = json.loads(record.pop("metrics_json"))
    return record


def flatten_row(record: dict) -> dict:
    flat = {k: v for k, v in record.items() if k not in ("config", "metrics")}
    flat.update({f"config.{k}": v for k, v in record["config"].items()})
    flat.update({f"metrics.{k}": v for k, v in record["metrics"].items()})
    return flat


def json_default(value: Any) -> Any:
    """``json.dumps(..., default=json_default)`` for results: numpy scalars and arrays as plain numbers and lists,
    anything else as its text."""
    try:
        import numpy as np  # only for values that json cannot write as they are
    except ImportError:  # pragma: no cover - numpy is a dependency
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)

"""The results store: one SQLite row per trained model, so every number can be traced and reused.

Layout (schema version 1)::

    meta(key, value)            -- application = 'recallkit-results', schema_version = '1'
    runs(config_hash UNIQUE, config_json, experiment, seed, metrics_json, accuracy,
         wall_time_s, device, threads, torch_version, code_version, created_at)
    experiment_runs(experiment, config_hash)   -- which experiments asked for which config
    freezes(hash, experiment, preset, created_at, document)   -- predictions frozen before their runs
                                                  (``recallkit freeze``; made on first use in an older store)

A config is trained once and reused by every experiment that asks for it (a run's result depends
only on its config: the engine guarantees that batching does not change it), so resume is a lookup
by config hash. The code version is recorded with each row, not part of the key; see
``code_versions()``. The database runs in WAL mode: one writer (the sweep driver, one transaction
per batch) and any number of readers while it runs. A file that is not a SQLite database, or a
SQLite database that is not ours, is refused with a one-line error and never written to.

What the store does with what it may meet:

- A row whose ``config_json`` or ``metrics_json`` is not a JSON object (edited by hand into bad JSON, or
  into a list) is read as not stored: every command goes on, and one warning line on stderr says how
  many rows were skipped, names each (rowid, config hash, column, what is wrong) and gives the
  ``DELETE`` that removes them. Read-only commands (``results``, ``fit --no-run``) therefore report the
  cells those runs decide as missing; a sweep (and ``fit``, ``report``) trains them again, and the new row
  replaces the damaged one.
- A store without write permission (the file, its folder or the medium) opens for reading, so commands
  with nothing to train work from it; the first write refuses in one line naming the store.
- A new store appears whole or not at all (built beside its path and hard-linked into place), so
  processes that start at once on the same new path all open the one complete store.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import errno
import io
import itertools
import json
import os
import shlex
import sqlite3
import sys
import time
import uuid
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


# predictions frozen before their runs (recallkit freeze); an older store gets the table on its first freeze
_FREEZES_TABLE = ("CREATE TABLE IF NOT EXISTS freezes (hash TEXT PRIMARY KEY, experiment TEXT NOT NULL, "
                  "preset TEXT NOT NULL, created_at TEXT NOT NULL, document TEXT NOT NULL)")

# One script, one transaction: idempotent, so a creator that finds the tables already there (another
# process filled the same empty file first) changes nothing.
_SCHEMA = f"""
BEGIN IMMEDIATE;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
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
CREATE TABLE IF NOT EXISTS experiment_runs (
    experiment  TEXT NOT NULL,
    config_hash TEXT NOT NULL REFERENCES runs(config_hash),
    PRIMARY KEY (experiment, config_hash)
);
{_FREEZES_TABLE};
INSERT OR IGNORE INTO meta VALUES ('application', '{APPLICATION}'), ('schema_version', '{SCHEMA_VERSION}');
COMMIT;
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
        self._damaged: set[str] = set()  # config hashes of rows read with damaged JSON: add() replaces them
        if not (self.path.exists() and self.path.stat().st_size > 0):
            if readonly:
                raise InputError(f"{self.path}: no results store here (run 'recallkit sweep' first or pass --store)")
            self._create()
        try:
            with open(self.path, "rb") as fh:
                header = fh.read(len(SQLITE_HEADER))
        except OSError as exc:
            raise InputError(f"{self.path}: cannot read the results store ({exc.strerror or exc})") from None
        if header != SQLITE_HEADER:
            raise InputError(f"{self.path}: not a recallkit results store (not a SQLite database); refusing to touch it")
        try:
            if not self._read_checked():  # validated before any write
                # a SQLite file without tables holds nobody's data: fill it in place (locked and idempotent, as
                # another process may be filling the same empty file at this moment)
                self._db.close()
                _write_schema(self.path)
                if not self._read_checked():
                    raise InputError(f"{self.path}: cannot create the results store (its tables did not appear)")
            if not readonly:
                self._reopen_for_writing()
        except _TornRead as exc:
            raise InputError(str(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: unreadable results store ({exc}); refusing to touch it") from None

    def _read_checked(self) -> bool:
        """:meth:`_open_checked`, read again after short pauses when it fails. A file with no write-ahead log beside
        it is read as immutable (no lock, no -wal/-shm left beside a refused file), and another process may be
        writing it at that moment (filling the same empty file, or checkpointing its log into it on close): the
        read can then meet a half-written page. Only a failure that persists is raised."""
        for pause in (0.02, 0.05, 0.1, 0.2, 0.4):
            try:
                return self._open_checked()
            except (sqlite3.DatabaseError, _TornRead):
                with contextlib.suppress(Exception):
                    self._db.close()
                time.sleep(pause)
        return self._open_checked()

    def _create(self) -> None:
        """Make a new store that appears whole or not at all, so that processes starting at once on the same new
        path all open one complete store: it is built under a name of its own beside ``path`` and hard-linked into
        place, which fails for all but the first (they open that one). An empty file already at ``path``, or a
        filesystem without hard links, gets the schema in place instead, in one locked, idempotent transaction."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"{self.path}: cannot create the results store here ({exc.strerror or exc})") from None
        building = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex}.new")
        try:
            try:
                _write_schema(building)
                os.link(building, self.path)
            except FileExistsError:
                if self.path.stat().st_size == 0:  # e.g. a name reserved with mkstemp
                    _write_schema(self.path)
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                    raise
                _write_schema(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise InputError(f"{self.path}: cannot create the results store "
                             f"({getattr(exc, 'strerror', None) or exc})") from None
        finally:
            for leftover in (building, Path(f"{building}-wal"), Path(f"{building}-shm"), Path(f"{building}-journal")):
                leftover.unlink(missing_ok=True)

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
        if not os.access(self.path, os.W_OK):
            # SQLite would open it read-only without saying so, and leave -wal/-shm files beside it that
            # stop the next writer once the permission is back
            self.readonly = True
            self.write_refused = "the file is not writable here: no write permission, or read-only media"
            return
        try:
            db = sqlite3.connect(self.path, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            # a write statement fails on a file SQLite could only open read-only, even when it changes nothing
            # (BEGIN IMMEDIATE alone passes there)
            db.execute("DELETE FROM meta WHERE key IS NULL")
            db.execute("ROLLBACK")
        except sqlite3.OperationalError as exc:
            # read-only media or permissions: keep the read-only connection; writing says why
            self.readonly = True
            self.write_refused = str(exc)
            return
        self._db.close()
        self._db = db

    def _open_checked(self) -> bool:
        """Open read-only and check the store; False for a SQLite file without tables, where a writer may create
        the store."""
        self._db = self._connect_readonly()
        try:
            return self._check()
        except sqlite3.OperationalError:
            # a WAL-mode file whose index SQLite may not create here: read it as an immutable file
            self._db.close()
            self._db = self._connect_readonly(immutable=True)
            return self._check()

    def _check(self) -> bool:
        tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.readonly:
                raise InputError(f"{self.path}: empty SQLite database, not a recallkit results store")
            return False
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
            raise _TornRead(f"{self.path}: results store is corrupted ({integrity}); refusing to touch it")
        return True

    # ------------------------------------------------------------------ reading
    def get_or_compute(self, experiment: str, config: dict, key: str, compute: Any, code_version: str,
                       torch_version: str | None = None) -> tuple[dict, float | None]:
        """One stored document keyed like a trained model (a runner experiment's result, a system's check): the
        stored metrics of ``key`` when there are some, else ``compute()`` (a JSON-able dict) stored under ``config``
        and read back, so this run gives exactly what a rerun will. Returns (metrics, seconds ``compute`` took, or
        None when reused)."""
        stored = self.get([key]).get(key)
        if stored is not None:
            return stored["metrics"], None
        started = time.perf_counter()
        metrics = json.loads(json.dumps(compute(), default=json_default))
        wall = time.perf_counter() - started
        self.add(experiment, [config], [key], [metrics], code_version, torch_version)
        return self.get([key])[key]["metrics"], wall

    def get(self, hashes: Iterable[str]) -> dict[str, dict]:
        """Stored rows for the given config hashes (missing ones are absent), as dicts."""
        hashes = list(dict.fromkeys(hashes))
        found: dict[str, dict] = {}
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            marks = ",".join("?" * len(chunk))
            cursor = self._db.execute(f"SELECT rowid, {', '.join(ROW_COLUMNS)} FROM runs WHERE config_hash IN ({marks})",
                                      chunk)
            found.update((record["config_hash"], record) for record in self._records(cursor))
        return found

    def rows(self, experiment: str | None = None) -> list[dict]:
        """All rows (or those an experiment asked for), oldest first."""
        cols = ", ".join(f"r.{c}" for c in ("rowid",) + ROW_COLUMNS)
        if experiment is None:
            cursor = self._db.execute(f"SELECT {cols} FROM runs r ORDER BY r.rowid")
        else:
            cursor = self._db.execute(
                f"SELECT {cols} FROM runs r JOIN experiment_runs e ON e.config_hash = r.config_hash "
                "WHERE e.experiment = ? ORDER BY r.rowid", (experiment,))
        return self._records(cursor)

    def _records(self, cursor: Iterable[Sequence]) -> list[dict]:
        """Rows (rowid first) as dicts, without those whose JSON was damaged: each of those is named once per
        process, in one warning line per read, and remembered so that :meth:`add` replaces it."""
        records, damaged = [], []
        for row in cursor:
            try:
                records.append(_row_dict(row[1:]))
            except _DamagedRow as exc:
                damaged.append((row[0], row[1], str(exc)))
                self._damaged.add(row[1])
        new = [d for d in damaged if (str(self.path.resolve()), d[0]) not in _WARNED]
        if new:
            _WARNED.update((str(self.path.resolve()), rowid) for rowid, _, _ in new)
            noun = "row" if len(new) == 1 else "rows"
            named = "; ".join(f"rowid {rowid} (config_hash {h}): {why}" for rowid, h, why in new)
            delete = f"DELETE FROM runs WHERE rowid IN ({', '.join(str(rowid) for rowid, _, _ in new)})"
            print(f"warning: {self.path}: skipped {len(new)} stored {noun} with damaged JSON, read as not stored "
                  f"(a sweep trains {'it' if len(new) == 1 else 'them'} again and replaces the {noun}): {named}; "
                  f"to remove: sqlite3 {shlex.quote(str(self.path))} {shlex.quote(delete)}", file=sys.stderr)
        return records

    def count(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def code_versions(self, experiment: str | None = None) -> dict[str, int]:
        """How many rows each code version produced (a store that mixes versions is worth knowing about)."""
        counts: dict[str, int] = {}
        for row in self.rows(experiment):
            counts[row["code_version"]] = counts.get(row["code_version"], 0) + 1
        return counts

    def first_stored(self, hashes: Iterable[str]) -> str | None:
        """When the earliest of these stored runs was stored (ISO 8601, UTC, to the second); None if none is."""
        wanted = sorted(set(hashes))
        earliest = None
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            found = self._db.execute(f"SELECT min(created_at) FROM runs WHERE config_hash IN "
                                     f"({','.join('?' * len(chunk))})", chunk).fetchone()[0]
            if found is not None and (earliest is None or found < earliest):
                earliest = found
        return earliest

    def freezes(self, experiment: str, preset: str) -> list[dict[str, Any]]:
        """Every freeze of an experiment's preset, oldest first: hash, created_at and the document (a dict); a
        store made before freezes existed has none."""
        try:
            rows = self._db.execute("SELECT hash, created_at, document FROM freezes WHERE experiment = ? AND "
                                    "preset = ? ORDER BY created_at, rowid", (experiment, preset)).fetchall()
        except sqlite3.OperationalError:  # no freezes table: an older store
            return []
        out = []
        for digest, created, document in rows:
            try:
                doc = json.loads(document)
            except ValueError:
                continue  # a damaged freeze is no freeze: its verdicts stay exploratory
            if isinstance(doc, dict):
                out.append({"hash": digest, "created_at": created, "document": doc})
        return out

    # ------------------------------------------------------------------ writing
    def add_freeze(self, digest: str, experiment: str, preset: str, created_at: str, document: str) -> bool:
        """Record a freeze (its hash is over ``document``); False when the store already holds it."""
        self._check_writable()
        with self._writing():
            self._db.execute(_FREEZES_TABLE)
            cursor = self._db.execute("INSERT OR IGNORE INTO freezes VALUES (?, ?, ?, ?, ?)",
                                      (digest, experiment, preset, created_at, document))
        return cursor.rowcount > 0

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
        replaced = [(h,) for h in hashes if h in self._damaged]
        with self._writing():
            if replaced:  # rows read with damaged JSON: the new ones take their place
                self._db.executemany("DELETE FROM runs WHERE config_hash = ?", replaced)
            self._db.executemany(
                "INSERT OR IGNORE INTO runs (config_hash, config_json, experiment, seed, metrics_json, accuracy, "
                "wall_time_s, device, threads, torch_version, code_version, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                records,
            )
            self._db.executemany("INSERT OR IGNORE INTO experiment_runs VALUES (?, ?)", [(experiment, h) for h in hashes])
        self._damaged.difference_update(hashes)

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


def _write_schema(path: Path) -> None:
    """Create the tables (idempotent). Processes filling one empty file at once can be told "database is locked"
    at once, without SQLite's busy wait (switching to WAL, or a lock upgrade that could deadlock): the script is
    then run again after a short pause, for up to the 30 s the busy wait would have allowed."""
    deadline = time.monotonic() + 30
    for attempt in itertools.count():
        try:
            return _write_schema_once(path)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(min(0.5, 0.01 * 2 ** attempt))


def _write_schema_once(path: Path) -> None:
    db = sqlite3.connect(path, timeout=30, isolation_level=None)  # the script holds its own transaction
    try:
        db.execute("PRAGMA journal_mode=WAL")
        try:
            db.executescript(_SCHEMA)
        except sqlite3.Error:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    finally:
        db.close()


class _TornRead(Exception):
    """An integrity check that failed: the file is corrupted, or another process was writing it as it was read
    (``ResultStore`` reads it again before it says which)."""


class _DamagedRow(ValueError):
    """A stored row whose config or metrics are not a JSON object (edited by hand, or written by something else)."""


# (store file, rowid) of every damaged row already named in this process: a report reads a row for each
# experiment that asks for it, and the warning says it once
_WARNED: set[tuple[str, int]] = set()


def _row_dict(row: Sequence) -> dict:
    record = dict(zip(ROW_COLUMNS, row))
    for column, key in (("config_json", "config"), ("metrics_json", "metrics")):
        text = record.pop(column)
        try:
            value = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise _DamagedRow(f"{column} is not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise _DamagedRow(f"{column} is {json.dumps(value)[:40]}, expected a JSON object")
        record[key] = value
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

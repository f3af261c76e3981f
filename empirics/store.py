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

- Every row read is checked against :class:`~recallkit.empirics.records.StoredRun` (its JSON columns parsed with
  :func:`~recallkit.empirics.files.loads_json`: at most 64 levels deep, never a RecursionError). A row that does not
  validate (edited by hand into bad JSON, JSON nested 100 000 deep, a list where an object belongs, a seed that
  is text, a NULL where a value belongs) is read as not stored: every command goes on, and one warning line on
  stderr says how many rows were left out, names each (rowid, config hash, column, what is wrong) and gives the
  ``DELETE`` that removes them; a row is named once per process. Read-only commands (``results``, ``fit --no-run``)
  therefore report the cells those runs decide as missing; a sweep (and ``fit``, ``report``) trains them again, and
  the new row replaces the damaged one. :attr:`ResultStore.skipped_rows` lists the rows this store left out
  (:meth:`ResultStore.left_out_text` says it in one line for a report).
- NaN and the infinities are not JSON: a run whose metric came out non-finite (a diverged loss) is stored with
  that metric null and the reason beside it, ``"nonfinite": {"loss": "nan"}``, and its JSON is written with
  ``allow_nan=False``. A row written before that, holding a bare ``NaN`` or ``Infinity``, is read the same way
  (null, with the reason), so no fit takes it for a finite measurement and no output writes it back.
- The path must be a regular file (or a link to one), or not exist: a FIFO, a device (a link to /dev/zero) or a
  folder is refused in one line before it is opened, so nothing waits on it.
- A write the database refuses (a full disk, read-only media, a trigger that aborts, a constraint) is one line
  naming the store and the reason; the batch is rolled back and every row committed before it is kept.
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
import math
import os
import shlex
import sqlite3
import stat
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from recallkit.empirics.files import MAX_DEPTH, loads_json
from recallkit.empirics.records import stored_run_problem
from recallkit.theory.errors import InputError, RecallkitError

__all__ = ["default_store_path", "APPLICATION", "DEFAULT_STORE", "finite_json", "flatten_row", "json_default",
           "left_out_line", "ResultStore", "ROW_COLUMNS", "SCHEMA_VERSION", "SkippedRow", "SQLITE_HEADER"]


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
        self._damaged: set[str] = set()  # config hashes of rows that did not validate: add() replaces them
        self._skipped: dict[int, SkippedRow] = {}  # rows this store left out, by rowid
        self._nonfinite: dict[int, dict[str, str]] = {}  # rows read with a NaN or an infinity, by rowid
        size = _regular_size(self.path)
        if not size:
            if readonly:
                raise InputError(f"{self.path}: no results store here (run 'recallkit sweep' first or pass --store)")
            self._create()
        header = _read_header(self.path)
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
        """Rows (rowid first) as dicts, without those that do not validate (:class:`StoredRun`): each of those is
        named once per process, in one warning line per read, kept in :attr:`skipped_rows` and remembered so that
        :meth:`add` replaces it."""
        records, damaged = [], []
        for row in cursor:
            try:
                record, nonfinite = _row_dict(row[0], row[1:])
            except _DamagedRow as exc:
                skipped = SkippedRow(row[0], row[1], str(exc))
                damaged.append(skipped)
                self._skipped[skipped.rowid] = skipped
                self._damaged.add(row[1])
                continue
            if nonfinite:
                self._nonfinite[row[0]] = nonfinite
            records.append(record)
        where = str(self.path.resolve())
        new = sorted((d for d in damaged if (where, d.rowid) not in _WARNED), key=lambda d: d.rowid)
        if new:
            _WARNED.update((where, d.rowid) for d in new)
            print(_left_out_warning(self.path, new), file=sys.stderr)
        return records

    @property
    def skipped_rows(self) -> list["SkippedRow"]:
        """Every stored row this store has left out so far because it does not validate (rowid, config hash, what
        is wrong), by rowid. Reading is what finds them: a fit replays its experiment's rows first."""
        return [self._skipped[rowid] for rowid in sorted(self._skipped)]

    @property
    def nonfinite_rows(self) -> dict[int, dict[str, str]]:
        """Rows read so far that hold a value stored as null because it was NaN or an infinity: rowid -> {metric:
        "nan" | "inf" | "-inf"}. They are read (a diverged run is a result), never as a finite measurement."""
        return {rowid: dict(self._nonfinite[rowid]) for rowid in sorted(self._nonfinite)}

    def left_out_text(self) -> str | None:
        """``2 stored rows left out (rowids 17, 23): they do not validate`` for a report; None when none was."""
        return left_out_line([row.rowid for row in self.skipped_rows])

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
                doc = loads_json(document)
            except (ValueError, TypeError):
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
            code_version: str, torch_version: str | None) -> list[dict]:
        """Insert one batch of trained models in one transaction (a crash loses at most this batch). A metric
        that is NaN or an infinity is stored as null with the reason (:func:`finite_json`). Returns the metrics as
        stored, which is what a later read gives."""
        self._check_writable()
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        records, stored = [], []
        for cfg, h, m in zip(configs, hashes, metrics, strict=True):
            config_text = self._json_text(cfg, "config", h)
            try:
                m = finite_json(m)
            except ValueError as exc:
                raise RecallkitError(f"{self.path}: cannot store the metrics of run {h} ({exc}); the rows stored "
                                     f"before are kept") from None
            stored.append(m)
            records.append((
                h, config_text, experiment, cfg.get("seed"), self._json_text(m, "metrics", h),
                m.get("accuracy"), m.get("wall_time_s"), m.get("device"), m.get("threads"),
                torch_version, code_version, now,
            ))
        replaced = [(h,) for h in hashes if h in self._damaged]
        with self._writing():
            if replaced:  # rows that did not validate: the new ones take their place
                self._db.executemany("DELETE FROM runs WHERE config_hash = ?", replaced)
            self._db.executemany(
                "INSERT OR IGNORE INTO runs (config_hash, config_json, experiment, seed, metrics_json, accuracy, "
                "wall_time_s, device, threads, torch_version, code_version, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                records,
            )
            self._db.executemany("INSERT OR IGNORE INTO experiment_runs VALUES (?, ?)", [(experiment, h) for h in hashes])
            kept = self._stored_count(hashes)
            if kept < len(set(hashes)):  # e.g. a trigger that answers RAISE(IGNORE): the batch is rolled back
                raise _Refused(f"it kept {kept} of the {len(set(hashes))} rows of the batch: a trigger or constraint "
                               f"in the store dropped the others")
        self._damaged.difference_update(hashes)
        return stored

    def _json_text(self, value: Any, what: str, config_hash: str) -> str:
        """``value`` as the JSON a row stores (sorted keys, never NaN); a config that holds NaN, an infinity or
        something JSON cannot say is refused in one line."""
        try:
            return json.dumps(value, sort_keys=True, allow_nan=False)
        except (ValueError, TypeError, RecursionError) as exc:
            raise RecallkitError(f"{self.path}: cannot store the {what} of run {config_hash} ({exc}); the rows "
                                 f"stored before are kept") from None

    def _stored_count(self, hashes: Sequence[str]) -> int:
        wanted = sorted(set(hashes))
        found = 0
        for start in range(0, len(wanted), 500):
            chunk = wanted[start:start + 500]
            found += self._db.execute(f"SELECT COUNT(DISTINCT config_hash) FROM runs WHERE config_hash IN "
                                      f"({','.join('?' * len(chunk))})", chunk).fetchone()[0]
        return found

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
        """One transaction; a full disk, read-only media, a locked file or a write the database refuses (a trigger
        that aborts, a constraint) becomes one line that says the rows committed before are kept (the transaction
        itself is rolled back as a whole)."""
        try:
            with self._db:
                yield
        except sqlite3.OperationalError as exc:
            reason = str(exc)
        except sqlite3.Error as exc:  # IntegrityError from RAISE(ABORT, ...) or a constraint, and the like
            reason = f"the store refused the write: {exc}"
        except _Refused as exc:
            reason = str(exc)
        else:
            return
        try:
            kept = self.count()
        except sqlite3.Error:
            kept = "all"
        raise RecallkitError(f"{self.path}: cannot write to the results store ({reason}); the {kept} rows "
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
    """A stored row that does not validate: its config or metrics are not a JSON object (edited by hand, or written
    by something else), or a column holds what :class:`~recallkit.empirics.records.StoredRun` does not allow."""


class _Refused(Exception):
    """A write the database took without an error but did not keep (a trigger's RAISE(IGNORE))."""


@dataclass(frozen=True)
class SkippedRow:
    """A stored row left out because it does not validate: its rowid, config hash and what is wrong (one line)."""

    rowid: int
    config_hash: Any
    reason: str


# (store file, rowid) of every damaged row already named in this process: a report reads a row for each
# experiment that asks for it, and the warning says it once
_WARNED: set[tuple[str, int]] = set()

# what the JSON module reads for the values JSON has no word for, and how a row's reason names them
_NONFINITE = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}


def _regular_size(path: Path) -> int:
    """The size of the file at ``path`` (0 when there is none); InputError for anything a store cannot be: a folder,
    a FIFO, a device (a link to /dev/zero), a socket, a link to nothing. Only ``stat``: nothing is opened."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"{path}: a symbolic link to {os.readlink(path)}, which does not exist; expected a "
                             f"results store file (SQLite)") from None
        return 0
    except OSError as exc:
        raise InputError(f"{path}: cannot read the results store ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path}: is a directory, expected a results store file (SQLite)")
    if not stat.S_ISREG(info.st_mode):
        what = _kind(info.st_mode)
        if os.path.islink(path):
            what = f"a symbolic link to {os.readlink(path)}, {what}"
        raise InputError(f"{path}: {what}, not a regular file; expected a results store file (SQLite); refusing to "
                         f"touch it")
    return info.st_size


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def _read_header(path: Path) -> bytes:
    """The first bytes of the store, read without waiting: opened non-blocking and checked to be a regular file
    through the open descriptor (the path may have been swapped for a FIFO since it was looked at)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the results store ({exc.strerror or exc})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{path}: {_kind(mode)}, not a regular file; expected a results store file (SQLite); "
                             f"refusing to touch it")
        return os.read(fd, len(SQLITE_HEADER))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the results store ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


class _NonFinite:
    """Where a NaN or an infinity was read (``text``: "nan", "inf" or "-inf"); replaced by None before use."""

    __slots__ = ("text",)

    def __init__(self, name: str):
        self.text = _NONFINITE[name]


def _nulled(document: Any) -> tuple[Any, dict[str, str]]:
    """``document`` (parsed with :class:`_NonFinite` for each constant) with every one of them replaced by None, and
    where each was (``loss``, ``curve.metric[2][0]``) with what it was; ValueError when it nests deeper than
    :data:`~recallkit.empirics.files.MAX_DEPTH`. Iterative: no depth can exhaust the stack."""
    found: dict[str, str] = {}
    if isinstance(document, _NonFinite):
        return None, {"": document.text}
    stack = [(document, 1, "")]
    while stack:
        item, depth, path = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise ValueError(f"JSON nested deeper than {MAX_DEPTH}")
        pairs = list(item.items()) if isinstance(item, dict) else list(enumerate(item))
        for key, value in pairs:
            where = (f"{path}.{key}" if path else str(key)) if isinstance(item, dict) else f"{path}[{key}]"
            if isinstance(value, _NonFinite):
                item[key] = None
                found[where] = value.text
            else:
                stack.append((value, depth + 1, where))
    return document, found


def _loads_nulled(text: Any) -> tuple[Any, dict[str, str]]:
    """A stored JSON text read as :func:`~recallkit.empirics.files.loads_json` reads it, except that NaN and the
    infinities are read as None (with where they were) instead of refusing the text: the form rows took before
    non-finite values were stored as null. ValueError for anything else that is wrong with it."""
    if text is None:
        raise ValueError("missing (NULL)")
    if not isinstance(text, (str, bytes)):
        raise ValueError(f"{type(text).__name__}, expected JSON text")
    try:
        return loads_json(text), {}
    except ValueError as exc:
        first = exc
    try:
        document = json.loads(text, parse_constant=_NonFinite)
    except (ValueError, RecursionError):
        raise first from None
    try:
        return _nulled(document)
    except ValueError:
        raise first from None


def finite_json(value: Any) -> Any:
    """``value`` as the JSON it will be stored as (numpy scalars and arrays as numbers and lists, see
    :func:`json_default`), with NaN and the infinities as None and, for a dict, ``"nonfinite": {where: "nan" |
    "inf" | "-inf"}`` added (merged with one it holds) when there were any. A document that cannot be JSON is a
    ValueError."""
    try:
        document = json.loads(json.dumps(value, default=json_default), parse_constant=_NonFinite)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH}") from None
    document, found = _nulled(document)
    if found and isinstance(document, dict):
        reasons = document.get("nonfinite") if isinstance(document.get("nonfinite"), dict) else {}
        document["nonfinite"] = {**reasons, **found}
    return document


def _row_dict(rowid: int, row: Sequence) -> tuple[dict, dict[str, str]]:
    """A stored row as the dict every reader gets (``config`` and ``metrics`` parsed), validated as a
    :class:`~recallkit.empirics.records.StoredRun`, and the non-finite values its metrics held (now null);
    _DamagedRow saying what is wrong otherwise."""
    record = dict(zip(ROW_COLUMNS, row))
    nonfinite: dict[str, str] = {}
    for column, key in (("config_json", "config"), ("metrics_json", "metrics")):
        try:
            value, found = _loads_nulled(record.pop(column))
        except json.JSONDecodeError as exc:
            raise _DamagedRow(f"{column} is not JSON ({exc})") from None
        except ValueError as exc:  # nested too deep, not UTF-8, NULL, NaN in a config
            raise _DamagedRow(f"{column}: {exc}") from None
        if not isinstance(value, dict):
            raise _DamagedRow(f"{column} is {_short(value)}, expected a JSON object")
        if found and key == "config":  # a config is validated before it is stored: it never held one
            raise _DamagedRow(f"{column} holds {', '.join(sorted(set(found.values())))} (not JSON)")
        if found:
            reasons = value.get("nonfinite") if isinstance(value.get("nonfinite"), dict) else {}
            value["nonfinite"] = {**reasons, **found}
            nonfinite.update(found)
        record[key] = value
    for column in ("accuracy", "wall_time_s"):  # REAL columns: SQLite keeps an infinity there (NaN it stores as NULL)
        number = record[column]
        if isinstance(number, float) and not math.isfinite(number):
            nonfinite.setdefault(column, "nan" if number != number else "inf" if number > 0 else "-inf")
            record[column] = None
    if (problem := stored_run_problem({"rowid": rowid, **record})) is not None:
        raise _DamagedRow(problem)
    if "nonfinite" in record["metrics"]:
        nonfinite = {**record["metrics"]["nonfinite"], **nonfinite}
    return record, nonfinite


def _short(value: Any) -> str:
    try:
        return json.dumps(value)[:40]
    except (ValueError, TypeError, RecursionError):
        return type(value).__name__


def _left_out_warning(path: Path, rows: Sequence[SkippedRow]) -> str:
    """The one warning line that names rows left out: each with its config hash and what is wrong, and the
    ``DELETE`` that removes them, ready to paste."""
    noun = "row" if len(rows) == 1 else "rows"
    named = "; ".join(f"rowid {r.rowid} (config_hash {r.config_hash}): {r.reason}" for r in rows)
    delete = f"DELETE FROM runs WHERE rowid IN ({', '.join(str(r.rowid) for r in rows)})"
    verb = "does" if len(rows) == 1 else "do"
    return (f"warning: {path}: skipped {len(rows)} stored {noun} that {verb} not validate, left out and read as not "
            f"stored (a sweep trains {'it' if len(rows) == 1 else 'them'} again and replaces the {noun}): {named}; "
            f"to remove: sqlite3 {shlex.quote(str(path))} {shlex.quote(delete)}")


def left_out_line(rowids: Sequence[int]) -> str | None:
    """``1 stored row left out (rowid 17): it does not validate`` (a report's line) for the rowids of the rows left
    out; None for none."""
    if not rowids:
        return None
    ids = ", ".join(str(rowid) for rowid in rowids[:20]) + (", ..." if len(rowids) > 20 else "")
    if len(rowids) == 1:
        return f"1 stored row left out (rowid {ids}): it does not validate"
    return f"{len(rowids)} stored rows left out (rowids {ids}): they do not validate"


def flatten_row(record: dict) -> dict:
    """A row as one flat dict: config and metrics keys as ``config.*`` / ``metrics.*`` columns, and where a metric
    was NaN or an infinity its reason as ``metrics.nonfinite.<metric>``."""
    flat = {k: v for k, v in record.items() if k not in ("config", "metrics")}
    flat.update({f"config.{k}": v for k, v in record["config"].items()})
    for k, v in record["metrics"].items():
        if k == "nonfinite" and isinstance(v, dict):
            flat.update({f"metrics.nonfinite.{name}": why for name, why in v.items()})
        else:
            flat[f"metrics.{k}"] = v
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

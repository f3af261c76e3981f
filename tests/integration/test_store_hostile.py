"""The results store against what users and schedulers do to it: rows edited by hand into bad JSON, a store
without write permission, and several processes creating the same new store at once.

One tiny capacity experiment (33 runs, a few seconds) fills one store for the module; each test works on a
copy of it."""
from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError

from tests.experiment_texts import TINY_LINEAR_MEMORY

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg"}
STORED = 33  # runs the tiny experiment's quick preset trains


def _tiny_experiment(folder: Path, seeds: str = "[0, 1]") -> Path:
    text = TINY_LINEAR_MEMORY
    path = folder / ("tiny.toml" if seeds == "[0, 1]" else "tiny_other_seeds.toml")
    path.write_text(text.replace("seeds = [0, 1]", f"seeds = {seeds}"))
    return path


def _recallkit(*args: str, cwd: Path, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, RECALLKIT, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def _stderr_lines(result: subprocess.CompletedProcess) -> list[str]:
    """stderr without the progress bars (which redraw with carriage returns)."""
    return [line for line in result.stderr.replace("\r", "\n").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    root = tmp_path_factory.mktemp("store_hostile")
    exp = _tiny_experiment(root)
    result = _recallkit("sweep", str(exp), "--store", str(root / "filled.db"), "--no-progress", cwd=root)
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(root / "filled.db") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file alone is the whole store, so copying it is enough
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == STORED
    return root


@pytest.fixture
def store(filled, tmp_path):
    """A copy of the filled store (and the experiment) in this test's own folder."""
    shutil.copy(filled / "filled.db", tmp_path / "s.db")
    _tiny_experiment(tmp_path)
    _tiny_experiment(tmp_path, seeds="[7]")  # one that has to train
    return tmp_path / "s.db"


def _edit(store: Path, column: str, value: str, rowid: int = 3) -> str:
    """Overwrite one row's column by hand, as a user with the sqlite3 shell would; the row's config hash."""
    with sqlite3.connect(store) as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE rowid = ?", (value, rowid))
        return db.execute("SELECT config_hash FROM runs WHERE rowid = ?", (rowid,)).fetchone()[0]


def _warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in _stderr_lines(result) if line.startswith("warning: ")]


def _check_one_warning(result: subprocess.CompletedProcess, store: Path, config_hash: str, column: str, rowid: int):
    assert "Traceback" not in result.stderr, result.stderr
    found = _warnings(result)
    assert len(found) == 1, result.stderr
    line = found[0]
    assert str(store.name) in line and config_hash in line and column in line and f"rowid {rowid}" in line, line
    assert "skipped 1 " in line, line
    assert f'DELETE FROM runs WHERE rowid IN ({rowid})' in line, line  # how to remove it, ready to paste


# ---------------------------------------------------------------------------------------------- 1. bad JSON
@pytest.mark.parametrize("column, value", [("metrics_json", "{not json"), ("config_json", "[1, 2]"),
                                           ("metrics_json", "null")])
def test_results_skips_a_hand_edited_row_with_one_warning(store, column, value):
    config_hash = _edit(store, column, value)
    result = _recallkit("results", "tiny.toml", "--store", store.name, cwd=store.parent)
    assert result.returncode == 0, result.stderr
    _check_one_warning(result, store, config_hash, column, 3)
    assert len(_stderr_lines(result)) == 1, result.stderr
    # the search cannot see past a run it lacks, so one damaged row can censor more than its own cell
    reused, missing = map(int, re.search(r"(\d+) runs in the store, (\d+) missing", result.stdout).groups())
    assert reused < STORED and missing >= 1


def test_results_csv_skips_a_hand_edited_row(store):
    config_hash = _edit(store, "config_json", "[]", rowid=5)
    result = _recallkit("results", "tiny.toml", "--store", store.name, "--csv", cwd=store.parent)
    assert result.returncode == 0, result.stderr
    _check_one_warning(result, store, config_hash, "config_json", 5)
    lines = result.stdout.splitlines()
    assert len(lines) == 1 + STORED - 1 and not any(config_hash in line for line in lines)


def test_fit_without_run_skips_a_hand_edited_row(store):
    config_hash = _edit(store, "metrics_json", '{"accuracy": 0.5,')
    result = _recallkit("fit", "tiny.toml", "--store", store.name, "--no-run", cwd=store.parent)
    assert result.returncode == 0, result.stderr
    _check_one_warning(result, store, config_hash, "metrics_json", 3)
    assert re.search(r"reused \d+ / computed 0 / missing [1-9]", result.stderr), result.stderr
    assert "linear" in result.stdout


def _numbers(metrics_json: str) -> dict:
    """A run's metrics without how it ran (its wall times and the size of its batch may differ)."""
    return {k: v for k, v in json.loads(metrics_json).items() if "time" not in k and "batch" not in k}


def test_sweep_trains_a_hand_edited_row_again_and_replaces_it(store, filled):
    with sqlite3.connect(filled / "filled.db") as db:
        original = db.execute("SELECT metrics_json FROM runs WHERE rowid = 3").fetchone()[0]
    config_hash = _edit(store, "metrics_json", "[]")
    result = _recallkit("sweep", "tiny.toml", "--store", store.name, "--no-progress", cwd=store.parent)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert len(_warnings(result)) == 1 and config_hash in _warnings(result)[0]
    assert f"reused {STORED - 1} / computed 1" in result.stdout
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == STORED
        replaced = db.execute("SELECT metrics_json FROM runs WHERE config_hash = ?", (config_hash,)).fetchone()[0]
    assert _numbers(replaced) == _numbers(original)  # trained again from the same config
    again = _recallkit("results", "tiny.toml", "--store", store.name, cwd=store.parent)
    assert again.returncode == 0 and not _warnings(again), again.stderr
    assert f"{STORED} runs in the store, 0 missing" in again.stdout


def test_fit_with_run_replaces_a_hand_edited_row(store):
    config_hash = _edit(store, "config_json", "{broken")
    result = _recallkit("fit", "tiny.toml", "--store", store.name, cwd=store.parent)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert len(_warnings(result)) == 1 and config_hash in _warnings(result)[0]
    assert f"reused {STORED - 1} / computed 1" in result.stderr
    with ResultStore(store, readonly=True) as opened:
        assert len(opened.rows()) == STORED


# ---------------------------------------------------------------------------------------------- 2. read-only
def _without_write_permission() -> tuple[str, ...] | None:
    """A command prefix under which file permissions apply: nothing for a normal user; for root, setpriv
    without the capabilities that bypass them (root ignores a file's mode otherwise)."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    caps = "-dac_override,-dac_read_search,-fowner"
    probe = subprocess.run([setpriv, "--bounding-set", caps, "--inh-caps", caps, "true"], capture_output=True)
    return (setpriv, "--bounding-set", caps, "--inh-caps", caps) if probe.returncode == 0 else None


NO_WRITE = _without_write_permission()
needs_permissions = pytest.mark.skipif(NO_WRITE is None, reason="running as root without setpriv to drop its capabilities")


@pytest.fixture
def read_only_store(store, request):
    """The store made read-only as the parametrisation says: the file (0444), or its folder (0555)."""
    if request.param == "file":
        store.chmod(0o444)
    else:
        store.parent.chmod(0o555)
    yield store
    store.parent.chmod(0o755)
    store.chmod(0o644)


@needs_permissions
@pytest.mark.parametrize("read_only_store", ["file", "folder"], indirect=True)
def test_fit_reads_a_read_only_store_with_nothing_to_train(read_only_store):
    store = read_only_store
    before = sorted(p.name for p in store.parent.iterdir())
    result = _recallkit("fit", "tiny.toml", "--store", store.name, cwd=store.parent, prefix=NO_WRITE)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert f"reused {STORED} / computed 0" in result.stderr
    assert "linear" in result.stdout
    # reading leaves nothing beside the store (a -wal/-shm made here without write permission would block
    # the next writer once the permission is back)
    assert sorted(p.name for p in store.parent.iterdir()) == before


@needs_permissions
@pytest.mark.parametrize("read_only_store", ["file", "folder"], indirect=True)
def test_training_into_a_read_only_store_is_refused_in_one_line(read_only_store):
    store = read_only_store
    result = _recallkit("sweep", "tiny_other_seeds.toml", "--store", store.name, "--no-progress", cwd=store.parent, prefix=NO_WRITE)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(_stderr_lines(result)) == 1, result.stderr
    last = _stderr_lines(result)[0]
    assert re.fullmatch(rf"error: {store.name}: cannot write to the results store \(.+\); the {STORED} rows stored "
                        r"before are kept", last), last
    with sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == STORED


# ---------------------------------------------------------------------------------------------- 3. creation race
def _open_new_store(path: str, start, failures) -> None:
    start.wait()
    try:
        with ResultStore(path) as opened:
            opened.count()
    except BaseException as exc:  # noqa: BLE001 - every failure is reported back to the test
        failures.put(f"{type(exc).__name__}: {exc}")


def test_a_read_that_meets_a_half_written_page_is_read_again(tmp_path, monkeypatch):
    # what a racer meets when another process checkpoints its log into the same file while it reads it as
    # immutable: SQLite's "malformed" once, then the whole file
    path = tmp_path / "s.db"
    ResultStore(path).close()
    real = ResultStore._open_checked
    calls = []

    def torn_once(self):
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.DatabaseError("database disk image is malformed")
        return real(self)

    monkeypatch.setattr(ResultStore, "_open_checked", torn_once)
    with ResultStore(path) as opened:
        assert opened.count() == 0
    assert len(calls) == 2


def test_a_store_that_stays_malformed_is_refused_in_one_line_and_left_as_it_was(tmp_path):
    path = tmp_path / "s.db"
    ResultStore(path).close()
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page:] = b"\xff" * (len(data) - page)  # every page after the first is garbage
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"s\.db: (unreadable results store|results store is corrupted) \(.+\); "
                                         r"refusing to touch it"):
        ResultStore(path)
    assert path.read_bytes() == bytes(data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


@pytest.mark.parametrize("empty_file", [False, True], ids=["no file", "empty file (a name reserved with mkstemp)"])
def test_processes_creating_the_same_new_store_at_once_all_succeed(tmp_path, empty_file):
    context = multiprocessing.get_context("fork")  # no re-import per process, so they all reach the store together
    failures = context.Queue()
    rounds, racers = 15, 4
    for index in range(rounds):
        path = tmp_path / f"race{index}" / "s.db"
        if empty_file:
            path.parent.mkdir()
            path.touch()
        start = context.Event()
        processes = [context.Process(target=_open_new_store, args=(str(path), start, failures)) for _ in range(racers)]
        for p in processes:
            p.start()
        start.set()
        for p in processes:
            p.join(60)
        assert all(p.exitcode == 0 for p in processes)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == [], f"{len(found)} of {rounds * racers} failed: {found[:3]}"
    for index in range(rounds):
        folder = tmp_path / f"race{index}"
        with ResultStore(folder / "s.db", readonly=True) as opened:
            assert opened.count() == 0
        # no half-built store left behind by the processes that lost the race
        assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("s.db-")) == ["s.db"]


@pytest.mark.slow  # its window is milliseconds against seconds of start-up: the constructor race above is the guard
def test_two_sweeps_started_at_once_on_a_new_store(tmp_path):
    exp = _tiny_experiment(tmp_path)
    command = [RECALLKIT, "sweep", str(exp), "--store", "new/s.db", "--no-progress"]
    sweeps = [subprocess.Popen(command, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in sweeps]
    for p, (out, err) in zip(sweeps, outputs):
        assert p.returncode == 0, err
    with ResultStore(tmp_path / "new" / "s.db", readonly=True) as opened:
        assert opened.count() == STORED
        assert len(opened.rows("tiny_linear_memory")) == STORED

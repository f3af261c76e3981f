"""The results store under faults, through the installed command: read-only media, a full disk, an
immutable file and a foreign database. Every fault is one line with exit 2, and every row committed
before it is kept and readable.

Read-only media and a full disk are made in a private mount namespace (``unshare -rm``), so nothing
outside the test sees the mounts; where the kernel does not allow that, those tests skip."""
from __future__ import annotations

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


def _tiny_experiment(folder: Path) -> Path:
    text = TINY_LINEAR_MEMORY
    path = folder / "tiny.toml"
    path.write_text(text)
    return path


def _namespace_available() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mkdir -p /tmp && mount -t tmpfs -o size=8k tmpfs /mnt"],
                           capture_output=True, text=True)
    return probe.returncode == 0


needs_namespace = pytest.mark.skipif(not _namespace_available(), reason="no private mount namespace (unshare -rm)")


def _in_namespace(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["unshare", "-rm", "bash", "-c", script], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=300)


def _rows(store: Path) -> int:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    root = tmp_path_factory.mktemp("store_faults")
    exp = _tiny_experiment(root)
    (root / "src").mkdir()
    result = subprocess.run([RECALLKIT, "sweep", str(exp), "--store", str(root / "src" / "s.db")], cwd=root,
                            env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return root


@needs_namespace
def test_store_on_read_only_media_is_readable(filled):
    script = ("set -e; mkdir -p ro; mount --bind -o ro src ro; mount -o remount,ro,bind ro; "
              "recallkit results tiny.toml --store ro/s.db > results.txt; "
              "recallkit fit tiny.toml --store ro/s.db --no-run > fit.txt; "
              "recallkit sweep tiny.toml --store ro/s.db > sweep.txt")
    result = _in_namespace(script, filled)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "33 runs in the store, 0 missing" in (filled / "results.txt").read_text()
    assert "reused 33 / computed 0" in result.stderr + (filled / "fit.txt").read_text()
    assert "reused 33 / computed 0" in (filled / "sweep.txt").read_text()


@needs_namespace
def test_read_only_media_refuses_a_write_in_one_line_and_keeps_the_rows(filled):
    # a sweep that has to train (another seed) cannot write there: one line, exit 2
    text = (filled / "tiny.toml").read_text().replace("seeds = [0, 1]", "seeds = [7]")
    (filled / "tiny_other_seed.toml").write_text(text)
    script = ("mkdir -p ro; mount --bind -o ro src ro; mount -o remount,ro,bind ro; "
              "recallkit sweep tiny_other_seed.toml --store ro/s.db")
    result = _in_namespace(script, filled)
    assert result.returncode == 2, result.stderr
    last = result.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert last.startswith("error: ") and "cannot write to the results store" in last and "33 rows" in last, last
    assert _rows(filled / "src" / "s.db") == 33


@needs_namespace
def test_full_disk_keeps_every_committed_row(filled):
    script = ("mkdir -p small; mount -t tmpfs -o size=140k tmpfs small; "
              "recallkit sweep tiny.toml --store small/s.db; echo $? > rc.txt; "
              "python -c \"import sqlite3; print(sqlite3.connect('small/s.db').execute('select count(*) from runs')"
              ".fetchone()[0])\" > kept.txt")
    result = _in_namespace(script, filled)
    assert (filled / "rc.txt").read_text().strip() == "2", result.stderr
    last = result.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    match = re.fullmatch(r"error: small/s\.db: cannot write to the results store \((.*full.*)\); the (\d+) rows "
                         r"stored before are kept", last)
    assert match, last
    assert int((filled / "kept.txt").read_text()) == int(match.group(2)) > 0


@needs_namespace
def test_a_store_that_cannot_be_created_says_so(filled):
    script = "mkdir -p tiny; mount -t tmpfs -o size=8k tmpfs tiny; recallkit sweep tiny.toml --store tiny/s.db"
    result = _in_namespace(script, filled)
    assert result.returncode == 2
    last = result.stderr.replace("\r", "\n").strip().splitlines()[-1]
    assert "cannot create the results store" in last and "Traceback" not in result.stderr, last


def test_immutable_store_file_is_one_line(filled, tmp_path):
    store = tmp_path / "s.db"
    shutil.copy(filled / "src" / "s.db", store)
    if subprocess.run(["chattr", "+i", str(store)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    try:
        text = (filled / "tiny.toml").read_text().replace("seeds = [0, 1]", "seeds = [9]")
        (tmp_path / "exp.toml").write_text(text)
        result = subprocess.run([RECALLKIT, "sweep", str(tmp_path / "exp.toml"), "--store", str(store)], cwd=tmp_path,
                                env=ENV, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["chattr", "-i", str(store)], capture_output=True)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "cannot write to the results store" in result.stderr and "rows stored before are kept" in result.stderr
    assert _rows(store) == 33


def test_refused_store_gets_no_side_files(tmp_path):
    foreign = tmp_path / "foreign.db"
    db = sqlite3.connect(foreign)
    db.execute("PRAGMA journal_mode=WAL")  # the kind of file that used to get -wal/-shm beside it
    with db:
        db.execute("CREATE TABLE t (x)")
    db.close()  # the last connection checkpoints and removes its -wal and -shm files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]
    before = foreign.read_bytes()
    with pytest.raises(InputError, match="not a recallkit results store"):
        ResultStore(foreign)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.db"]
    assert foreign.read_bytes() == before


def test_store_path_that_is_a_directory_is_one_line(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        ResultStore(tmp_path)

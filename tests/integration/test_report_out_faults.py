"""``recallkit report`` into an ``--out`` it cannot write, through the installed command: a folder where the
report's PDF or summary.json goes (exit 2: input the user can change), and a full disk (exit 3: asked-for work that
could not be written). Each is one line naming ``--out`` and what went wrong, and the earlier report there, the results store and the folder in the way are left as they were.

The full disk is a small tmpfs mounted in a private mount namespace (``unshare -rm``), so nothing outside the
test sees it; where the kernel does not allow that, that test skips."""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.experiment_texts import TINY_LINEAR_MEMORY

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg", "RECALLKIT_CACHE": "off"}


def _namespace_available() -> bool:
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=8k tmpfs /mnt"],
                           capture_output=True, text=True)
    return probe.returncode == 0


def _report(out: str, where: str = ".") -> list[str]:
    """The command, run from ``where`` relative to the folder of the store and the experiment."""
    return [RECALLKIT, "report", f"{where}/tiny.toml", "--out", out, "--store", f"{where}/store.db", "--no-probes",
            "--jobs", "1"]


def _files(folder: Path) -> dict[str, str]:
    """relative path -> SHA-256 of every file under ``folder``."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _rows(store: Path) -> int:
    with sqlite3.connect(store) as db:
        return db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def _one_line(stderr: str) -> str:
    lines = stderr.replace("\r", "\n").strip().splitlines()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """A folder with a results store and a complete report in ``out``."""
    root = tmp_path_factory.mktemp("out_faults")
    (root / "tiny.toml").write_text(TINY_LINEAR_MEMORY)
    done = subprocess.run(_report("out") + ["--workers", "1"], cwd=root, env=ENV, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (root / "out" / "recallkit-report.pdf").is_file()
    return root


@pytest.mark.parametrize("in_the_way", ["recallkit-report.pdf", "summary.json"])
def test_a_folder_where_the_report_goes_is_one_line_and_keeps_the_earlier_report(earlier, in_the_way):
    out = earlier / f"out_{in_the_way}"
    shutil.copytree(earlier / "out", out)
    (out / in_the_way).unlink()
    (out / in_the_way).mkdir()
    (out / in_the_way / "keep.txt").write_text("someone's file")
    before, rows = _files(out), _rows(earlier / "store.db")

    done = subprocess.run(_report(out.name), cwd=earlier, env=ENV, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    line = _one_line(done.stderr)
    assert line.startswith(f"error: --out {out.name}: ") and f"{out.name}/{in_the_way} is a folder" in line, line
    assert "expected the report's file there" in line, line
    assert _files(out) == before  # figures, summary.json / PDF and the folder in the way, byte for byte
    assert not list(out.glob(".recallkit-staging-*"))
    assert _rows(earlier / "store.db") == rows


@pytest.mark.skipif(not _namespace_available(), reason="no private mount namespace (unshare -rm)")
# drawing covers matplotlib's failed write too; copying unchanged pages runs in the slow run
@pytest.mark.parametrize("redraw", [pytest.param([], marks=pytest.mark.slow), ["--redraw"]],
                         ids=["copying-pages", "drawing-pages"])
def test_a_full_disk_under_out_is_one_line_and_keeps_the_earlier_report(earlier, redraw):
    """The disk fills while unchanged pages are copied from the earlier report, or while pages are drawn
    (where matplotlib, failing to write, raised an AttributeError of its own)."""
    size_k = sum(p.stat().st_size for p in (earlier / "out").rglob("*") if p.is_file()) // 1024
    # room for the earlier report and little more: the new build's pages do not fit beside it
    script = (f"set -u; mkdir -p small; mount -t tmpfs -o size={size_k + 160}k tmpfs small; "
              "cp -a out small/out && cd small && "
              "find out -type f | sort | xargs sha256sum > ../before.txt; "
              f"{shlex.join(_report('out', '..') + redraw)} 2> ../err.txt; echo $? > ../rc.txt; "
              "find out -type f | sort | xargs sha256sum > ../after.txt; ls -a out > ../listing.txt")
    rows = _rows(earlier / "store.db")
    done = subprocess.run(["unshare", "-rm", "bash", "-c", script], cwd=earlier, env=ENV, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stderr = (earlier / "err.txt").read_text()
    assert (earlier / "rc.txt").read_text().strip() == "3", stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    line = stderr.replace("\r", "\n").strip().splitlines()[-1]  # after the progress lines of the run
    assert re.fullmatch(r"error: --out out: cannot write the report: No space left on device; the previous report "
                        r"there and the results store are kept", line), line
    before = (earlier / "before.txt").read_text()
    assert "recallkit-report.pdf" in before and "summary.json" in before
    assert (earlier / "after.txt").read_text() == before
    assert ".recallkit-staging" not in (earlier / "listing.txt").read_text()
    assert _rows(earlier / "store.db") == rows

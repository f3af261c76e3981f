"""Without the dask extra, ``--executor dask`` is one line and exit 2, before any work: through the installed command,
in an interpreter where importing dask and distributed fails as it does where they are not installed (a
sitecustomize puts None in their sys.modules entries). And nothing but the Dask executor imports them."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from recallkit.empirics.executors import DASK_MISSING

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ROOT = Path(__file__).resolve().parents[2]
BLOCK = "import sys\nsys.modules['dask'] = None\nsys.modules['distributed'] = None\n"


def _without_dask(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "sitecustomize.py").write_text(BLOCK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "RECALLKIT_CACHE": "off", "MPLBACKEND": "Agg"}
    return subprocess.run([RECALLKIT, *args], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)


@pytest.mark.parametrize("command, flags", [
    ("report", ["--dask-local", "2", "--out", "out"]),
    ("report", ["--scheduler", "tcp://127.0.0.1:1", "--out", "out"]),
    ("sweep", ["--dask-local", "2"]),
])
def test_the_dask_executor_without_dask_is_one_line_and_exit_2(tmp_path, command, flags):
    done = _without_dask(tmp_path, command, "assoc_memory_linear", "--executor", "dask", "--store", "s.db", *flags)
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert done.stderr.strip().splitlines() == [f"error: {DASK_MISSING}"], done.stderr
    assert not (tmp_path / "s.db").exists() and not (tmp_path / "out").exists()  # before any work


def test_the_block_is_what_a_missing_dask_looks_like(tmp_path):
    """(The sitecustomize is read: the same interpreter cannot import dask.)"""
    (tmp_path / "sitecustomize.py").write_text(BLOCK)
    done = subprocess.run([sys.executable, "-c", "import dask"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert done.returncode == 1 and "ModuleNotFoundError" in done.stderr, done.stderr


def test_only_the_dask_executor_imports_dask():
    """One import of dask in the toolkit, inside a function of the executors module (so importing any module of
    the toolkit never loads it)."""
    found = []
    for folder in ("recallkit", "empirics", "compare", "reports", "systems", "theory"):
        for path in (ROOT / folder).rglob("*.py"):
            for line in path.read_text(encoding="utf-8").splitlines():
                if re.match(r"\s*(import|from)\s+(dask|distributed)\b", line):
                    found.append((path.relative_to(ROOT).as_posix(), line))
    assert len(found) == 1 and found[0][0] == "empirics/executors.py", found
    assert found[0][1].startswith(" "), found  # indented: in a function, not at the module's top

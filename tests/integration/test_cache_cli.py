"""``recallkit cache``, installed: ``verify`` finds by recomputation a wrong entry that carries a valid MAC (signed
with the user's own secret, which the MAC cannot tell from a right one), ``clear`` empties the cache and nothing
else, ``info`` says where it is and what it holds."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from recallkit.empirics.cache import Cache

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "small_store" / "store.sqlite"
EXPERIMENT = "assoc_memory_linear"


def run(base: Path, *args: str, timeout: float = 240, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ, RECALLKIT_CACHE=str(base / "cache"), RECALLKIT_CACHE_KEY_FILE=str(base / "key"),
                SOURCE_DATE_EPOCH="1764493200", RECALLKIT_STORE=str(base / "store.sqlite"))
    full.update(env)
    return subprocess.run(["recallkit", *args], cwd=base, env=full, capture_output=True, text=True, timeout=timeout)


def slopes(folder: Path) -> list:
    return [(row.get("line"), row.get("slope"), row.get("verdict"))
            for row in json.loads((folder / "summary.json").read_text())["entries"]]


@pytest.fixture(scope="module")  # one report for the module: verify leaves the cache as the store gives it, clear last
def reported(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("cache_cli")
    shutil.copy(FIXTURE, tmp_path / "store.sqlite")
    done = run(tmp_path, "report", EXPERIMENT, "--no-probes", "--out", "clean")
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path


def test_verify_finds_a_wrong_entry_signed_with_the_users_own_secret(reported):
    cache = Cache(reported / "cache", (reported / "key").read_bytes().strip())
    (key,) = [k for kind, k in cache.entries(("fits",))]
    document = cache.get("fits", key)
    text = json.dumps(document)
    slope = next(s for _, s, _ in slopes(reported / "clean") if isinstance(s, float))
    assert repr(slope) in text
    # a wrong slope under a valid MAC: a report would believe it (the MAC proves who wrote it, not that it is right)
    assert cache.put("fits", key, json.loads(text.replace(repr(slope), repr(slope + 1.0))))

    found = run(reported, "cache", "verify", EXPERIMENT, "--all")
    assert found.returncode == 1, found.stdout + found.stderr
    assert f"differs: fits/{key}" in found.stdout
    assert "1 differ" in found.stdout

    assert cache.get("fits", key) == document  # rewritten with what the store gives
    again = run(reported, "cache", "verify", EXPERIMENT, "--all")
    assert again.returncode == 0 and "0 differ" in again.stdout, again.stdout + again.stderr


def test_clear_empties_the_cache_and_leaves_everything_else(reported):
    mine = reported / "cache" / "notes.txt"
    mine.write_text("not the cache's")
    before = run(reported, "cache", "info")
    assert before.returncode == 0 and "fits" in before.stdout and str(reported / "key") in before.stdout
    done = run(reported, "cache", "clear")
    assert done.returncode == 0, done.stderr
    assert "removed" in done.stdout and int(done.stdout.split("removed ")[1].split()[0]) >= 15
    assert [p.name for p in (reported / "cache").rglob("*")] == ["notes.txt"]
    assert "entries: none" in run(reported, "cache", "info").stdout


def test_verify_with_the_cache_off_is_one_line(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "store.sqlite")
    done = run(tmp_path, "cache", "verify", EXPERIMENT, RECALLKIT_CACHE="off")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "RECALLKIT_CACHE" in done.stderr and "Traceback" not in done.stderr

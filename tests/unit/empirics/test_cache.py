"""The one cache of derived data (empirics.cache), as its page entries show it: a second report into a new folder
draws nothing and gives the same bytes, a corrupt entry is drawn again, a killed write leaves no entry, the cache
stays within its bound, and it lives where the environment says (never in the home folder during tests).
Its authentication (MACs, the secret, hostile files) is tested in test_cache_auth.py."""
from __future__ import annotations

import os
import subprocess
import tempfile
import sys
import time
from pathlib import Path

import pytest

from recallkit.empirics import cache as cache_module
from recallkit.empirics import files
from recallkit.empirics.cache import Cache
from recallkit.reports import pdf as pdf_mod
from recallkit.reports.pdf import build_report
from recallkit.theory.errors import InputError
from tests.unit.reports.test_reports_figures import synthetic_capacity


def small_summary() -> dict:
    """One capacity experiment: a handful of pages, so a test draws in a few seconds."""
    exp = {"name": "assoc_linear", "title": "Associative memory (anchor)", "kind": "capacity", "pack": "assoc_memory",
           "lines": [{"name": "linear d^2", "prediction": {"slope": 1.0, "dominant": "interference"}}],
           "fits": [synthetic_capacity()]}
    return {"schema": "recallkit.summary/1", "title": "recallkit report (cache)",
            "provenance": {"code_version": "0.1.0+gabc", "date": "2026-11-30T09:00:00Z", "preset": "quick"},
            "experiments": [exp]}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RECALLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    return tmp_path / "cache"


def page_bytes(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "figures").iterdir()) if p.suffix in (".pdf", ".png")}


@pytest.fixture
def joins(monkeypatch) -> list:
    calls: list = []
    real = pdf_mod._join
    monkeypatch.setattr(pdf_mod, "_join", lambda *a, **k: (calls.append(1), real(*a, **k)))
    return calls


def test_a_report_into_a_new_folder_copies_every_page_and_the_joined_pdf_from_the_cache(tmp_path, cache_dir, joins):
    first, second = {}, {}
    a = build_report(small_summary(), tmp_path / "a", stats=first)
    b = build_report(small_summary(), tmp_path / "b", stats=second)
    assert first["pages"] >= 5 and first["drawn"] == first["pages"] and first["cached"] == 0, first
    assert second["drawn"] == 0 and second["reused"] == 0 and second["cached"] == second["pages"], second
    assert "from the page cache" in second["line"]
    assert joins == [1]  # the second report's PDF is the first one's, copied
    assert b.read_bytes() == a.read_bytes()
    assert page_bytes(tmp_path / "b") == page_bytes(tmp_path / "a")
    assert len(list((cache_dir / "pages").glob("*.json"))) == first["pages"]


def test_pages_copied_from_the_cache_equal_pages_drawn_without_it(tmp_path, cache_dir, monkeypatch):
    build_report(small_summary(), tmp_path / "fill", png=True)
    stats = {}
    cached = build_report(small_summary(), tmp_path / "cached", png=True, stats=stats)
    assert stats["cached"] == stats["pages"] and stats["drawn"] == 0, stats
    monkeypatch.setenv("RECALLKIT_CACHE", "off")
    drawn = build_report(small_summary(), tmp_path / "drawn", png=True, jobs=1)
    assert cached.read_bytes() == drawn.read_bytes()
    pages = page_bytes(tmp_path / "cached")
    assert any(name.endswith(".png") for name in pages) and pages == page_bytes(tmp_path / "drawn")


def test_a_page_kept_without_png_is_drawn_again_when_png_is_asked(tmp_path, cache_dir):
    build_report(small_summary(), tmp_path / "a")
    stats, again = {}, {}
    build_report(small_summary(), tmp_path / "b", png=True, stats=stats)
    assert stats["drawn"] == stats["pages"], stats  # no PNG in the entries: drawn, and kept with one
    build_report(small_summary(), tmp_path / "c", png=True, stats=again)
    assert again["cached"] == again["pages"], again


def test_a_corrupt_cache_entry_is_drawn_again_and_rewritten(tmp_path, cache_dir):
    a = build_report(small_summary(), tmp_path / "a")
    pdfs = sorted((cache_dir / "pages").glob("*.pdf"))
    pdfs[0].write_bytes(pdfs[0].read_bytes()[: 200])  # cut short
    pdfs[1].with_suffix(".json").write_text("{not json")  # a marker that cannot be read
    joined = next((cache_dir / "joined").glob("*.pdf"))
    data = joined.read_bytes()
    joined.write_bytes(data.replace(b"recallkit", b"RECALLKIT", 1))  # same size, other bytes
    assert joined.read_bytes() != data
    stats, repaired = {}, {}
    b = build_report(small_summary(), tmp_path / "b", stats=stats)
    assert stats["drawn"] == 2 and stats["cached"] == stats["pages"] - 2, stats
    assert b.read_bytes() == a.read_bytes() and page_bytes(tmp_path / "b") == page_bytes(tmp_path / "a")
    build_report(small_summary(), tmp_path / "c", stats=repaired)
    assert repaired["drawn"] == 0 and repaired["cached"] == repaired["pages"], repaired


def test_redraw_reads_nothing_from_the_cache(tmp_path, cache_dir):
    build_report(small_summary(), tmp_path / "a")
    stats = {}
    build_report(small_summary(), tmp_path / "b", reuse=False, stats=stats)
    assert stats["drawn"] == stats["pages"] and stats["cached"] == 0, stats


KILL_AT = """
import os, signal, sys
from pathlib import Path
from recallkit.empirics import cache, files

root, src, kill_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
calls = []
real = os.replace

def replace(a, b):
    calls.append(b)
    if len(calls) == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    real(a, b)

files.os.replace = replace
cache.Cache(root, b"s" * 32).store_files("pages", "e" * 64, {".pdf": src, ".png": src.with_suffix(".png")})
"""


@pytest.mark.parametrize("kill_at", [1, 2, 3], ids=["first-file", "second-file", "marker"])
def test_a_write_killed_at_any_step_leaves_no_entry(tmp_path, kill_at):
    src = tmp_path / "page.pdf"
    src.write_bytes(b"%PDF-1.4 page\n%%EOF\n")
    src.with_suffix(".png").write_bytes(b"\x89PNG page")
    root = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", KILL_AT, str(root), str(src), str(kill_at)], capture_output=True)
    assert done.returncode == -9, done.stderr.decode()
    cache = Cache(root, b"s" * 32)
    targets = {".pdf": tmp_path / "out.pdf", ".png": tmp_path / "out.png"}
    assert not cache.fetch_files("pages", "e" * 64, targets)
    assert not (tmp_path / "out.pdf").exists()
    left = list((root / "pages").iterdir())
    assert left  # what the killed writer left: a temporary file, maybe a file with no marker
    old = time.time() - 2 * 3600
    for path in left:
        os.utime(path, (old, old))
    cache.prune()  # long dead: removed
    assert list((root / "pages").iterdir()) == []
    assert cache.store_files("pages", "e" * 64, {".pdf": src, ".png": src.with_suffix(".png")})
    assert cache.fetch_files("pages", "e" * 64, targets) and targets[".pdf"].read_bytes() == src.read_bytes()


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    src = tmp_path / "page.pdf"
    src.write_bytes(b"%PDF-1.4 page\n%%EOF\n")
    cache = Cache(tmp_path / "cache", b"s" * 32)

    def interrupted(a, b):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.store_files("pages", "e" * 64, {".pdf": src})
    assert list((tmp_path / "cache" / "pages").iterdir()) == []


def test_prune_removes_the_least_recently_used_entries_beyond_the_bound(tmp_path):
    cache = Cache(tmp_path / "cache", b"s" * 32, limit=3000)  # two entries of about 1.4 kB
    for n, key in enumerate(("a" * 64, "b" * 64, "c" * 64)):
        src = tmp_path / f"{n}.pdf"
        src.write_bytes(bytes([n]) * 1000)
        cache.store_files("pages", key, {".pdf": src})
        marker = tmp_path / "cache" / "pages" / f"{key}.json"
        os.utime(marker, (1000.0 + n, 1000.0 + n))  # a oldest, c newest
    assert cache.fetch_files("pages", "a" * 64, {".pdf": tmp_path / "out.pdf"})  # a used now: the newest
    assert cache.prune() == 1
    kept = sorted(p.stem for p in (tmp_path / "cache" / "pages").glob("*.json"))
    assert kept == ["a" * 64, "c" * 64]
    assert not (tmp_path / "cache" / "pages" / f"{'b' * 64}.pdf").exists()


def test_cache_root_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("RECALLKIT_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_module.cache_root() == tmp_path / "home" / ".cache" / "recallkit"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # the XDG spec ignores a relative path
    assert cache_module.cache_root() == tmp_path / "home" / ".cache" / "recallkit"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_module.cache_root() == tmp_path / "xdg" / "recallkit"
    monkeypatch.setenv("RECALLKIT_CACHE", str(tmp_path / "mine"))
    assert cache_module.from_env().root == tmp_path / "mine"
    monkeypatch.setenv("RECALLKIT_CACHE", "off")
    assert cache_module.from_env() is None
    monkeypatch.setenv("RECALLKIT_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("RECALLKIT_CACHE_MB", "lots")
    with pytest.raises(InputError, match="RECALLKIT_CACHE_MB: expected a size in megabytes"):
        cache_module.from_env()
    monkeypatch.setenv("RECALLKIT_CACHE_MB", "0.5")
    assert cache_module.from_env().limit == 2**19
    monkeypatch.setenv("RECALLKIT_CACHE_MB", "inf")
    with pytest.raises(InputError, match="RECALLKIT_CACHE_MB: expected a size in megabytes"):
        cache_module.from_env()


def test_the_test_session_keeps_out_of_the_home_cache():
    # tests/conftest.py turns the cache off for every test that does not point it at its own tmp_path, and keeps
    # the secret in a folder of the session's own
    assert os.environ.get("RECALLKIT_CACHE") == "off" and cache_module.from_env() is None
    assert str(cache_module.key_path()).startswith(tempfile.gettempdir())


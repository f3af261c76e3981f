"""The cache attacked as anyone who can write its folder would (a CI job restoring a cache from another branch, a
folder shared between users), through the installed ``recallkit report``: no tampered entry changes a verdict, a
number or a page; the report says how many entries it recomputed; hostile files (a FIFO, a link to /dev/zero, JSON
nested 100 000 deep, NaN) are misses within seconds; and a cache made under another secret works, only slower.

The attacker here has no secret, so the best they can do is change an entry and recompute every digest it carries
(``forge``): that is exactly what fooled the cache when entries carried a SHA-256 of themselves."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pypdf
import pytest

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "small_store" / "store.sqlite"
EXPERIMENT = "assoc_memory_linear"  # a capacity search: fits, realised predictions, a pack's pieces, 12 pages
DIGESTS = ("sha256", "mac")


def _env(base: Path, cache: Path, key: Path) -> dict:
    env = dict(os.environ, RECALLKIT_CACHE=str(cache), RECALLKIT_CACHE_KEY_FILE=str(key),
               SOURCE_DATE_EPOCH="1764493200", RECALLKIT_STORE=str(base / "store.sqlite"))
    env.pop("MPLBACKEND", None)
    return env


def report(base: Path, out: str, cache: Path, key: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(["recallkit", "report", EXPERIMENT, "--no-probes", "--out", str(base / out)],
                          cwd=base, env=_env(base, cache, key), capture_output=True, text=True, timeout=timeout)


def verdicts(folder: Path) -> list:
    """Every check's row of summary.json (its numbers and verdict), the experiments' fits, and the pages listed."""
    doc = json.loads((folder / "summary.json").read_text())
    fits = [e.get("fits") for e in doc["experiments"]]
    return [doc["entries"], fits, [e.get("name") for e in doc["experiments"]]]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A report on a copy of the small store, into an empty cache: the cache every test copies and attacks."""
    base = tmp_path_factory.mktemp("clean")
    shutil.copy(FIXTURE, base / "store.sqlite")
    done = report(base, "out", base / "cache", base / "key")
    assert done.returncode == 0, done.stderr[-3000:]
    return base


@pytest.fixture
def attacked(clean, tmp_path):
    """A copy of the clean report's store, cache and secret, for one test to attack."""
    shutil.copy(clean / "store.sqlite", tmp_path / "store.sqlite")
    shutil.copytree(clean / "cache", tmp_path / "cache", symlinks=True)
    shutil.copy2(clean / "key", tmp_path / "key")
    return tmp_path


def entries(cache: Path, kind: str) -> list[Path]:
    """The entry files (``KEY.json``) of one kind of cache entry."""
    found = sorted(p for p in (cache / kind).glob("*.json") if len(p.stem) == 64)
    assert found, f"the clean report kept no {kind} entry"
    return found


def forge(entry: Path, body: bytes) -> None:
    """Put ``body`` in ``entry`` and recompute every digest its header carries, as SHA-256 of the body: all an
    attacker without the secret can do."""
    head, _, _ = entry.read_bytes().partition(b"\n")
    header = json.loads(head)
    for field in DIGESTS:
        if field in header:
            header[field] = hashlib.sha256(body).hexdigest()
    entry.write_bytes(json.dumps(header).encode() + b"\n" + body)


def shift_numbers(body: bytes) -> bytes:
    """The same document with every float one larger (a slope, a CI, a prediction)."""
    def walk(value):
        if isinstance(value, float):
            return value + 1.0
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value
    return json.dumps(walk(json.loads(body)), separators=(",", ":")).encode()


def forge_files(cache: Path, kind: str, garbage: bytes) -> int:
    """Replace every file of every ``kind`` entry with ``garbage`` and rewrite the hashes its entry lists."""
    n = 0
    for entry in entries(cache, kind):
        _, _, body = entry.read_bytes().partition(b"\n")
        listed = json.loads(body)
        files = listed.get("files", listed)
        for suffix in list(files):
            (cache / kind / f"{entry.stem}{suffix}").write_bytes(garbage)
            files[suffix] = hashlib.sha256(garbage).hexdigest()
        forge(entry, json.dumps(listed, sort_keys=True).encode())
        n += 1
    return n


def not_ours(stderr: str) -> int:
    lines = [line for line in stderr.splitlines() if "cache entr" in line and "not ours" in line]
    assert len(lines) == 1, stderr[-3000:]
    return int(lines[0].split()[0])


def pdf_pages(path: Path) -> int:
    return len(pypdf.PdfReader(path).pages)


def test_rewritten_fits_documents_and_pieces_change_no_verdict_and_are_counted(clean, attacked):
    forged = 0
    for kind in ("fits", "documents"):
        for entry in entries(attacked / "cache", kind):
            forge(entry, shift_numbers(entry.read_bytes().partition(b"\n")[2]))
            forged += 1
    for entry in entries(attacked / "cache", "pieces"):  # a foreign document where the pack's pieces were
        forge(entry, json.dumps({"terms": [], "regions": [], "notes": ["not the pack's"]}).encode())
        forged += 1
    done = report(attacked, "out", attacked / "cache", attacked / "key")
    assert done.returncode == 0, done.stderr[-3000:]
    assert verdicts(attacked / "out") == verdicts(clean / "out")
    assert not_ours(done.stderr) == forged
    again = report(attacked, "again", attacked / "cache", attacked / "key")  # recomputed entries were rewritten
    assert again.returncode == 0 and "not ours" not in again.stderr, again.stderr[-3000:]


def test_garbage_pages_and_joined_pdf_under_rehashed_entries_give_the_same_report(clean, attacked):
    forged = forge_files(attacked / "cache", "pages", b"%PDF-1.4 garbage\n")
    forged += forge_files(attacked / "cache", "joined", b"not a pdf at all")
    done = report(attacked, "out", attacked / "cache", attacked / "key")
    assert done.returncode == 0, done.stderr[-3000:]
    assert not_ours(done.stderr) == forged
    pdf = attacked / "out" / "recallkit-report.pdf"
    assert pdf_pages(pdf) == pdf_pages(clean / "out" / "recallkit-report.pdf")
    assert pdf.read_bytes() == (clean / "out" / "recallkit-report.pdf").read_bytes()


@pytest.mark.slow  # a report of its own; the default run keeps the cache's own tamper cases
def test_garbage_pages_in_the_previous_report_folder_are_drawn_again(clean, attacked):
    out = attacked / "out"
    shutil.copytree(clean / "out", out)
    shutil.rmtree(attacked / "cache")  # only the previous report's folder to reuse from
    listing = json.loads((out / "figures" / "pages.json").read_text())
    for stem, page in listing["pages"].items():
        (out / "figures" / f"{stem}.pdf").write_bytes(b"garbage")
        for field in ("files", "sha256"):
            if isinstance(page.get(field), dict):
                page[field] = {s: hashlib.sha256(b"garbage").hexdigest() for s in page[field]}
    (out / "figures" / "pages.json").write_text(json.dumps(listing))
    (out / "recallkit-report.pdf").write_bytes(b"garbage")
    done = report(attacked, "out", attacked / "cache", attacked / "key")
    assert done.returncode == 0, done.stderr[-3000:]
    pdf = out / "recallkit-report.pdf"
    assert pdf.read_bytes() == (clean / "out" / "recallkit-report.pdf").read_bytes()
    assert all((out / "figures" / f"{stem}.pdf").read_bytes().startswith(b"%PDF") for stem in listing["pages"])


@pytest.mark.slow  # a report of its own; the default run keeps the cache's own tamper cases
def test_a_cache_made_under_another_secret_works_and_recomputes(clean, attacked):
    done = report(attacked, "out", attacked / "cache", attacked / "another-key")
    assert done.returncode == 0, done.stderr[-3000:]
    assert verdicts(attacked / "out") == verdicts(clean / "out")
    assert not_ours(done.stderr) >= 15  # every entry the report looked up
    assert (attacked / "another-key").stat().st_mode & 0o777 == 0o600  # made on first use, the owner's alone


def plant(entry: Path, hostile: str) -> None:
    """Put a hostile file where ``entry`` was."""
    entry.unlink()
    if hostile == "fifo":
        os.mkfifo(entry)  # a reader that opened it blocking would wait forever
    elif hostile == "dev-zero":
        entry.symlink_to("/dev/zero")  # a reader that followed it would fill memory
    elif hostile == "folder":
        entry.mkdir()
    else:
        body = b"[" * 100_000 + b"]" * 100_000 if hostile == "deep-json" else b'{"value": NaN}'
        header = {"schema": "recallkit.cache/2", "kind": entry.parent.name, "key": entry.stem,
                  "sha256": hashlib.sha256(body).hexdigest(), "mac": hashlib.sha256(body).hexdigest()}
        entry.write_bytes(json.dumps(header).encode() + b"\n" + body)


def test_hostile_files_in_place_of_entries_are_misses_within_seconds(clean, attacked):
    cache = attacked / "cache"
    pages = entries(cache, "pages")
    planted = {entries(cache, "fits")[0]: "fifo", entries(cache, "documents")[0]: "dev-zero",
               pages[0]: "deep-json", pages[1]: "nan", pages[2]: "folder", pages[3]: "fifo", pages[4]: "dev-zero"}
    for entry, hostile in planted.items():
        plant(entry, hostile)
    done = report(attacked, "out", cache, attacked / "key", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert verdicts(attacked / "out") == verdicts(clean / "out")
    assert not_ours(done.stderr) == len(planted)


def test_a_key_file_readable_by_others_is_refused_in_one_line(clean, attacked):
    key = attacked / "key"
    key.chmod(0o644)
    done = report(attacked, "out", attacked / "cache", key, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(key) in lines[0] and "readable by others" in lines[0], done.stderr
    assert not (attacked / "out" / "summary.json").exists()  # refused before anything ran
    key.chmod(0o600)
    assert stat.S_IMODE(key.stat().st_mode) == 0o600

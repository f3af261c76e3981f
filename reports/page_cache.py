"""A content-addressed cache of drawn pages (and joined reports), shared by every report on this machine.

Why: a report into a new ``--out`` folder had nothing to reuse and drew every page again, although the
same pages, from the same data and the same code, were drawn by the report before it in another folder.
Here a drawn page's files are kept under the page's cache key (``reports.render.page_keys``: its data,
stem, label and the code fingerprint), so any report, in any folder, copies them instead of drawing. The
joined PDF is kept the same way under its join key (``reports.join_cache.join_key``).

Where: ``$RECALLKIT_CACHE``, else ``$XDG_CACHE_HOME/recallkit``, else ``~/.cache/recallkit``;
``RECALLKIT_CACHE=off`` turns it off (nothing read, nothing written). Entries live in ``pages/`` and
``joined/`` under it (and the main job's fits, packs' pieces and systems' steps' entries in ``fits/``,
``pieces/`` and ``steps/``, see ``compare.fit_cache`` and ``recallkit.own_steps``, bounded with them).

An entry is its files (``KEY.pdf``, ``KEY.png`` when the page was drawn with ``--png``) and a marker
``KEY.json`` holding the SHA-256 of each file. Every file is written to a temporary file in the same folder
and moved into place with ``os.replace``, the marker last: a report killed while writing leaves either
the previous entry or no entry (a file without its marker is not an entry), never half a page. A read
checks each file against its marker's hash, so a truncated or edited file is a miss: the page is drawn
again and the entry rewritten.

Bounded: after a report stores new entries, the least recently used ones (a hit touches the marker) are
removed while the cache holds more than ``$RECALLKIT_CACHE_MB`` megabytes (default 256, about 25
reports of the quick preset). Failing to write the cache never fails a report: it only costs a redraw
the next time.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from recallkit.theory.errors import InputError

__all__ = ["PageCache", "cache_root", "from_env", "DEFAULT_MB", "SCHEMA"]

SCHEMA = "recallkit.page-cache/1"
DEFAULT_MB = 256
OFF = "off"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0  # a temporary file this old belongs to a writer that was killed, not a running one
_MARKER = ".json"
# every folder under the cache the prune bounds: pages, joined reports, and the main job's fits, packs' pieces and
# systems' steps' entries
# (``compare.fit_cache``: one file KEY.json each, which counts as its own marker here)
KINDS = ("pages", "joined", "fits", "pieces", "steps")


def cache_root() -> Path | None:
    """The cache folder: ``$RECALLKIT_CACHE``, else ``$XDG_CACHE_HOME/recallkit``, else ``~/.cache/recallkit``;
    None when ``RECALLKIT_CACHE=off`` (or there is no home folder)."""
    raw = os.environ.get("RECALLKIT_CACHE", "").strip()
    if raw.lower() == OFF:
        return None
    if raw:
        return Path(raw).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # (the XDG spec: a relative value is ignored)
        return Path(xdg) / "recallkit"
    try:
        return Path.home() / ".cache" / "recallkit"
    except RuntimeError:  # no home folder to be found: no cache, the report draws its pages
        return None


def _max_bytes() -> int:
    raw = os.environ.get("RECALLKIT_CACHE_MB", "").strip()
    if not raw:
        return DEFAULT_MB * 2**20
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise InputError(f"RECALLKIT_CACHE_MB: expected a size in megabytes (a number >= 0), got {raw!r}")
    return int(value * 2**20)


def from_env() -> "PageCache | None":
    """The cache the environment names (see the module's docstring), or None when it is off."""
    root = cache_root()
    return None if root is None else PageCache(root, _max_bytes())


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before, whenever the process dies."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP_PREFIX)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would keep a cache shared through $RECALLKIT_CACHE from the others
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass
class PageCache:
    """Entries keyed by a hex digest, in ``root/<kind>/`` (kind: ``pages`` or ``joined``), at most about
    ``max_bytes`` in all."""

    root: Path
    max_bytes: int = DEFAULT_MB * 2**20
    stored: int = field(default=0, init=False)  # entries this object wrote (prune only after some)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    def _folder(self, kind: str) -> Path:
        return self.root / kind

    def fetch(self, kind: str, key: str, targets: dict[str, Path]) -> bool:
        """Write the entry's files to ``targets`` ({suffix: path}, e.g. {".pdf": ..., ".png": ...}) and return
        True; False, writing nothing, when the entry is missing, lacks a suffix or fails its hash."""
        folder = self._folder(kind)
        marker = folder / f"{key}{_MARKER}"
        try:
            doc = json.loads(marker.read_text())
            hashes = doc["files"] if doc.get("schema") == SCHEMA else {}
            blobs = {}
            for suffix in targets:
                data = (folder / f"{key}{suffix}").read_bytes()
                if not isinstance(hashes, dict) or hashes.get(suffix) != _sha256(data):
                    return False  # corrupt or half-replaced: drawn again, and rewritten by store()
                blobs[suffix] = data
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False
        for suffix, path in targets.items():
            Path(path).write_bytes(blobs[suffix])
        with contextlib.suppress(OSError):
            os.utime(marker)  # recently used: pruned last
        return True

    def store(self, kind: str, key: str, sources: dict[str, Path]) -> bool:
        """Keep the files ``sources`` ({suffix: path}) under ``key``; the marker goes last, so a store that
        dies half-way leaves no entry. Returns whether it was stored (an unwritable cache is skipped)."""
        folder = self._folder(kind)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            hashes = {}
            for suffix, path in sources.items():
                data = Path(path).read_bytes()
                hashes[suffix] = _sha256(data)
                _write_atomic(folder / f"{key}{suffix}", data)
            doc = {"schema": SCHEMA, "files": hashes}
            _write_atomic(folder / f"{key}{_MARKER}", json.dumps(doc, sort_keys=True).encode())
        except OSError:
            return False
        self.stored += 1
        return True

    def prune(self) -> int:
        """Remove the least recently used entries while the cache is over ``max_bytes``, and files that
        belong to no entry (a killed writer's); return how many entries were removed."""
        entries: list[tuple[float, int, list[Path]]] = []  # (last use, bytes, files)
        total = 0
        now = time.time()
        for kind in KINDS:
            folder = self._folder(kind)
            try:
                names = list(os.scandir(folder))
            except OSError:
                continue
            groups: dict[str, list[os.DirEntry]] = {}
            for item in names:
                if item.name.startswith(_TMP_PREFIX):
                    with contextlib.suppress(OSError):
                        if now - item.stat().st_mtime > _STALE_TMP_S:
                            os.unlink(item.path)
                    continue
                groups.setdefault(item.name.split(".", 1)[0], []).append(item)
            for key, items in groups.items():
                marker = next((i for i in items if i.name == f"{key}{_MARKER}"), None)
                try:
                    size = sum(i.stat().st_size for i in items)
                    used = marker.stat().st_mtime if marker is not None else None
                except OSError:
                    continue  # removed meanwhile by another report's prune
                if used is None:  # files whose marker was never written: a writer killed (or still writing)
                    for item in items:
                        with contextlib.suppress(OSError):
                            if now - item.stat().st_mtime > _STALE_TMP_S:
                                os.unlink(item.path)
                    continue
                # marker first: a reader that finds no marker never takes the rest for an entry
                entries.append((used, size, [Path(marker.path)] + [Path(i.path) for i in items if i is not marker]))
                total += size
        removed = 0
        for _, size, files in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            for path in files:
                with contextlib.suppress(OSError):
                    path.unlink()
            total -= size
            removed += 1
        return removed

"""The one cache of derived data: fits, documents (a pack's phase diagram, realised predictions), systems' steps'
entries, the math path, drawn pages and joined reports, each kept under a key of exactly what it was computed from.

**Keys.** :func:`cache_key` hashes a type-exact canonical form of the builder's own arguments (``1`` and ``1.0``,
a tuple and a list, a dict's order all count), the source of the whole ``recallkit`` namespace
(:func:`source_fingerprint`, so an uncommitted edit counts too), ``code_version()`` and the numerical libraries'
versions. A changed stored metric, pack file or option gives another key, hence a fresh result.

**Authenticated entries.** The SHA-256 a file carries proves only that the file agrees with itself: anyone who can
write the cache folder (a cache restored by a CI job from another branch, a folder shared between users) could
rewrite an entry and its hash and so change a verdict. Every entry here carries a MAC instead: HMAC-SHA256, under a
per-user secret kept outside the cache folder (:func:`key_path`), over the entry's schema, kind, key and body, so
an entry can neither be forged nor replayed under another key. An entry whose MAC does not verify, or that is not
a regular file we could have written, is *not ours*: a miss, computed again and rewritten, and counted
(:attr:`Cache.not_ours`) so the report says how many. A cache made under another secret still works, only slower.

**Files.** An entry is ``KIND/KEY.json``: one header line ``{"schema", "kind", "key", "mac"}`` and the body. A
document's body is its JSON; a page's or a joined report's body lists its files (``KEY.pdf``, ``KEY.png``) with
the SHA-256 of each, so the files are authenticated through the MAC'd body. Files are written by
``empirics.files.write_atomic`` (temporary file, fsync, rename; the header entry last), read by
``empirics.files.read_regular`` (no links followed, no FIFOs or devices, a size limit) and parsed with a depth
limit: any failure is a miss, never a hang or a traceback. Nothing in the cache is executed or unpickled: bodies
are JSON and the page files are only copied.

**Where and how much.** ``$RECALLKIT_CACHE``, else ``$XDG_CACHE_HOME/recallkit``, else ``~/.cache/recallkit``;
``RECALLKIT_CACHE=off`` turns it off. After a report stores entries, the least recently used (a hit touches its
header file) are removed while the cache holds more than ``$RECALLKIT_CACHE_MB`` megabytes (default 256).
Writing the cache is best effort: an unwritable cache folder costs the computation next time, never the result.

**Declined values.** A value whose inputs or result the cache cannot hold exactly (an object type outside the
closed set the encodings know, a document JSON would not give back as it was) is computed again on every report:
that costs time silently, so each one is counted with its reason (:attr:`Cache.declined`, :meth:`Cache.decline`).
``RECALLKIT_CACHE_STRICT=1`` makes a decline raise :class:`Declined` instead (for tests and CI: a derived value that
is neither cached nor cheap is a bug); ``0`` or unset counts it only.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import importlib.metadata
import json
import math
import os
import re
import secrets
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from recallkit.empirics.files import TMP_PREFIX, loads_json, read_regular, write_atomic
from recallkit.empirics.provenance import code_version, namespace_digest
from recallkit.theory.errors import InputError

__all__ = ["Cache", "DEFAULT_MB", "Declined", "KINDS", "SCHEMA", "STRICT_ENV", "Uncacheable", "Audit", "cache_key",
           "cache_root", "cached", "canonical", "from_env", "json_exact", "key_path", "load_secret", "max_bytes",
           "signed", "source_fingerprint", "strict", "verified"]

SCHEMA = "recallkit.cache/2"
DEFAULT_MB = 256
OFF = "off"
#: the folders under the cache root, one per kind of entry
KINDS = ("fits", "documents", "pieces", "steps", "environment", "pages", "joined", "reports")
_FILE_KINDS = frozenset({"pages", "joined"})
_LIBRARIES = ("numpy", "scipy", "statsmodels", "sympy")
_KEY_RE = re.compile(r"^[0-9a-f]{64}$")
_NAME_RE = re.compile(r"^[0-9a-f]{64}\.(json|pdf|png)$")
_MAX_DOCUMENT = 64 * 2**20
_MAX_FILE = 256 * 2**20
_STALE_TMP_S = 3600.0  # a temporary file this old belongs to a writer that was killed, not a running one
_SECRET_BYTES = 32
_KEY_ENV = "RECALLKIT_CACHE_KEY_FILE"
STRICT_ENV = "RECALLKIT_CACHE_STRICT"


class Uncacheable(TypeError):
    """A value holds a type the cache does not store exactly: it is computed, not cached."""


class Declined(RuntimeError):
    """Under ``RECALLKIT_CACHE_STRICT=1``: the cache was handed a value it cannot keep. Not a TypeError or ValueError,
    so that no "best effort" handler around a store swallows it."""


def strict() -> bool:
    """Whether ``$RECALLKIT_CACHE_STRICT`` is 1 (a declined value raises); InputError (one line) unless 1, 0 or unset.
    Read at each decline, so a test may set it for one report."""
    raw = os.environ.get(STRICT_ENV, "").strip()
    if raw in ("", "0"):
        return False
    if raw == "1":
        return True
    raise InputError(f"{STRICT_ENV}: expected 1 (a value the cache cannot keep is an error) or 0, got {raw!r}")


# ----------------------------------------------------------------------------- keys
@functools.lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """SHA-256 over every ``.py`` and ``.toml`` file (code, shipped packs and experiments) of the installed
    ``recallkit`` namespace, by path and bytes. Kept for the process: the code a process runs is the code it
    imported."""
    return namespace_digest(("*.py", "*.toml"))


@functools.lru_cache(maxsize=1)
def _library_versions() -> tuple[str, ...]:
    found = []
    for name in _LIBRARIES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} absent")
    return tuple(found)


def canonical(value: Any) -> Any:
    """A JSON-able form of ``value`` that keeps every distinction a computation may see: the exact type of
    numbers, tuples against lists, a mapping's order, each field of a dataclass. Other types raise Uncacheable."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    numpy = sys.modules.get("numpy")  # not imported: no value is one of its numbers (and --help stays light)
    if numpy is not None and isinstance(value, numpy.generic):
        return {"numpy": value.dtype.str, "value": canonical(value.item())}
    if kind in (list, tuple):
        items = [canonical(v) for v in value]
        return items if kind is list else {"tuple": items}
    if isinstance(value, Mapping):  # a mapping's order is the order its JSON is written in
        return {"dict": [[canonical(k), canonical(v)] for k, v in value.items()], "type": kind.__name__}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"dataclass": f"{kind.__module__}.{kind.__qualname__}",
                "fields": [[f.name, canonical(getattr(value, f.name))] for f in dataclasses.fields(value)]}
    raise Uncacheable(f"cannot cache a value of type {kind.__module__}.{kind.__qualname__}")


def json_exact(value: Any) -> bool:
    """Whether ``value`` comes back from JSON exactly as it is (no tuples, no non-string keys, no numpy types, no
    non-finite floats)."""
    try:
        return canonical(json.loads(json.dumps(value, allow_nan=False))) == canonical(value)
    except (Uncacheable, TypeError, ValueError, RecursionError):
        return False


def cache_key(what: str, inputs: Any) -> str:
    """The key of a result named ``what`` computed from ``inputs`` by this code (source, code version, libraries).
    Uncacheable when an input has a type the key cannot hold exactly, or names an object's memory address (never
    the same twice, and not what the object holds)."""
    text = json.dumps(canonical(inputs), separators=(",", ":"), allow_nan=False)
    if " at 0x" in text:
        raise Uncacheable(f"{what}: an input names an object's memory address")
    head = json.dumps([SCHEMA, what, source_fingerprint(), code_version(), list(_library_versions())])
    return hashlib.sha256(f"{head}\n{text}".encode()).hexdigest()


# ----------------------------------------------------------------------------- the secret
def key_path() -> Path | None:
    """Where the cache's secret is kept: ``$RECALLKIT_CACHE_KEY_FILE``, else ``$XDG_CONFIG_HOME/recallkit/cache-key``,
    else ``~/.config/recallkit/cache-key`` (outside the cache folder: a restored or shared cache never holds it).
    None when there is no home folder."""
    raw = os.environ.get(_KEY_ENV, "").strip()
    if raw:
        return Path(raw).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "recallkit" / "cache-key"
    try:
        return Path.home() / ".config" / "recallkit" / "cache-key"
    except RuntimeError:
        return None


def _key_label(path: Path) -> str:
    return f"{_KEY_ENV} {path}" if os.environ.get(_KEY_ENV, "").strip() else f"cache key {path}"


def _read_secret(path: Path) -> bytes:
    """The secret in ``path``; InputError when the file is not one we can trust (one line, naming it)."""
    label = _key_label(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{label}: cannot read it: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{label}: expected a regular file holding the cache's secret")
        if info.st_mode & 0o077:
            raise InputError(f"{label}: readable by others (mode {stat.S_IMODE(info.st_mode):04o}); a cache secret "
                             f"must be the owner's alone: chmod 600 {path}")
        if hasattr(os, "getuid") and info.st_uid != os.getuid():
            raise InputError(f"{label}: owned by another user (uid {info.st_uid}); a cache secret must be yours")
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    secret = data.strip()
    if len(secret) < 16:
        raise InputError(f"{label}: expected at least 16 bytes of secret (e.g. 64 hex digits), found {len(secret)}")
    return secret


def _create_secret(path: Path) -> None:
    """Make ``path`` with a fresh secret, mode 0600, created exclusively (``O_EXCL``): two processes starting at
    once agree on one secret, and a file that is there is never overwritten."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX)  # O_EXCL, mode 0600
    try:
        os.write(fd, secrets.token_hex(_SECRET_BYTES).encode() + b"\n")
        os.fsync(fd)
        os.close(fd)
        fd = -1
        with contextlib.suppress(FileExistsError):  # another process made it first: its secret is the one
            os.link(tmp, path)
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def load_secret(create: bool = True) -> bytes | None:
    """The per-user secret the cache's MACs are made with, created on first use (``create``); None when there is
    no place for it (no home folder, or its folder cannot be written: the cache is then off). A key file that is
    there but readable by others, not a regular file or another user's is refused: InputError, one line."""
    path = key_path()
    if path is None:
        return None
    if not os.path.lexists(path):
        if not create:
            return None
        try:
            _create_secret(path)
        except OSError:
            return None
    return _read_secret(path)


def _secret_for_process() -> bytes | None:
    path = key_path()
    ident = str(path)
    if ident not in _SECRETS:
        _SECRETS[ident] = load_secret()
    return _SECRETS[ident]


_SECRETS: dict[str, bytes | None] = {}


def _document_mac(secret: bytes, kind: str, document: Mapping) -> str:
    body = json.dumps({k: v for k, v in document.items() if k != "mac"}, sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode()
    return hmac.new(secret, f"{SCHEMA}\n{kind}\n".encode() + body, hashlib.sha256).hexdigest()


def signed(kind: str, document: Mapping) -> dict:
    """``document`` with a ``mac`` field under this user's secret (for a record kept outside the cache folder that
    a later run trusts, such as a report folder's list of its pages); unsigned when there is no secret."""
    secret = _secret_for_process()
    doc = {k: v for k, v in document.items() if k != "mac"}
    if secret is not None:
        doc["mac"] = _document_mac(secret, kind, doc)
    return doc


def verified(kind: str, document: Any) -> dict | None:
    """``document`` when it carries a ``mac`` this user's secret made for ``kind``; None otherwise."""
    secret = _secret_for_process()
    if secret is None or not isinstance(document, dict) or not isinstance(document.get("mac"), str):
        return None
    try:
        good = hmac.compare_digest(document["mac"], _document_mac(secret, kind, document))
    except (TypeError, ValueError, RecursionError):
        return None
    return document if good else None


# ----------------------------------------------------------------------------- settings from the environment
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
    except RuntimeError:
        return None


def max_bytes() -> int:
    """``$RECALLKIT_CACHE_MB`` in bytes (default 256 MB); InputError (one line) unless a finite number >= 0."""
    raw = os.environ.get("RECALLKIT_CACHE_MB", "").strip()
    if not raw:
        return DEFAULT_MB * 2**20
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and 0 <= value <= 2**40):
        raise InputError(f"RECALLKIT_CACHE_MB: expected a size in megabytes (a finite number from 0 to 2**40), "
                         f"got {raw!r}")
    return int(value * 2**20)


_OPEN: dict[tuple, "Cache"] = {}


def from_env(create_key: bool = True) -> "Cache | None":
    """The cache the environment names (one object per process for the same folder and secret, so that its counts
    add up over a command), or None when it is off or has no secret."""
    root = cache_root()
    if root is None:
        return None
    size = max_bytes()
    secret = load_secret(create=create_key)
    if secret is None:
        return None
    ident = (str(root), hashlib.sha256(secret).hexdigest(), size)
    if ident not in _OPEN:
        _OPEN[ident] = Cache(root, secret, size)
    return _OPEN[ident]


# ----------------------------------------------------------------------------- audits (recallkit cache verify)
@dataclasses.dataclass
class Audit:
    """While set on a cache (:attr:`Cache.audit`), a hit of a verdict-bearing entry whose key is sampled is
    computed again and compared with what the entry holds (``fraction`` of the keys, by key; 1.0: all)."""

    fraction: float = 0.25
    checked: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (kind, key, what)
    differ: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    hits: int = 0

    def wants(self, key: str) -> bool:
        return self.fraction >= 1.0 or int(key[:8], 16) / 2**32 < self.fraction


# ----------------------------------------------------------------------------- the folder
@dataclasses.dataclass(eq=False)
class Cache:
    """Authenticated entries under ``root/<kind>/`` (see the module's docstring), at most about ``limit`` bytes."""

    root: Path
    secret: bytes = dataclasses.field(repr=False)
    limit: int = DEFAULT_MB * 2**20
    stored: int = 0  # entries written by this object (prune only after some)
    hits: int = 0
    not_ours: int = 0  # entries found that this user's secret did not sign, or that are not plain files: recomputed
    audit: Audit | None = None
    # (what, why) of each value this cache was handed but could not keep: computed again on every report
    declined: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = Path(self.root)

    # -- the header and its MAC
    def _mac(self, kind: str, key: str, body: bytes) -> str:
        message = f"{SCHEMA}\n{kind}\n{key}\n".encode() + body
        return hmac.new(self.secret, message, hashlib.sha256).hexdigest()

    def _entry(self, kind: str, key: str) -> Path:
        if kind not in KINDS or not _KEY_RE.match(key):
            raise ValueError(f"not a cache entry: {kind}/{key}")
        return self.root / kind / f"{key}.json"

    def _read_body(self, kind: str, key: str) -> bytes | None:
        """The verified body of ``kind/key``, or None (missing; or not ours, counted)."""
        path = self._entry(kind, key)
        try:
            data = read_regular(path, _MAX_DOCUMENT)
        except FileNotFoundError:
            return None
        except OSError:  # a link, FIFO, device, folder or oversized file: not ours
            self.not_ours += 1
            return None
        head, _, body = data.partition(b"\n")
        try:
            header = loads_json(head, max_depth=2)
            ok = (isinstance(header, dict) and header.get("schema") == SCHEMA and header.get("kind") == kind
                  and header.get("key") == key and isinstance(header.get("mac"), str)
                  and hmac.compare_digest(header["mac"], self._mac(kind, key, body)))
        except ValueError:
            ok = False
        if not ok:
            self.not_ours += 1
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return body

    def _write_entry(self, kind: str, key: str, body: bytes) -> bool:
        header = json.dumps({"schema": SCHEMA, "kind": kind, "key": key, "mac": self._mac(kind, key, body)})
        try:
            (self.root / kind).mkdir(parents=True, exist_ok=True)
            write_atomic(self._entry(kind, key), header.encode() + b"\n" + body)
        except OSError:  # (OutputError is one): best effort, the value is computed again next time
            return False
        self.stored += 1
        return True

    def decline(self, what: str, reason: str) -> None:
        """Count a value that could not be kept (``what`` it is, ``reason`` why); raise :class:`Declined` under
        ``RECALLKIT_CACHE_STRICT=1``."""
        self.declined.append((what, reason))
        if strict():
            raise Declined(f"cache: {what} was not kept ({reason}); {STRICT_ENV}=1 makes that an error")

    # -- documents
    def get(self, kind: str, key: str) -> Any:
        """The document stored under ``kind/key``, or None (missing, not ours, or not a JSON document we wrote)."""
        body = self._read_body(kind, key)
        if body is None:
            return None
        try:
            document = loads_json(body)
        except ValueError:  # signed by us, so written by us: a document we cannot read back is a miss
            return None
        self.hits += 1
        return document

    def put(self, kind: str, key: str, document: Any, what: str = "") -> bool:
        """Keep ``document`` (plain JSON, finite numbers only) under ``kind/key``; False if it was not stored (a
        document that is not such JSON is declined, :meth:`decline`, as ``what``)."""
        try:
            body = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError, RecursionError) as exc:
            self.decline(what or kind, f"not a JSON document: {exc}")
            return False
        return self._write_entry(kind, key, body)

    def keep(self, kind: str, key: str, document: Any, what: str = "") -> bool:
        """:meth:`put` for a document that must come back exactly as it is: one JSON would change (a tuple, a
        non-string key, a numpy number, a non-finite float) is declined instead of stored."""
        if not json_exact(document):
            self.decline(what or kind, "JSON would not give it back exactly (a tuple, a non-string key, a numpy "
                                       "number or a non-finite float)")
            return False
        return self.put(kind, key, document, what)

    # -- files (pages, joined reports)
    def fetch_files(self, kind: str, key: str, targets: Mapping[str, Path]) -> bool:
        """Write the entry's files to ``targets`` ({suffix: path}) and return True; False, writing nothing, when
        the entry is missing, not ours, lacks a suffix, or a file does not match the hash its entry signed."""
        listed = self.get(kind, key)
        files = listed.get("files") if isinstance(listed, dict) else None
        if not isinstance(files, dict):
            return False
        blobs = {}
        for suffix in targets:
            want = files.get(suffix)
            if not isinstance(want, str):
                return False  # kept without this file (a page drawn without --png)
            try:
                data = read_regular(self.root / kind / f"{key}{suffix}", _MAX_FILE)
            except FileNotFoundError:
                return False  # removed since (a prune half-way): drawn again
            except OSError:
                data = None
            if data is None or hashlib.sha256(data).hexdigest() != want:
                self.not_ours += 1  # replaced under a signed entry: drawn again, and the entry rewritten
                return False
            blobs[suffix] = data
        for suffix, path in targets.items():
            write_atomic(path, blobs[suffix])  # the output's own failure (a full disk) is the caller's to report
        return True

    def store_files(self, kind: str, key: str, sources: Mapping[str, Path]) -> bool:
        """Keep the files ``sources`` ({suffix: path}) under ``kind/key``; the signed entry goes last, so a store
        that dies half-way leaves no entry. Returns whether it was stored."""
        try:
            (self.root / kind).mkdir(parents=True, exist_ok=True)
            hashes = {}
            for suffix, path in sources.items():
                data = read_regular(path, _MAX_FILE)
                hashes[suffix] = hashlib.sha256(data).hexdigest()
                write_atomic(self.root / kind / f"{key}{suffix}", data)
        except OSError:
            return False
        return self.put(kind, key, {"files": hashes})

    # -- the whole folder
    def _names(self) -> Iterator[tuple[str, os.DirEntry]]:
        for kind in KINDS:
            try:
                items = list(os.scandir(self.root / kind))
            except OSError:
                continue
            for item in items:
                yield kind, item

    def entries(self, kinds: tuple[str, ...] = KINDS) -> list[tuple[str, str]]:
        """(kind, key) of every entry file in the folder, ours or not."""
        return sorted((kind, item.name[:-5]) for kind, item in self._names()
                      if kind in kinds and item.name.endswith(".json") and _NAME_RE.match(item.name))

    def prune(self) -> int:
        """Remove the least recently used entries while the cache is over its limit, stale temporary files and
        files that belong to no entry (a killed writer's); return how many entries were removed."""
        now = time.time()
        groups: dict[tuple[str, str], list[os.DirEntry]] = {}
        for kind, item in self._names():
            if item.name.startswith(TMP_PREFIX) or not _NAME_RE.match(item.name):
                with contextlib.suppress(OSError):
                    if item.name.startswith(TMP_PREFIX) and now - item.stat(follow_symlinks=False).st_mtime > _STALE_TMP_S:
                        os.unlink(item.path)
                continue
            groups.setdefault((kind, item.name[:64]), []).append(item)
        entries: list[tuple[float, int, list[Path]]] = []
        total = 0
        for (_, key), items in groups.items():
            marker = next((i for i in items if i.name == f"{key}.json"), None)
            try:
                size = sum(i.stat(follow_symlinks=False).st_size for i in items)
                used = marker.stat(follow_symlinks=False).st_mtime if marker is not None else None
            except OSError:
                continue  # removed meanwhile by another report's prune
            if used is None:  # files whose entry was never written: a writer killed (or still writing)
                for item in items:
                    with contextlib.suppress(OSError):
                        if now - item.stat(follow_symlinks=False).st_mtime > _STALE_TMP_S:
                            os.unlink(item.path)
                continue
            # the entry first: a reader that finds no entry never takes the rest for one
            entries.append((used, size, [Path(marker.path)] + [Path(i.path) for i in items if i is not marker]))
            total += size
        removed = 0
        for _, size, files in sorted(entries, key=lambda e: e[0]):
            if total <= self.limit:
                break
            for path in files:
                with contextlib.suppress(OSError):
                    path.unlink()
            total -= size
            removed += 1
        return removed

    def clear(self) -> int:
        """Remove every entry, file and temporary file of the cache's folders (nothing else: only names the cache
        writes, inside its own kind folders, links removed, never followed); return how many entries went."""
        removed = 0
        for kind, item in self._names():
            if item.name.startswith(TMP_PREFIX) or _NAME_RE.match(item.name):
                if item.is_dir(follow_symlinks=False):
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(item.path)
                    removed += item.name.endswith(".json")
        for kind in KINDS:
            with contextlib.suppress(OSError):
                (self.root / kind).rmdir()
        return removed


def cached(cache: Cache | None, kind: str, key: str | None, compute: Callable[[], Any],
           encode: Callable[[Any], Any] = lambda value: value, decode: Callable[[Any], Any] = lambda doc: doc,
           what: str = "") -> Any:
    """``compute()``, or the value kept in ``cache`` under ``kind/key`` (``encode`` makes the plain JSON document
    kept, ``decode`` gives the value back; ``decode`` raising ValueError, TypeError, KeyError or Uncacheable means
    "a miss", ``encode`` raising one of them "cannot keep it": declined, :meth:`Cache.decline`). Under an
    :class:`Audit` a sampled hit is computed again and compared."""
    if cache is None or key is None:
        return compute()
    document = cache.get(kind, key)
    if document is not None:
        try:
            value = decode(document)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, Uncacheable):
            pass  # signed by us but not this builder's document: computed again and rewritten
        else:
            audit = cache.audit
            if audit is None:
                return value
            audit.hits += 1
            if not audit.wants(key):
                return value
            fresh = compute()
            try:
                same = json.dumps(encode(fresh), allow_nan=False) == json.dumps(document, allow_nan=False)
            except (ValueError, TypeError, Uncacheable):
                same = False
            audit.checked.append((kind, key, what))
            if same:
                return value
            audit.differ.append((kind, key, what))
            with contextlib.suppress(ValueError, TypeError, Uncacheable):
                cache.put(kind, key, encode(fresh))
            return fresh
    value = compute()
    try:
        document = encode(value)
    except (ValueError, TypeError, Uncacheable) as exc:  # counted, and an error under RECALLKIT_CACHE_STRICT=1
        cache.decline(what or kind, str(exc) or type(exc).__name__)
    else:
        cache.put(kind, key, document, what or kind)
    return value

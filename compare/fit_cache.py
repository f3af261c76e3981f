"""Results that are costly to compute and depend on nothing but their inputs, kept on disk under a hash of
exactly those inputs: an experiment's fits (the seed bootstraps take most of an unchanged report's time) and
other plain documents the main job derives (a pack's phase diagram).

Why a key of the inputs and not of the store or the folder: the cached value must never outlive a change of
what it was computed from. :func:`cache_key` hashes a type-exact canonical form of every input (``1`` and
``1.0``, a tuple and a list, a dict's order all count), the source of the whole ``recallkit`` namespace
(:func:`source_fingerprint`, so an uncommitted edit counts too), ``code_version()`` and the versions of the
numerical libraries. A changed stored metric, pack file or option gives another key, hence a fresh result.

An entry is one file ``KEY.json``: a header line (schema, key, SHA-256 of the rest) and the document. It is
written to a temporary file and moved into place with ``os.replace``, so a reader sees the old entry, the new one
or none; an entry that fails its hash, names another key or does not decode is a miss (computed again and
rewritten). Fits are stored as a closed set of plain types (:func:`encode_fits`): no code is ever loaded from
the cache. Writing is best effort: an unwritable folder costs the computation next time, never the report.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from recallkit.compare.fits import BootstrapInfo, ConstantFit, SlopeFit
from recallkit.compare.results import FitResult
from recallkit.compare.verdicts import Verdict
from recallkit.empirics.provenance import code_version, namespace_digest, namespace_roots

__all__ = ["DiskCache", "Uncacheable", "cache_key", "cached_document", "cached_fits", "canonical", "decode_fits", "encode_fits",
           "json_exact", "namespace_digest", "namespace_roots", "source_fingerprint"]

SCHEMA = "recallkit.result-cache/1"
_TMP_PREFIX = ".tmp-"  # as reports.page_cache names its temporary files, so that its prune removes stale ones
_LIBRARIES = ("numpy", "scipy", "statsmodels", "sympy")
# the only types a cached fit is made of; anything else is not cached
_CLASSES = {cls.__name__: cls for cls in (FitResult, SlopeFit, ConstantFit, BootstrapInfo, Verdict)}


class Uncacheable(TypeError):
    """A value holds a type the cache does not store exactly: it is computed, not cached."""


def json_exact(value: Any) -> bool:
    """Whether ``value`` comes back from JSON exactly as it is (no tuples, no non-string keys, no numpy types)."""
    try:
        return canonical(json.loads(json.dumps(value))) == canonical(value)
    except (Uncacheable, TypeError, ValueError):
        return False


@functools.lru_cache(maxsize=1)
def source_fingerprint() -> str:
    """SHA-256 over every ``.py`` and ``.toml`` file (code, shipped packs and experiments) of the installed
    ``recallkit`` namespace, by path and bytes. Kept for the process (keyed by nothing: the code a process runs is
    the code it imported)."""
    return namespace_digest(("*.py", "*.toml"))


@functools.lru_cache(maxsize=1)
def _library_versions() -> tuple[str, ...]:
    """The numerical libraries' versions (kept for the process: they are the ones it imported)."""
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
    if isinstance(value, np.generic):
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


def cache_key(what: str, inputs: Any) -> str:
    """The key of a result named ``what`` computed from ``inputs`` by this code (source, code version, libraries)."""
    return _key_of(what, json.dumps(canonical(inputs), separators=(",", ":"), allow_nan=False))


def _key_of(what: str, inputs_text: str) -> str:
    head = json.dumps([SCHEMA, what, source_fingerprint(), code_version(), list(_library_versions())])
    return hashlib.sha256(f"{head}\n{inputs_text}".encode()).hexdigest()


# ----------------------------------------------------------------------------- fits as plain documents
def encode_fits(fits: list[FitResult]) -> Any:
    """The fits as a JSON-able document that :func:`decode_fits` turns back into equal objects (Uncacheable if
    they hold a type outside the closed set a fit is made of)."""
    return [_encode(fit) for fit in fits]


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind in _CLASSES.values():
        return {"object": kind.__name__, "fields": [[f.name, _encode(getattr(value, f.name))]
                                                     for f in dataclasses.fields(value)]}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if kind in (np.float64, np.int64, np.bool_):
        return {"numpy": kind.__name__, "value": _encode(value.item())}
    if kind in (list, tuple):
        items = [_encode(v) for v in value]
        return items if kind is list else {"tuple": items}
    if kind is dict:
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise Uncacheable(f"cannot cache a fit holding a {kind.__module__}.{kind.__qualname__}")


def decode_fits(document: Any) -> list[FitResult]:
    """The fits :func:`encode_fits` wrote (ValueError on a document it did not write)."""
    fits = [_decode(item) for item in document]
    if not all(type(fit) is FitResult for fit in fits):
        raise ValueError("not a list of fits")
    return fits


_SCALARS = {"float64": np.float64, "int64": np.int64, "bool_": np.bool_}


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "object" in value:
        return _CLASSES[value["object"]](**{name: _decode(v) for name, v in value["fields"]})
    if "float" in value:
        return float(value["float"])
    if "numpy" in value:
        return _SCALARS[value["numpy"]](_decode(value["value"]))
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "dict" in value:
        return {_decode(k): _decode(v) for k, v in value["dict"]}
    raise ValueError(f"unknown entry {sorted(value)}")


# ----------------------------------------------------------------------------- the folder
@dataclasses.dataclass(frozen=True)
class DiskCache:
    """JSON documents under their keys in ``folder`` (see the module's docstring for the file format)."""

    folder: Path

    def _path(self, key: str) -> Path:
        return Path(self.folder) / f"{key}.json"

    def get(self, key: str) -> Any:
        """The document stored under ``key``, or None (missing, damaged, or another key's)."""
        path = self._path(key)
        try:
            head, _, body = path.read_bytes().partition(b"\n")
            header = json.loads(head)
            if (header.get("schema") != SCHEMA or header.get("key") != key
                    or header.get("sha256") != hashlib.sha256(body).hexdigest()):
                return None
            document = json.loads(body)
        except (OSError, ValueError, AttributeError):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: the page cache's prune removes it last
        return document

    def put(self, key: str, document: Any) -> bool:
        """Store ``document`` under ``key`` atomically; False (nothing stored) if it cannot be written."""
        body = json.dumps(document, separators=(",", ":")).encode()
        header = json.dumps({"schema": SCHEMA, "key": key, "sha256": hashlib.sha256(body).hexdigest()}).encode()
        try:
            Path(self.folder).mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=_TMP_PREFIX)
        except OSError:
            return False
        try:
            os.fchmod(fd, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(header + b"\n" + body)
            os.replace(tmp, self._path(key))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True


def cached_document(cache: DiskCache | None, what: str, inputs: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``'s plain JSON document, or the one stored under the key of ``what`` and ``inputs`` (every input
    ``compute`` reads; a text that names an object's memory address cannot be one). A document JSON would not give
    back exactly (tuples, non-string keys, numpy numbers) is computed every time."""
    if cache is None:
        return compute()
    try:
        text = json.dumps(canonical(inputs), separators=(",", ":"), allow_nan=False)
    except Uncacheable:
        return compute()
    if " at 0x" in text:  # an object's address: never the same twice, and not what the object holds
        return compute()
    key = _key_of(what, text)
    document = cache.get(key)
    if isinstance(document, dict) and "value" in document:
        return document["value"]
    value = compute()
    if json_exact(value):
        cache.put(key, {"value": value})
    return value


def cached_fits(cache: DiskCache | None, inputs: Any, compute: Callable[[], list[FitResult]]) -> list[FitResult]:
    """``compute()``'s fits, or those stored under the key of ``inputs`` (every input ``compute`` reads). Inputs
    or fits of a type the cache cannot hold exactly are computed every time."""
    if cache is None:
        return compute()
    try:
        key = cache_key("fits", inputs)
    except Uncacheable:
        return compute()
    document = cache.get(key)
    if document is not None:
        try:
            return decode_fits(document)
        except (ValueError, TypeError, KeyError, IndexError):
            pass  # damaged or written by something else: computed again and rewritten below
    fits = compute()
    with contextlib.suppress(Uncacheable, ValueError):
        cache.put(key, encode_fits(fits))
    return fits

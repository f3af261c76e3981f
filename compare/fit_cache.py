"""Fits and other plain documents of the compare stage, kept in the one cache (``empirics.cache``) under a key of
exactly their inputs: an experiment's fits (the seed bootstraps take most of an unchanged report's time) and the
documents the main job derives (realised predictions, a pack's phase diagram).

Fits and documents are stored as a closed set of plain types (:func:`encode_value`): no code is ever loaded from the
cache. The cache authenticates every entry and treats anything else as a miss (see ``empirics.cache``).

**The typed encoding.** JSON alone would give back a different value for a tuple (a list), a dict with int or
float keys (string keys), a numpy number (a float) or a non-finite float (none at all): realised predictions hold
``{V: value}`` tables keyed by int, so as plain JSON they could never be kept. :func:`encode_value` writes each such
value as a one-key object naming what it was, and every dict as one too, so nothing it writes can be mistaken for
another: ``{"tuple": [...]}``, ``{"dict": [[key, value], ...]}`` (in order), ``{"float": "nan" | "inf" |
"-inf"}``, ``{"numpy": "float32", "value": 0.5}``, ``{"object": "FitResult", "fields": [[name, value], ...]}`` (the
fits' own classes only); lists, strings, bools, ints and finite floats are themselves (a float's JSON text is its
repr, which reads back as the same float). :func:`decode_value` inverts it exactly: ``decode_value(encode_value(x))``
equals ``x``, with the same types, and a value outside this set is :class:`Uncacheable` (declined by the cache).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from recallkit.compare.fits import BootstrapInfo, ConstantFit, SlopeFit
from recallkit.compare.results import FitResult
from recallkit.compare.verdicts import Verdict
from recallkit.empirics.cache import Cache, Uncacheable, cache_key, cached, canonical, json_exact, source_fingerprint

__all__ = ["Uncacheable", "cache_key", "cached_document", "cached_fits", "canonical", "decode_fits", "decode_value",
           "encode_fits", "encode_value", "json_exact", "source_fingerprint"]

# the only classes a cached value may hold (a fit is made of them); anything else is not cached
_CLASSES = {cls.__name__: cls for cls in (FitResult, SlopeFit, ConstantFit, BootstrapInfo, Verdict)}
# numpy scalars by type name: each holds its value exactly as a Python int, float or bool (.item()) and back
_SCALARS = {cls.__name__: cls for cls in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                          np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}


# ----------------------------------------------------------------------------- fits as plain documents
def encode_fits(fits: list[FitResult]) -> Any:
    """The fits as a JSON-able document that :func:`decode_fits` turns back into equal objects (Uncacheable if
    they hold a type outside the closed set a fit is made of)."""
    return [_encode(fit) for fit in fits]


def encode_value(value: Any) -> Any:
    """``value`` in the typed encoding (the module's docstring): plain JSON that :func:`decode_value` turns back into
    an equal value of the same types. Uncacheable for a type outside the closed set."""
    try:
        return _encode(value)
    except RecursionError:  # nested deeper than any document a computation here makes
        raise Uncacheable("nested too deep to keep") from None


def decode_value(document: Any) -> Any:
    """The value :func:`encode_value` wrote (ValueError, KeyError or TypeError on a document it did not write)."""
    return _decode(document)


def _encode(value: Any) -> Any:
    kind = type(value)
    if kind in _CLASSES.values():
        return {"object": kind.__name__, "fields": [[f.name, _encode(getattr(value, f.name))]
                                                     for f in dataclasses.fields(value)]}
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if _SCALARS.get(kind.__name__) is kind:
        return {"numpy": kind.__name__, "value": _encode(value.item())}
    if kind in (list, tuple):
        items = [_encode(v) for v in value]
        return items if kind is list else {"tuple": items}
    if kind is dict:
        return {"dict": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise Uncacheable(f"cannot cache a value holding a {kind.__module__}.{kind.__qualname__}")


def decode_fits(document: Any) -> list[FitResult]:
    """The fits :func:`encode_fits` wrote (ValueError on a document it did not write)."""
    fits = [_decode(item) for item in document]
    if not all(type(fit) is FitResult for fit in fits):
        raise ValueError("not a list of fits")
    return fits


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


# ----------------------------------------------------------------------------- through the cache
def cached_document(cache: Cache | None, what: str, inputs: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``'s document, or the one kept under the key of ``what`` and ``inputs`` (every input ``compute``
    reads). Kept in the typed encoding (:func:`encode_value`), so tuples, int keys, numpy numbers and non-finite
    floats come back as they were; inputs or a document outside it are declined (counted, ``Cache.decline``; an
    error under ``RECALLKIT_CACHE_STRICT=1``) and computed every time."""
    key = _key(cache, what, inputs)
    return cached(cache, "documents", key, compute, lambda value: {"typed": encode_value(value)},
                  lambda document: decode_value(document["typed"]), what=what)


def _key(cache: Cache | None, what: str, inputs: Any) -> str | None:
    """The key of ``what`` from ``inputs``; None (declined) when an input is of a type the key cannot hold."""
    if cache is None:
        return None
    try:
        return cache_key(what, inputs)
    except Uncacheable as exc:
        cache.decline(what, f"its inputs: {exc}")
        return None


def cached_fits(cache: Cache | None, inputs: Any, compute: Callable[[], list[FitResult]]) -> list[FitResult]:
    """``compute()``'s fits, or those kept under the key of ``inputs`` (every input ``compute`` reads). Inputs or
    fits of a type the cache cannot hold exactly are declined (counted; an error under RECALLKIT_CACHE_STRICT=1) and
    computed every time."""
    return cached(cache, "fits", _key(cache, "fits", inputs), compute, encode_fits, decode_fits, what="fits")

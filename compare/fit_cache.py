"""Fits and other plain documents of the compare stage, kept in the one cache (``empirics.cache``) under a key of
exactly their inputs: an experiment's fits (the seed bootstraps take most of an unchanged report's time) and the
documents the main job derives (realised predictions, a pack's phase diagram).

Fits are stored as a closed set of plain types (:func:`encode_fits`): no code is ever loaded from the cache. The
cache authenticates every entry and treats anything else as a miss (see ``empirics.cache``).
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

__all__ = ["Uncacheable", "cache_key", "cached_document", "cached_fits", "canonical", "decode_fits", "encode_fits",
           "json_exact", "source_fingerprint"]

# the only types a cached fit is made of; anything else is not cached
_CLASSES = {cls.__name__: cls for cls in (FitResult, SlopeFit, ConstantFit, BootstrapInfo, Verdict)}


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


# ----------------------------------------------------------------------------- through the cache
def cached_document(cache: Cache | None, what: str, inputs: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``'s plain JSON document, or the one kept under the key of ``what`` and ``inputs`` (every input
    ``compute`` reads). A document JSON would not give back exactly (tuples, non-string keys, numpy numbers,
    non-finite floats) is computed every time."""
    try:
        key = cache_key(what, inputs) if cache is not None else None
    except Uncacheable:
        key = None

    def encode(value: Any) -> Any:
        if not json_exact(value):
            raise Uncacheable(f"{what}: not a plain JSON document")
        return {"value": value}

    return cached(cache, "documents", key, compute, encode, lambda document: document["value"], what=what)


def cached_fits(cache: Cache | None, inputs: Any, compute: Callable[[], list[FitResult]]) -> list[FitResult]:
    """``compute()``'s fits, or those kept under the key of ``inputs`` (every input ``compute`` reads). Inputs or
    fits of a type the cache cannot hold exactly are computed every time."""
    try:
        key = cache_key("fits", inputs) if cache is not None else None
    except Uncacheable:
        key = None
    return cached(cache, "fits", key, compute, encode_fits, decode_fits, what="fits")

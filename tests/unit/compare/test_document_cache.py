"""Documents in the cache (``compare.fit_cache.cached_document``): a document JSON alone would change (int keys,
tuples, numpy numbers, non-finite floats, as realised predictions hold) is kept in the typed encoding and read back
equal, with the same types; a value the cache cannot keep is counted (``Cache.declined``), and is an error under
``RECALLKIT_CACHE_STRICT=1`` instead of being computed again on every report."""
from __future__ import annotations

import math

import numpy as np
import pytest

from recallkit.compare.fit_cache import cached_document, cached_fits, decode_value, encode_value
from recallkit.empirics.cache import Cache, Declined, canonical, strict
from recallkit.theory.errors import InputError

# the shapes a realised prediction holds: {V: value} tables keyed by int, tuples, numpy numbers, nan and inf
DOCUMENT = {
    "N=V**1.5, L=V**0.25": {
        "realised": {"slope": 1.25, "constants": [{"V": 64, "L": 2}], "log_power": 0},
        "all_terms_by_check": {"0.1": {"d": {64: 23.5, 128: np.float64(41.0)}, "cap": {64: math.inf, 128: math.nan},
                                       "shares": {(64, "a"): (0.5, np.float32(0.25))}, "count_cap": {1.5: -0.0}}},
        "levels": {"0.1": {"evidence": "a priori", "source": "the threshold 0.1"}},
        "flags": [np.bool_(True), np.int64(3), np.uint8(7), None, "text"],
    },
}


def _same(a, b) -> bool:
    """Equal with the same types everywhere (``canonical`` keeps types, order and nan as text)."""
    return canonical(a) == canonical(b)


@pytest.fixture
def cache(tmp_path):
    return Cache(tmp_path / "cache", b"k" * 32)


def test_the_typed_encoding_gives_back_the_same_value_with_its_types():
    back = decode_value(encode_value(DOCUMENT))
    assert _same(back, DOCUMENT)
    table = back["N=V**1.5, L=V**0.25"]["all_terms_by_check"]["0.1"]
    assert list(table["d"]) == [64, 128] and type(table["d"][128]) is np.float64
    assert type(next(iter(table["shares"]))) is tuple and type(table["shares"][(64, "a")][1]) is np.float32
    assert math.copysign(1.0, table["count_cap"][1.5]) == -1.0
    assert not _same(decode_value(encode_value({"1": 1})), {1: 1})  # (the comparison can fail)


def test_a_document_json_would_change_is_read_back_from_the_cache_as_computed(cache, monkeypatch):
    monkeypatch.setenv("RECALLKIT_CACHE_STRICT", "1")
    calls = []

    def compute():
        calls.append(1)
        return DOCUMENT

    first = cached_document(cache, "realised predictions", ["inputs", 1], compute)
    again = cached_document(cache, "realised predictions", ["inputs", 1], compute)
    assert calls == [1] and cache.hits == 1 and cache.declined == []
    assert again is not first and _same(again, DOCUMENT) and _same(first, DOCUMENT)
    cached_document(cache, "realised predictions", ["inputs", 2], compute)  # another key: computed
    assert calls == [1, 1]


class Opaque:
    """A type outside the closed set the cache keeps."""


def test_a_value_the_cache_cannot_keep_is_counted_with_its_reason(cache, monkeypatch):
    monkeypatch.delenv("RECALLKIT_CACHE_STRICT", raising=False)
    assert cached_document(cache, "a document", [1], lambda: {"x": Opaque()})["x"] is not None
    assert cached_fits(cache, [Opaque()], lambda: []) == []
    assert [what for what, _ in cache.declined] == ["a document", "fits"]
    assert "Opaque" in cache.declined[0][1] and "inputs" in cache.declined[1][1]
    assert cache.stored == 0


def test_under_strict_a_value_the_cache_cannot_keep_is_an_error(cache, monkeypatch):
    monkeypatch.setenv("RECALLKIT_CACHE_STRICT", "1")
    with pytest.raises(Declined, match="a document.*Opaque.*RECALLKIT_CACHE_STRICT=1"):
        cached_document(cache, "a document", [1], lambda: {"x": Opaque()})
    with pytest.raises(Declined, match="fits"):
        cached_fits(cache, [Opaque()], lambda: [])
    with pytest.raises(Declined, match="pieces"):
        cache.keep("pieces", "0" * 64, {1: "int key"}, what="pieces")
    assert cache.keep("pieces", "0" * 64, {"1": "string key"}, what="pieces")


def test_no_cache_declines_nothing(monkeypatch):
    monkeypatch.setenv("RECALLKIT_CACHE_STRICT", "1")
    assert cached_document(None, "a document", [Opaque()], lambda: {"x": 1}) == {"x": 1}


@pytest.mark.parametrize("raw, expected", [("", False), ("0", False), ("1", True), (" 1 ", True)])
def test_the_strict_switch(monkeypatch, raw, expected):
    monkeypatch.setenv("RECALLKIT_CACHE_STRICT", raw)
    assert strict() is expected


def test_a_bad_strict_switch_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv("RECALLKIT_CACHE_STRICT", "yes")
    with pytest.raises(InputError, match=r"^RECALLKIT_CACHE_STRICT: expected 1 .* or 0, got 'yes'$"):
        strict()

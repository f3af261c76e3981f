"""The fit cache (compare.fit_cache): an unchanged experiment reuses its fits, any changed input fits again, and a
damaged entry is never read back."""
from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

from recallkit import sweep_and_fit
from recallkit.compare import assertions
from recallkit.compare.fit_cache import cache_key, canonical, decode_fits, encode_fits
from recallkit.empirics.cache import Cache
from recallkit.empirics.plan import plan
from tests.experiment_texts import TINY_LINEAR_MEMORY


@pytest.fixture(scope="module")
def trained(tmp_path_factory, one_torch_thread_module):
    """A tiny capacity experiment trained once into a store: (plan, store path)."""
    folder = tmp_path_factory.mktemp("fit-cache")
    path = folder / "tiny_linear_memory.toml"
    path.write_text(TINY_LINEAR_MEMORY)
    store = folder / "store.db"
    planned = plan(path, preset="quick")
    sweep_and_fit(planned, store=store, progress=False)
    return planned, store


@pytest.fixture
def store(trained, tmp_path):
    """A copy of the trained store that a test may change."""
    copy = tmp_path / "store.db"
    shutil.copyfile(trained[1], copy)
    return copy


@pytest.fixture
def computed(monkeypatch):
    """How many times the fits were computed (not read from the cache)."""
    calls = []
    real = assertions.fit_boundary_points

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(assertions, "fit_boundary_points", counting)
    return calls


def _fit(trained, store, cache, **options):
    return assertions.fit_experiment(trained[0], store=store, cache=cache, **options)


def _doc(fitted) -> str:
    return json.dumps([fit.to_dict() for fit in fitted.fits], sort_keys=True)


def test_unchanged_inputs_reuse_the_fits_exactly(trained, store, tmp_path, computed):
    cache = Cache(tmp_path, b"test secret " * 3)
    first = _fit(trained, store, cache)
    again = _fit(trained, store, Cache(tmp_path, b"test secret " * 3))
    assert computed == [1]
    assert _doc(again) == _doc(first)
    assert repr(again.fits) == repr(first.fits)  # the objects too: types of every number, tuples, order
    assert again.fits and list((tmp_path / "fits").glob("*.json"))


def test_a_changed_stored_metric_fits_again(trained, store, tmp_path, computed):
    cache = Cache(tmp_path, b"test secret " * 3)
    before = _fit(trained, store, cache)
    answer = next(p.config_hash for p in before.sweep_result.points if p.config_hash and not p.censored)
    with sqlite3.connect(store) as db:  # the run that answered one boundary point no longer reaches its threshold
        (text,) = db.execute("SELECT metrics_json FROM runs WHERE config_hash = ?", (answer,)).fetchone()
        metrics = json.loads(text)
        metrics["accuracy"] = 0.0
        db.execute("UPDATE runs SET metrics_json = ?, accuracy = 0.0 WHERE config_hash = ?",
                   (json.dumps(metrics), answer))
    after = _fit(trained, store, cache)
    fresh = _fit(trained, store, None)
    assert computed == [1, 1, 1]
    assert _doc(after) == _doc(fresh) != _doc(before)


def test_a_changed_prediction_fits_again(trained, store, tmp_path, computed):
    cache = Cache(tmp_path, b"test secret " * 3)
    before = _fit(trained, store, cache, predicted=1.0)
    after = _fit(trained, store, cache, predicted=1.5)
    assert computed == [1, 1]
    assert {f.verdict.predicted_slope for f in before.fits} == {1.0}
    assert {f.verdict.predicted_slope for f in after.fits} == {1.5}


def test_a_damaged_entry_is_ignored_and_rewritten(trained, store, tmp_path, computed):
    cache = Cache(tmp_path, b"test secret " * 3)
    first = _fit(trained, store, cache)
    slope = f"{first.fits[0].fit.slope!r}"
    (entry,) = [path for path in (tmp_path / "fits").glob("*.json") if slope in path.read_text()]
    head, body = entry.read_text().split("\n", 1)
    entry.write_text(head + "\n" + body.replace(slope, "0.125", 1))  # still valid JSON, another number
    again = _fit(trained, store, cache)
    assert computed == [1, 1]
    assert _doc(again) == _doc(first)
    _fit(trained, store, cache)  # the entry was written again, whole
    assert computed == [1, 1]
    entry.write_text(head)  # cut short
    assert _doc(_fit(trained, store, cache)) == _doc(first)
    assert computed == [1, 1, 1]


def test_an_entry_under_another_key_is_not_read(tmp_path):
    cache = Cache(tmp_path, b"test secret " * 3)
    assert cache.put("fits", "a" * 64, [1, 2])
    (tmp_path / "fits" / ("a" * 64 + ".json")).rename(tmp_path / "fits" / ("b" * 64 + ".json"))
    assert cache.get("fits", "b" * 64) is None
    assert cache.get("fits", "a" * 64) is None
    assert cache.not_ours == 1


def test_the_fits_survive_the_round_trip_with_their_types(trained, store):
    fits = _fit(trained, store, None).fits
    back = decode_fits(json.loads(json.dumps(encode_fits(fits))))
    assert repr(back) == repr(fits)
    assert [type(f.fit.slope) for f in back if f.fit] == [type(f.fit.slope) for f in fits if f.fit]


def test_the_key_tells_apart_what_a_computation_may_tell_apart():
    assert cache_key("x", [1]) != cache_key("x", [1.0])
    assert cache_key("x", [(1, 2)]) != cache_key("x", [[1, 2]])
    assert cache_key("x", {"a": 1, "b": 2}) != cache_key("x", {"b": 2, "a": 1})
    assert cache_key("x", [1]) != cache_key("y", [1])
    assert canonical(float("nan")) == {"float": "nan"}
    with pytest.raises(TypeError):
        canonical(object())

"""The readout fit of ``two_step_then_fit`` (W frozen, V trained by Adam) reads the same training features at every
step: the problem keeps them per chunk of training items, for a W that takes no gradient, and computes only the
read-out again. The kept features must give the very numbers of computing them each time (bit for bit, since they
are made by the same operations), must be made twice per chunk (kept from the second pass; a single pass keeps
nothing), must follow a changed W, and must stay within their
memory cap (beyond it, a chunk is computed each time, as before)."""
from __future__ import annotations

import pytest
import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.tasks import build_problem
from recallkit.empirics.trainers import two_step_then_fit
from recallkit.systems.token_retrieval import task as task_module

CPU = torch.device("cpu")
BASE = dict(task="token_retrieval", model="attention-mlp", trainer="two_step_then_fit", V=32, N=200, L=4, d=8, m=64,
            eta=1e-3, kappa=1.0, features="relu_centred", fit_lr=0.1, fit_steps=30, n_eval=64)


def _fit(chunk: int | None, monkeypatch, kept_cap: int | None = None):
    if kept_cap is not None:
        monkeypatch.setattr(task_module, "FEATURES_KEPT_ELEMENTS", kept_cap)
    problem = build_problem([parse_config({**BASE, "seed": s}) for s in (0, 1)], CPU)
    if chunk is not None:
        problem.train_chunk = chunk  # several chunks, a short last one
    made = []
    features_of = problem.features_of
    monkeypatch.setattr(problem, "features_of", lambda *a: made.append(a[1].shape[1]) or features_of(*a))
    params, extra = two_step_then_fit(problem, [1e-3] * 2, [None] * 2, [1.0] * 2, [0.1] * 2, 30, [0.0] * 2)
    return params, problem.evaluate(params), made


@pytest.mark.parametrize("chunk", [None, 70])
def test_kept_features_give_the_same_numbers_and_are_made_twice_per_chunk(chunk, monkeypatch):
    params, metrics, made = _fit(chunk, monkeypatch)
    with monkeypatch.context() as undo:
        reference_params, reference_metrics, remade = _fit(chunk, undo, kept_cap=0)  # nothing kept: made each step
    for name in ("W", "V"):
        assert torch.equal(params[name], reference_params[name]), name
    for name, value in reference_metrics.items():
        assert torch.equal(metrics[name], value), name
    chunks = 1 if chunk is None else 3  # 200 items: 70 + 70 + 60
    # with the cap at 0 every one of the 30 fit steps makes every chunk's features again
    assert remade.count(200 if chunk is None else 70) >= 30
    # kept: each chunk made twice in the fit, at its first pass and when kept at its second (the two gradient steps
    # and the evaluation make their own)
    fit_made = len(made) - (len(remade) - 30 * chunks)
    assert fit_made == 2 * chunks, (made, remade)


def test_a_single_pass_at_a_frozen_w_keeps_nothing():
    """three_step's step 3 reads the training features once: keeping them would only hold memory."""
    problem = build_problem([parse_config({**BASE, "seed": s}) for s in (0, 1)], CPU)
    W = torch.randn(2, BASE["d"], BASE["d"])
    V = torch.randn(*problem.params["V"].shape)
    problem.loss({"W": W, "V": V})
    assert not [name for name in problem._kept_values if name.startswith("training features")]
    problem.loss({"W": W, "V": V})  # asked again at the same W: kept from now on
    assert [name for name in problem._kept_values if name.startswith("training features")] == [
        "training features 0:200"]


def test_a_changed_w_is_not_read_from_the_kept_features(monkeypatch):
    problem = build_problem([parse_config({**BASE, "seed": 0})], CPU)
    W = torch.randn(1, BASE["d"], BASE["d"])
    V = torch.randn(*problem.params["V"].shape)
    first = problem.loss({"W": W, "V": V})[0]
    W.mul_(2.0)  # in place: the same tensor, a new version
    fresh_problem = build_problem([parse_config({**BASE, "seed": 0})], CPU)
    assert torch.equal(problem.loss({"W": W, "V": V})[0], fresh_problem.loss({"W": W, "V": V})[0])
    assert not torch.equal(first, problem.loss({"W": W, "V": V})[0])


def test_a_minibatch_is_never_read_from_the_kept_features():
    problem = build_problem([parse_config({**BASE, "seed": s}) for s in (0, 1)], CPU)
    W = torch.randn(2, BASE["d"], BASE["d"])
    V = torch.randn(*problem.params["V"].shape)
    problem.loss({"W": W, "V": V})  # keeps the features of all 200 items
    shuffled = torch.stack([torch.randperm(200)[:50] for _ in range(2)])
    got = problem.loss({"W": W, "V": V}, shuffled)[0]
    fresh = build_problem([parse_config({**BASE, "seed": s}) for s in (0, 1)], CPU)
    assert torch.equal(got, fresh.loss({"W": W, "V": V}, shuffled)[0])

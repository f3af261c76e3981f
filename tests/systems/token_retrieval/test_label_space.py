"""The attention-only model in label space: its logits as o (U V)^T with the read-out U V made once per value
matrix, and three-step GD's steps 1 and 3 written out through it. Each must equal, to float32 rounding, the
hidden-state-first order (U (V o)) and autograd's gradients, which the engine ran before and still runs where the
value matrix takes a gradient (Adam) and for the attention-MLP model."""
from __future__ import annotations

import pytest
import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.tasks import build_problem
from recallkit.empirics.trainers import _grad, three_step

CPU = torch.device("cpu")
BASE = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=48, N=300, L=6, d=20,
            eta=1e-3, kappa=1.0, n_eval=128)


def _problem(chunk: int | None = None, **extra):
    problem = build_problem([parse_config({**BASE, **extra, "seed": s}) for s in (0, 1)], CPU)
    if chunk is not None:
        problem.train_chunk = chunk  # several chunks, a short last one
    return problem


def _hidden_first_logits(problem, params, tokens, positions):
    features, _ = problem.features_of(params["W"], tokens, positions)
    return torch.bmm(torch.einsum("mnk,mdk->mnd", features, params["V"]), problem.U.transpose(1, 2))


@pytest.mark.parametrize("chunk", [None, 37])
def test_step_gradients_in_label_space_equal_autograds(chunk):
    problem = _problem(chunk)
    params, _ = three_step(problem, [1e-3] * 2, [None] * 2, [1.0] * 2)
    W1 = params["W"]
    V1 = -1e-3 * problem.value_gradient_at_zero()
    written = problem.value_gradient(W1, V1)
    by_autograd = _grad(problem, {"W": W1, "V": V1}, "V")  # V a leaf that takes a gradient: hidden state first
    assert written.shape == by_autograd.shape == V1.shape
    scale = by_autograd.abs().max()
    assert scale > 0
    assert (written - by_autograd).abs().max() <= 1e-5 * scale

    # step 1 at V = 0, W_KQ = 0: mean_i (u_bar - u_{y_i}) f_i^T item by item
    zero_W = torch.zeros_like(W1)
    features, _ = problem.features_of(zero_W, problem.train["tokens"], problem.train["positions"])
    targets = problem.U.gather(1, problem.train["labels"].unsqueeze(-1).expand(-1, -1, problem.d))
    item_by_item = torch.einsum("mnd,mne->mde", problem.U.mean(1, keepdim=True) - targets, features) / problem.N
    at_zero = problem.value_gradient_at_zero()
    assert (at_zero - item_by_item).abs().max() <= 1e-5 * item_by_item.abs().max()


def test_logits_through_the_read_out_equal_the_hidden_state_first_and_follow_the_value_matrix():
    problem = _problem()
    params, _ = three_step(problem, [1e-3] * 2, [None] * 2, [1.0] * 2)
    tokens, positions = problem.eval["tokens"], problem.eval["positions"]
    reference = _hidden_first_logits(problem, params, tokens, positions)
    logits, _ = problem.forward(params, tokens, positions)
    assert (logits - reference).abs().max() <= 1e-5 * reference.abs().max()
    # a value matrix that takes a gradient is read hidden state first, bit for bit the reference
    leaf = {**params, "V": params["V"].detach().clone().requires_grad_(True)}
    assert problem.readout(leaf["V"]) is None
    assert torch.equal(problem.forward(leaf, tokens, positions)[0].detach(), reference)
    # the kept read-out follows an in-place change of the value matrix (its version) and another tensor
    first = problem.readout(params["V"])
    assert problem.readout(params["V"]) is first
    params["V"].mul_(2.0)
    doubled, _ = problem.forward(params, tokens, positions)
    assert problem.readout(params["V"]) is not first
    assert (doubled - 2 * reference).abs().max() <= 2e-5 * reference.abs().max()


def test_attention_mlp_keeps_autograd_and_the_hidden_state_first():
    problem = _problem(model="attention-mlp", m=64)
    assert problem.readout(problem.params["V"]) is None
    assert problem.value_gradient(problem.params["W"], problem.params["V"]) is None

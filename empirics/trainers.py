"""Trainers over a batched problem (empirics.tasks): every tensor has a leading model axis M.

The loss that is differentiated is the sum over models of each model's mean loss, so model k's
gradient is exactly its own mean-loss gradient and models never influence each other. Per-model
numbers (step sizes, learning rates, early-stop thresholds) are tensors of shape [M].

- :func:`three_step`: the token-retrieval model's three full-batch gradient steps from V = 0, W_KQ = 0:
  V1 = -eta grad_V L(0, 0); W1 = -gamma grad_W L(V1, 0); V2 = V1 - gamma grad_V L(V1, W1).
- :func:`adam`: Adam (or AdamW, decoupled weight decay) written out elementwise, as in
  torch.optim.Adam (beta1 0.9, beta2 0.999, eps 1e-8, no amsgrad), so that one model's update can be
  masked off once it early-stops. Minibatch order per model comes from its ``"shuffle"`` stream.
"""
from __future__ import annotations

import math

import torch

from recallkit.empirics.tasks import generator

BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def _per_model(values, device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32, device=device)


def _expand(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return x.reshape(x.shape + (1,) * (like.dim() - 1))


def _grad(problem, params: dict, name: str) -> torch.Tensor:
    """Gradient of each model's mean loss over all its training items wrt ``params[name]``.

    Large N is handled by accumulating over chunks of ``problem.train_chunk`` items (a size fixed by
    the model's shape, not by how many models share the batch), each weighted by its share of N.
    """
    leaf = params[name].detach().requires_grad_(True)
    n = problem.n_train
    chunk = getattr(problem, "train_chunk", n)
    if chunk >= n:
        loss, _ = problem.loss({**params, name: leaf})
        (gradient,) = torch.autograd.grad(loss.sum(), [leaf])
        return gradient
    M = leaf.shape[0]
    gradient = torch.zeros_like(leaf)
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk), device=leaf.device).expand(M, -1)
        loss, _ = problem.loss({**params, name: leaf}, idx)
        (part,) = torch.autograd.grad(loss.sum() * (idx.shape[1] / n), [leaf])
        gradient += part
    return gradient


def three_step(problem, eta: list[float], gamma: list[float]) -> tuple[dict, dict]:
    """Returns (params after step 3, extra per-model metrics)."""
    device = problem.params["V"].device
    eta_t, gamma_t = _per_model(eta, device), _per_model(gamma, device)
    zero = {k: torch.zeros_like(v) for k, v in problem.params.items()}
    V1 = -_expand(eta_t, zero["V"]) * _grad(problem, zero, "V")
    W1 = -_expand(gamma_t, zero["W"]) * _grad(problem, {"W": zero["W"], "V": V1}, "W")
    V2 = V1 - _expand(gamma_t, V1) * _grad(problem, {"W": W1, "V": V1}, "V")
    M = V2.shape[0]
    return {"W": W1, "V": V2}, {"steps_run": torch.full((M,), 3.0)}


def adam(
    problem,
    lr: list[float],
    batch_size: int,
    epochs: int | None,
    steps: int | None,
    early_stop: list[float | None],
    weight_decay: list[float],
    seeds: list[int],
    decoupled: bool,
) -> tuple[dict, dict]:
    """Minibatch Adam/AdamW for ``epochs`` passes or ``steps`` steps; per-model early stop.

    Early stop: a model stops (its parameters are frozen from then on) as soon as its accuracy over
    all training items is > its threshold. Full-batch training checks before every step, using that
    step's own forward pass; minibatch training checks at the end of every pass over the data.
    """
    params = {k: v.detach().clone() for k, v in problem.params.items()}
    device = next(iter(params.values())).device
    M, n = len(seeds), problem.n_train
    lr_t = _per_model(lr, device)
    wd_t = _per_model(weight_decay, device)
    threshold = _per_model([math.inf if t is None else t for t in early_stop], device)
    checks_early_stop = bool(torch.isfinite(threshold).any())
    active = torch.ones(M, dtype=torch.bool, device=device)
    steps_run = torch.zeros(M, device=device)
    first_moment = {k: torch.zeros_like(v) for k, v in params.items()}
    second_moment = {k: torch.zeros_like(v) for k, v in params.items()}
    full_batch = batch_size >= n
    steps_per_pass = 1 if full_batch else math.ceil(n / batch_size)
    total_steps = steps if steps is not None else epochs * steps_per_pass
    shufflers = [generator(seed, "shuffle") for seed in seeds]
    order = None
    for step in range(total_steps):
        position = step % steps_per_pass
        if full_batch:
            idx = None
        else:
            if position == 0:
                order = torch.stack([torch.randperm(n, generator=g) for g in shufflers]).to(device)
            idx = order[:, position * batch_size : (position + 1) * batch_size]
        leaves = {k: v.requires_grad_(True) for k, v in params.items()}
        loss, accuracy = problem.loss(leaves, idx)
        if full_batch and checks_early_stop:
            active &= ~(accuracy.detach() > threshold)
            if not active.any():
                break
        gradients = torch.autograd.grad(loss.sum(), list(leaves.values()))
        t = step + 1
        with torch.no_grad():
            for (name, p), g in zip(leaves.items(), gradients):
                mask = _expand(active, p)
                m1 = torch.where(mask, BETA1 * first_moment[name] + (1 - BETA1) * g, first_moment[name])
                m2 = torch.where(mask, BETA2 * second_moment[name] + (1 - BETA2) * g * g, second_moment[name])
                first_moment[name], second_moment[name] = m1, m2
                step_size = _expand(lr_t, p) / (1 - BETA1**t)
                denominator = (m2 / (1 - BETA2**t)).sqrt() + EPS
                new = p - step_size * m1 / denominator
                if decoupled:
                    new = new - _expand(lr_t * wd_t, p) * p
                params[name] = torch.where(mask, new, p).detach()
        steps_run += active.float()
        if not full_batch and checks_early_stop and position == steps_per_pass - 1:
            active &= ~(problem.train_accuracy(params) > threshold)
            if not active.any():
                break
    return params, {"steps_run": steps_run}

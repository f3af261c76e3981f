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

from recallkit.empirics.tasks import exceeds, generator

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


def _adam_step(p, g, m1, m2, step_size, bias2: float, decay):
    """One Adam(W) update out of place: (p, m1, m2) -> new (p, m1, m2). Eight elementwise operations
    (lerp, addcmul, addcdiv fuse what took three each); the same arithmetic whether or not the result is
    then masked, so a model's numbers do not depend on whether its batch partners stopped early."""
    m1 = torch.lerp(m1, g, 1 - BETA1)
    m2 = torch.addcmul(m2 * BETA2, g, g, value=1 - BETA2)
    denominator = (m2 / bias2).sqrt_().add_(EPS)
    if decay is not None:
        p = p * decay  # decoupled weight decay, as torch.optim.AdamW: p (1 - lr wd) before the step
    return torch.addcdiv(p, m1 * step_size, denominator, value=-1), m1, m2


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
    step's own forward pass (the argmax only where a free bound cannot decide, see
    ``empirics.tasks.Accuracy``); minibatch training checks at the end of every pass over the data.
    Without early stop no accuracy is computed during training.
    """
    params = {k: v.detach().clone() for k, v in problem.params.items()}
    device = next(iter(params.values())).device
    M, n = len(seeds), problem.n_train
    lr_t = _per_model(lr, device)
    wd_t = _per_model(weight_decay, device)
    threshold = _per_model([math.inf if t is None else t for t in early_stop], device)
    checks_early_stop = bool(torch.isfinite(threshold).any())
    active = torch.ones(M, dtype=torch.bool, device=device)
    everyone_active = True  # kept on the host: no device sync per step while nobody has stopped
    steps_run = torch.zeros(M, device=device)
    steps_everyone_ran = 0  # steps taken while every model was active, added to steps_run at the end
    first_moment = {k: torch.zeros_like(v) for k, v in params.items()}
    second_moment = {k: torch.zeros_like(v) for k, v in params.items()}
    lr_of = {k: _expand(lr_t, v) for k, v in params.items()}
    decays = decoupled and any(w != 0 for w in weight_decay)
    decay_of = {k: _expand(1 - lr_t * wd_t, v) if decays else None for k, v in params.items()}
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
            active &= ~exceeds(accuracy, threshold, among=active)
            everyone_active = bool(active.all())
            if not everyone_active and not active.any():
                break
        del accuracy  # it holds the logits; the backward pass reuses their memory
        gradients = torch.autograd.grad(loss.sum(), list(leaves.values()))
        del loss
        t = step + 1
        bias1, bias2 = 1 - BETA1**t, 1 - BETA2**t
        with torch.no_grad():
            for (name, p), g in zip(leaves.items(), gradients):
                p = p.detach()
                new_p, m1, m2 = _adam_step(p, g, first_moment[name], second_moment[name], lr_of[name] / bias1,
                                           bias2, decay_of[name])
                if not everyone_active:
                    mask = _expand(active, p)
                    new_p, m1 = torch.where(mask, new_p, p), torch.where(mask, m1, first_moment[name])
                    m2 = torch.where(mask, m2, second_moment[name])
                params[name], first_moment[name], second_moment[name] = new_p, m1, m2
        if everyone_active:
            steps_everyone_ran += 1
        else:
            steps_run += active.float()
        if not full_batch and checks_early_stop and position == steps_per_pass - 1:
            active &= ~(problem.train_accuracy(params) > threshold)
            everyone_active = bool(active.all())
            if not active.any():
                break
    return params, {"steps_run": steps_run + steps_everyone_ran}

"""Trainers over a batched problem (empirics.tasks): every tensor has a leading model axis M.

The loss that is differentiated is the sum over models of each model's mean loss, so model k's
gradient is exactly its own mean-loss gradient and models never influence each other. Per-model
numbers (step sizes, learning rates, early-stop thresholds) are tensors of shape [M].

- :func:`three_step`: the token-retrieval model's three full-batch gradient steps from V = 0, W_KQ = 0:
  V1 = -eta grad_V L(0, 0); W1 = -gamma grad_W L(V1, 0); V2 = V1 - gamma grad_V L(V1, W1).
  With ``kappa`` instead of ``gamma`` a model's gamma is measured: the step-2 score gap (the problem's
  ``score_gap``) is linear in gamma, so gamma = kappa / the gap at gamma = 1.
- :func:`two_step_then_fit`: steps 1-2 as above, then the readout (the problem's ``fit_params``, default
  ``("V",)``) trained by full-batch Adam with the rest frozen (a readout trained to convergence in place
  of the single Hebbian step 3).
- :func:`adam`: Adam (or AdamW, decoupled weight decay) written out elementwise, as in
  torch.optim.Adam (beta1 0.9, beta2 0.999, eps 1e-8, no amsgrad), so that one model's update can be
  masked off once it early-stops. Minibatch order per model comes from its ``"shuffle"`` stream.

The engine calls them through :func:`train_three_step`, :func:`train_two_step_then_fit` and
:func:`train_adam`, the ``train`` functions of the shipped trainers (``empirics.config.TRAINERS``): each
turns one chunk of run configs into the per-model arguments of its trainer.
"""
from __future__ import annotations

import contextlib
import functools
import math
from typing import Iterator

import torch

from recallkit.empirics.config import evaluate
from recallkit.empirics.tasks import exceeds, generator
from recallkit.theory.errors import InputError

__all__ = ["adam", "denormals_flushed", "flush_denormals", "three_step", "train_adam", "train_three_step", "train_two_step_then_fit",
           "two_step_then_fit"]


BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def flush_denormals(trainer):
    """Train with subnormal floats flushed to zero on the CPU. A converged model's shifted logits reach
    -87 and below, where exp() gives float32 subnormals; x86 CPUs compute with those tens of times more
    slowly (one small full-batch Adam cell spent most of its time in them). Flushed, they become 0,
    which changes no sum they enter beyond float32 rounding (each is below 1.2e-38 beside a total of at
    least 1), and the result stays a function of the config alone. The setting is restored afterwards."""
    @functools.wraps(trainer)
    def wrapped(problem, *args, **kwargs):
        with denormals_flushed(next(iter(problem.params.values())).device):
            return trainer(problem, *args, **kwargs)

    return wrapped


@contextlib.contextmanager
def denormals_flushed(device: torch.device) -> Iterator[None]:
    """The block with subnormal floats flushed to zero where ``device`` is the CPU (:func:`flush_denormals`); the
    engine evaluates the trained models under it too: a model trained with Adam to sharp attention gave
    subnormal attention weights, and its final evaluation (outside the trainer) took 25x its logged ones."""
    if device.type != "cpu":
        yield
        return
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


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
        loss = problem.loss({**params, name: leaf})[0]  # not the accuracy: it holds the logits
        (gradient,) = torch.autograd.grad(loss.sum(), [leaf])
        return gradient
    M = leaf.shape[0]
    gradient = torch.zeros_like(leaf)
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk), device=leaf.device).expand(M, -1)
        loss = problem.loss({**params, name: leaf}, idx)[0]  # the logits are freed before the next chunk
        (part,) = torch.autograd.grad(loss.sum() * (idx.shape[1] / n), [leaf])
        gradient += part
    return gradient


def _two_steps(problem, eta: list[float], gamma: list[float | None], kappa: list[float | None]):
    """Steps 1 and 2 from zero: (V1, W1, gamma per model [M], extra metrics).

    Step 1's gradient is the problem's ``value_gradient_at_zero()`` where it writes it out (at V = 0 the
    logits vanish and most of the autograd pass is products with zero), else autograd's.

    A model given ``kappa`` instead of ``gamma`` gets gamma = kappa / gap, where gap is the problem's
    ``score_gap`` of the step-2 direction -grad_W at gamma = 1 (the gap is linear in W, so W1 then has
    exactly that gap on the training items)."""
    device = problem.params["V"].device
    eta_t = _per_model(eta, device)
    zero = {k: torch.zeros_like(v) for k, v in problem.params.items()}
    at_zero = problem.value_gradient_at_zero() if hasattr(problem, "value_gradient_at_zero") else _grad(problem, zero, "V")
    V1 = -_expand(eta_t, zero["V"]) * at_zero
    direction = -_grad(problem, {"W": zero["W"], "V": V1}, "W")
    extra = {}
    if any(k is not None for k in kappa):
        if not hasattr(problem, "score_gap"):
            raise InputError("kappa: this task's problem has no score_gap; give gamma instead")
        gap = problem.score_gap(direction)
        measured = _per_model([k if k is not None else 1.0 for k in kappa], device) / gap
        given = _per_model([g if g is not None else 0.0 for g in gamma], device)
        uses_kappa = torch.tensor([k is not None for k in kappa], device=device)
        gamma_t = torch.where(uses_kappa, measured, given)
        extra["score_gap_unit"] = gap
    else:
        gamma_t = _per_model(gamma, device)
    W1 = _expand(gamma_t, direction) * direction
    extra["gamma_used"] = gamma_t
    return V1, W1, gamma_t, extra


@flush_denormals
def three_step(problem, eta: list[float], gamma: list[float | None], kappa: list[float | None] | None = None
               ) -> tuple[dict, dict]:
    """Returns (params after step 3, extra per-model metrics)."""
    kappa = kappa if kappa is not None else [None] * len(eta)
    V1, W1, gamma_t, extra = _two_steps(problem, eta, gamma, kappa)
    # a problem may write step 3's value gradient out (token retrieval's attention-only model, in label space)
    gradient = problem.value_gradient(W1, V1) if hasattr(problem, "value_gradient") else None
    if gradient is None:
        gradient = _grad(problem, {"W": W1, "V": V1}, "V")
    if hasattr(problem, "step3_value_gradient"):  # a problem may change step 3 (token retrieval's centring)
        gradient = problem.step3_value_gradient(W1, gradient)
    V2 = V1 - _expand(gamma_t, V1) * gradient
    M = V2.shape[0]
    return {"W": W1, "V": V2}, {"steps_run": torch.full((M,), 3.0), **extra}


def _loss_and_grads(problem, params: dict, names: tuple[str, ...]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Each model's mean loss over all its training items [M] and its gradients wrt ``params[names]``,
    accumulated over the problem's ``train_chunk`` items as in :func:`_grad` (full batch, bounded memory)."""
    leaves = {k: (v.detach().requires_grad_(True) if k in names else v) for k, v in params.items()}
    n = problem.n_train
    chunk = getattr(problem, "train_chunk", n)
    if chunk >= n:
        loss = problem.loss(leaves)[0]  # not the accuracy: it holds the logits
        gradients = torch.autograd.grad(loss.sum(), [leaves[k] for k in names])
        return loss.detach(), list(gradients)
    M = next(iter(params.values())).shape[0]
    total = None
    gradients = [torch.zeros_like(params[k]) for k in names]
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk), device=gradients[0].device).expand(M, -1)
        loss = problem.loss(leaves, idx)[0]  # the logits are freed before the next chunk
        weight = idx.shape[1] / n
        parts = torch.autograd.grad(loss.sum() * weight, [leaves[k] for k in names])
        for g, part in zip(gradients, parts):
            g += part
        total = loss.detach() * weight if total is None else total + loss.detach() * weight
    return total, gradients


@flush_denormals
def two_step_then_fit(problem, eta: list[float], gamma: list[float | None], kappa: list[float | None],
                      fit_lr: list[float], fit_steps: int, fit_tol: list[float]) -> tuple[dict, dict]:
    """Steps 1-2 as :func:`three_step`, then the problem's ``fit_params`` (default: ``("V",)``, the
    readout) trained from their step-1 values by full-batch Adam with everything else frozen, for at
    most ``fit_steps`` steps. A model stops (its parameters frozen from then on) once one step lowers
    its training loss by less than ``fit_tol`` times the loss; ``fit_tol = 0`` runs every step."""
    V1, W1, _, extra = _two_steps(problem, eta, gamma, kappa)
    params = {"W": W1, "V": V1}
    names = tuple(getattr(problem, "fit_params", ("V",)))
    device = V1.device
    M = V1.shape[0]
    lr_t, tol_t = _per_model(fit_lr, device), _per_model(fit_tol, device)
    active = torch.ones(M, dtype=torch.bool, device=device)
    steps_run = torch.zeros(M, device=device)
    first = {k: torch.zeros_like(params[k]) for k in names}
    second = {k: torch.zeros_like(params[k]) for k in names}
    previous = None
    for step in range(fit_steps):
        loss, gradients = _loss_and_grads(problem, params, names)
        if previous is not None:
            active &= ~((tol_t > 0) & (previous - loss < tol_t * previous.abs()))
            if not active.any():
                break
        previous = loss
        t = step + 1
        with torch.no_grad():
            for name, g in zip(names, gradients):
                p = params[name]
                mask = _expand(active, p)
                m1 = torch.where(mask, BETA1 * first[name] + (1 - BETA1) * g, first[name])
                m2 = torch.where(mask, BETA2 * second[name] + (1 - BETA2) * g * g, second[name])
                first[name], second[name] = m1, m2
                new = p - _expand(lr_t, p) / (1 - BETA1**t) * m1 / ((m2 / (1 - BETA2**t)).sqrt() + EPS)
                params[name] = torch.where(mask, new, p)
        steps_run += active.float()
    return params, {"steps_run": 2.0 + steps_run, "fit_steps_run": steps_run, **extra}


def _log_evaluation(problem, params: dict, epochs: list[int], logged: dict) -> None:
    """The problem's evaluation of the current parameters, stored in ``logged`` as ``<metric>_epoch_<k>`` (its
    accuracy and train_accuracy) for every epoch k in ``epochs``."""
    with torch.no_grad():
        measured = problem.evaluate({k: v.detach() for k, v in params.items()})
    for epoch in epochs:
        logged.update({f"{name}_epoch_{epoch}": measured[name] for name in ("accuracy", "train_accuracy")
                       if name in measured})


def _powers_of_two_below(epochs: int) -> tuple[int, ...]:
    """1, 2, 4, ... below ``epochs``: the epochs ``log_epochs`` measures (the last is the run's own result)."""
    return tuple(1 << i for i in range(max(epochs - 1, 0).bit_length()) if 1 << i < epochs)


def _adam_step(p, g, m1, m2, step_size, bias2: float, decay, in_place: bool = False):
    """One Adam(W) update: (p, m1, m2) -> new (p, m1, m2). Eight elementwise operations (lerp, addcmul,
    addcdiv fuse what took three each). ``in_place`` overwrites p, m1 and m2 (while every model of the batch
    trains, nothing needs the old values); otherwise the update is out of place, to be masked. Both ways run
    the same kernels on the same operands, so a model's numbers do not depend on whether its batch partners
    stopped early."""
    if in_place:
        m1.lerp_(g, 1 - BETA1)
        m2.mul_(BETA2).addcmul_(g, g, value=1 - BETA2)
    else:
        m1 = torch.lerp(m1, g, 1 - BETA1)
        m2 = torch.addcmul(m2 * BETA2, g, g, value=1 - BETA2)
    denominator = (m2 / bias2).sqrt_().add_(EPS)
    if decay is not None:  # decoupled weight decay, as torch.optim.AdamW: p (1 - lr wd) before the step
        p = p.mul_(decay) if in_place else p * decay
    if in_place:
        return p.addcdiv_(m1 * step_size, denominator, value=-1), m1, m2
    return torch.addcdiv(p, m1 * step_size, denominator, value=-1), m1, m2


@flush_denormals
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
    log_epochs: bool = False,
) -> tuple[dict, dict]:
    """Minibatch Adam/AdamW for ``epochs`` passes or ``steps`` steps; per-model early stop.

    Early stop: a model stops (its parameters are frozen from then on) as soon as its accuracy over
    all training items is > its threshold. Full-batch training checks before every step, using that
    step's own forward pass (the argmax only where a free bound cannot decide, see
    ``empirics.tasks.Accuracy``); minibatch training checks at the end of every pass over the data.
    Without early stop no accuracy is computed during training.

    ``log_epochs``: after epochs 1, 2, 4, ... below ``epochs``, the problem's ``evaluate`` of the current
    parameters, returned as ``<metric>_epoch_<k>`` for its accuracy and train_accuracy.
    """
    state = _AdamState(problem, lr, weight_decay, decoupled)
    params, device = state.params, state.device
    M, n = len(seeds), problem.n_train
    threshold = _per_model([math.inf if t is None else t for t in early_stop], device)
    checks_early_stop = bool(torch.isfinite(threshold).any())
    active = torch.ones(M, dtype=torch.bool, device=device)
    everyone_active = True  # kept on the host: no device sync per step while nobody has stopped
    steps_run = torch.zeros(M, device=device)
    steps_everyone_ran = 0  # steps taken while every model was active, added to steps_run at the end
    full_batch = batch_size >= n
    steps_per_pass = 1 if full_batch else math.ceil(n / batch_size)
    total_steps = steps if steps is not None else epochs * steps_per_pass
    batches = _Minibatches(seeds, n, batch_size, steps_per_pass, device)
    logged: dict[str, torch.Tensor] = {}
    log_epochs = bool(log_epochs) and epochs is not None
    written_out = hasattr(problem, "gradients")  # (gradients dict, Accuracy or None) = gradients(params, idx, accuracy)
    for step in range(total_steps):
        position = step % steps_per_pass
        idx = None if full_batch else batches.at(position)
        if written_out:  # the problem's own backward, without an autograd graph
            gradient_of, accuracy = problem.gradients(params, idx, accuracy=full_batch and checks_early_stop)
            gradients = [gradient_of[k] for k in params]
        else:
            leaves = {k: v.requires_grad_(True) for k, v in params.items()}
            loss, accuracy = problem.loss(leaves, idx)
        if full_batch and checks_early_stop:
            active &= ~exceeds(accuracy, threshold, among=active)
            everyone_active = bool(active.all())
            if not everyone_active and not active.any():
                break
        del accuracy  # it holds the logits; the backward pass reuses their memory
        if not written_out:
            gradients = torch.autograd.grad(loss.sum(), list(leaves.values()))
            del loss
        state.update(gradients, step + 1, active, everyone_active)
        if everyone_active:
            steps_everyone_ran += 1
        else:
            steps_run += active.float()
        if log_epochs and position == steps_per_pass - 1 and (step + 1) // steps_per_pass in _powers_of_two_below(epochs):
            _log_evaluation(problem, params, [(step + 1) // steps_per_pass], logged)
        if not full_batch and checks_early_stop and position == steps_per_pass - 1:
            active &= ~(problem.train_accuracy(params) > threshold)
            everyone_active = bool(active.all())
            if not active.any():
                break
    if log_epochs:  # every model stopped early: the epochs not reached hold the final parameters
        missing = [k for k in _powers_of_two_below(epochs) if f"accuracy_epoch_{k}" not in logged]
        if missing:
            _log_evaluation(problem, params, missing, logged)
    return params, {"steps_run": steps_run + steps_everyone_ran, **logged}


class _AdamState:
    """The parameters and Adam moments of the M models of one batch, with each model's step size and decay.
    ``params`` is updated in place as a dict (its tensors are replaced each step), so the loop reads it live."""

    def __init__(self, problem, lr: list[float], weight_decay: list[float], decoupled: bool):
        self.params = {k: v.detach().clone() for k, v in problem.params.items()}
        self.device = next(iter(self.params.values())).device
        lr_t = _per_model(lr, self.device)
        wd_t = _per_model(weight_decay, self.device)
        self.first_moment = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.second_moment = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.lr_of = {k: _expand(lr_t, v) for k, v in self.params.items()}
        decays = decoupled and any(w != 0 for w in weight_decay)
        self.decay_of = {k: _expand(1 - lr_t * wd_t, v) if decays else None for k, v in self.params.items()}

    def update(self, gradients, t: int, active: torch.Tensor, everyone_active: bool) -> None:
        """Adam step ``t`` of every model; a model that stopped early keeps its parameters and moments."""
        bias1, bias2 = 1 - BETA1**t, 1 - BETA2**t
        params, first_moment, second_moment = self.params, self.first_moment, self.second_moment
        with torch.no_grad():
            for (name, p), g in zip(list(params.items()), gradients):
                p = p.detach()
                new_p, m1, m2 = _adam_step(p, g, first_moment[name], second_moment[name], self.lr_of[name] / bias1,
                                           bias2, self.decay_of[name], in_place=everyone_active)
                if not everyone_active:
                    mask = _expand(active, p)
                    new_p, m1 = torch.where(mask, new_p, p), torch.where(mask, m1, first_moment[name])
                    m2 = torch.where(mask, m2, second_moment[name])
                params[name], first_moment[name], second_moment[name] = new_p, m1, m2


class _Minibatches:
    """Each model's minibatch indices: a fresh permutation of its n items from its own seeded stream at the
    start of every pass, cut into batches of ``batch_size``."""

    def __init__(self, seeds: list[int], n: int, batch_size: int, steps_per_pass: int, device):
        self.shufflers = [generator(seed, "shuffle") for seed in seeds]
        self.n, self.batch_size, self.device = n, batch_size, device
        self.order = None

    def at(self, position: int) -> torch.Tensor:
        """The [M, batch] indices of step ``position`` of the current pass (position 0 draws a new pass)."""
        if position == 0:
            self.order = torch.stack([torch.randperm(self.n, generator=g) for g in self.shufflers]).to(self.device)
        return self.order[:, position * self.batch_size : (position + 1) * self.batch_size]


# ------------------------------------------------------------------- the shipped trainers' train functions
# Each is a ``recallkit.registry.Trainer.train``: (problem, cfgs, sizes) -> (params, extra metrics) for one
# chunk of run configs sharing a shape, the per-model numbers read from each config (expressions evaluated at
# ``sizes``), the shared ones from the first.


def _step_sizes(cfgs, sizes: dict[str, int]) -> dict[str, list]:
    """eta, gamma and kappa per model: the arguments of steps 1 and 2."""
    return dict(
        eta=[evaluate(c.trainer_config.eta, "eta", sizes) for c in cfgs],
        gamma=[None if c.trainer_config.gamma is None else evaluate(c.trainer_config.gamma, "gamma", sizes)
               for c in cfgs],
        kappa=[c.trainer_config.kappa for c in cfgs],
    )


def train_three_step(problem, cfgs, sizes: dict[str, int]) -> tuple[dict, dict]:
    return three_step(problem, **_step_sizes(cfgs, sizes))


def train_two_step_then_fit(problem, cfgs, sizes: dict[str, int]) -> tuple[dict, dict]:
    return two_step_then_fit(
        problem, **_step_sizes(cfgs, sizes), fit_lr=[evaluate(c.trainer_config.fit_lr, "fit_lr", sizes) for c in cfgs],
        fit_steps=cfgs[0].trainer_config.fit_steps, fit_tol=[c.trainer_config.fit_tol for c in cfgs])


def train_adam(problem, cfgs, sizes: dict[str, int]) -> tuple[dict, dict]:
    """Both ``adam`` and ``adamw``: the config's ``decoupled`` tells them apart."""
    first = cfgs[0]
    tc = first.trainer_config
    return adam(
        problem,
        lr=[evaluate(c.trainer_config.lr, "lr", sizes) for c in cfgs],
        batch_size=tc.resolved_batch_size(sizes, first.task_config.n_train),
        epochs=tc.epochs,
        steps=tc.steps,
        early_stop=[c.trainer_config.early_stop for c in cfgs],
        weight_decay=[c.trainer_config.weight_decay for c in cfgs],
        seeds=[c.seed for c in cfgs],
        decoupled=tc.decoupled,
        log_epochs=bool(tc.log_epochs),
    )

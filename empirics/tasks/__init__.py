"""Tasks: data and models for many independent models of one shape, with a leading model axis.

Every task builds a *problem* from a list of run configs that share a shape (same sizes, model and
trainer; seeds and step sizes may differ). A problem holds, per model k:

- ``params``: dict of trainable tensors, shape ``[M, ...]`` (initial values);
- ``loss(params, idx=None) -> (loss [M], accuracy [M])``: mean cross-entropy and accuracy of each
  model on its training items (all of them, or the minibatch ``idx`` of shape ``[M, B]``);
- ``evaluate(params) -> dict`` of per-model metric tensors (``accuracy`` on fresh samples where the
  task has a population, ``train_accuracy``, ``loss``, task-specific ones);
- ``n_train``: the number of training items.

Determinism: model k's data and initial weights are drawn on the CPU from generators seeded by
:func:`stream_seed(seed_k, stream)`, one stream per purpose (``"instance"`` for embeddings and
permutations, ``"train"`` for training samples, ``"eval"`` for fresh samples, ``"init"`` for
initial weights, ``"shuffle"`` for minibatch order). So a model's numbers never depend on which
other models share its batch, nor on the device.
"""
from __future__ import annotations

import hashlib

import torch


def stream_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for one purpose of one model, independent across streams."""
    digest = hashlib.sha256(f"recallkit/{seed}/{stream}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def generator(seed: int, stream: str) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(stream_seed(seed, stream))


def unit_sphere(n: int, d: int, gen: torch.Generator) -> torch.Tensor:
    """n i.i.d. points uniform on the unit sphere in R^d (normalised Gaussians), float32."""
    x = torch.randn(n, d, generator=gen, dtype=torch.float32)
    return x / x.norm(dim=-1, keepdim=True)


def cross_entropy_and_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-model mean cross-entropy and accuracy: logits [M, n, C], labels [M, n] -> ([M], [M]).

    log_softmax subtracts the max, so logits of size 1e6 (gamma = 1e7 steps) stay finite.
    """
    logp = torch.log_softmax(logits, dim=-1)
    loss = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1).mean(dim=1)
    accuracy = (logits.argmax(dim=-1) == labels).float().mean(dim=1)
    return loss, accuracy


ITEM_CHUNK_ELEMENTS = 1 << 20  # per model: floats in one [items, width] tensor of an evaluation chunk


def items_per_chunk(width: int, budget: int = ITEM_CHUNK_ELEMENTS) -> int:
    """Items per chunk of a pass over many items. It depends only on a model's shape, never on how many
    models share the batch, so a model's sums are added in the same order alone and batched (resume
    relies on that: a stored number must not depend on what else was trained with it)."""
    return max(1, budget // max(1, width))


def loss_and_correct_sums(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-model summed cross-entropy and number of correct argmaxes (exact integers as floats)."""
    logp = torch.log_softmax(logits, dim=-1)
    loss_sum = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1).sum(dim=1)
    correct = (logits.argmax(dim=-1) == labels).sum(dim=1).to(logits.dtype)
    return loss_sum, correct


def build_problem(configs, device: torch.device):
    """The batched problem for configs that share a shape (see empirics.config.shape_key), built by the
    problem class its task registered (``recallkit.registry``)."""
    from recallkit.empirics.config import task_spec

    return task_spec(configs[0].task).problem_class()(configs, device)


def gather_items(x: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    """Select per-model items along dim 1: x [M, n, ...], idx [M, B] -> [M, B, ...]."""
    if idx is None:
        return x
    shape = idx.shape + x.shape[2:]
    index = idx.reshape(idx.shape + (1,) * (x.dim() - 2)).expand(shape)
    return x.gather(1, index)

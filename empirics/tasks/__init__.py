"""Tasks: data and models for many independent models of one shape, with a leading model axis.

Every task builds a *problem* from a list of run configs that share a shape (same sizes, model and
trainer; seeds and step sizes may differ). A problem holds, per model k:

- ``params``: dict of trainable tensors, shape ``[M, ...]`` (initial values);
- ``loss(params, idx=None) -> (loss [M], accuracy)``: mean cross-entropy and accuracy of each
  model on its training items (all of them, or the minibatch ``idx`` of shape ``[M, B]``); the
  accuracy is an :class:`Accuracy` (computed only when early stop asks) or a plain tensor [M];
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

from recallkit.empirics.config import ITEM_CHUNK_ELEMENTS, items_per_chunk  # noqa: F401  (re-exported)
from recallkit.empirics.config import task_spec

__all__ = ["Accuracy", "build_problem", "cross_entropy_and_accuracy", "exceeds", "EXP_FLOOR", "gather_items",
           "generator", "loss_and_correct_sums", "stream_seed", "unit_sphere"]


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


EXP_FLOOR = -87.0  # exp(-87) = 1.6e-38, the smallest float32 exp that is still a normal number


class _SoftmaxCrossEntropy(torch.autograd.Function):
    """Per-model mean cross-entropy with a hand-written backward: fewer passes over the [M, n, C] logits.

    Forward: row max, shifted = logits - max (a new buffer, so the logits stay intact for an argmax),
    exp in place, row sum, loss = log(sum) - shifted[label]. Backward writes softmax * dL/dloss - onehot
    into the saved exp buffer in place (one pass instead of log_softmax's backward plus the gather's
    zero-fill and scatter). Every operation works row by row, so a model's numbers do not depend on
    the other models in its batch. A second backward through the same graph raises (the buffer was
    modified), it never returns a wrong gradient.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor):
        row_max = logits.amax(dim=-1, keepdim=True)
        shifted = torch.sub(logits, row_max)  # -inf..0; logits of size 1e6 (gamma = 1e7 steps) stay finite
        label_shifted = shifted.gather(-1, labels.unsqueeze(-1))
        # exp() below -87 is 0 to float32 precision beside the row maximum's exp(0) = 1 in the sum, but the
        # CPU's vectorised exp takes a slow path there (25-35x): clamp first, the loss and softmax keep
        # their float32 values (the label's own logit was taken above, unclamped)
        exp = shifted.clamp_min_(EXP_FLOOR).exp_()
        total = exp.sum(dim=-1, keepdim=True)
        loss = (total.log() - label_shifted).squeeze(-1).mean(dim=1)
        ctx.save_for_backward(exp, total, labels)
        ctx.mark_non_differentiable(label_shifted)
        return loss, label_shifted

    @staticmethod
    def backward(ctx, grad_loss, _unused):
        exp, total, labels = ctx.saved_tensors
        n = exp.shape[1]
        scale = (grad_loss / n)[:, None, None]
        grad = exp.mul_(scale / total)  # softmax * scale, in the buffer this graph owns
        grad.scatter_add_(-1, labels.unsqueeze(-1), (-scale).expand(-1, n, 1))
        return grad, None


class Accuracy:
    """The per-model accuracy of one forward pass, computed only when it is asked for.

    The argmax over [M, n, C] costs about as much as the whole softmax, and training needs the
    accuracy only for early stop. :meth:`exceeds` answers ``accuracy > threshold`` exactly: it first
    uses a bound that costs nothing (the share of rows whose label logit reaches the row maximum, at
    least the accuracy) and runs the argmax only for models whose bound passes the threshold.
    """

    def __init__(self, logits: torch.Tensor, labels: torch.Tensor, label_shifted: torch.Tensor | None = None):
        # label_shifted [M, n, 1]: the label's logit minus the row maximum, from the cross-entropy
        self._logits, self._labels, self._label_shifted = logits.detach(), labels, label_shifted
        self._value: torch.Tensor | None = None

    def value(self) -> torch.Tensor:
        """Exact per-model accuracy [M] (argmax = label), as float."""
        if self._value is None:
            self._value = (self._logits.argmax(dim=-1) == self._labels).float().mean(dim=1)
        return self._value

    def exceeds(self, threshold: torch.Tensor, among: torch.Tensor | None = None) -> torch.Tensor:
        """``value() > threshold`` per model (bool [M]), with the argmax only where the bound cannot decide.
        ``among`` (bool [M]): only these models are asked about; the others get False."""
        if self._value is not None or self._label_shifted is None:
            answer = self.value() > threshold
            return answer if among is None else answer & among
        # a right answer (argmax = label) has its logit at the row maximum, so rows where the label's
        # logit is strictly below it are certainly wrong; NaN rows count as "maybe" (argmax picks NaN)
        maybe_right = ~(self._label_shifted.squeeze(-1) < 0)
        maybe = maybe_right.float().mean(dim=1) > threshold
        if among is not None:
            maybe &= among
        if not bool(maybe.any()):
            return maybe
        rows = maybe.nonzero().squeeze(1)
        exact = (self._logits[rows].argmax(dim=-1) == self._labels[rows]).float().mean(dim=1)
        out = torch.zeros_like(maybe)
        out[rows] = exact > threshold[rows]
        return out


def exceeds(accuracy, threshold: torch.Tensor, among: torch.Tensor | None = None) -> torch.Tensor:
    """``accuracy > threshold`` for an :class:`Accuracy` or a plain accuracy tensor [M] (a problem of
    another package may return either from its ``loss``); models outside ``among`` get False."""
    if isinstance(accuracy, Accuracy):
        return accuracy.exceeds(threshold, among)
    answer = accuracy.detach() > threshold
    return answer if among is None else answer & among


def cross_entropy_and_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, Accuracy]:
    """Per-model mean cross-entropy [M] and the :class:`Accuracy` (on demand): logits [M, n, C], labels [M, n].

    The shift by the row maximum keeps logits of size 1e6 (gamma = 1e7 steps) finite.
    """
    loss, label_shifted = _SoftmaxCrossEntropy.apply(logits, labels)
    return loss, Accuracy(logits, labels, label_shifted)




def loss_and_correct_sums(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-model summed cross-entropy and number of correct argmaxes (exact integers as floats)."""
    logp = torch.log_softmax(logits, dim=-1)
    loss_sum = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1).sum(dim=1)
    correct = (logits.argmax(dim=-1) == labels).sum(dim=1).to(logits.dtype)
    return loss_sum, correct


def build_problem(configs, device: torch.device):
    """The batched problem for configs that share a shape (see empirics.config.shape_key), built by the
    problem class its task registered (``recallkit.registry``)."""
    return task_spec(configs[0].task).problem_class()(configs, device)


def gather_items(x: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    """Select per-model items along dim 1: x [M, n, ...], idx [M, B] -> [M, B, ...]."""
    if idx is None:
        return x
    shape = idx.shape + x.shape[2:]
    index = idx.reshape(idx.shape + (1,) * (x.dim() - 2)).expand(shape)
    return x.gather(1, index)

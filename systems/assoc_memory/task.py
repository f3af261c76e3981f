"""The associative-memory anchor (Nichani, Lee, Bietti, ICLR 2025): linear and MLP associative memories.

N inputs e_i and N outputs u_i, unit-norm Gaussian embeddings in R^d (the ``"instance"`` stream:
E then U); target f*(i) = i; loss = mean cross-entropy of softmax(U f(e_i)) over all N items.
- linear: f(x) = W x, W in R^{d x d};
- mlp: f(x) = W2 relu(W1 x + b), W1 in R^{m x d}, b in R^m, W2 in R^{d x m}.
Initial weights (the ``"init"`` stream): W, W1 entries N(0, 1/d), W2 entries N(0, 1/m), b = 0.
Accuracy is over all N items, so ``accuracy`` and ``train_accuracy`` are the same number.

The linear memory's training gradient is written out (:meth:`AssocMemory.gradients`, which the Adam
trainer uses instead of autograd): a handful of bmm's and three passes over the logits, with the
logits laid out [output, input] so that every bmm reads contiguous operands.

Measured (linear, d=24, AdamW wd 0, 1000 full-batch steps, early stop > 0.99, seed 0): N=64 reaches
100% at every lr in {1000, 1, 0.1, 0.01}; N=128 reaches 57% (lr 1 or 0.1) but 27% at lr 1000;
N=256 about 11%. Those N are above capacity (N ~ 95 at d = 24 on the anchor's line), where final
accuracy says little; measured as capacity, lr 1000 matches lr 1 at d = 16 and is about 10% lower at
d = 32, and it is the published value for this parametrisation (docs/anchor.md).
"""
from __future__ import annotations

import torch

from recallkit.empirics.tasks import EXP_FLOOR, Accuracy, cross_entropy_and_accuracy, generator, items_per_chunk, loss_and_correct_sums, unit_sphere


def key_value_embeddings(configs, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Each model's inputs E and outputs U, [M, N, d] unit vectors from its own ``"instance"`` stream (E first)."""
    task = configs[0].task_config
    pairs = []
    for c in configs:
        gen = generator(c.seed, "instance")
        pairs.append((unit_sphere(task.N, task.d, gen), unit_sphere(task.N, task.d, gen)))
    return torch.stack([e for e, _ in pairs]).to(device), torch.stack([u for _, u in pairs]).to(device)


class AssocMemory:
    def __init__(self, configs, device: torch.device):
        task = configs[0].task_config
        self.N, self.d, self.m, self.model = task.N, task.d, task.m, task.model
        self.device = device
        self.E, self.U = key_value_embeddings(configs, device)
        inits = [self._init(c.seed) for c in configs]
        self.params = {k: torch.stack([p[k] for p in inits]).to(device) for k in inits[0]}
        self.labels = torch.arange(task.N, device=device).expand(len(configs), task.N)
        self.n_train = task.N
        if self.model == "linear":  # constant operands of the written-out gradient, laid out as its bmm's read them
            self._Et = self.E.transpose(1, 2).contiguous()
            self._Ut = self.U.transpose(1, 2).contiguous()
            self._negative_Ut = -self._Ut

    def _init(self, seed: int) -> dict[str, torch.Tensor]:
        gen = generator(seed, "init")
        d, m = self.d, self.m
        if self.model == "linear":
            return {"W": torch.randn(d, d, generator=gen) / d**0.5}
        return {
            "W1": torch.randn(m, d, generator=gen) / d**0.5,
            "b": torch.zeros(m),
            "W2": torch.randn(d, m, generator=gen) / m**0.5,
        }

    def forward(self, params, x: torch.Tensor) -> torch.Tensor:
        """x [M, n, d] -> logits [M, n, N]."""
        if self.model == "linear":
            out = torch.bmm(x, params["W"].transpose(1, 2))
        else:
            hidden = torch.relu(torch.einsum("mnd,mkd->mnk", x, params["W1"]) + params["b"][:, None, :])
            out = torch.einsum("mnk,mdk->mnd", hidden, params["W2"])
        return torch.bmm(out, self.U.transpose(1, 2))

    def loss(self, params, idx: torch.Tensor | None = None):
        if idx is None:
            return cross_entropy_and_accuracy(self.forward(params, self.E), self.labels)
        x = self.E.gather(1, idx[..., None].expand(*idx.shape, self.d))
        return cross_entropy_and_accuracy(self.forward(params, x), idx)

    @torch.no_grad()
    def gradients(self, params, idx: torch.Tensor | None = None, accuracy: bool = False):
        """(gradients of each model's mean loss wrt ``params``, dict like ``params``; the :class:`Accuracy`
        of this forward pass when ``accuracy``, else None), on all items or the minibatch ``idx`` [M, B].

        Linear memory, by hand (no autograd graph): with B = W X^T [M, d, B] (X the batch's inputs),
        the logits transposed, Z = U B [M, N, B] (Z[j, i] = u_j . W x_i), their column softmax P,
        and G = P - onehot(labels): dL/dW = (U^T G) X / B, where U^T G = (U^T exp(Z - max)) / colsum
        - U^T[labels], so the softmax is never divided out over the [N, B] logits. The MLP memory goes
        through autograd."""
        if self.model != "linear":
            with torch.enable_grad():
                leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
                loss, acc = self.loss(leaves, idx)
                grads = torch.autograd.grad(loss.sum(), list(leaves.values()))
            return dict(zip(leaves, grads)), (acc if accuracy else None)
        W = params["W"]
        if idx is None:
            x, xt, negative_targets, labels = self.E, self._Et, self._negative_Ut, self.labels
        else:
            x = self.E.gather(1, idx[..., None].expand(*idx.shape, self.d))
            xt = x.transpose(1, 2)
            negative_targets = self._negative_Ut.gather(2, idx[:, None, :].expand(-1, self.d, -1))
            labels = idx
        z = torch.bmm(self.U, torch.bmm(W, xt))  # [M, N, B]: logits of item i in column i
        column_max = z.amax(dim=1, keepdim=True)
        result = None
        if accuracy:
            logits = z.transpose(1, 2)
            label_shifted = logits.gather(2, labels.unsqueeze(-1)) - column_max.transpose(1, 2)
            result = Accuracy(logits.clone(), labels, label_shifted)
        z.sub_(column_max).clamp_min_(EXP_FLOOR).exp_()  # the floor: see empirics.tasks.EXP_FLOOR
        signal = torch.addcdiv(negative_targets, torch.bmm(self._Ut, z), z.sum(dim=1, keepdim=True))  # U^T G
        gradient = torch.baddbmm(W, signal, x, beta=0, alpha=1 / x.shape[1])
        return {"W": gradient}, result

    @torch.no_grad()
    def evaluate(self, params) -> dict[str, torch.Tensor]:
        M = self.E.shape[0]
        chunk = items_per_chunk(max(self.N, self.m or 0))
        loss_sum = torch.zeros(M, device=self.device)
        correct = torch.zeros(M, device=self.device)
        for start in range(0, self.N, chunk):
            part = slice(start, start + chunk)
            chunk_loss, chunk_correct = loss_and_correct_sums(self.forward(params, self.E[:, part]), self.labels[:, part])
            loss_sum += chunk_loss
            correct += chunk_correct
        accuracy = correct / self.N
        return {"accuracy": accuracy, "train_accuracy": accuracy, "loss": loss_sum / self.N}

    def train_accuracy(self, params) -> torch.Tensor:
        return self.evaluate(params)["accuracy"]

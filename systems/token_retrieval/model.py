"""The token-retrieval model, written once: its draws, its samples' labels and its feature maps. The engine's
batched float32 task (``task.TokenRetrieval``) and the term probes' float64 model (``term_probes.ThreeStepModel``)
both take these from here, so a seed is the same instance, the same samples and the same feature map in both;
``reference.py`` stays an independent float64 implementation (the tests' oracle) and shares only the draws.

Token retrieval under random (non-orthogonal) embeddings, attention-only and attention-MLP.

The reconstructed token-retrieval model (see README.md in this folder), exactly:
- e_1..e_V, u_1..u_V, z_trig, z_EOS i.i.d. uniform on the unit sphere of R^d; Pi* a uniform
  permutation of [V] (all from the model's ``"instance"`` stream, drawn in that order);
- a sample: tokens x_1..x_L i.i.d. uniform on [V], informative position l uniform on [L] (the
  ``"train"`` / ``"eval"`` streams: first all tokens [n, L], then all positions [n]);
  h_j = e_{x_j} + [j = l] z_trig, label y = Pi*(x_l);
- attention a = softmax_j(h_j . (W_KQ z_EOS)), o = sum_j a_j h_j;
- attention-only logits U V o (V in R^{d x d}); attention-mlp logits U V phi(o),
  phi(o) = relu(W1 o), W1 in R^{m x d} fixed with rows N(0, I/d) (the ``"instance"`` stream, after Pi*),
  V in R^{d x m}. Feature options (config key ``features``): ``relu`` (as written), ``relu_centred``
  (phi minus its mean over the m units of the same sample, which removes the common mean that acts
  like a mean-bias term), ``relu_normalised`` (centred, then divided by the sample's standard
  deviation over the units), ``abs_centred`` (|W1 o| minus its mean over the m units of the same
  sample: an even feature map, so it has no linear part, and centring removes its constant).
Option ``mlp_input`` (config key): ``attended`` (default, the model above) or ``content``: the MLP
(attention-only: the value matrix) reads o - a_l z_trig, the attended token embeddings without the
trigger component that every attended vector shares (README.md: why).
Option ``centring`` (config key, three_step only): ``none`` (default) or ``labels``: step 3's value update reads
u_{y_n} - u_hat, the training labels' embeddings minus their empirical mean, in place of u_{y_n} - u_bar
(``task.TokenRetrieval.step3_value_gradient``); the mean-bias terms then vanish exactly (DERIVATION.md §10).
Trained parameters: ``W`` (= W_KQ, d x d) and ``V``; both start at zero.


The two forward passes stay apart: the engine scores e_x . q and z_trig . q separately (batched over models, one
embedding_bag for o, no h materialised), the probes materialise h and split o into its parts in float64; written as
one function, either would round differently from what its stored runs and tests hold.
"""
from __future__ import annotations

import torch

from recallkit.empirics.tasks import generator, unit_sphere
from recallkit.systems.token_retrieval.config import INT16_TOKENS_MAX_V

DRAW_CHUNK_TOKENS = 1 << 22  # tokens drawn per call when filling a model's [n, L] slice


def token_dtype(V: int) -> torch.dtype:
    """The smallest integer type that holds token values 0..V-1 (and is usable by torch indexing ops)."""
    return torch.int16 if V <= INT16_TOKENS_MAX_V else torch.int32


def draw_instance(seed: int, V: int, d: int, m: int | None) -> dict[str, torch.Tensor]:
    """One model's embeddings, permutation and (attention-mlp) fixed first layer."""
    gen = generator(seed, "instance")
    instance = {
        "E": unit_sphere(V, d, gen),
        "U": unit_sphere(V, d, gen),
        "z_trig": unit_sphere(1, d, gen)[0],
        "z_eos": unit_sphere(1, d, gen)[0],
        "perm": torch.randperm(V, generator=gen),
    }
    if m is not None:
        instance["W1"] = torch.randn(m, d, generator=gen) / d**0.5
    return instance


def draw_samples(seed: int, stream: str, n: int, V: int, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n samples: tokens [n, L] (int64) and informative positions [n]."""
    gen = generator(seed, stream)
    tokens = torch.randint(V, (n, L), generator=gen)
    positions = torch.randint(L, (n,), generator=gen)
    return tokens, positions


def draw_samples_into(seed: int, stream: str, V: int, tokens: torch.Tensor, positions: torch.Tensor) -> None:
    """Fill one model's tokens [n, L] (any integer type, any device) and positions [n] in place with the
    numbers :func:`draw_samples` gives: the generator's draws do not depend on the integer type or on how
    the rows are split into calls. Rows are drawn a chunk at a time on the CPU, so no int64 copy of the
    whole [n, L] ever exists."""
    n, L = tokens.shape
    gen = generator(seed, stream)
    rows = max(1, DRAW_CHUNK_TOKENS // L)
    on_cpu = tokens.device.type == "cpu"
    for start in range(0, n, rows):
        part = tokens[start : start + rows]
        if on_cpu:
            torch.randint(V, part.shape, generator=gen, dtype=part.dtype, out=part)
        else:
            part.copy_(torch.randint(V, part.shape, generator=gen, dtype=part.dtype))
    positions.copy_(torch.randint(L, (n,), generator=gen))


def sample_labels(perm: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(the informative token x_l, the label Pi*(x_l)) of each sample: tokens [..., L], positions [...], perm [..., V]
    (one model's, or one per model stacked on the first axis)."""
    informative = tokens.gather(-1, positions.unsqueeze(-1)).squeeze(-1)
    return informative, perm.gather(-1, informative.long())


def feature_map(pre: torch.Tensor, features: str) -> torch.Tensor:
    """The MLP's features phi from its pre-activations W1 o (last axis: the m units), for each ``features`` option of
    the model's statement above."""
    if features == "abs_centred":  # even: no linear part; centring removes the constant
        phi = pre.abs()
        return phi - phi.mean(dim=-1, keepdim=True)
    phi = torch.relu(pre)
    if features == "relu":
        return phi
    phi = phi - phi.mean(dim=-1, keepdim=True)
    if features == "relu_centred":
        return phi
    return phi / (phi.std(dim=-1, keepdim=True) + 1e-12)  # relu_normalised

"""The closed-form trainer of rf_ridge: ridge regression solved exactly, no optimiser and no steps."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from recallkit.registry import Trainer
from recallkit.theory.errors import InputError

__all__ = ["fit_ridge", "RIDGE", "ridge_flops", "RidgeConfig"]


@dataclass(frozen=True)
class RidgeConfig:
    """``ridge``: lambda in min_theta (1/n) |y - Phi theta|^2 + lambda |theta|^2 (default: the ridgeless limit, kept
    only so that the solve is well posed)."""

    ridge: float = 1e-12

    def __post_init__(self) -> None:
        if isinstance(self.ridge, bool) or not isinstance(self.ridge, (int, float)) or not math.isfinite(self.ridge) \
                or self.ridge < 0:
            raise InputError(f"ridge: expected a number >= 0, got {self.ridge!r}")
        object.__setattr__(self, "ridge", float(self.ridge))


def fit_ridge(problem, cfgs, sizes):
    """theta = (Phi^T Phi + n lambda I)^-1 Phi^T y, every model of the chunk at once, in float64; through the n x n
    system Phi^T (Phi Phi^T + n lambda I)^-1 y when there are more features than samples (the same solution)."""
    Phi, y = problem.features, problem.y
    n, p = Phi.shape[1], Phi.shape[2]
    ridge = torch.tensor([c.trainer_config.ridge for c in cfgs], dtype=Phi.dtype, device=Phi.device)[:, None, None]
    if p <= n:
        gram = Phi.transpose(1, 2) @ Phi + n * ridge * torch.eye(p, dtype=Phi.dtype, device=Phi.device)
        theta = torch.linalg.solve(gram, (Phi.transpose(1, 2) @ y[..., None]))[..., 0]
    else:
        kernel = Phi @ Phi.transpose(1, 2) + n * ridge * torch.eye(n, dtype=Phi.dtype, device=Phi.device)
        theta = (Phi.transpose(1, 2) @ torch.linalg.solve(kernel, y[..., None]))[..., 0]
    return {"theta": theta}, {}


def ridge_flops(task_config, trainer_config) -> int:
    """Matmul-like FLOPs of one model (2 per multiply-add): the target and the features on both sample sets, the
    Gram matrix, its solve and the predictions (the cosines are left out, as the other tasks leave out softmax)."""
    c = task_config
    side = min(c.n, c.p)
    samples = c.n + c.n_test
    return (2 * samples * c.target_features * (c.dim + 1) + 2 * samples * c.p * (c.dim + 1) + 2 * c.n * c.p * side
            + 2 * side**3 // 3)


RIDGE = Trainer("ridge", RidgeConfig, f"{__name__}:fit_ridge", per_model=("ridge",), cost=f"{__name__}:ridge_flops")

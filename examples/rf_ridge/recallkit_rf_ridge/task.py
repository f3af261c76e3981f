"""The batched rf_ridge problem: every model's dictionary, samples and target from its own seeded streams."""
from __future__ import annotations

import math

import torch

from recallkit.empirics.tasks import generator

from .config import FEATURE_BLOCK

__all__ = ["FREQUENCY", "RFRidge", "dictionary", "expansion", "features"]

# The features' frequencies are N(0, FREQUENCY^2 I): two features' correlation under x ~ N(0, I/dim) is about
# exp(-FREQUENCY^2) = 1e-7, so the dictionary is orthonormal to that accuracy (README.md, "The model").
FREQUENCY = 4.0


def dictionary(seed: int, rows: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Frequencies [rows, dim] and phases [rows] of the features, drawn block by block from the seed's
    ``instance`` stream, so that the first rows do not depend on how many are drawn."""
    gen = generator(seed, "instance")
    frequencies, phases = [], []
    for _ in range(-(-rows // FEATURE_BLOCK)):
        frequencies.append(FREQUENCY * torch.randn(FEATURE_BLOCK, dim, generator=gen, dtype=torch.float64))
        phases.append(2 * math.pi * torch.rand(FEATURE_BLOCK, generator=gen, dtype=torch.float64))
    return torch.cat(frequencies)[:rows], torch.cat(phases)[:rows]


def features(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
    """sqrt(2) cos(<v_j, x> + b_j): [..., samples, dim] -> [..., samples, features], unit variance each."""
    return math.sqrt(2.0) * torch.cos(x @ frequencies.transpose(-1, -2) + phases[..., None, :])


def expansion(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor, coefficients: torch.Tensor) -> torch.Tensor:
    """sum_j coefficients_j feature_j(x), block by block: [..., samples, dim] -> [..., samples]."""
    total = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)
    for start in range(0, coefficients.shape[-1], FEATURE_BLOCK):
        block = slice(start, start + FEATURE_BLOCK)
        block_features = features(x, frequencies[..., block, :], phases[..., block])
        total += torch.einsum("...nj,...j->...n", block_features, coefficients[..., block])
    return total


class RFRidge:
    """Models of one shape (p, n): ``features`` [M, n, p] of the training samples (each scaled by its standard
    deviation j^(-feature_decay/2)), the target ``y`` [M, n] on them, and what the evaluation needs."""

    def __init__(self, configs, device: torch.device):
        task = configs[0].task_config
        self.p, self.n = task.p, task.n
        j = torch.arange(1, task.dictionary_rows + 1, dtype=torch.float64)
        self.scales = j[: task.p] ** (-task.feature_decay / 2)
        target = j[: task.target_features] ** (-task.target_decay / 2)
        rows: dict[str, list[torch.Tensor]] = {key: [] for key in ("V", "b", "x_eval", "y", "y_eval", "features")}
        for c in configs:
            V, b = dictionary(c.seed, task.dictionary_rows, task.dim)
            x = torch.randn(task.n, task.dim, generator=generator(c.seed, "train"), dtype=torch.float64) / math.sqrt(task.dim)
            x_eval = torch.randn(task.n_test, task.dim, generator=generator(c.seed, "eval"),
                                 dtype=torch.float64) / math.sqrt(task.dim)
            teacher = (V[: task.target_features], b[: task.target_features], target)
            rows["y"].append(expansion(x, *teacher))
            rows["y_eval"].append(expansion(x_eval, *teacher))
            rows["features"].append(features(x, V[: task.p], b[: task.p]) * self.scales)
            rows["V"].append(V[: task.p]), rows["b"].append(b[: task.p]), rows["x_eval"].append(x_eval)
        stacked = {key: torch.stack(value).to(device) for key, value in rows.items()}
        self.features, self.y = stacked["features"], stacked["y"]
        self.V, self.b, self.x_eval, self.y_eval = stacked["V"], stacked["b"], stacked["x_eval"], stacked["y_eval"]
        self.scales = self.scales.to(device)
        self.params: dict[str, torch.Tensor] = {}
        self.n_train = task.n

    @torch.no_grad()
    def evaluate(self, params) -> dict[str, torch.Tensor]:
        """``test_error``: mean squared error on the fresh samples; ``train_error`` (also ``loss``) on the training ones."""
        theta = params["theta"]
        prediction = expansion(self.x_eval, self.V, self.b, theta * self.scales)
        test_error = ((prediction - self.y_eval) ** 2).mean(dim=1)
        train_error = ((torch.einsum("mnp,mp->mn", self.features, theta) - self.y) ** 2).mean(dim=1)
        return {"test_error": test_error, "train_error": train_error, "loss": train_error}

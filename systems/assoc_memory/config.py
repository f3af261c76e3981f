"""Run config of the associative-memory task (keys ``N``, ``d``, ``m`` for the mlp model)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from recallkit.empirics.config import MAX_D, MAX_M, MAX_N, check_model, positive_int
from recallkit.theory.errors import InputError

@dataclass(frozen=True)
class AssocMemoryConfig:
    """Associative memory: store f*(i) = i for N items with unit-norm Gaussian input/output embeddings."""

    model: str
    N: int
    d: int
    m: int | None = None
    MODELS: ClassVar[tuple[str, ...]] = ("linear", "mlp")

    def __post_init__(self) -> None:
        check_model(self)
        for key, limit in (("N", MAX_N), ("d", MAX_D)):
            object.__setattr__(self, key, positive_int(getattr(self, key), key, limit))
        if self.model == "mlp":
            if self.m is None:
                raise InputError("m: the mlp model needs the width m (a positive integer)")
            object.__setattr__(self, "m", positive_int(self.m, "m", MAX_M))
        elif self.m is not None:
            raise InputError("m: the linear model has no width; remove m (its parameter count is d**2)")

    @property
    def param_count(self) -> int:
        """The anchor's count: d**2 (linear) or m*d (mlp)."""
        return self.d * self.d if self.model == "linear" else self.m * self.d

    @property
    def trainable_params(self) -> int:
        return self.d * self.d if self.model == "linear" else 2 * self.m * self.d + self.m

    @property
    def n_train(self) -> int:
        return self.N

    def sizes(self) -> dict[str, int]:
        sizes = {"N": self.N, "d": self.d}
        if self.m is not None:
            sizes["m"] = self.m
        return sizes

    def bytes_per_model(self, trainer_config) -> int:
        """Rough size of one model's largest training activations (floats x 4 bytes x autograd copies)."""
        n = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        per_item = self.N * 3 + (self.m or 0) * 3 + self.d * 3
        data = self.N * self.d * 2 + (self.m or self.d) * self.d * 4
        return 4 * (n * per_item + data)

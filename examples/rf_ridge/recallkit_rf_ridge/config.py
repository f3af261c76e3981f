"""The run config of the rf_ridge task: width p, samples n and the fixed model constants."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from recallkit.empirics.config import check_model, positive_int
from recallkit.theory.errors import InputError

__all__ = ["FEATURE_BLOCK", "RFRidgeConfig"]

MAX_FEATURES = 1 << 20
MAX_SAMPLES = 1 << 20
# Features are drawn, evaluated and summed in blocks of this many, so that the dictionary's first rows are the
# same whatever its length and no [samples, all features] matrix of the target is ever held at once.
FEATURE_BLOCK = 1024
FLOAT64_BYTES = 8


def _positive_number(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{key}: expected a positive number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RFRidgeConfig:
    """p random cosine features of x ~ N(0, I_dim / dim) with variances j^-feature_decay, fitted by ridge on n
    samples of a target that is a fixed expansion in the first ``target_features`` features of the same
    dictionary with powers j^-target_decay; the test error is measured on ``n_test`` fresh samples."""

    model: str
    p: int
    n: int
    dim: int = 16
    target_features: int = 2048
    n_test: int = 1024
    feature_decay: float = 1.5
    target_decay: float = 2.5
    MODELS: ClassVar[tuple[str, ...]] = ("random_features",)

    def __post_init__(self) -> None:
        check_model(self)
        for key, limit in (("p", MAX_FEATURES), ("n", MAX_SAMPLES), ("dim", 4096), ("target_features", MAX_FEATURES),
                           ("n_test", MAX_SAMPLES)):
            object.__setattr__(self, key, positive_int(getattr(self, key), key, limit))
        for key in ("feature_decay", "target_decay"):
            object.__setattr__(self, key, _positive_number(getattr(self, key), key))
        if self.target_decay <= 1:
            raise InputError(f"target_decay: expected a number > 1 (a target of finite variance), got {self.target_decay}")

    @property
    def param_count(self) -> int:
        return self.p

    @property
    def trainable_params(self) -> int:
        return self.p

    @property
    def n_train(self) -> int:
        return self.n

    @property
    def dictionary_rows(self) -> int:
        """Rows of the drawn dictionary: enough for the student's p features and the target's."""
        return max(self.p, self.target_features)

    def sizes(self) -> dict[str, int]:
        return {"p": self.p, "n": self.n}

    def bytes_per_model(self, trainer_config) -> int:
        """The float64 tensors alive at the peak: the dictionary, the student's features on the training samples,
        the Gram matrix and its solve (side min(n, p)), the test inputs and one block of features on the test or
        training samples."""
        side = min(self.n, self.p)
        floats = (self.dictionary_rows * (self.dim + 1) + self.n * (self.p + self.dim + 2) + 3 * side * side
                  + self.n_test * (self.dim + 2) + 2 * max(self.n, self.n_test) * FEATURE_BLOCK)
        return FLOAT64_BYTES * floats

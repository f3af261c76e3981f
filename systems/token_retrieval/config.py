"""Run config of the token-retrieval task (keys ``V``, ``d``, ``L``, ``N``, ``m``, ``features``, ``mlp_input``,
``n_eval``).

``features`` (attention-mlp): ``relu``, ``relu_centred``, ``relu_normalised`` or ``abs_centred`` (|W1 x|
minus its per-sample mean over the m units: an even map with no linear part, so after centring its
kernel starts at Hermite degree 2; README.md, DERIVATION.md §5.4).
``mlp_input``: what the MLP (attention-only: the value matrix) reads, ``attended`` (o = a_l z_trig +
content, the paper's model) or ``content`` (the attended token embeddings without the trigger
component). A default-valued ``mlp_input`` is left out of the canonical dict, so the store keys of
configs written before the key existed do not change.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from recallkit.empirics.config import MAX_D, MAX_L, MAX_M, MAX_N, MAX_V, check_model, positive_int
from recallkit.theory.errors import InputError

FEATURES = ("relu", "relu_centred", "relu_normalised", "abs_centred")
MLP_INPUTS = ("attended", "content")


@dataclass(frozen=True)
class TokenRetrievalConfig:
    """Token retrieval: one informative token among L, label Pi*(x_l), random unit-sphere embeddings."""

    model: str
    V: int
    d: int
    L: int
    N: int
    m: int | None = None
    features: str = "relu"
    n_eval: int = 4096
    mlp_input: str = field(default="attended", metadata={"omit_default": True})
    MODELS: ClassVar[tuple[str, ...]] = ("attention-only", "attention-mlp")

    def __post_init__(self) -> None:
        check_model(self)
        for key, limit in (("V", MAX_V), ("d", MAX_D), ("L", MAX_L), ("N", MAX_N), ("n_eval", MAX_N)):
            object.__setattr__(self, key, positive_int(getattr(self, key), key, limit))
        if self.model == "attention-mlp":
            if self.m is None:
                raise InputError("m: the attention-mlp model needs the MLP width m (a positive integer)")
            object.__setattr__(self, "m", positive_int(self.m, "m", MAX_M))
        elif self.m is not None:
            raise InputError("m: attention-only has no MLP width; remove m (its parameter count is d**2)")
        if self.features not in FEATURES:
            raise InputError(f"features: expected one of {', '.join(FEATURES)}, got {self.features!r}")
        if self.mlp_input not in MLP_INPUTS:
            raise InputError(f"mlp_input: expected one of {', '.join(MLP_INPUTS)}, got {self.mlp_input!r}")

    @property
    def width(self) -> int:
        """Columns of the trained value matrix V: m for attention-mlp, d for attention-only."""
        return self.m if self.m is not None else self.d

    @property
    def param_count(self) -> int:
        """The paper's count, m*d (d**2 for attention-only): the trained value matrix."""
        return self.width * self.d

    @property
    def trainable_params(self) -> int:
        """Everything a trainer updates: the value matrix plus W_KQ (d x d)."""
        return self.width * self.d + self.d * self.d

    @property
    def n_train(self) -> int:
        return self.N

    def sizes(self) -> dict[str, int]:
        return {"V": self.V, "N": self.N, "d": self.d, "L": self.L, "m": self.width}

    def bytes_per_model(self, trainer_config) -> int:
        """Rough size of one model's largest training activations (floats x 4 bytes x autograd copies)."""
        from recallkit.empirics.config import AdamConfig

        n = min(self.N, (1 << 22) // max(self.V, self.L, self.m or 0))  # three_step accumulates over sample chunks
        if isinstance(trainer_config, AdamConfig):
            n = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        per_item = self.V * 3 + self.L * 4 + self.width * 3 + self.d * 3
        data = (self.N + self.n_eval) * (self.L * 2 + 3) + self.V * self.d * 2 + (self.m or 0) * self.d
        return 4 * (n * per_item + data)

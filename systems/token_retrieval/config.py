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

from recallkit.empirics.config import (FLOAT_BYTES, MAX_D, MAX_L, MAX_M, MAX_N, MAX_V, TRAIN_CHUNK_ELEMENTS,
                                       ThreeStepConfig, check_model, items_per_chunk, parameter_state_bytes,
                                       positive_int, training_passes)
from recallkit.theory.errors import InputError

FEATURES = ("relu", "relu_centred", "relu_normalised", "abs_centred")
MLP_INPUTS = ("attended", "content")
INT16_TOKENS_MAX_V = 1 << 15  # token values 0..V-1 fit in int16 up to V = 32768
# The attended vector sum_j a_j e_{x_j} (task.py) goes through the dense [n, V] mass matrix when V <= 2L,
# else one embedding_bag; its gradient wrt the attention is one bmm + gather when V <= 32L, else torch's
# per-sample backward. Measured on CPU, one thread, d = 64..512 (the fastest path at each ratio).
DENSE_MASS_MAX_RATIO = 2
DENSE_BACKWARD_MAX_RATIO = 32


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

    @property
    def token_bytes(self) -> int:
        """Bytes of one stored token: int16 up to V = 32768, else int32."""
        return 2 if self.V <= INT16_TOKENS_MAX_V else 4

    @property
    def dense_mass(self) -> bool:
        return self.V <= DENSE_MASS_MAX_RATIO * self.L

    @property
    def dense_attention_backward(self) -> bool:
        return self.V <= DENSE_BACKWARD_MAX_RATIO * self.L

    @property
    def train_chunk(self) -> int:
        """Items per chunk of a full-batch gradient pass (three_step accumulates over them)."""
        return items_per_chunk(max(self.V, self.L, self.m or 0), TRAIN_CHUNK_ELEMENTS)

    @property
    def eval_chunk(self) -> int:
        return items_per_chunk(max(self.V, self.L, self.m or 0))

    def _bytes_per_item(self, trainer: str, gathered: bool) -> int:
        """Peak bytes per item of one pass of task.py: the tensors alive at its largest moment, fitted to the
        measured peak (CPU, one thread; V 512..4096, L 22..1024, d 32..2048, m up to 4096). ``trainer``:
        "three_step" (a gradient accumulated over chunks), "adam" (one pass per step) or "evaluate" (no
        gradient). ``gathered``: the items' tokens are copied out of the stored ones."""
        V, L, d, m = self.V, self.L, self.d, self.m or 0
        dense, mixed = self.dense_mass, not self.dense_mass and self.dense_attention_backward
        if trainer == "three_step":
            floats = 7 * V // 2 + 2 * L + 3 * d // 2 + 3 * m
        elif trainer == "adam":
            floats = 2 * V + L + d + 5 * m // 2 + (V if dense else 0)
        else:
            floats = 2 * V + 2 * L + 2 * d + 2 * m + (V if dense else 0)
        index = 8 if dense else 12 if mixed and trainer != "evaluate" else 4  # int64 / int32 (+ int64 in the backward)
        return FLOAT_BYTES * floats + (index + (self.token_bytes if gathered else 0)) * L

    def bytes_per_model(self, trainer_config) -> int:
        """Peak memory of one model's training, every buffer counted: embeddings and permutation, the
        stored training and fresh samples (tokens in int16/int32, positions and labels in int64), the
        parameters with gradients and optimizer state, and the largest pass (a three_step chunk, an Adam
        minibatch or the full batch; evaluation chunks are smaller). Checked against measured peak RSS."""
        instance = FLOAT_BYTES * (2 * self.V * self.d + 2 * self.d + (self.m or 0) * self.d) + 8 * self.V
        samples = (self.N + self.n_eval) * (self.token_bytes * self.L + 16)
        if isinstance(trainer_config, ThreeStepConfig):
            items, trainer = min(self.N, self.train_chunk), "three_step"
        else:
            items, trainer = trainer_config.resolved_batch_size(self.sizes(), self.n_train), "adam"
        training = items * self._bytes_per_item(trainer, gathered=items < self.N)
        evaluation = min(self.eval_chunk, max(self.N, self.n_eval)) * self._bytes_per_item("evaluate", False)
        largest_pass = max(training, evaluation)
        parameters = parameter_state_bytes(trainer_config, self.trainable_params, max(self.d * self.d, self.d * self.width))
        return instance + samples + parameters + largest_pass

    def _flops_per_item(self) -> dict[str, int]:
        """Multiply-adds per item of each pass (x 2 = FLOPs), counted as the model needs them: the
        attended vector is L*d (a bag sum), whichever path computes it. Softmax, gathers and the
        per-model query (d*d + V*d per pass, not per item) are not counted."""
        V, L, d, w, m = self.V, self.L, self.d, self.width, self.m or 0
        forward = L * d + m * d + w * d + d * V  # attended vector, MLP layer, value matrix, unembedding
        backward_value = V * d + w * d  # grad of the hidden state, then of the value matrix
        backward_attention = V * d + w * d + m * d + L * d  # hidden state, features, o, attention scores
        return {"forward": forward, "backward": backward_attention + w * d, "backward_value": backward_value,
                "backward_attention": backward_attention, "evaluate": forward}

    def train_flops(self, trainer_config) -> int:
        """FLOPs of one model's training and final evaluation (2 per multiply-add, matmul-like work only),
        the work ``benchmarks/engine.py`` and ``benchmarks/paper_cost.py`` divide by time."""
        items = training_passes(trainer_config, self.sizes(), self.n_train)
        items["evaluate"] += self.n_eval
        per_item = self._flops_per_item()
        return 2 * sum(int(items[k] * per_item[k]) for k in items)

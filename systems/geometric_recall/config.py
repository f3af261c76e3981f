"""Run config of the fact-bijections task (keys ``N`` subjects = attributes, ``R`` relations, ``d``, ``m`` [4*d])."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from recallkit.empirics.config import (FLOAT_BYTES, MAX_D, MAX_M, MAX_N, MAX_R, allocator_retention_bytes,
                                       check_model, evaluations, items_per_chunk, parameter_state_bytes, positive_int,
                                       training_passes)

@dataclass(frozen=True)
class FactBijectionsConfig:
    """Geometric recall: R random bijections pi_r on N subjects; query (s, r) -> pi_r(s)."""

    model: str
    N: int
    R: int
    d: int
    m: int | None = None
    # learned: every table trained. frozen-subjects: E_s fixed random (U, E_r, MLP trained).
    # frozen: E_s and U fixed random on the sphere (E_r and the MLP trained): the paper's
    # "frozen random embeddings" control.
    MODELS: ClassVar[tuple[str, ...]] = ("learned", "frozen-subjects", "frozen")

    def __post_init__(self) -> None:
        check_model(self)
        for key, limit in (("N", MAX_N), ("R", MAX_R), ("d", MAX_D)):
            object.__setattr__(self, key, positive_int(getattr(self, key), key, limit))
        object.__setattr__(self, "m", positive_int(4 * self.d if self.m is None else self.m, "m", MAX_M))

    @property
    def learned_entity_tables(self) -> int:
        """How many of the two per-entity tables (subjects E_s, attributes U, N x d each) are trained."""
        return {"learned": 2, "frozen-subjects": 1, "frozen": 0}[self.model]

    @property
    def param_count(self) -> int:
        """Trainable parameters: every learned per-entity table (E_s for learned, U for learned and
        frozen-subjects), E_r, W1, b1, W2."""
        return self.learned_entity_tables * self.N * self.d + self.R * self.d + 2 * self.m * self.d + self.m

    trainable_params = param_count

    @property
    def n_train(self) -> int:
        return self.N * self.R

    def sizes(self) -> dict[str, int]:
        return {"N": self.N, "R": self.R, "d": self.d, "m": self.m}

    def bytes_per_model(self, trainer_config) -> int:
        """Peak memory of one model's training, every buffer counted: bijections and fact indices (int64),
        the frozen subjects, parameters with gradients and Adam state, and the largest pass (the batch or an
        evaluation chunk: logits and the cross-entropy's exp buffer, hidden layers, gathered embeddings); plus
        what the allocator keeps of the freed buffers (``empirics.config.allocator_retention_bytes``).
        Checked against measured peak RSS."""
        data = 8 * self.R * self.N + 16 * self.n_train + FLOAT_BYTES * self.N * self.d
        batch = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        chunk = min(self.n_train, items_per_chunk(max(self.N, self.m)))
        per_item = FLOAT_BYTES * (2 * self.N + 2 * self.m + 3 * self.d) + 24
        largest = max(self.N * self.d, self.m * self.d)
        live = data + parameter_state_bytes(trainer_config, self.trainable_params, largest) + max(batch, chunk) * per_item
        transient = [FLOAT_BYTES * largest] + [FLOAT_BYTES * items * width for items in (batch, chunk)
                                               for width in (self.N, self.m, self.d)]
        return live + allocator_retention_bytes(transient)

    def train_flops(self, trainer_config) -> int:
        """FLOPs (2 per multiply-add) of one model's training and final evaluation, matmuls only: forward
        W1, W2 and the unembedding U; backward also the gradients of U and of both MLP weights."""
        d, m, N = self.d, self.m, self.N
        forward = 2 * m * d + d * N
        backward = 2 * N * d + 4 * m * d
        items = training_passes(trainer_config, self.sizes(), self.n_train)
        return 2 * int(items["forward"] * forward + items["backward"] * backward + items["evaluate"] * forward)

    def work(self, trainer_config) -> dict[str, dict[str, float]]:
        """What one model's run does, by phase and kind of operation (``empirics.cost`` prices each kind at its
        measured rate; token retrieval's ``work`` says what each kind counts): the bijections and tables drawn,
        Adam's steps over the N*R facts (the logits through the cross-entropy, the products, the gathers and the
        embedding gradients, the update of every parameter, the calls of a step) and the evaluation over every
        fact. The calls per step are a step's time at the smallest sizes over ``empirics.cost.CALL_SECONDS``."""
        d, m, N, R = self.d, self.m, self.N, self.R
        n = self.n_train
        forward, backward = 2 * m * d + d * N, 2 * N * d + 4 * m * d
        items = training_passes(trainer_config, self.sizes(), n)
        batch = trainer_config.resolved_batch_size(self.sizes(), n)
        steps = trainer_config.steps or trainer_config.epochs * math.ceil(n / batch)
        passes = math.ceil(steps * batch / n)
        early = trainer_config.early_stop is not None
        per_item = 8 * d + 4 * m + 400
        tables = (self.learned_entity_tables + 1) * N * d + R * d  # gradients of the gathered tables, zero-filled
        train = {"flops": 2 * (items["forward"] * forward + items["backward"] * backward),
                 "logits": 1.5 * N * items["forward"],
                 "elements": 2 * items["forward"] * per_item + steps * (16 * self.trainable_params + tables),
                 "calls": steps * ({"learned": 90, "frozen-subjects": 80, "frozen": 75}[self.model]
                                   + (10 if early else 0))}
        if early and batch < n:  # the accuracy over every fact after every pass
            train["flops"] += 2 * passes * n * forward
            train["logits"] += passes * n * N
            train["elements"] += passes * n * per_item
        chunks = math.ceil(n / min(n, items_per_chunk(max(N, m))))
        evaluated = items["evaluate"]
        evaluate = {"flops": 2 * evaluated * forward, "logits": evaluated * N, "elements": evaluated * per_item,
                    "calls": evaluations(trainer_config) * (20 * chunks + 30)}
        data = {"draws": 5 * R * N + 2 * N * d + R * d + 2 * m * d + (5 * n * passes if batch < n else 0),
                "elements": 8 * N * d + 4 * n, "calls": 50 + 5 * R}
        return {"data": data, "train": train, "evaluate": evaluate}

"""Run config of the associative-memory task (keys ``N``, ``d``, ``m`` for the mlp model)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from recallkit.empirics.config import (FLOAT_BYTES, MAX_D, MAX_M, MAX_N, allocator_retention_bytes, check_model,
                                       evaluations, items_per_chunk, parameter_state_bytes, positive_int,
                                       training_passes)
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

    def _bytes_per_item(self) -> int:
        """Peak bytes per item of a pass: logits and the cross-entropy's exp buffer, the MLP's hidden layers,
        the gathered input and its output (task.py)."""
        return FLOAT_BYTES * (2 * self.N + 2 * (self.m or 0) + 3 * self.d) + 8

    def bytes_per_model(self, trainer_config) -> int:
        """Peak memory of one model's training, every buffer counted: the input and output embeddings,
        parameters with gradients and Adam state, and the largest pass (the batch, or an evaluation chunk);
        plus what the allocator keeps of the freed buffers (``empirics.config.allocator_retention_bytes``).
        Checked against measured peak RSS."""
        embeddings = 2 * FLOAT_BYTES * self.N * self.d
        batch = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        chunk = min(items_per_chunk(max(self.N, self.m or 0)), self.N)
        largest_pass = max(batch, chunk) * self._bytes_per_item()
        if self.model == "linear":
            # task.py's written-out gradient: E^T, U^T and -U^T kept beside E and U; a training pass holds the
            # transposed logits (exponentiated in place), their copy for the accuracy when early stop asks
            # for it, and [d]-wide columns; the evaluation chunk, the logits and their log_softmax
            embeddings = 5 * FLOAT_BYTES * self.N * self.d
            logit_copies = 2 if getattr(trainer_config, "early_stop", None) is not None else 1
            training = batch * (FLOAT_BYTES * (logit_copies * self.N + 4 * self.d) + 8)
            largest_pass = max(training, chunk * self._bytes_per_item())
        largest = self.d * self.d if self.model == "linear" else self.m * self.d
        live = embeddings + parameter_state_bytes(trainer_config, self.trainable_params, largest) + largest_pass
        transient = [FLOAT_BYTES * largest] + [FLOAT_BYTES * items * width for items in (batch, chunk)
                                               for width in (self.N, self.m or 0, self.d)]
        return live + allocator_retention_bytes(transient)

    def train_flops(self, trainer_config) -> int:
        """FLOPs (2 per multiply-add) of one model's training and final evaluation, matmuls only."""
        d, m, N = self.d, self.m or 0, self.N
        if self.model == "linear":
            forward, backward = d * d + d * N, N * d + d * d  # grad of the output, then of W
        else:
            forward = 2 * m * d + d * N
            backward = N * d + 3 * m * d  # output, W2 and the hidden layer, W1
        items = training_passes(trainer_config, self.sizes(), self.n_train)
        return 2 * int(items["forward"] * forward + items["backward"] * backward + items["evaluate"] * forward)

    def work(self, trainer_config) -> dict[str, dict[str, float]]:
        """What one model's run does, by phase and kind of operation (``empirics.cost`` prices each kind at its
        measured rate; token retrieval's ``work`` says what each kind counts): the embeddings drawn, Adam's steps
        (a batch's logits through the cross-entropy, its products, the update of every parameter, the calls of a
        step: 12 for the linear memory's written-out gradient, 58 through autograd) and the evaluation over all N
        items. The calls per step are a step's time at the smallest sizes over ``empirics.cost.CALL_SECONDS``."""
        d, m, N = self.d, self.m or 0, self.N
        forward = d * d + d * N if self.model == "linear" else 2 * m * d + d * N
        backward = N * d + d * d if self.model == "linear" else N * d + 3 * m * d
        items = training_passes(trainer_config, self.sizes(), self.n_train)
        batch = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        steps = trainer_config.steps or trainer_config.epochs * math.ceil(N / batch)
        passes = math.ceil(steps * batch / N)
        early = trainer_config.early_stop is not None
        per_item = 6 * d + 100 if self.model == "linear" else 8 * d + 8 * m + 400
        train = {"flops": 2 * (items["forward"] * forward + items["backward"] * backward),
                 "logits": 1.5 * N * items["forward"],
                 "elements": items["forward"] * per_item + steps * 16 * self.trainable_params,
                 "calls": steps * ((12 if self.model == "linear" else 58) + (10 if early else 0))}
        if early and batch < N:  # the accuracy over all N items after every pass
            train["flops"] += 2 * passes * N * forward
            train["logits"] += passes * N * N
            train["elements"] += passes * N * per_item
        chunks = math.ceil(N / min(items_per_chunk(max(N, m)), N))
        evaluated = items["evaluate"]
        evaluate = {"flops": 2 * evaluated * forward, "logits": evaluated * N, "elements": evaluated * per_item,
                    "calls": evaluations(trainer_config) * (20 * chunks + 30)}
        initial = d * d if self.model == "linear" else 2 * m * d
        data = {"draws": 2 * N * d + initial + (5 * N * passes if batch < N else 0),
                "elements": 9 * N * d, "calls": 50}
        return {"data": data, "train": train, "evaluate": evaluate}

"""Run config of the token-retrieval task (keys ``V``, ``d``, ``L``, ``N``, ``m``, ``features``, ``mlp_input``,
``centring``, ``n_eval``).

``features`` (attention-mlp): ``relu``, ``relu_centred``, ``relu_normalised`` or ``abs_centred`` (|W1 x|
minus its per-sample mean over the m units: an even map with no linear part, so after centring its
kernel starts at Hermite degree 2; README.md, DERIVATION.md §5.4).
``mlp_input``: what the MLP (attention-only: the value matrix) reads, ``attended`` (o = a_l z_trig +
content, the paper's model) or ``content`` (the attended token embeddings without the trigger
component). A default-valued ``mlp_input`` is left out of the canonical dict, so the store keys of
configs written before the key existed do not change.
``centring``: ``none`` (the paper's model) or ``labels``: three_step's step 3 reads the training labels'
embeddings minus their empirical mean, which removes the mean-bias terms exactly (DERIVATION.md §10). Left
out of the canonical dict while ``none``, like ``mlp_input``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from recallkit.empirics.config import (ADAM_PARAMETER_COPIES, ADAM_UPDATE_COPIES, FLOAT_BYTES, MAX_D, MAX_L, MAX_M,
                                       MAX_N, MAX_V, TRAIN_CHUNK_ELEMENTS, ThreeStepConfig, TwoStepThenFitConfig,
                                       allocator_retention_bytes, check_model, evaluations, items_per_chunk,
                                       positive_int, training_passes)
from recallkit.theory.errors import InputError

FEATURES = ("relu", "relu_centred", "relu_normalised", "abs_centred")
MLP_INPUTS = ("attended", "content")
CENTRINGS = ("none", "labels")
INT16_TOKENS_MAX_V = 1 << 15  # token values 0..V-1 fit in int16 up to V = 32768
# The attended vector sum_j a_j e_{x_j} (task.py) goes through the dense [n, V] mass matrix when V <= 2L,
# else one embedding_bag; its gradient wrt the attention is one bmm + gather when V <= 32L, else torch's
# per-sample backward. Measured on CPU, one thread, d = 64..512 (the fastest path at each ratio).
DENSE_MASS_MAX_RATIO = 2
DENSE_BACKWARD_MAX_RATIO = 32
# [items, m] float tensors of the MLP (task.py _mlp_features) alive at once, per feature option: in a
# forward without gradient (the pre-activation, the features and the centred copy), in one with gradient,
# what a gradient pass keeps for its backward (relu's output, the centred copy, abs's input, the
# normalised chain), and in the backward (those plus the incoming gradient and its sums). Read off
# torch.profiler's memory events at the peak of each option.
MLP_FORWARD = {"relu": 2, "relu_centred": 3, "abs_centred": 3, "relu_normalised": 3}
MLP_FORWARD_GRAD = {"relu": 2, "relu_centred": 3, "abs_centred": 3, "relu_normalised": 4}
MLP_SAVED = {"relu": 1, "relu_centred": 2, "abs_centred": 2, "relu_normalised": 3}
MLP_BACKWARD = {"relu": 3, "relu_centred": 4, "abs_centred": 4, "relu_normalised": 7}


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
    centring: str = field(default="none", metadata={"omit_default": True})
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
        if self.centring not in CENTRINGS:
            raise InputError(f"centring: expected one of {', '.join(CENTRINGS)}, got {self.centring!r}")

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

    def _pass_bytes(self, items: int, kind: str, gathered: bool) -> int:
        """Peak bytes of the tensors of one pass over ``items`` items (task.py ``forward``, the cross-entropy
        of empirics/tasks and, with a gradient, the backward): the largest of its moments, each counted
        buffer by buffer. ``kind``: "attention" (the gradient goes through the attention: Adam, and
        three_step's step 2), "value" (the gradient of the value matrix only: three_step's steps 1 and 3)
        or "evaluate" (no gradient; the evaluation's log_softmax). ``gathered``: the items' tokens,
        positions and labels are copied out of the stored ones (a chunk or a minibatch)."""
        V, L, d, m, f = self.V, self.L, self.d, self.m or 0, FLOAT_BYTES
        dense, mixed = self.dense_mass, not self.dense_mass and self.dense_attention_backward
        tokens = (self.token_bytes * L + 24) if gathered else 0  # + int64 positions, labels and chunk indices
        index = 8 * L if dense else 4 * L  # tokens.long() for the dense mass, else int32 rows of the stacked table
        scores = 2 * f * L  # the scores and their softmax (each out of place)
        mass = 2 * f * V if dense else 0  # the zeros and the scatter_add that fills them
        logits = f * V
        mlp_features = f * m  # attention-only: the features are o, counted with the other [items, d] tensors
        if kind == "evaluate":
            moments = [index + scores + mass, MLP_FORWARD[self.features] * f * m,
                       mlp_features + 3 * f * d + logits,  # content, o, hidden and the logits being written
                       2 * logits]  # the logits and their log_softmax
            return items * max(moments)
        if kind == "value":  # W_KQ is a constant: nothing of the attention is kept
            moments = [tokens + index + scores + mass, tokens + MLP_FORWARD[self.features] * f * m,
                       tokens + mlp_features + 3 * f * d + logits,
                       tokens + mlp_features + f * d + 2 * logits]  # the cross-entropy: logits and shifted exp
            return items * max(moments)
        # kept for the backward: the softmax, the index (gather / index_select), torch's int64 bag offsets
        saved = f * L + index + (0 if dense or mixed else 8 * L)
        kept_tokens = tokens if mixed else 0  # the bmm backward gathers at the (gathered) tokens
        mlp_saved = MLP_SAVED[self.features] * f * m
        if dense:  # the gradient of the mass [items, V], its gather at the tokens and the softmax backward
            attention_backward = logits + 2 * f * L
        elif mixed:  # bmm(grad_o, E^T) [items, V], the tokens as int64 and their gather
            attention_backward = logits + 8 * L + f * L
        else:  # torch's per-sample-weight backward
            attention_backward = f * L
        moments = [
            tokens + index + scores + mass,  # the attention's forward (and the dense mass)
            tokens + saved + MLP_FORWARD_GRAD[self.features] * f * m,
            tokens + saved + mlp_saved + 3 * f * d + logits,  # content, o, hidden, the logits being written
            tokens + saved + mlp_saved + f * d + 2 * logits,  # the cross-entropy: logits and shifted exp
            kept_tokens + saved + mlp_saved + 3 * f * d,  # gradients of hidden and o, o kept for the value matrix
            kept_tokens + saved + MLP_BACKWARD[self.features] * f * m + f * d,
            kept_tokens + saved + f * d + attention_backward,
        ]
        return items * max(moments)

    def _passes(self, trainer_config) -> list[tuple[int, str, bool]]:
        """(items, kind, gathered) of each kind of pass a training runs, the final evaluation included."""
        evaluation = (min(self.eval_chunk, max(self.N, self.n_eval)), "evaluate", False)
        if isinstance(trainer_config, ThreeStepConfig):
            items = min(self.N, self.train_chunk)
            return [(items, "value", items < self.N), (items, "attention", items < self.N), evaluation]
        items = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
        return [(items, "attention", items < self.N), evaluation]

    def _live_bytes(self, trainer_config) -> int:
        """The tensors alive at the peak of one model's training (what torch.profiler's memory events report):
        embeddings, permutation and MLP layer; the stored training and fresh samples (tokens in int16/int32,
        positions and labels in int64); and the largest of the training's phases, each its parameter
        tensors (initial values, steps, gradients and their chunk accumulators, Adam's moments and update
        temporaries) plus the pass that runs with them."""
        f, d, W, Vp = FLOAT_BYTES, self.d, self.d * self.d, self.d * self.width  # W_KQ and value-matrix floats
        instance = f * (2 * self.V * d + 2 * d + (self.m or 0) * d) + 8 * self.V
        samples = (self.N + self.n_eval) * (self.token_bytes * self.L + 16)
        passes = {kind: self._pass_bytes(items, kind, gathered) for items, kind, gathered in self._passes(trainer_config)}
        if isinstance(trainer_config, ThreeStepConfig):
            # trainers.three_step: the problem's zero parameters throughout; steps 1-2 their zero copies;
            # a chunked gradient its accumulator and the last chunk's part while its passes run (unchunked,
            # the gradient appears only once its pass has ended)
            grads = 2 if self.train_chunk < self.N else 0
            phases = [
                f * (2 * W + (2 + grads) * Vp) + passes["value"],  # step 1 (written out: less than step 3)
                f * ((2 + grads) * W + 3 * Vp) + passes["attention"],  # step 2: grad W at (0, V1)
                f * (4 * W + 3 * Vp),  # after step 2: zeros, their copies, V1, the direction and W1
                f * (2 * W + (2 + grads) * Vp) + passes["value"],  # step 3: grad V at (W1, V1)
                f * (2 * W + 4 * Vp),  # V2 = V1 - gamma grad
                f * (2 * W + 2 * Vp) + passes["evaluate"],
            ]
            if isinstance(trainer_config, TwoStepThenFitConfig):  # Adam on V: its moments and update
                phases += [f * (2 * W + (4 + grads) * Vp) + passes["value"], f * (2 * W + 10 * Vp)]
        else:
            # trainers.adam: initial values, parameters and two moments throughout; in the backward the
            # gradients and the copies einsum's backward makes of them; the update of one parameter (five
            # of its size); then the evaluation
            P, largest = W + Vp, max(W, Vp)
            batch = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
            minibatch_order = 8 * self.N if batch < self.N else 0  # each model's int64 shuffle of the items
            phases = [
                f * (ADAM_PARAMETER_COPIES + 2) * P + passes["attention"] + minibatch_order,
                f * ((ADAM_PARAMETER_COPIES + 1) * P + ADAM_UPDATE_COPIES * largest) + minibatch_order,
                f * 2 * P + passes["evaluate"],
            ]
        return instance + samples + max(phases)

    def pass_bytes(self, trainer_config) -> int:
        """Bytes of one model's largest training pass (not the evaluation's): what the engine keeps in cache
        when it decides how many models to batch on the CPU."""
        return max(self._pass_bytes(items, kind, gathered) for items, kind, gathered in self._passes(trainer_config)
                   if kind != "evaluate")

    def _transient_buffers(self, trainer_config) -> list[int]:
        """Bytes of the tensors a training frees and allocates again: each pass's [items, width] tensors
        and the parameter-sized steps."""
        sizes = [FLOAT_BYTES * self.d * self.d, FLOAT_BYTES * self.d * self.width]
        for items, kind, gathered in self._passes(trainer_config):
            widths = [FLOAT_BYTES * self.V, FLOAT_BYTES * self.L, FLOAT_BYTES * self.d, FLOAT_BYTES * (self.m or 0),
                      (8 if self.dense_mass or kind == "attention" else 4) * self.L]
            if gathered:
                widths.append(self.token_bytes * self.L)
            sizes += [items * width for width in widths]
        return sizes

    def bytes_per_model(self, trainer_config) -> int:
        """Peak memory of one model's training: the tensors alive at its peak, counted buffer by buffer
        (:meth:`_live_bytes`), plus what the allocator keeps of the freed ones
        (``empirics.config.allocator_retention_bytes``). Checked against measured peak RSS."""
        return self._live_bytes(trainer_config) + allocator_retention_bytes(self._transient_buffers(trainer_config))

    def _flops_per_item(self, trainer_config) -> dict[str, int]:
        """Multiply-adds per item of each pass (x 2 = FLOPs), counted as the model needs them: the
        attended vector is L*d (a bag sum), whichever path computes it. Softmax, gathers and the
        per-model query (d*d + V*d per pass, not per item) are not counted. Attention-only reads a value
        matrix that takes no gradient (three_step's steps, every evaluation) through the read-out U V
        (task.py ``readout``): d*V per item, and the read-out itself once per pass (:meth:`_readout_flops`)."""
        V, L, d, w, m = self.V, self.L, self.d, self.width, self.m or 0
        forward = L * d + m * d + w * d + d * V  # attended vector, MLP layer, value matrix, unembedding
        backward_value = V * d + w * d  # grad of the hidden state, then of the value matrix
        backward_attention = V * d + w * d + m * d + L * d  # hidden state, features, o, attention scores
        value_at_zero = L * d + m * d + w * d  # what V reads, and sum_i u_{y_i} f_i^T
        out = {"forward": forward, "backward": backward_attention + w * d, "value_at_zero": value_at_zero,
               "backward_value": backward_value, "backward_attention": backward_attention, "evaluate": forward}
        if self.m is None:  # label space: the value matrix's products are the read-out's, once per pass
            out["evaluate"] = L * d + d * V
            if isinstance(trainer_config, ThreeStepConfig):
                out.update(forward=L * d + d * V, backward_value=V * d, backward_attention=V * d + L * d,
                           value_at_zero=L * d)
        return out

    def _readout_flops(self, trainer_config) -> int:
        """Multiply-adds of attention-only's per-pass products in label space, V*d*d each: three_step's step 1
        (U^T of the label sums), step 2 and step 3 (the read-out of V1, and U^T of its gradient) and the read-out
        of the final value matrix; another trainer's read-out at each evaluation. 0 for attention-mlp."""
        if self.m is not None:
            return 0
        count = 4 if isinstance(trainer_config, ThreeStepConfig) else evaluations(trainer_config)
        return count * self.V * self.d * self.d

    def train_flops(self, trainer_config) -> int:
        """FLOPs of one model's training and final evaluation (2 per multiply-add, matmul-like work only),
        the work ``benchmarks/engine.py`` and ``benchmarks/paper_cost.py`` divide by time."""
        items = training_passes(trainer_config, self.sizes(), self.n_train)
        items["evaluate"] += self.n_eval * evaluations(trainer_config)
        per_item = self._flops_per_item(trainer_config)
        return 2 * (sum(int(items[k] * per_item[k]) for k in items) + self._readout_flops(trainer_config))

    def work(self, trainer_config) -> dict[str, dict[str, float]]:
        """What one model's run does, by phase and kind of operation (``empirics.cost`` prices each kind at its
        measured rate): ``data``, the instance and the samples drawn; ``train``, the trainer's passes and steps;
        ``evaluate``, every evaluation (the training items and the ``n_eval`` fresh samples). ``flops`` are
        :meth:`train_flops`' (plus the dense mass's products where V <= 2L); ``logits`` one per label of an item
        in a pass with a softmax (a training cross-entropy's backward half again); ``elements`` the attention's
        work over the L positions, the d- and m-wide vectors and a fixed part per item (the [items]-sized and
        row-wise operations), what every chunk of a pass reads whole (the scores of the V embeddings, the MLP's
        layers; the matrix-vector products of W_KQ's gradient), and Adam's update of every parameter; ``calls``
        per chunk of a pass and per step. The counts were read off timings of each pass on one CPU thread
        (benchmarks/price_check.py checks them against whole runs)."""
        V, L, d, m, N, w = self.V, self.L, self.d, self.m or 0, self.N, self.width
        per_item = self._flops_per_item(trainer_config)
        items = training_passes(trainer_config, self.sizes(), self.n_train)
        evaluated = items.pop("evaluate") + self.n_eval * evaluations(trainer_config)
        mass = 2 * V if self.dense_mass else 0  # the [items, V] mass: filled with zeros, then scattered into
        forward = 12 * L + mass + 10 * d + 5 * m + 400  # elements per item of a pass through the model
        elements = {"forward": forward, "backward": forward + 5 * d + 5 * m, "value_at_zero": forward,
                    "backward_value": 5 * d + 5 * m + 100, "backward_attention": forward}
        logits = {"forward": V, "backward": 0.5 * V, "value_at_zero": 0, "backward_value": 0.5 * V,
                  "backward_attention": 0.5 * V}
        attention_passes = ("forward", "value_at_zero", "backward", "backward_attention")
        train = {"flops": sum(2 * items[k] * (per_item[k] + (V * d if k in attention_passes and self.dense_mass else 0))
                              for k in items),
                 "logits": sum(items[k] * logits[k] for k in items),
                 "elements": sum(items[k] * elements[k] for k in items)}
        # read whole by every chunk of a pass: the V embeddings' scores (a matrix-vector product, computed for a
        # batch of two: empirics' per_model_matvec), the MLP's layers (a product of a few items with m x d weights)
        # or the read-out; with W_KQ's gradient also its backward (a transposed product, slower) and outer products
        constant = 5 * V * d + (6 * m * d if m else V * d)
        with_grad = constant + 26 * V * d + 21 * d * d + 6 * m * d
        value_grad = 8 * m * d if m else 3 * V * d
        readouts = 2 * self._readout_flops(trainer_config)  # three steps' (3 of 4) and each evaluation's (V d^2 each)
        evaluation_readouts = 2 * evaluations(trainer_config) * V * d * d if not m else 0
        eval_chunks = math.ceil(N / self.eval_chunk) + math.ceil(self.n_eval / self.eval_chunk)
        evaluate = {"flops": evaluated * 2 * (per_item["evaluate"] + (V * d if self.dense_mass else 0))
                    + evaluation_readouts,
                    "logits": evaluated * V, "elements": evaluated * forward + evaluations(trainer_config) * (
                        eval_chunks * constant), "calls": evaluations(trainer_config) * (30 * eval_chunks + 50)}
        train["flops"] += readouts - evaluation_readouts
        if isinstance(trainer_config, ThreeStepConfig):
            chunks = math.ceil(N / self.train_chunk)
            passes_without_grad = 2 + (self.centring == "labels")  # step 1, step 3's features (and the centring's)
            # and the steps themselves, a few dozen operations on parameter-sized tensors (freshly allocated ones of
            # the value matrix at m x d cost up to ten elements' time an element: their pages are touched first)
            train["elements"] += chunks * (passes_without_grad * constant + with_grad + value_grad) + 160 * (
                d * w + d * d)
            train["calls"] = (3 + passes_without_grad) * 60 * chunks + 300
            if isinstance(trainer_config, TwoStepThenFitConfig):  # full-batch Adam on V, every step a pass over N
                fit = trainer_config.fit_steps
                train["flops"] += fit * 2 * N * (per_item["forward"] + per_item["backward_value"])
                train["logits"] += fit * N * 1.5 * V
                train["elements"] += fit * (N * (forward + elements["backward_value"])
                                            + chunks * (constant + value_grad) + 16 * d * w)
                train["calls"] += fit * (40 * chunks + 30)
            shuffles = 0
        else:
            batch = trainer_config.resolved_batch_size(self.sizes(), self.n_train)
            steps = (trainer_config.steps if trainer_config.steps is not None
                     else trainer_config.epochs * math.ceil(N / batch))
            early = getattr(trainer_config, "early_stop", None) is not None
            # each step one pass with W_KQ's gradient and the value matrix's, and Adam's update element by element
            train["elements"] += steps * (with_grad + value_grad + 16 * self.trainable_params)
            train["calls"] = steps * (110 + (18 if m else 0) + (15 if early else 0))
            passes = math.ceil(steps * batch / N)
            shuffles = 5 * N * passes if batch < N else 0  # a randperm element takes 5 draws' time
            if early and batch < N:  # the training accuracy after every pass, over all N items
                train["flops"] += passes * N * 2 * per_item["evaluate"]
                train["logits"] += passes * N * V
                train["elements"] += passes * (N * forward + math.ceil(N / self.eval_chunk) * constant)
        drawn = (N + self.n_eval) * (L + 1)  # tokens and the informative position of every sample
        data = {"draws": 2 * V * d + 2 * d + 5 * V + m * d + drawn + shuffles,
                "elements": 6 * V * d + 4 * drawn, "calls": 100}
        return {"data": data, "train": train, "evaluate": evaluate}

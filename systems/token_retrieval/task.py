"""The engine's token-retrieval task: the model of model.py (stated there, with its draws, options and feature
maps), batched over models in float32, with the written-out gradients three-step GD uses.

Where the attention-MLP model learns (measured with the engine, three steps, eta = 1, seed 0, 1
thread; accuracy on 4096 fresh samples, chance 1/V):
- V=512, N=11585 (V^1.5), L=8, d=64, m=2048: gamma 1e4 / 1e5 / 1e6 -> relu 2.2% / 3.7% / 3.7%,
  relu_centred 4.2% / 8.3% / 8.3% (attention mass on l: 0.72 / 1.0 / 1.0); chance 0.2%.
- V=256, N=4096 (V^1.5), L=8, d=32, m=1024: gamma 1e2..1e5 -> relu 0.4% .. 5.5%, relu_centred
  1.6% .. 9.5% (best at 1e5); chance 0.4%.
So it learns once gamma is large enough to concentrate the attention on l (mass near 1) with N ~ V^1.5
and m ~ d^2; centring roughly doubles the accuracy by removing the shared feature mean.
``relu_normalised`` features are about m*L/(L+1)/(4 Var relu) times larger in kernel scale, so they need
a gamma smaller by that factor (at V=256 above: 1.6% with gamma <= 0.1, chance at gamma >= 10); use
the schedule in ``term_probes.schedule_gamma`` rather than the same gamma for every option.

o is computed without materialising h or an n x V matrix of attention mass per token value:
o = sum_j a_j e_{x_j} + a_l z_trig is one ``embedding_bag`` (mode "sum", the attention as per-sample
weights) over the model's embedding table, n*L*d multiply-adds instead of n*V*d.

Tokens are kept in the smallest integer type that holds V (int16 up to V = 32767, else int32),
drawn chunk by chunk straight into the stacked [M, n, L] tensor (the same numbers as one int64 draw
of the whole [n, L]; tests check it), and widened to an index type only one forward chunk at a time.
"""
from __future__ import annotations

import weakref

import torch

from recallkit.empirics.tasks import cross_entropy_and_accuracy, gather_items, loss_and_correct_sums
from recallkit.systems.token_retrieval.model import (
    draw_instance, draw_samples, draw_samples_into, feature_map, sample_labels, token_dtype)
from recallkit.theory.errors import InputError

# the training features :meth:`TokenRetrieval.loss` keeps for a W that takes no gradient, at most this many floats a
# model (32 MiB): the readout fit of the quick Fig 1(a) runs keeps all of them (N m <= 5e6), a large model only its
# first chunks (the rest is computed each pass, as before)
FEATURES_KEPT_ELEMENTS = 8 << 20
_FEATURES_PREFIX = "training features"  # the kept values' names: this, then the chunk's span


def _features_name(span: tuple[int, int]) -> str:
    return f"{_FEATURES_PREFIX} {span[0]}:{span[1]}"

# draw_instance and draw_samples are re-exported: reference.py, gradient_access.py and the tests read the draws here
__all__ = ["TokenRetrieval", "draw_instance", "draw_samples", "per_model_matvec"]


class _BagSumDenseBackward(torch.autograd.Function):
    """o[m, i] = sum_j a[m, i, j] E[m, x_ij] by one embedding_bag; the gradient wrt the attention
    (E x grad_o at each token) as one [n, d] x [d, V] bmm per model and a gather of the L tokens of each
    row, which runs at the matmul rate instead of a per-sample dot-product loop. E gets no gradient."""

    @staticmethod
    def forward(ctx, attention, rows, tokens, E):
        M, n, L = attention.shape
        ctx.save_for_backward(tokens, E)
        return torch.nn.functional.embedding_bag(rows, E.reshape(-1, E.shape[-1]),
                                                 per_sample_weights=attention.reshape(M * n, L),
                                                 mode="sum").reshape(M, n, E.shape[-1])

    @staticmethod
    def backward(ctx, grad_o):
        tokens, E = ctx.saved_tensors
        return torch.bmm(grad_o, E.transpose(1, 2)).gather(2, tokens.long()), None, None, None


def per_model_matvec(A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[M, i, j] x [M, j] -> [M, i], the same bits for each model whatever M is. torch's bmm (and einsum) takes
    another kernel for a batch of one, a plain matrix-vector product whose sums round differently: a model
    trained alone ended 1e-7 away from the same model trained beside others (attention mass, loss). The same
    held for the trigger's score as einsum("md,md->m") at d = 512. A batch of
    one is computed as a batch of two, the second a copy whose result is dropped (its gradient is exactly zero),
    which costs one more d x d or V x d product per step."""
    if A.shape[0] == 1:
        return torch.bmm(A.expand(2, *A.shape[1:]), x.expand(2, *x.shape[1:]).unsqueeze(-1))[:1, :, 0]
    return torch.bmm(A, x.unsqueeze(-1)).squeeze(-1)


class TokenRetrieval:
    def __init__(self, configs, device: torch.device):
        task = configs[0].task_config
        self.V, self.d, self.L, self.N = task.V, task.d, task.L, task.N
        self.m = task.m
        self.features = task.features
        self.mlp_input = task.mlp_input
        self.centring = task.centring
        if self.centring != "none" and configs[0].trainer != "three_step":
            # only three_step has a step 3 to centre: another trainer would store the plain model's numbers
            # under a centred config
            raise InputError(f"centring: {self.centring!r} changes three_step's step 3 only; "
                             f"trainer {configs[0].trainer} expects centring = 'none'")
        self.model = task.model
        self.n_eval = task.n_eval
        self.device = device
        instances = [draw_instance(c.seed, task.V, task.d, task.m) for c in configs]
        for key in instances[0]:
            setattr(self, key, torch.stack([inst[key] for inst in instances]).to(device))
        M = len(configs)
        # model k's tokens index rows k*V .. k*V + V-1 of the flattened [M*V, d] embedding table
        self.index_dtype = torch.int32 if M * task.V <= torch.iinfo(torch.int32).max else torch.int64
        self.token_offset = (torch.arange(M, device=device) * task.V).to(self.index_dtype)[:, None, None]
        self.dense_mass = task.dense_mass
        self.dense_attention_backward = task.dense_attention_backward
        self.train = self._samples(configs, "train", task.N)
        self.eval = self._samples(configs, "eval", task.n_eval)
        self.params = {
            "W": torch.zeros(M, task.d, task.d, device=device),
            "V": torch.zeros(M, task.d, task.width, device=device),
        }
        self.n_train = task.N
        # full-batch gradients are accumulated over chunks of this many samples (three_step)
        self.train_chunk, self.eval_chunk = task.train_chunk, task.eval_chunk
        self._kept_values: dict[str, tuple] = {}  # name -> (weak reference to its source, version, value)
        self._asked: dict[str, tuple] = {}  # training-feature chunk -> (weak reference to W, version) of its last pass

    def _samples(self, configs, stream: str, n: int) -> dict[str, torch.Tensor]:
        M = len(configs)
        tokens = torch.empty(M, n, self.L, dtype=token_dtype(self.V), device=self.device)
        positions = torch.empty(M, n, dtype=torch.int64, device=self.device)
        for k, c in enumerate(configs):
            draw_samples_into(c.seed, stream, self.V, tokens[k], positions[k])
        _, labels = sample_labels(self.perm, tokens, positions)
        return {"tokens": tokens, "positions": positions, "labels": labels}

    def forward(self, params, tokens: torch.Tensor, positions: torch.Tensor):
        """tokens [M, n, L], positions [M, n] -> logits [M, n, V], attention on position l [M, n].

        Attention-only with a value matrix that takes no gradient (three-step GD's step 2, every evaluation):
        the logits are o (U V)^T, with the [V, d] read-out U V made once per value matrix (:meth:`readout`);
        otherwise (U (V o)), the hidden state first."""
        features, attention_informative = self.features_of(params["W"], tokens, positions)
        return self._logits(features, params["V"]), attention_informative

    def _logits(self, features: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        """[M, n, V]: the logits of what the value matrix reads (``features`` [M, n, width])."""
        readout = self.readout(value)
        if readout is not None:
            return torch.bmm(features, readout.transpose(1, 2))
        hidden = torch.einsum("mnk,mdk->mnd", features, value)
        return torch.bmm(hidden, self.U.transpose(1, 2))

    def readout(self, value: torch.Tensor) -> torch.Tensor | None:
        """[M, V, d]: U V, each label's read-out of the attended vector (attention-only), made once per value
        matrix and kept while that tensor lives unchanged; None for the attention-MLP model (its width m is
        large beside V, so the hidden state first is the cheaper order there) and for a value matrix that
        takes a gradient (Adam, where each minibatch is smaller than V).

        Why: the hidden state V o costs n d^2 per pass and the read-out V d^2 once, the logits n d V either
        way; with N >> V (N ~ V^1.5, N ~ V log V) and d > V/4 the hidden state was most of a run. One CPU thread,
        V = 1024, L = 32 (``recallkit train ... --json``, wall_time_s): N = 7097, d = 4096 from 25.0 s to 8.5 s;
        d = 8192 from 94.5 s to 26.4 s; N = 32768, d = 2048 from 30.5 s to 12.8 s. The accuracies were equal."""
        if self.m is not None or value.requires_grad:
            return None
        return self._kept("readout", value, lambda: torch.bmm(self.U, value))

    def _kept(self, name: str, source: torch.Tensor, make):
        """``make()``, a function of ``source`` only, made once and kept while that tensor lives unchanged (a
        chunked pass asks for it once per chunk). Only for tensors that take no gradient: the value is reused
        as it is."""
        kept = self._kept_values.get(name)
        if kept is not None and kept[0]() is source and kept[1] == source._version:
            return kept[2]
        value = make()
        self._kept_values[name] = (weakref.ref(source), source._version, value)
        return value

    def features_of(self, W: torch.Tensor, tokens: torch.Tensor, positions: torch.Tensor):
        """With W_KQ = W: what the value matrix reads [M, n, width] (o, or the MLP's features of it) and the
        attention on position l [M, n]."""
        M, n, L = tokens.shape
        if W.requires_grad:
            query = per_model_matvec(W, self.z_eos)  # W_KQ z_EOS
        else:  # the same query for every chunk of a pass
            query = self._kept("query", W, lambda: per_model_matvec(W, self.z_eos))
        token_scores = per_model_matvec(self.E, query)  # e_v . query
        trigger_score = per_model_matvec(self.z_trig[:, None, :], query)[:, 0]  # z_trig . query
        informative = positions.unsqueeze(-1)
        if self.dense_mass:
            index = tokens.long()
            scores = token_scores.gather(1, index.reshape(M, n * L)).reshape(M, n, L)
        else:
            index = (tokens + self.token_offset).reshape(M * n, L)  # rows of the [M*V, d] table (type promotion)
            scores = token_scores.reshape(M * self.V).index_select(0, index.reshape(-1)).reshape(M, n, L)
        scores = scores.scatter_add(2, informative, trigger_score[:, None, None].expand(M, n, 1))
        attention = torch.softmax(scores, dim=-1)
        attention_informative = attention.gather(2, informative).squeeze(-1)
        content = self._attended(attention, index, tokens)
        if self.mlp_input == "content":  # the value path reads the attended tokens, not the trigger
            o = content
        else:
            o = torch.addcmul(content, attention_informative[..., None], self.z_trig[:, None, :])
        return (o if self.m is None else self._mlp_features(o)), attention_informative

    def _attended(self, attention: torch.Tensor, index: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """sum_j a_j e_{x_j} [M, n, d], the fastest of three ways for this shape (measured on CPU, one thread,
        d = 64..512): the dense n x V mass matrix and one bmm when V <= 2L (the L ~ V lines); otherwise one
        embedding_bag, with the attention's gradient as one bmm and a gather when V <= 32L (torch's
        per-sample-weight backward is a scalar loop, 4-10x slower there) and torch's own above."""
        M, n, L = attention.shape
        if self.dense_mass:
            mass = torch.zeros(M, n, self.V, device=attention.device, dtype=attention.dtype).scatter_add(2, index, attention)
            return torch.bmm(mass, self.E)
        if attention.requires_grad and self.dense_attention_backward:
            return _BagSumDenseBackward.apply(attention, index, tokens, self.E)
        return torch.nn.functional.embedding_bag(index, self.E.reshape(M * self.V, self.d),
                                                 per_sample_weights=attention.reshape(M * n, L),
                                                 mode="sum").reshape(M, n, self.d)

    def _mlp_features(self, o: torch.Tensor) -> torch.Tensor:
        return feature_map(torch.einsum("mnd,mkd->mnk", o, self.W1), self.features)

    @torch.no_grad()
    def value_gradient_at_zero(self) -> torch.Tensor:
        """[M, d, width]: the gradient wrt V of each model's mean training loss at V = 0, W_KQ = 0 (three-step
        GD's step 1), written out. There the logits are 0, so the softmax is uniform and
        dL/dV = mean_i (ubar - u_{y_i}) f_i^T, with ubar the mean of U's rows and f_i what V reads: one
        [d, n] x [n, width] product per chunk of items, where autograd would run the two products of the
        forward pass (both with V = 0), the cross-entropy over n x V logits, and two products back."""
        M, n, _ = self.train["tokens"].shape
        W = torch.zeros(M, self.d, self.d, device=self.device)
        width = self.params["V"].shape[2]
        feature_sum = torch.zeros(M, width, device=self.device)
        # sum_i u_{y_i} f_i^T. Attention-only: in label space, sum_k u_k (sum_{i: y_i = k} f_i)^T, one V x d sum per
        # item and one d x V x d product at the end, where the item by item form costs d^2 per item
        label_sums = torch.zeros(M, self.V, width, device=self.device) if self.m is None else None
        target_features = torch.zeros_like(self.params["V"]) if label_sums is None else None
        for features, labels in self._training_chunks(W):
            feature_sum += features.sum(1)
            if label_sums is not None:
                label_sums.scatter_add_(1, labels.unsqueeze(-1).expand(-1, -1, width), features)
            else:
                targets = self.U.gather(1, labels.unsqueeze(-1).expand(-1, -1, self.d))  # u_{y_i} [M, items, d]
                target_features.baddbmm_(targets.transpose(1, 2), features)
        if label_sums is not None:
            target_features = torch.bmm(self.U.transpose(1, 2), label_sums)
        mean_target = self.U.mean(1)
        return (mean_target[:, :, None] * feature_sum[:, None, :] - target_features) / n

    def value_gradient(self, W: torch.Tensor, value: torch.Tensor) -> torch.Tensor | None:
        """[M, d, d]: the gradient wrt the value matrix of each model's mean training loss at W_KQ = W
        (three-step GD's step 3), in label space (attention-only): the cross-entropy's gradient wrt the
        read-out R = U V, accumulated chunk by chunk (n d V multiply-adds), then U^T of it once (d^2 V), where
        autograd through U (V o) costs 2 n d^2 more. None for the attention-MLP model (the trainer's autograd)."""
        if self.m is not None:
            return None
        n = self.train["tokens"].shape[1]
        # three_step's step 2 made this read-out already (the same value matrix, V1)
        readout = self.readout(value if not value.requires_grad else value.detach()).detach().requires_grad_(True)
        gradient = torch.zeros_like(readout)
        for features, labels in self._training_chunks(W):
            loss, _ = cross_entropy_and_accuracy(torch.bmm(features, readout.transpose(1, 2)), labels)
            (part_gradient,) = torch.autograd.grad(loss.sum() * (features.shape[1] / n), [readout])
            gradient += part_gradient
        return torch.bmm(self.U.transpose(1, 2), gradient)

    def _training_chunks(self, W: torch.Tensor):
        """(what V reads at W_KQ = W [M, items, width], labels [M, items]) for each chunk of the training items in
        order, the features without a graph: what the written-out gradients of steps 1 and 3 sum over."""
        n = self.train["tokens"].shape[1]
        for start in range(0, n, self.train_chunk):
            part = slice(start, start + self.train_chunk)
            with torch.no_grad():
                features, _ = self.features_of(W, self.train["tokens"][:, part], self.train["positions"][:, part])
            yield features, self.train["labels"][:, part]

    @torch.no_grad()
    def step3_value_gradient(self, W: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
        """Step 3's value gradient at W_KQ = W (three_step). ``gradient`` is the cross-entropy's, (1/N) sum_n
        (U^T p_n - u_{y_n}) f_n^T; ``none`` returns it as it is. ``labels`` adds (u_hat - u_bar) f_bar^T, so the
        update reads u_{y_n} - u_hat in place of u_{y_n} - u_bar: u_hat = (1/N) sum_n u_{y_n} the empirical label
        mean, u_bar the mean of U's rows, f_bar = (1/N) sum_n f_n the mean of what V reads at W. Then
        sum_n u_k . (u_{y_n} - u_hat) = 0 for every label k, and the mean-bias terms vanish (DERIVATION.md §10)."""
        if self.centring == "none":
            return gradient
        M, n, _ = self.train["tokens"].shape
        feature_sum = torch.zeros(M, gradient.shape[2], device=self.device)
        label_counts = torch.zeros(M, self.V, device=self.device)
        for features, labels in self._training_chunks(W):
            feature_sum += features.sum(1)
            label_counts.scatter_add_(1, labels, torch.ones(labels.shape, device=self.device))
        # u_hat - u_bar = U^T (counts / n - 1 / V): the empirical label frequencies minus the uniform prior
        deviation = torch.bmm((label_counts / n - 1.0 / self.V).unsqueeze(1), self.U).squeeze(1)
        return gradient + deviation[:, :, None] * (feature_sum / n)[:, None, :]

    @torch.no_grad()
    def score_gap(self, W: torch.Tensor) -> torch.Tensor:
        """[M]: mean over the training samples of the informative position's attention score minus the
        mean score of the other L - 1 positions, with W_KQ = W (the step-2 gap kappa' of DERIVATION.md
        §2.2; the ``kappa`` schedule of the trainers sets it). Linear in W."""
        M, n, L = self.train["tokens"].shape
        query = per_model_matvec(W, self.z_eos)
        token_scores = per_model_matvec(self.E, query)
        trigger_score = per_model_matvec(self.z_trig[:, None, :], query)[:, 0]  # z_trig . query
        scores = token_scores.gather(1, self.train["tokens"].reshape(M, n * L).long()).reshape(M, n, L)
        informative = scores.gather(2, self.train["positions"].unsqueeze(-1).long()).squeeze(-1) + trigger_score[:, None]
        if L == 1:
            return informative.mean(1)
        others = (scores.sum(-1) - (informative - trigger_score[:, None])) / (L - 1)
        return (informative - others).mean(1)

    def loss(self, params, idx: torch.Tensor | None = None):
        labels = gather_items(self.train["labels"], idx)
        W = params["W"]
        span = self._training_span(idx) if not W.requires_grad else None
        if span is not None and self._features_kept(span) <= FEATURES_KEPT_ELEMENTS * W.shape[0]:
            features, _ = self._training_features(W, span)
            return cross_entropy_and_accuracy(self._logits(features, params["V"]), labels)
        tokens = gather_items(self.train["tokens"], idx)
        positions = gather_items(self.train["positions"], idx)
        logits, _ = self.forward(params, tokens, positions)
        return cross_entropy_and_accuracy(logits, labels)

    def _training_span(self, idx: torch.Tensor | None) -> tuple[int, int] | None:
        """(start, stop) when ``idx`` is every model's training items start..stop-1 in order (the full-batch passes'
        chunks), else None (a minibatch)."""
        if idx is None:
            return 0, self.n_train
        if idx.dim() != 2 or idx.shape[1] == 0 or (idx.shape[0] > 1 and idx.stride(0) != 0):
            return None
        start = int(idx[0, 0])
        span = torch.arange(start, start + idx.shape[1], device=idx.device, dtype=idx.dtype)
        return (start, start + idx.shape[1]) if torch.equal(idx[0], span) else None

    def _training_features(self, W: torch.Tensor, span: tuple[int, int]) -> tuple:
        """What V reads of training items start..stop at a W that takes no gradient, and their attention. It is the
        same at every pass while W lives unchanged (two_step_then_fit's readout fit asks 400 times per chunk), so from
        the second pass on it is kept and only the read-out is computed again; a single pass (three_step's step 3)
        keeps nothing. Made by the very operations the forward pass runs: the same numbers."""
        name = _features_name(span)
        part = slice(*span)

        def make():
            return self.features_of(W, self.train["tokens"][:, part], self.train["positions"][:, part])

        asked = self._asked.get(name)
        if asked is None or asked[0]() is not W or asked[1] != W._version:
            self._asked[name] = (weakref.ref(W), W._version)
            return make()
        return self._kept(name, W, make)

    def _features_kept(self, span: tuple[int, int]) -> int:
        """Floats of training features kept, with those of ``span`` (kept already or not)."""
        name = _features_name(span)
        V = self.params["V"]
        kept = sum(value[2][0].numel() for key, value in self._kept_values.items()
                   if key.startswith(_FEATURES_PREFIX) and key != name)
        return kept + V.shape[0] * (span[1] - span[0]) * V.shape[2]

    @torch.no_grad()
    def _metrics_on(self, params, samples) -> dict[str, torch.Tensor]:
        M, n, _ = samples["tokens"].shape
        loss_sum = torch.zeros(M, device=self.device)
        correct = torch.zeros(M, device=self.device)
        mass = torch.zeros(M, device=self.device)
        for start in range(0, n, self.eval_chunk):
            part = slice(start, start + self.eval_chunk)
            logits, attention_informative = self.forward(params, samples["tokens"][:, part], samples["positions"][:, part])
            chunk_loss, chunk_correct = loss_and_correct_sums(logits, samples["labels"][:, part])
            loss_sum += chunk_loss
            correct += chunk_correct
            mass += attention_informative.sum(1)
        return {"loss": loss_sum / n, "accuracy": correct / n, "attention_mass": mass / n}

    def evaluate(self, params) -> dict[str, torch.Tensor]:
        fresh = self._metrics_on(params, self.eval)
        train = self._metrics_on(params, self.train)
        return {
            "accuracy": fresh["accuracy"],
            "train_accuracy": train["accuracy"],
            "loss": train["loss"],
            "eval_loss": fresh["loss"],
            "attention_mass": fresh["attention_mass"],
        }

    def train_accuracy(self, params) -> torch.Tensor:
        return self._metrics_on(params, self.train)["accuracy"]

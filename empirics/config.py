"""Run configs: one flat JSON dict per trained model, validated into dataclasses.

A run config is a flat dict (docs/ARCHITECTURE.md): ``task``, ``model``, ``trainer``, ``seed`` plus
the numbers of the task and trainer. :func:`parse_config` splits it into a :class:`RunConfig` holding
a task dataclass and a trainer dataclass; both validate themselves in ``__post_init__`` and every
error is one line naming the key (``d: expected a positive integer <= 16384, got -3``).

Keys (defaults in brackets): each task's own keys are documented by the config dataclass its system
registers (``recallkit.registry.Task.config``, e.g. ``recallkit theory``-independent ``task = "..."``
names such as the shipped systems' ``systems/<name>/config.py``). The trainer keys are shared:

- trainer ``three_step`` (only for tasks that list it): ``eta``, and ``gamma`` or ``kappa`` (the step-2
  score gap from which gamma is measured per model; the problem must have ``score_gap``).
- trainer ``two_step_then_fit`` (only for tasks that list it): steps 1-2 as ``three_step`` (``eta``,
  ``gamma`` or ``kappa``), then the problem's ``fit_params`` trained by full-batch Adam: ``fit_lr``
  [0.1], ``fit_steps`` [400], ``fit_tol`` [0: run every step].
- trainers ``adam`` / ``adamw``: ``lr``, exactly one of ``epochs`` (passes over the N training
  items in minibatches) or ``steps`` (minibatch steps), ``batch_size`` [full batch],
  ``early_stop`` [none] (stop a model once its training accuracy is > this value),
  ``weight_decay`` [0; adamw only, decoupled as in torch.optim.AdamW].
- a registered system's own trainers (``recallkit.registry.Trainer``, listed in its ``System.trainers``):
  the keys of their config dataclass. :func:`trainers` finds every trainer by name.

``eta``, ``gamma``, ``lr`` and ``batch_size`` may be numbers or expression strings in
``V, N, d, L, m, R`` (parsed by ``theory.expr`` and evaluated in floats by walking the parsed tree;
never evaluated as Python). ``batch_size`` expressions are floored: ``"floor(N/16)"`` and ``"N/16"``
mean the same.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

# theory loads its expression parser (sympy, about 0.3 s) on first use: --help and plain numbers never need it
from recallkit import registry, theory
from recallkit.empirics.numerics import HEAP_BUFFER_MAX  # the allocator's constant, re-exported for the memory model
from recallkit.registry import Trainer
from recallkit.theory.errors import InputError, RecallkitError
from recallkit.theory.sizes import SIZE_SYMBOLS

__all__ = ["AdamConfig", "allocator_retention_bytes", "check_memory", "check_model", "config_hash", "evaluate",
           "evaluations", "EXPRESSION_SYMBOLS", "FLOAT_BYTES", "HEAP_BUFFER_MAX", "HEAP_RETAINED_BUFFERS",
           "ITEM_CHUNK_ELEMENTS", "items_per_chunk", "MAX_D", "MAX_L", "MAX_M", "MAX_N", "MAX_R", "MAX_V",
           "memory_available", "memory_free", "model_flops", "ModelTooLarge", "parameter_state_bytes", "parse_config",
           "ParsedConfig", "planned_config", "positive_int", "RunConfig", "shape_key", "store_key", "task_spec",
           "THREE_STEP_PARAMETER_COPIES", "ThreeStepConfig", "TRAIN_CHUNK_ELEMENTS", "trainer_spec", "TRAINERS",
           "trainers", "training_passes", "TwoStepThenFitConfig"]


MAX_D = 16384
MAX_M = 1 << 20
MAX_V = 10_000_000
MAX_N = 100_000_000
MAX_L = 100_000
MAX_R = 100_000
EXPRESSION_SYMBOLS = SIZE_SYMBOLS  # a run config's expressions (a gamma schedule) are written in its sizes


def _where(where: str, key: str) -> str:
    return f"{where}: {key}" if where else key


def positive_int(value: Any, key: str, limit: int, where: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or isinstance(value, float) and not value.is_integer():
        raise InputError(f"{_where(where, key)}: expected a positive integer <= {limit}, got {value!r}")
    value = int(value)
    if value <= 0 or value > limit:
        raise InputError(f"{_where(where, key)}: expected a positive integer <= {limit}, got {value}")
    return value


def _number_or_expression(value: Any, key: str, where: str = "", positive: bool = True) -> float | str:
    if isinstance(value, str):
        _parse(value, key, where)  # syntax and symbols are checked now, the value when sizes are known
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{_where(where, key)}: expected a number or an expression string, got {value!r}")
    if positive and value <= 0:
        raise InputError(f"{_where(where, key)}: expected a positive number, got {value}")
    return float(value)


def _parse(text: str, key: str, where: str):
    """Parse an expression with theory.expr (the whitelist parser: nothing is executed)."""
    return theory.compile_numeric(text, EXPRESSION_SYMBOLS, where=_where(where, key))


def evaluate(value: float | str, key: str, sizes: dict[str, int]) -> float:
    """The number a config value stands for: numbers pass through, expressions are evaluated at ``sizes``."""
    if not isinstance(value, str):
        return float(value)
    expression = _parse(value, key, "")
    missing = sorted(name for name in expression.symbols if name not in sizes)
    if missing:
        raise InputError(f"{key}: expression {value!r} uses {', '.join(missing)}, which this task does not have")
    number = expression.evaluate({name: sizes[name] for name in expression.symbols})
    if not math.isfinite(number) or number <= 0:
        raise InputError(f"{key}: expression {value!r} evaluates to {number}, expected a positive number")
    return number


# ------------------------------------------------------------------- memory and FLOP models
# Each task config's ``bytes_per_model`` and ``train_flops`` (systems/<name>/config.py) are built from
# these, so the engine's chunking, the refusal of too-large models and benchmarks/paper_cost.py all use
# one model, checked against measured peak RSS in tests/integration/test_memory_model.py.
#
# ``bytes_per_model`` = the tensors alive at the peak of a training (counted buffer by buffer from the
# code: the live-tensor peak that torch.profiler's memory events report) + what the allocator keeps of
# the freed ones (:func:`allocator_retention_bytes`).

FLOAT_BYTES = 4  # every tensor the trainers keep is float32
ITEM_CHUNK_ELEMENTS = 1 << 20  # per model: floats in one [items, width] tensor of an evaluation chunk
# per model: floats in one [items, width] tensor of a full-batch gradient chunk. 4 MiB per model, as the
# evaluation's: with 6 models a chunk's [M, items, V] tensors stay under glibc's 32 MiB mmap threshold, so
# they are reused from the heap instead of being mapped, page-faulted in and unmapped again every chunk
# (at 1 << 22, the tr_fig2 quick cell of benchmarks/engine.py spent 0.4-1.4 s of its 5 s in the kernel)
TRAIN_CHUNK_ELEMENTS = 1 << 20
# Copies of the trainable parameters alive at the peak of a training: three_step (trainers._two_steps,
# just after W1 = gamma * direction) holds the problem's zeros, their copies, V1, the direction and W1:
# 4 W-sized + 3 V-sized tensors, 3.5 copies when W and V have the same size (the token-retrieval task
# counts its phases exactly); Adam holds, for every parameter, the problem's initial value, the
# parameter and two moments, and while it updates one parameter its new value, new moments and
# temporaries (five of that parameter's size).
THREE_STEP_PARAMETER_COPIES = 3.5
ADAM_PARAMETER_COPIES, ADAM_UPDATE_COPIES = 4, 5
# glibc's malloc (CPU) takes a buffer from its heap instead of a fresh mmap once it has freed one of that
# size, up to DEFAULT_MMAP_THRESHOLD_MAX = 32 MiB (HEAP_BUFFER_MAX), and keeps up to twice that size free at
# the top of its heap before it gives memory back (the dynamic M_TRIM_THRESHOLD, mallopt(3)). That reuse is
# what makes a chunked pass fast, and the resident memory it costs is part of a training's peak. Larger
# buffers are mmapped and unmapped when freed.
HEAP_RETAINED_BUFFERS = 2


def items_per_chunk(width: int, budget: int = ITEM_CHUNK_ELEMENTS) -> int:
    """Items per chunk of a pass over many items. It depends only on a model's shape, never on how many
    models share the batch, so a model's sums are added in the same order alone and batched (resume
    relies on that: a stored number must not depend on what else was trained with it)."""
    return max(1, budget // max(1, width))


def parameter_state_bytes(trainer_config, trainable_params: int, largest_parameter: int) -> int:
    """Parameters, gradients and optimizer state of one model at the peak of its training (``largest_parameter``:
    the elements of its largest parameter tensor, which Adam's update copies while it runs)."""
    if isinstance(trainer_config, ThreeStepConfig):
        return int(THREE_STEP_PARAMETER_COPIES * FLOAT_BYTES * trainable_params)
    return FLOAT_BYTES * (ADAM_PARAMETER_COPIES * trainable_params + ADAM_UPDATE_COPIES * largest_parameter)


def allocator_retention_bytes(transient_buffers) -> int:
    """Freed memory the allocator still holds at a training's peak: twice the largest buffer that is freed
    and allocated again during the training (``transient_buffers``: their sizes in bytes) and is small
    enough to come from glibc's heap (<= HEAP_BUFFER_MAX; larger ones are unmapped when freed). A margin
    of the right size, not an exact count: the heap also keeps holes between live buffers, and where they
    fall depends on the order of allocations (even on Python's hash seed). Measured in fresh processes,
    the peak RSS exceeded the live tensors by 0.3 to 2.6 times this on the configs of
    tests/integration/test_memory_model.py, and by 5 MiB (a cross-entropy's two [items, V] buffers,
    freed in stack order) to 70 MiB (an MLP's backward) on smaller token-retrieval shapes, whose total
    it then misses by up to -28% / +82%. At most 64 MiB: nothing next to a GPU's memory."""
    heap_served = [int(size) for size in transient_buffers if 0 < size <= HEAP_BUFFER_MAX]
    return HEAP_RETAINED_BUFFERS * max(heap_served, default=0)


def evaluations(trainer_config) -> int:
    """How many times one training evaluates its model: at the end, and after every power-of-two epoch below
    the last when the trainer logs epochs (``log_epochs``: epochs 1, 2, 4, ...; (epochs - 1).bit_length() of them)."""
    if getattr(trainer_config, "log_epochs", 0) and getattr(trainer_config, "epochs", None):
        return 1 + (trainer_config.epochs - 1).bit_length()
    return 1


def training_passes(trainer_config, sizes: dict[str, int], n_train: int) -> dict[str, float]:
    """How many items go through each kind of pass in one training (for FLOP models), as the trainers run
    them: ``forward``; ``backward`` (the gradient of every trained parameter: Adam); three_step's
    ``value_at_zero`` (step 1, the problem's written-out gradient at V = 0, W_KQ = 0: what the value matrix
    reads and one product with it), ``backward_value`` (step 3: the value matrix only) and
    ``backward_attention`` (step 2: W_KQ only); ``evaluate`` (every evaluation on the training items, forward
    only: the final one and those of ``log_epochs``, see :func:`evaluations`; a task adds its fresh
    samples). Early stop is ignored: an upper bound on the work."""
    if isinstance(trainer_config, ThreeStepConfig):
        return {"forward": 2 * n_train, "backward": 0, "value_at_zero": n_train, "backward_value": n_train,
                "backward_attention": n_train, "evaluate": n_train}
    batch = trainer_config.resolved_batch_size(sizes, n_train)
    steps_per_pass = 1 if batch >= n_train else math.ceil(n_train / batch)
    steps = trainer_config.steps if trainer_config.steps is not None else trainer_config.epochs * steps_per_pass
    items = steps * batch
    return {"forward": items, "backward": items, "value_at_zero": 0, "backward_value": 0, "backward_attention": 0,
            "evaluate": n_train * evaluations(trainer_config)}


# ----------------------------------------------------------------------------------- tasks


def check_model(task_config) -> None:
    if task_config.model not in task_config.MODELS:
        raise InputError(f"model: expected one of {', '.join(task_config.MODELS)}, got {task_config.model!r}")


# --------------------------------------------------------------------------------- trainers


@dataclass(frozen=True)
class ThreeStepConfig:
    """Three full-batch gradient steps from zero init: step size eta, then gamma for steps 2 and 3.

    Give exactly one of ``gamma`` (a number or expression) or ``kappa``: the step-2 score gap the
    problem should reach (its ``score_gap``), from which each model's gamma is measured: step 2 is
    linear in gamma, so gamma = kappa / (the gap of the step-2 direction at gamma = 1).
    """

    eta: float | str
    gamma: float | str | None = None
    kappa: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "eta", _number_or_expression(self.eta, "eta"))
        if (self.gamma is None) == (self.kappa is None):
            raise InputError("gamma/kappa: give exactly one of gamma (the step size of steps 2 and 3) or kappa "
                             "(the step-2 score gap gamma is measured from)")
        if self.gamma is not None:
            object.__setattr__(self, "gamma", _number_or_expression(self.gamma, "gamma"))
        else:
            object.__setattr__(self, "kappa", _number_or_expression(self.kappa, "kappa"))
            if isinstance(self.kappa, str):
                raise InputError(f"kappa: expected a positive number, got {self.kappa!r}")


@dataclass(frozen=True)
class TwoStepThenFitConfig(ThreeStepConfig):
    """Steps 1 and 2 as :class:`ThreeStepConfig`, then the readout (the problem's ``fit_params``) trained
    by full-batch Adam with the rest frozen: at most ``fit_steps`` steps at learning rate ``fit_lr``; a
    model stops once its training loss falls by less than ``fit_tol`` (relative) in one step."""

    fit_lr: float | str = 0.1
    fit_steps: int = 400
    fit_tol: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "fit_lr", _number_or_expression(self.fit_lr, "fit_lr"))
        object.__setattr__(self, "fit_steps", positive_int(self.fit_steps, "fit_steps", 1_000_000))
        if isinstance(self.fit_tol, bool) or not isinstance(self.fit_tol, (int, float)) or not 0 <= self.fit_tol < 1:
            raise InputError(f"fit_tol: expected a number in [0, 1), got {self.fit_tol!r}")
        object.__setattr__(self, "fit_tol", float(self.fit_tol))


@dataclass(frozen=True)
class AdamConfig:
    """Adam / AdamW with minibatches, optional per-model early stop on training accuracy."""

    lr: float | str
    epochs: int | None = None
    steps: int | None = None
    batch_size: int | str | None = None
    early_stop: float | None = None
    weight_decay: float = 0.0
    decoupled: bool = field(default=False, repr=False)
    # 1: also measure the model's accuracy (the problem's evaluate(): fresh samples where the task has them)
    # after epochs 1, 2, 4, ... below ``epochs``, stored as accuracy_epoch_<k> (and train_accuracy_epoch_<k>);
    # the same runs then give the boundary at every such epoch. Each is what an ``epochs = k`` run of the same
    # config gives: no learning-rate schedule depends on the total, and the shuffles and early stop of the
    # first k epochs are the same.
    log_epochs: int = field(default=0, metadata={"omit_default": True})

    def __post_init__(self) -> None:
        object.__setattr__(self, "lr", _number_or_expression(self.lr, "lr"))
        if isinstance(self.log_epochs, bool) or self.log_epochs not in (0, 1):
            raise InputError(f"log_epochs: expected 0 or 1, got {self.log_epochs!r}")
        if self.log_epochs and self.epochs is None:
            raise InputError("log_epochs: needs epochs (the accuracy is measured after epochs 1, 2, 4, ...), not steps")
        if (self.epochs is None) == (self.steps is None):
            raise InputError("epochs/steps: give exactly one of epochs or steps (a positive integer)")
        for key in ("epochs", "steps"):
            if getattr(self, key) is not None:
                object.__setattr__(self, key, positive_int(getattr(self, key), key, 100_000_000))
        if self.batch_size is not None:
            if isinstance(self.batch_size, str):
                _number_or_expression(self.batch_size, "batch_size")
            else:
                object.__setattr__(self, "batch_size", positive_int(self.batch_size, "batch_size", MAX_N))
        if self.early_stop is not None:
            if isinstance(self.early_stop, bool) or not isinstance(self.early_stop, (int, float)) or not 0 <= self.early_stop <= 1:
                raise InputError(f"early_stop: expected an accuracy in [0, 1], got {self.early_stop!r}")
            object.__setattr__(self, "early_stop", float(self.early_stop))
        if isinstance(self.weight_decay, bool) or not isinstance(self.weight_decay, (int, float)) or self.weight_decay < 0:
            raise InputError(f"weight_decay: expected a number >= 0, got {self.weight_decay!r}")
        object.__setattr__(self, "weight_decay", float(self.weight_decay))
        if self.weight_decay and not self.decoupled:
            raise InputError("weight_decay: only the adamw trainer takes weight_decay")

    def resolved_batch_size(self, sizes: dict[str, int], n_train: int) -> int:
        if self.batch_size is None:
            return n_train
        value = int(math.floor(evaluate(self.batch_size, "batch_size", sizes)))
        if value < 1:
            raise InputError(f"batch_size: {self.batch_size!r} gives {value}, expected at least 1")
        return min(value, n_train)


# The shipped trainers. Their train functions are named, not imported: this module stays free of torch.
TRAINERS: dict[str, Trainer] = {t.name: t for t in (
    Trainer("three_step", ThreeStepConfig, "recallkit.empirics.trainers:train_three_step"),
    Trainer("two_step_then_fit", TwoStepThenFitConfig, "recallkit.empirics.trainers:train_two_step_then_fit"),
    Trainer("adam", AdamConfig, "recallkit.empirics.trainers:train_adam"),
    Trainer("adamw", AdamConfig, "recallkit.empirics.trainers:train_adam"),
)}


def trainers() -> dict[str, Trainer]:
    """Every trainer a run config may name: the shipped ones (:data:`TRAINERS`), then each registered system's.
    A system's trainer named like a shipped one is a RegistryError, as a name two systems register is."""
    found = dict(TRAINERS)
    for name, (system, trainer) in registry.system_trainers().items():
        if name in found:
            raise registry.RegistryError(f"system {system.name}: trainer {name!r} is already registered by recallkit "
                                         f"(a shipped trainer)")
        found[name] = trainer
    return found


def model_flops(trainer: str, task_config, trainer_config) -> float | None:
    """The FLOPs of one model's training and evaluation: its trainer's cost model where the trainer has one
    (``Trainer.cost``), else its task's ``train_flops``; None when neither counts them (a plug-in task without a
    FLOP model, or a system trainer the task cannot count)."""
    counter = trainer_spec(trainer).cost_function()
    try:
        if counter is not None:
            return float(counter(task_config, trainer_config))
        return float(task_config.train_flops(trainer_config))
    except (AttributeError, TypeError):
        return None


def trainer_spec(trainer: str) -> Trainer:
    """The trainer (``recallkit.registry.Trainer``) behind a config's ``trainer`` key."""
    known = trainers()
    if trainer not in known:
        raise InputError(f"trainer: expected one of {', '.join(known)}, got {trainer!r}")
    return known[trainer]


def task_spec(task: str):
    """The registered task (``recallkit.registry.Task``) behind a config's ``task`` key."""
    try:
        return registry.task(task)
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None


# --------------------------------------------------------------------------------- run config


@dataclass(frozen=True)
class RunConfig:
    task: str
    model: str
    trainer: str
    seed: int
    task_config: Any
    trainer_config: Any

    @classmethod
    def from_dict(cls, raw: dict, where: str = "") -> "RunConfig":
        """Validate a flat config dict; ``where`` prefixes errors (e.g. a file name)."""
        try:
            return _from_dict(raw)
        except InputError as exc:
            if where:
                raise InputError(f"{where}: {exc}") from None
            raise

    def to_dict(self) -> dict:
        """The flat dict with every default filled in (the canonical form that is hashed), except the
        fields whose dataclass metadata says ``omit_default``: keys added after configs were stored,
        left out while they hold their default so that those configs keep their store keys."""
        flat = {"task": self.task, "model": self.model, "trainer": self.trainer, "seed": self.seed}
        for part in (self.task_config, self.trainer_config):
            for f in dataclasses.fields(part):
                if f.name in ("model", "decoupled"):
                    continue
                value = getattr(part, f.name)
                if f.metadata.get("omit_default") and value == f.default:
                    continue  # a key added later: its default keeps the store keys of older configs
                if value is not None and not (f.name == "weight_decay" and self.trainer != "adamw"):
                    flat[f.name] = value
        return flat

    @property
    def param_count(self) -> int:
        return self.task_config.param_count

    @functools.cached_property
    def digest(self) -> str:
        """The store key (:func:`config_hash`), computed once per parsed config."""
        return store_key(self.to_dict())


def _from_dict(raw: dict) -> RunConfig:
    if not isinstance(raw, dict):
        raise InputError(f"config: expected a dict of keys to values, got {type(raw).__name__}")
    values = dict(raw)
    for key in ("task", "model", "trainer"):
        if not isinstance(values.get(key), str):
            raise InputError(f"{key}: required, expected a string, got {values.get(key)!r}")
    task, model, trainer = values.pop("task"), values.pop("model"), values.pop("trainer")
    spec = task_spec(task)
    trainer_cls = trainer_spec(trainer).config_class()
    if trainer not in spec.trainers:
        raise InputError(f"trainer: {trainer} does not apply to task {task} (it takes {', '.join(spec.trainers)})")
    seed = values.pop("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed: expected an integer >= 0, got {seed!r}")
    task_cls = spec.config_class()
    task_keys = {f.name for f in dataclasses.fields(task_cls)} - {"model"}
    trainer_keys = {f.name for f in dataclasses.fields(trainer_cls)} - {"decoupled"}
    unknown = sorted(set(values) - task_keys - trainer_keys)
    if unknown:
        allowed = ", ".join(sorted(task_keys | trainer_keys | {"seed"}))
        raise InputError(f"{unknown[0]}: unknown key for task {task} with trainer {trainer} (allowed: {allowed})")
    task_args = {k: v for k, v in values.items() if k in task_keys}
    trainer_args = {k: v for k, v in values.items() if k in trainer_keys}
    for f in dataclasses.fields(task_cls):
        if f.default is dataclasses.MISSING and f.name != "model" and f.name not in task_args:
            raise InputError(f"{f.name}: required for task {task}")
    for f in dataclasses.fields(trainer_cls):
        if f.default is dataclasses.MISSING and f.name not in trainer_args:
            raise InputError(f"{f.name}: required for trainer {trainer}")
    if trainer == "adamw":
        trainer_args["decoupled"] = True
    task_config = task_cls(model=model, **task_args)
    trainer_config = trainer_cls(**trainer_args)
    # expressions are checked against this task's sizes now, so a bad one fails before any training
    if isinstance(trainer_config, ThreeStepConfig):
        for key in ("eta", "gamma", "fit_lr"):
            if getattr(trainer_config, key, None) is not None:
                evaluate(getattr(trainer_config, key), key, task_config.sizes())
    elif isinstance(trainer_config, AdamConfig):
        evaluate(trainer_config.lr, "lr", task_config.sizes())
        trainer_config.resolved_batch_size(task_config.sizes(), task_config.n_train)
    return RunConfig(task, model, trainer, seed, task_config, trainer_config)


class ParsedConfig(dict):
    """A flat run config (a plain dict to every reader: runners, the store, JSON) that carries its validated
    :class:`RunConfig`, so that the executors and the engine do not parse it again. Made by
    :func:`planned_config`; a copy made with ``dict(...)`` is a plain dict again and is parsed when used."""

    parsed: RunConfig


def planned_config(raw: dict, where: str = "") -> ParsedConfig:
    """``raw`` validated once: a :class:`ParsedConfig` with the same keys and values."""
    config = ParsedConfig(raw)
    config.parsed = parse_config(raw, where)
    return config


def parse_config(raw: dict | RunConfig, where: str = "") -> RunConfig:
    """The validated config of a dict (one-line InputError otherwise); a RunConfig or a ParsedConfig's own."""
    if isinstance(raw, RunConfig):
        return raw
    parsed = getattr(raw, "parsed", None)
    if isinstance(raw, ParsedConfig) and isinstance(parsed, RunConfig):
        return parsed
    return RunConfig.from_dict(raw, where)


def store_key(config: dict, prefix: str = "") -> str:
    """The one key scheme of the results store: ``prefix`` + the first 16 hex digits of the sha256 of the
    canonical JSON of ``config`` (sorted keys, no spaces). Trained models use it through
    :func:`config_hash`; rows that are not one trained model (a system's whole-experiment result, a term
    probe) use it directly, with a prefix that keeps them apart."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return prefix + hashlib.sha256(canonical.encode()).hexdigest()[:16]


def config_hash(cfg: dict | RunConfig) -> str:
    """The store key of a training config: :func:`store_key` of its canonical form (defaults filled in)."""
    return parse_config(cfg).digest


def shape_key(cfg: RunConfig) -> str:
    """Configs with equal keys train together: everything but the per-model numbers (the shipped trainers', and
    those a system's trainer declares in its ``per_model``)."""
    flat = cfg.to_dict()
    for key in ("seed", "lr", "eta", "gamma", "kappa", "fit_lr", "fit_tol", "early_stop", "weight_decay",
                *trainer_spec(cfg.trainer).per_model):
        flat.pop(key, None)
    return json.dumps(flat, sort_keys=True)


class ModelTooLarge(RecallkitError):
    """One model would not fit in the memory of the device it is meant for. Not an InputError: a search
    that reaches such a size records a failed run there and goes on."""


def memory_available(device=None) -> int:
    """Bytes one model may use: the GPU's total memory for a CUDA device, else this machine's physical memory."""
    if device is not None and getattr(device, "type", str(device)).startswith("cuda"):
        import torch  # only for a CUDA device; torch takes about 1 s to import

        return int(torch.cuda.mem_get_info(device)[1])
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not on Linux
        return 1 << 40


def memory_free(device=None) -> int:
    """Bytes free on the device now: CUDA's free memory for a CUDA device, else the kernel's MemAvailable
    (what can be allocated without swapping), else this machine's physical memory."""
    if device is not None and getattr(device, "type", str(device)).startswith("cuda"):
        import torch  # only for a CUDA device; torch takes about 1 s to import

        return int(torch.cuda.mem_get_info(device)[0])
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - not Linux
        pass
    return memory_available(device)


def check_memory(config: "RunConfig", where: str = "", device=None, available: int | None = None,
                 bound: str = "of memory of this device") -> None:
    """Refuse, in one line and before anything is allocated, a config whose one model would not fit in
    ``available`` bytes (default: the device's total, the bound for a plan run later or elsewhere; a run now
    goes through :func:`recallkit.empirics.cost.check_free_memory`, which passes what is free now), estimated
    from all its sizes together (each size alone can pass its own limit: V = 10**7 with d = 16384 is 640 GB
    of embeddings). ``bound`` says in the message what ``available`` is."""
    estimate = config.task_config.bytes_per_model(config.trainer_config)
    available = memory_available(device) if available is None else available
    if estimate > available:
        place = f"{where}: " if where else ""
        sizes = ", ".join(f"{k}={v}" for k, v in config.task_config.sizes().items())
        raise ModelTooLarge(f"{place}one model ({sizes}) needs about {estimate / 2**30:,.1f} GiB, more than the "
                            f"{available / 2**30:,.1f} GiB {bound}")

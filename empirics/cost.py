"""What training costs before it starts, and the limit above which a command refuses it.

**Time.** A run is priced from what it does, counted by its task (``task_config.work(trainer_config)``) in three
phases, each a count of operations of a few kinds, and each kind at one measured per-operation rate:

- phases: ``data`` (the instance and the samples the run draws: embeddings, permutations, the training and the
  fresh evaluation samples, Adam's minibatch shuffles), ``train`` (the trainer's passes and steps) and ``evaluate``
  (every evaluation: the final one on the training items and on ``n_eval`` fresh samples, and those
  ``log_epochs`` adds);
- kinds (:data:`WORK_KINDS`): ``flops`` (matmul-like work, 2 per multiply-add: the task's FLOP model, at the
  device's dense float32 matmul rate times the engine's efficiency), ``logits`` (a logit through a softmax:
  the evaluation's log-softmax, gather and argmax, or the training cross-entropy's forward and backward),
  ``elements`` (an element through an elementwise, gather or scatter operation: the attention over L positions,
  the d- and m-wide vectors, Adam's update of every parameter), ``draws`` (a random number drawn) and
  ``calls`` (an operator call's fixed cost: what a step or a chunk of a pass costs however small its tensors);
  plus :data:`MODEL_SECONDS` per model.

The rates (:data:`CPU_RATES`: one thread of this project's 2-core AMD EPYC, AVX2, torch 2.13; each measured by
``benchmarks/price_check.py --rates``) are the same for every task and phase, so evaluating 10^8 fresh samples is
priced as the logits, elements and draws it takes, not as its matmuls alone (which priced ``n_eval = 1e8`` at about
a second for a run of minutes). ``benchmarks/price_check.py`` checks the price against the time of runs at the
extremes (``n_eval`` and ``steps`` up to 1e8, the largest shipped sizes), each run's time extrapolated from a
short sample: every run within 3x of its price. A GPU's matmul rate is its datasheet's times the efficiency
measured for three steps on one H200 (:data:`GPU_EFFICIENCY`); its other rates are assumed (memory-bound
kernels and launches), except that the data is drawn on the CPU (the tasks' seeded generators are CPU
generators) and priced at the CPU's rate. A task without a ``work`` model (a plug-in) is priced as before: its
FLOP model (``train_flops``, or its trainer's ``Trainer.cost``) at the matmul rate plus :data:`STEP_SECONDS` per
optimizer step and :data:`MODEL_SECONDS` per model. Early stop is ignored, so a price is an upper bound on the
steps. It is an estimate, not a measurement: a machine slower than :data:`CPU_RATES` runs longer.

**The limit.** ``--max-cost DURATION`` (``2h``, ``30m``, ``90s``, ``inf``), else ``$RECALLKIT_MAX_COST``, else
:data:`DEFAULT_MAX_COST` (2 h). Work estimated above it is refused in one line that gives the estimate and the flag
that accepts it, before anything is built.

**What is priced, and when.**

- ``recallkit train``: its one model, before it is built.
- a grid experiment (``recallkit sweep``): every cell, before the first config is built (:func:`plan_estimate`).
- a search (``sweep``, ``report``, ``fit``, ``assert_scaling``: every executor that :func:`empirics.executors.
  make_executor` returns is a :class:`PricedExecutor`): round by round, before each round trains, the runs it
  trains plus those already trained under the same budget. A search's size is not known before it runs (the
  bracket widens until the threshold is crossed, up to ``search.max``), and its worst case (every cell
  bisecting up to ``search.max``) is thousands of CPU-hours for shipped quick presets that take minutes, so
  it is checked step by step rather than priced by its worst case. A round that would pass the limit is
  refused before it trains; the runs already trained stay in the store, and a rerun with a larger
  ``--max-cost`` reuses them.
- term probes: the grid's rows the store lacks, before the first is computed (the task's own probe model).

:func:`budget` opens one budget for a block (a command): every priced round in it is charged to it, and the
processes started in it inherit its limit through ``$RECALLKIT_MAX_COST``. Outside one, each executor keeps
its own budget at the default limit. The engine itself (``run_configs``) trains what it is given: a caller
that plans the work prices it (:func:`estimate`, :func:`charge`).

**Memory.** :func:`check_free_memory` refuses a model whose ``bytes_per_model`` exceeds what is free now:
the kernel's MemAvailable (CUDA: the device's free memory), and less where the process has a cgroup memory
limit or an address-space / data limit (``ulimit -v``), which would otherwise end in the allocator's traceback.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import resource
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence

from recallkit.empirics.config import (ThreeStepConfig, TwoStepThenFitConfig, check_memory, memory_available,
                                       memory_free, model_flops, parse_config, trainer_spec)
from recallkit.empirics.device import resolve_device
from recallkit.theory.errors import InputError

__all__ = ["active_budget", "budget", "Budget", "CALL_SECONDS", "charge", "check_free_memory", "CostTooHigh",
           "CPU_EFFICIENCY", "CPU_MATMUL_EFFICIENCY", "CPU_MATMUL_GFLOPS", "CPU_RATES", "DEFAULT_MAX_COST",
           "DRAW_SECONDS", "ELEMENT_SECONDS", "Estimate", "estimate", "format_duration", "free_memory",
           "GPU_EFFICIENCY", "GPU_FP32_TFLOPS", "GPU_RATES", "LOGIT_SECONDS", "max_cost_allowed", "MAX_COST_ENV",
           "MAX_COST_HELP", "MODEL_SECONDS", "no_cost_model", "NOTE_SECONDS", "parse_duration", "PHASES",
           "plan_estimate", "price", "price_work", "PricedExecutor", "Rates", "rate_flops", "refuse_above",
           "ROUND_NOTE_SECONDS", "STEP_SECONDS", "task_work", "WORK_KINDS"]


# Per-operation rates of one thread of this project's 2-core AMD EPYC (AVX2, torch 2.13), each measured by
# benchmarks/price_check.py --rates (best of three, CPU time):
# dense float32 matmul, a 1024^3 product
CPU_MATMUL_GFLOPS = 68.0
# the fraction of it the engine's batched products reach on the shipped shapes, the rest of a pass counted apart
# (benchmarks/price_check.py: runs dominated by their matmuls, tr_fig2's and tr_fig3's largest cells)
CPU_MATMUL_EFFICIENCY = {"three_step": 0.8, "adam": 0.8}
# Whole runs' FLOPs over their time as a fraction of the matmul rate, everything but the matmuls included: what
# benchmarks/paper_cost.py prices a preset's FLOPs at (benchmarks/engine.py, one thread of a 2-core Xeon whose
# matmul reached 213 GFLOP/s, CPU time, medians of three runs on the largest quick cells: tr_fig2 64%, tr_fig5 65%).
CPU_EFFICIENCY = {"three_step": 0.64, "adam": 0.65}
LOGIT_SECONDS = 4.2e-9    # a logit through log_softmax, gather and argmax ([items, 1024]; 4.0-5.6 ns from 8192 to 64)
ELEMENT_SECONDS = 0.5e-9  # an element through an out-of-place elementwise operation (add, relu; exp takes 1.4 ns)
DRAW_SECONDS = 5.5e-9     # a random integer drawn (torch.randint into int16; randn 6.5 ns, randperm 26 ns an element)
CALL_SECONDS = 12e-6      # an operator call: a step of token retrieval's smallest Adam training over its 110 operators
GPU_FP32_TFLOPS = 67.0  # NVIDIA H200 SXM: dense float32 (non-tensor-core) peak, the datasheet figure
# Three steps: measured on one H200 (2026-12-04, torch 2.11): tr_fig2_attention_only's gpu preset at its 16 seeds,
# 2080 TFLOP of the FLOP model in 163 s of sweep, 0.19 of the rate above (12.8 TFLOP/s; at 8 seeds 1063 TFLOP in
# 94 s, 0.17: more models per batched call). Its largest cell alone reached 0.52 of the measured float32 matmul
# rate (benchmarks/gpu_check.py); the search's smaller cells and rounds bring the sweep down. Small models sit far
# below: tr_fig4_mlp_width_rank2's gpu preset reached 0.018 (132 TFLOP in 112 s; per-step overhead, not FLOPs), which
# the calls price. Adam: not measured on a GPU, assumed.
GPU_EFFICIENCY = {"three_step": 0.19, "adam": 0.20}
# A task without a work model (a plug-in): a fixed time per optimizer step and per model for what its FLOP model
# leaves out (kernel launches, softmax, gathers, building the problem); per model for every task.
STEP_SECONDS = 5e-4
MODEL_SECONDS = 0.05
DEFAULT_MAX_COST = 2 * 3600.0
MAX_COST_ENV = "RECALLKIT_MAX_COST"
MAX_COST_HELP = ("refuse work estimated above this much compute, e.g. 2h, 30m, 90s or inf (default 2h, or "
                 "$RECALLKIT_MAX_COST); the estimate counts each task's matmuls, softmax logits, elementwise "
                 "work, random draws and operator calls at measured rates")
NOTE_SECONDS = 10.0  # a training estimated above this says so before it starts, so a long run is never silent
# a search round above this says so too (a curve search draws no progress bar); higher, so that the main job's
# rounds, a few seconds each, stay quiet
ROUND_NOTE_SECONDS = 60.0

# what a task's work model counts (``task_config.work(trainer_config)`` -> {phase: {kind: count}})
PHASES = ("data", "train", "evaluate")
WORK_KINDS = ("flops", "logits", "elements", "draws", "calls")


@dataclass(frozen=True)
class Rates:
    """The per-operation rates of one kind of device: FLOP/s of dense float32 matmul (``matmul``) and the engine's
    efficiency on it per trainer family (``three_step``, ``adam``); seconds per logit, element, draw and operator
    call; seconds per model, and per optimizer step of a task without a work model (``step``). ``data_on_cpu``:
    the data phase is drawn on the CPU whatever the device (priced at :data:`CPU_RATES`)."""

    matmul: float = CPU_MATMUL_GFLOPS * 1e9
    three_step: float = CPU_MATMUL_EFFICIENCY["three_step"]
    adam: float = CPU_MATMUL_EFFICIENCY["adam"]
    logit: float = LOGIT_SECONDS
    element: float = ELEMENT_SECONDS
    draw: float = DRAW_SECONDS
    call: float = CALL_SECONDS
    model: float = MODEL_SECONDS
    step: float = STEP_SECONDS
    data_on_cpu: bool = False

    def seconds(self, kind: str, count: float, trainer_config=None) -> float:
        """What ``count`` operations of ``kind`` take."""
        if kind == "flops":
            return count / self.flop_rate(trainer_config)
        return count * {"logits": self.logit, "elements": self.element, "draws": self.draw, "calls": self.call}[kind]

    def flop_rate(self, trainer_config=None) -> float:
        """FLOPs per second the engine reaches with this trainer's matmuls."""
        return self.matmul * (self.three_step if isinstance(trainer_config, ThreeStepConfig) else self.adam)


CPU_RATES = Rates()
# A GPU: the datasheet's matmul rate at the measured efficiency; a logit and an element as memory-bound kernels
# (about 4.8 TB/s: a log-softmax pass over a float32 logit and an elementwise op), a call as a kernel launch and
# its Python (assumed, not measured); the data drawn on the CPU.
GPU_RATES = Rates(matmul=GPU_FP32_TFLOPS * 1e12, three_step=GPU_EFFICIENCY["three_step"], adam=GPU_EFFICIENCY["adam"],
                  logit=1e-11, element=2e-12, draw=DRAW_SECONDS, call=1e-5, data_on_cpu=True)

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd])\s*$", re.IGNORECASE)


class CostTooHigh(InputError):
    """Work estimated above the limit: the user accepts it with --max-cost (an InputError: exit 2, one line)."""


def parse_duration(text: str, where: str = "--max-cost") -> float:
    """``"2h"`` -> 7200.0; units s, m, h, d; ``"inf"`` (no limit). One-line InputError otherwise."""
    raw = str(text).strip()
    if raw.lower() in ("inf", "infinity", "none"):
        return math.inf
    match = _DURATION.match(raw)
    if not match or float(match.group(1)) <= 0:
        raise InputError(f"{where}: expected a positive duration such as 2h, 30m, 90s or inf, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2).lower()]


def format_duration(seconds: float) -> str:
    """The shortest exact spelling of a limit: 7200 -> "2h", 1800 -> "30m", 5400 -> "1.5h", inf -> "inf"."""
    if math.isinf(seconds):
        return "inf"
    for unit in ("d", "h", "m"):
        count = seconds / _UNITS[unit]
        if count >= 1 and float(f"{count:g}") * _UNITS[unit] == seconds:
            return f"{count:g}{unit}"
    return f"{seconds:g}s"


def _suggestion(seconds: float) -> str:
    """A round limit at least ``seconds``: what the refusal suggests passing."""
    for unit, ceiling in (("s", 120.0), ("m", 7200.0), ("h", math.inf)):
        if seconds < ceiling:
            return f"{max(1, math.ceil(seconds / _UNITS[unit] * (1 + 1e-9)))}{unit}"
    raise AssertionError("unreachable")


def max_cost_allowed(max_cost: str | float | None = None) -> float:
    """The limit in seconds: ``max_cost`` (the ``--max-cost`` flag: text or seconds) when given, else
    ``$RECALLKIT_MAX_COST``, else :data:`DEFAULT_MAX_COST`."""
    if isinstance(max_cost, (int, float)) and not isinstance(max_cost, bool):
        if not max_cost > 0:
            raise InputError(f"--max-cost: expected a positive duration, got {max_cost!r}")
        return float(max_cost)
    if max_cost is not None:
        return parse_duration(max_cost)
    raw = os.environ.get(MAX_COST_ENV, "")
    if not raw:
        return DEFAULT_MAX_COST
    return parse_duration(raw, f"{MAX_COST_ENV} / --max-cost")


# ----------------------------------------------------------------------------------------- estimates
@dataclass(frozen=True)
class Estimate:
    """Work priced before it runs: how many runs, their FLOPs and the estimated seconds on ``device``
    ("CPU" or "GPU": the hours are that device's). ``unpriced``: the trainers of runs that no cost model counts
    (neither the trainer's nor the task's), priced at the per-run overhead only."""

    runs: int = 0
    flops: float = 0.0
    seconds: float = 0.0
    device: str = "CPU"
    unpriced: tuple[str, ...] = ()

    def __add__(self, other: "Estimate") -> "Estimate":
        return Estimate(self.runs + other.runs, self.flops + other.flops, self.seconds + other.seconds,
                        other.device if other.runs else self.device, tuple(sorted({*self.unpriced, *other.unpriced})))

    def time_text(self) -> str:
        """``"3.2 CPU-hours"``, ``"12.5 CPU-minutes"`` or ``"40 CPU-seconds"``."""
        if self.seconds >= 7200:
            return f"{self.seconds / 3600:,.1f} {self.device}-hours"
        if self.seconds >= 120:
            return f"{self.seconds / 60:,.1f} {self.device}-minutes"
        return f"{self.seconds:,.1f} {self.device}-seconds"

    def describe(self) -> str:
        """``"3.2 CPU-hours (4.1e15 FLOP) for 40 runs"``."""
        mantissa, _, exponent = f"{self.flops:.1e}".partition("e")
        flops = f"{self.flops:.0f}" if self.flops < 1000 else f"{mantissa}e{int(exponent)}"
        text = f"{self.time_text()} ({flops} FLOP) for {self.runs:,} run{'' if self.runs == 1 else 's'}"
        return f"{text}; {no_cost_model(self.unpriced)}" if self.unpriced else text


def no_cost_model(trainers: Sequence[str]) -> str:
    """What an estimate says of runs that no cost model counts."""
    many = len(trainers) > 1
    return (f"trainer{'s' if many else ''} {', '.join(trainers)} ha{'ve' if many else 's'} no cost model (each run is "
            f"priced at the per-run overhead only)")


def _device_kind(device) -> str:
    """"GPU" for a CUDA device (a torch device or its name), "CPU" for anything else (None included)."""
    if device in ("CPU", "GPU"):
        return device
    kind = getattr(device, "type", None) or str(device or "cpu")
    return "GPU" if kind.startswith("cuda") else "CPU"


def _rates_of(device_kind: str, rates: Rates | None = None) -> Rates:
    return rates if rates is not None else GPU_RATES if device_kind == "GPU" else CPU_RATES


def rate_flops(trainer_config, device_kind: str = "CPU", rates: Rates | None = None) -> float:
    """FLOPs per second the engine reaches with this trainer on this kind of device."""
    return _rates_of(device_kind, rates).flop_rate(trainer_config)


def _optimizer_steps(task_config, trainer_config) -> int:
    """Optimizer steps of one training (three steps, or the fit's, or Adam's: steps, or epochs x batches)."""
    if isinstance(trainer_config, TwoStepThenFitConfig):
        return 2 + trainer_config.fit_steps
    if isinstance(trainer_config, ThreeStepConfig):
        return 3
    steps, epochs = getattr(trainer_config, "steps", None), getattr(trainer_config, "epochs", None)
    if steps:
        return int(steps)
    if epochs and hasattr(trainer_config, "resolved_batch_size"):
        n_train = task_config.n_train
        batch = trainer_config.resolved_batch_size(task_config.sizes(), n_train)
        return int(epochs) * max(1, math.ceil(n_train / max(1, batch)))
    return 1


def _checked_work(work, where: str) -> dict[str, dict[str, float]]:
    """A task's work model as {phase: {kind: count}}, every phase and kind present (0 where it counts none)."""
    if not isinstance(work, Mapping) or set(work) - set(PHASES):
        raise TypeError(f"{where}: a work model maps {', '.join(PHASES)} to counts, got {work!r}")
    out = {}
    for phase in PHASES:
        counts = work.get(phase) or {}
        unknown = set(counts) - set(WORK_KINDS)
        if unknown:
            raise TypeError(f"{where}: unknown kind(s) {', '.join(sorted(unknown))} in phase {phase}")
        out[phase] = {kind: float(counts.get(kind, 0.0)) for kind in WORK_KINDS}
    return out


def task_work(trainer: str, task_config, trainer_config) -> dict[str, dict[str, float]] | None:
    """What one model's run does, by phase and kind (:data:`PHASES`, :data:`WORK_KINDS`): its task's work model
    (``task_config.work(trainer_config)``); None where the task has none, or where the run's trainer has a cost
    model of its own (``Trainer.cost``: the task cannot count a trainer it does not know), or where the work model
    fails for this trainer (AttributeError, TypeError: a plug-in's, written for other trainers), as a FLOP model
    that fails does (``empirics.config.model_flops``)."""
    counter = getattr(task_config, "work", None)
    if counter is None or trainer_spec(trainer).cost is not None:
        return None
    try:
        return _checked_work(counter(trainer_config), f"{type(task_config).__name__}.work")
    except (AttributeError, TypeError):
        return None


def price_work(work: Mapping[str, Mapping[str, float]], trainer_config, device_kind: str = "CPU",
               rates: Rates | None = None) -> dict[str, float]:
    """Seconds of each phase of ``work`` ({phase: {kind: count}}) and of the per-model overhead (``"model"``) on this
    kind of device (``rates``: default :data:`CPU_RATES` / :data:`GPU_RATES`)."""
    chosen = _rates_of(device_kind, rates)
    out = {}
    for phase in PHASES:
        at = CPU_RATES if phase == "data" and chosen.data_on_cpu else chosen
        out[phase] = sum(at.seconds(kind, count, trainer_config) for kind, count in work.get(phase, {}).items())
    out["model"] = chosen.model
    return out


@functools.lru_cache(maxsize=4096)
def _model_cost(trainer: str, task_config, trainer_config, device_kind: str, rates: Rates | None = None
                ) -> tuple[float, float, bool, tuple[tuple[str, float], ...]]:
    """(FLOPs, seconds, whether a cost model counted the FLOPs, seconds per phase) of one model; seeds share it
    (task and trainer configs are frozen, hashable)."""
    work = task_work(trainer, task_config, trainer_config)
    if work is not None:
        parts = price_work(work, trainer_config, device_kind, rates)
        flops = sum(work[phase]["flops"] for phase in PHASES)
        return flops, sum(parts.values()), True, tuple(parts.items())
    flops = model_flops(trainer, task_config, trainer_config)  # None: nothing counts them
    chosen = _rates_of(device_kind, rates)
    steps = _optimizer_steps(task_config, trainer_config)
    parts = {"train": (flops or 0.0) / chosen.flop_rate(trainer_config) + steps * chosen.step, "model": chosen.model}
    return flops or 0.0, sum(parts.values()), flops is not None, tuple(parts.items())


def _cost_of(config, device_kind: str, rates: Rates | None = None):
    parsed = parse_config(config)
    try:
        return _model_cost(parsed.trainer, parsed.task_config, parsed.trainer_config, device_kind, rates)
    except TypeError:  # an unhashable plug-in config: priced without the cache
        return _model_cost.__wrapped__(parsed.trainer, parsed.task_config, parsed.trainer_config, device_kind, rates)


def price(config, device=None, rates: Rates | None = None) -> dict[str, float]:
    """One run's price in seconds by part: ``data``, ``train``, ``evaluate`` (the task's work model) and ``model``
    (the per-model overhead); a task without a work model gives ``train`` and ``model`` only. ``rates``: default
    the device kind's (:data:`CPU_RATES`, :data:`GPU_RATES`)."""
    return dict(_cost_of(config, _device_kind(device), rates)[3])


def _priced(config, device_kind: str, runs: int = 1) -> Estimate:
    """``runs`` runs of ``config``'s cost (seeds do not change it)."""
    flops, seconds, counted, _ = _cost_of(config, device_kind)
    unpriced = () if counted else (parse_config(config).trainer,)
    return Estimate(runs, flops * runs, seconds * runs, device_kind, unpriced)


def estimate(configs: Iterable, device=None) -> Estimate:
    """The price of training ``configs`` (dicts, ParsedConfigs or RunConfigs) on ``device`` (a torch device,
    "cpu", "cuda:N" or None for the CPU)."""
    kind = _device_kind(device)
    total = Estimate(device=kind)
    for config in configs:
        total = total + _priced(config, kind)
    return total


def plan_estimate(planned, device=None) -> Estimate | None:
    """The price of a grid experiment's whole product (one config per line, base value and size, times the
    seeds: a seed does not change the cost), without building every config; None for a search, whose size
    is not known before it runs (it is priced round by round)."""
    exp = getattr(planned, "experiment", None)
    if exp is None or exp.kind != "grid":
        return None
    kind = _device_kind(device)
    total = Estimate(device=kind)
    for line_index, line in enumerate(exp.lines):
        for base_value in exp.values_of(line_index):
            for size in exp.sizes:
                total = total + _priced(exp.build_config(line, base_value, size, exp.seeds[0]), kind, len(exp.seeds))
    return total


def refuse_above(work: Estimate, limit: float, what: str = "", before: Estimate | None = None) -> None:
    """One-line :class:`CostTooHigh` when ``work`` (plus ``before``, already spent under the same limit) is
    estimated above ``limit`` seconds."""
    total = work if before is None or not before.runs else before + work
    if total.seconds <= limit:
        return
    place = f"{what}: " if what else ""
    spent = f" ({before.runs:,} of them trained already in this command)" if before is not None and before.runs else ""
    raise CostTooHigh(f"{place}estimated {total.describe()}{spent}, above the {format_duration(limit)} limit; "
                      f"pass --max-cost {_suggestion(total.seconds)} to run it (or set {MAX_COST_ENV})")


# ------------------------------------------------------------------------------------------- budgets
class Budget:
    """The estimated work one command may do: each priced piece is charged before it runs."""

    def __init__(self, limit: float | None = None):
        self.limit = max_cost_allowed() if limit is None else float(limit)
        self.spent = Estimate()

    def charge(self, work: Estimate, what: str = "") -> None:
        """Refuse ``work`` (one line, :class:`CostTooHigh`) if it takes the total above the limit, else add it."""
        refuse_above(work, self.limit, what, before=self.spent)
        self.spent = self.spent + work


_ACTIVE: ContextVar[Budget | None] = ContextVar("recallkit_cost_budget", default=None)


def active_budget() -> Budget | None:
    """The budget a surrounding :func:`budget` block opened, if any."""
    return _ACTIVE.get()


@contextlib.contextmanager
def budget(limit: str | float | None = None) -> Iterator[Budget]:
    """One budget for the block (``limit``: a duration text, seconds, or None for the default): every priced
    round in it is charged to it, and processes started in it (local workers, the main job's step worker)
    inherit its limit through ``$RECALLKIT_MAX_COST``."""
    opened = Budget(max_cost_allowed(limit))
    token = _ACTIVE.set(opened)
    before = os.environ.get(MAX_COST_ENV)
    os.environ[MAX_COST_ENV] = "inf" if math.isinf(opened.limit) else f"{opened.limit!r}s"
    try:
        yield opened
    finally:
        _ACTIVE.reset(token)
        if before is None:
            os.environ.pop(MAX_COST_ENV, None)
        else:
            os.environ[MAX_COST_ENV] = before


def charge(work: Estimate, what: str = "") -> None:
    """Charge ``work`` to the open budget, or refuse it alone against the default limit when none is open."""
    (_ACTIVE.get() or Budget()).charge(work, what)


class PricedExecutor:
    """An executor whose every round is priced before it trains: charged to the open :func:`budget`, else to
    this executor's own (the default limit over all its rounds). Everything else is the wrapped executor's."""

    def __init__(self, inner, device=None):
        self.inner = inner
        self.device = device
        self.own = Budget()
        self._kind: str | None = None
        self._unpriced_told: set[str] = set()

    def run(self, configs: Sequence[dict]) -> list[dict]:
        configs = list(configs)
        if self._kind is None:  # where the engine will train: "auto" is the GPU when there is one
            self._kind = _device_kind(resolve_device(self.device))
        work = estimate(configs, self._kind)
        (_ACTIVE.get() or self.own).charge(work, "this search round")
        if work.seconds >= ROUND_NOTE_SECONDS:
            print(f"search round: estimated {work.describe()}", file=sys.stderr, flush=True)
        untold = [name for name in work.unpriced if name not in self._unpriced_told]
        if untold:  # once per search: its limit cannot see what these runs cost
            self._unpriced_told.update(untold)
            print(f"search round: {no_cost_model(untold)}", file=sys.stderr, flush=True)
        return self.inner.run(configs)

    def __getattr__(self, name: str):
        if name == "inner":  # not set yet (a copy being built): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)


# -------------------------------------------------------------------------------------------- memory
def _read_int(path: str) -> int | None:
    try:
        with open(path) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> int | None:
    """Bytes this process's cgroup may still take (v2: memory.max - memory.current; v1: limit - usage)."""
    try:
        with open("/proc/self/cgroup") as handle:
            entries = [line.rstrip("\n").split(":", 2) for line in handle]
    except OSError:
        return None
    for hierarchy, controllers, path in (e for e in entries if len(e) == 3):
        if hierarchy == "0" and controllers == "":
            root, files = "/sys/fs/cgroup", ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            root, files = "/sys/fs/cgroup/memory", ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        # a container usually sees its own cgroup mounted as the root, not under the path the host names
        for folder in (root + path.rstrip("/"), root):
            limit, used = (_read_int(f"{folder}/{name}") for name in files)
            if limit is not None and used is not None:
                if limit < 1 << 60:  # v1 writes "no limit" as about 2**63, v2 as "max" (not a number)
                    return max(0, limit - used)
                break
    return None


def _status_bytes(field: str) -> int | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def free_memory(device=None) -> tuple[int, str]:
    """(bytes a new model may take now, what bounds it): CUDA's free memory on a CUDA device; on the CPU the
    kernel's MemAvailable, or less where the cgroup's memory limit or the process's address-space / data
    limit leaves less."""
    free = memory_free(device)
    if _device_kind(device) == "GPU":
        return free, "free on this GPU"
    bounds = [(free, "available on this machine")]
    room = _cgroup_room()
    if room is not None:
        bounds.append((room, "left under this process's cgroup memory limit"))
    for limit_name, field, shown in ((resource.RLIMIT_AS, "VmSize", "ulimit -v"),
                                     (resource.RLIMIT_DATA, "VmData", "ulimit -d")):
        soft = resource.getrlimit(limit_name)[0]
        used = _status_bytes(field)
        if soft != resource.RLIM_INFINITY and used is not None:
            bounds.append((max(0, soft - used), f"left under this process's memory limit ({shown})"))
    return min(bounds, key=lambda bound: bound[0])


def check_free_memory(configs: Iterable, device=None, where: str = "") -> None:
    """The memory check of a run now: refuse, in one line (:class:`ModelTooLarge`, through
    :func:`~recallkit.empirics.config.check_memory`) and before anything is allocated, a config whose one
    model needs more memory (its task's ``bytes_per_model``) than the device has at all (the message says so:
    freeing memory would not help) or than is free now (:func:`free_memory`: the message names what bounds it)."""
    bounds = None
    seen = set()
    for config in configs:
        parsed = parse_config(config)
        try:
            key = (parsed.task_config, parsed.trainer_config)
            if key in seen:
                continue
            seen.add(key)
        except TypeError:  # unhashable plug-in config: checked each time
            pass
        if bounds is None:  # only when there is a config to check: free_memory reads /proc and the cgroup
            bounds = [(memory_available(device), "of memory of this device"), free_memory(device)]
        for available, bound in bounds:
            check_memory(parsed, where, available=available, bound=bound)

"""The batched engine: train many run configs, batching those that share a shape.

``run_configs(configs, device=None, progress=True) -> list[dict]`` (docs/ARCHITECTURE.md) groups
configs by :func:`empirics.config.shape_key` (everything but seed, lr, eta, gamma, early_stop,
weight_decay), builds one problem per group with a leading model axis, trains it with one trainer
call and returns one metrics dict per config, in the input order. A group too large for memory is
split into chunks (:func:`chunk_budget_bytes`: half the device's free memory, divided by the task's
``bytes_per_model``); since each model's data, initial weights and minibatch order come from its own
seeded streams and its gradient is its own, the split changes no result beyond float rounding (on one
CPU thread, none at all).

Metrics: ``accuracy`` (on fresh samples where the task has a population, else on all items),
``train_accuracy``, ``loss`` (final mean training cross-entropy), ``param_count`` (the paper's
count), ``trainable_params``, ``steps_run``, ``wall_time_s`` (the chunk's wall time divided by its
number of models), ``batch_wall_time_s``, ``batched_models``, ``device``, ``threads``,
``torch_version``, ``config_hash``; plus whatever the task's ``evaluate`` adds (e.g. ``attention_mass``, mean attention on the
informative position over the fresh samples, with the final W_KQ) and ``eval_loss``.
"""
from __future__ import annotations

import sys
import time

import torch
from tqdm import tqdm

from recallkit.empirics.config import (RunConfig, config_hash, memory_free,
                                       parse_config, shape_key, trainer_spec)
from recallkit.empirics.cost import check_free_memory
from recallkit.empirics.device import describe, resolve_device
from recallkit.empirics.numerics import keep_freed_heap, math_path
from recallkit.empirics.tasks import build_problem
from recallkit.empirics.trainers import denormals_flushed

__all__ = ["chunk_budget_bytes", "CHUNK_MEMORY_FRACTION", "CPU_BATCH_PASS_BYTES", "keep_freed_heap",
           "models_per_chunk", "run_config", "run_configs", "split_evenly"]


CHUNK_MEMORY_FRACTION = 0.5  # of the device's free memory, for the models of one chunk together
# On the CPU, the models of one chunk together keep at most this many bytes in one training pass (their
# task's ``pass_bytes``): batching seeds whose pass tensors leave the cache is slower than training them one
# by one. Measured on a 2-core Xeon with 4 MiB of L2 per core, one thread, tr_fig2/tr_fig5 quick cells (6 or
# 3 seeds): per-model pass 16 MiB: one at a time 10-21% faster; 9.5-9.7 MiB: 0-5% faster; 2.9 MiB: batched
# 12% faster. A model's numbers do not depend on its batch, so this changes only the time.
CPU_BATCH_PASS_BYTES = 16 << 20


def chunk_budget_bytes(device: torch.device) -> int:
    """Bytes the models of one chunk may use together: half of what the device has free when the call
    starts (CUDA: free memory; CPU: MemAvailable), so a GPU with 140 GB trains far more models at once
    than a laptop, and a machine shared with other jobs takes what is left."""
    return int(CHUNK_MEMORY_FRACTION * memory_free(device))


def _bytes_per_model(cfg: RunConfig) -> int:
    """One model's peak memory, from its task (each task config counts its own buffers)."""
    return cfg.task_config.bytes_per_model(cfg.trainer_config)


def models_per_chunk(cfg: RunConfig, device: torch.device, budget: int) -> int:
    """How many models of ``cfg``'s shape train together: as many as the memory budget holds, and on the CPU
    no more than keep CPU_BATCH_PASS_BYTES in one pass, where the task counts its pass (``pass_bytes``)."""
    most = max(1, budget // max(1, _bytes_per_model(cfg)))
    pass_bytes = getattr(cfg.task_config, "pass_bytes", None)
    if device.type == "cpu" and pass_bytes is not None:
        most = min(most, max(1, CPU_BATCH_PASS_BYTES // max(1, pass_bytes(cfg.trainer_config))))
    return most


def split_evenly(indices: list[int], most: int) -> list[list[int]]:
    """``indices`` in as few consecutive parts of at most ``most`` as possible, of sizes differing by at most one
    (seven models at most three a chunk: 3, 2, 2, not 3, 3, 1)."""
    parts = -(-len(indices) // most)
    if parts == 0:
        return []
    size, extra = divmod(len(indices), parts)
    bounds = [0]
    for k in range(parts):
        bounds.append(bounds[-1] + size + (k < extra))
    return [indices[a:b] for a, b in zip(bounds, bounds[1:])]


def _train_chunk(cfgs: list[RunConfig], device: torch.device) -> list[dict]:
    start = time.perf_counter()
    problem = build_problem(cfgs, device)
    first = cfgs[0]
    # the configs of a chunk share a shape, hence a trainer (shape_key keeps its name)
    params, extra = trainer_spec(first.trainer).train_function()(problem, cfgs, first.task_config.sizes())
    with denormals_flushed(device):  # as the trainers run: subnormal attention weights cost 25x (trainers)
        metrics = problem.evaluate(params)
    metrics.update(extra)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elapsed = time.perf_counter() - start
    shared = {
        "device": describe(device),
        "threads": torch.get_num_threads(),
        "math_path": math_path(str(device) if device.type == "cuda" else None),
        "torch_version": torch.__version__,
        "batch_wall_time_s": elapsed,
        "batched_models": len(cfgs),
        "wall_time_s": elapsed / len(cfgs),
    }
    host = {k: v.detach().cpu().tolist() for k, v in metrics.items()}
    results = []
    for k, cfg in enumerate(cfgs):
        row = {name: float(values[k]) for name, values in host.items()}
        row["steps_run"] = int(row.get("steps_run", 0))  # a closed-form trainer takes none and may not say so
        row.update(shared)
        row["param_count"] = cfg.task_config.param_count
        row["trainable_params"] = cfg.task_config.trainable_params
        row["config_hash"] = config_hash(cfg)
        results.append(row)
    return results


def run_configs(configs: list, device=None, progress: bool = True) -> list[dict]:
    """Train every config (dicts or RunConfigs); one metrics dict per config, in input order."""
    parsed = [parse_config(c, where=f"configs[{i}]") for i, c in enumerate(configs)]
    target = resolve_device(device)
    if target.type == "cpu":
        keep_freed_heap()
    check_free_memory(parsed, target)  # before anything is allocated, under any cgroup or ulimit: else the allocator's traceback
    groups: dict[str, list[int]] = {}
    for i, cfg in enumerate(parsed):
        groups.setdefault(shape_key(cfg), []).append(i)
    chunks = []
    budget = chunk_budget_bytes(target)
    for indices in groups.values():
        chunks += split_evenly(indices, models_per_chunk(parsed[indices[0]], target, budget))
    results: list[dict | None] = [None] * len(parsed)
    with tqdm(total=len(parsed), desc="training", unit="model", file=sys.stderr, disable=not progress) as bar:
        for indices in chunks:
            for i, row in zip(indices, _train_chunk([parsed[i] for i in indices], target)):
                results[i] = row
            bar.update(len(indices))
    return results


def run_config(config, device=None) -> dict:
    """Train one config alone (no batching with others); its metrics dict."""
    return run_configs([config], device=device, progress=False)[0]

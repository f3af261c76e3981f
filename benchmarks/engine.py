"""Benchmark: the batched engine against a per-model loop, and against the machine's matmul rate, on three cells.

Cells (all on the CPU, one torch thread):
- ``anchor``, the benchmark cell: the associative-memory anchor's linear memory (AdamW, weight decay 0),
  8 seeds x 4 learning rates = 32 models of one shape, a fixed number of full-batch steps and no early
  stop (so both ways do the same arithmetic). Its loop trains each model alone with torch.optim.AdamW
  on 2-D tensors, the way one would write it without a model axis, from the same seeded draws; the
  accuracies of both ways are compared.
- ``tr_fig2``: the largest quick cell of tr_fig2_attention_only (three-step GD): V = 512, the line
  N = V^1.5, L = V^0.5, d = 512 (the quick preset's search.max), its 6 seeds, built from the experiment file.
- ``tr_fig5``: the largest quick cell of tr_fig5_adam (Adam, 16 full-batch epochs): V = 512, the line
  N = V log V, L = V, d = 512, its 3 seeds.
For the token-retrieval cells the loop is the same engine one model at a time (``run_config``), so the
ratio is what batching the seeds buys; at this size the engine itself trains them one at a time on the
CPU (their passes leave the cache, see ``empirics.engine.CPU_BATCH_PASS_BYTES``), so it is about 1.

Time is CPU time of this process (``time.process_time``; one thread, so it is the compute time even when
other jobs share the cores), the median of ``--repeats`` runs. FLOPs are the task's own FLOP model
(``task_config.train_flops``: 2 per multiply-add of the matmul-like work the training and final
evaluation need; the anchor counts forward E W^T and W^T U^T, and backward the gradient of the output
and of W, not of the fixed embeddings). The matmul rate is a 1024^3 float32 matmul on one thread,
measured in CPU time before every timed run; the median of all of them is the peak each cell is
divided by.

Ceiling: torch.profiler records the operand shapes of every call one batched run makes, forward and
backward, to the kernels that do the work the FLOP models count: matmuls (bmm, baddbmm, mm, addmm, mv)
and embedding_bag's weighted sums. Those calls are then replayed alone on random contiguous operands of
the same shapes, timed like the runs. Their time is the least any cell can take with these kernels, so
the cell's FLOPs over it is the ceiling of its rate were all other work (softmax, gathers, the
optimiser, Python) free. The cross-entropy calls (the trainers' softmax cross-entropy, forward and
backward, and the evaluation's log_softmax and argmax) are replayed too, on logits of the recorded
shapes, for the ceiling with the passes over the logits that every training needs. (The anchor's
softmax is written into its gradient, not a separate call: ``benchmarks/anchor_step.py`` times it.)
The matmul line also gives the matmul work done, which differs from what the FLOP model counts (it
counts the bag sums; the dense backward of the bag sum is a matmul it does not count). The last line
holds every ratio and ceiling.

    python benchmarks/engine.py [--cells anchor,tr_fig2,tr_fig5] [--repeats 3] [--d 16] [--N 64] [--steps 512] [--seeds 8]

The price of a fixed math-library code path: ``--math-paths`` runs the benchmark again in one fresh process per
MKL setting (MKL reads it at its first call), interleaved over ``--repeats`` rounds: MKL's own choice by CPU
(``MKL_CBWR`` empty, what recallkit did before it pinned the path), recallkit's pin (AVX2 where the CPU has it)
and COMPATIBLE; and prints each cell's batched time as a ratio to MKL's own choice, measured in the same run.

    python benchmarks/engine.py --math-paths [--cells anchor,tr_fig2] [--repeats 3]
"""
from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import time

import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.engine import run_config, run_configs
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.tasks import cross_entropy_and_accuracy
from recallkit.systems.assoc_memory.task import AssocMemory

LEARNING_RATES = (0.01, 0.03, 0.1, 0.3)
QUICK_CELLS = {  # experiment, line label, base value, size
    "tr_fig2": ("tr_fig2_attention_only", "N=V**1.5, L=V**0.5", 512, 512),
    "tr_fig5": ("tr_fig5_adam", "N=V*log(V), L=V", 512, 512),
}


def plain_loop(configs: list[dict]) -> list[float]:
    """One model at a time, no model axis: the straightforward way."""
    accuracies = []
    for cfg in configs:
        problem = AssocMemory([parse_config(cfg)], torch.device("cpu"))  # the same seeded draws
        E, U = problem.E[0], problem.U[0]
        W = problem.params["W"][0].clone().requires_grad_(True)
        labels = torch.arange(cfg["N"])
        optimizer = torch.optim.AdamW([W], lr=cfg["lr"], weight_decay=0.0)
        for _ in range(cfg["steps"]):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(E @ W.T @ U.T, labels)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            _, accuracy = cross_entropy_and_accuracy((E @ W.T @ U.T)[None], labels[None])
        accuracies.append(accuracy.value().item())
    return accuracies


def engine_loop(configs: list[dict]) -> list[float]:
    """The engine, one model at a time."""
    return [run_config(cfg, device="cpu")["accuracy"] for cfg in configs]


def matmul_gflops(size: int = 1024, repeats: int = 10) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.process_time()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.process_time() - start) / 1e9


def quick_cell(name: str) -> list[dict]:
    experiment_name, label, base, size = QUICK_CELLS[name]
    experiment = load_experiment(experiment_name, "quick")
    line = next(line for line in experiment.lines if line.label == label)
    return [experiment.build_config(line, base, size, seed) for seed in experiment.seeds]


MATMUL_OPS = {  # the matmul kernels the engine reaches (einsum and matmul call these); operands -> call
    "aten::bmm": lambda a, b: torch.bmm(a, b),
    "aten::baddbmm": lambda c, a, b: torch.baddbmm(c, a, b),
    "aten::mm": lambda a, b: torch.mm(a, b),
    "aten::addmm": lambda c, a, b: torch.addmm(c, a, b),
    "aten::mv": lambda a, b: torch.mv(a, b),
}


BAG_OPS = ("aten::_embedding_bag_forward_only", "aten::_embedding_bag")  # the bag sums (weight, indices, offsets, ...)
# the cross-entropy over the logits: training's (forward and its backward) and the evaluation's
SOFTMAX_OPS = ("_SoftmaxCrossEntropy", "aten::_log_softmax", "aten::argmax")
KINDS = {"bag": "bag", **{name: "cross-entropy" for name in SOFTMAX_OPS}}


def counted_calls(run, configs) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """(op, operand shapes) of every call one batched run makes, forward and backward, to the kernels that do
    the work the FLOP models count: matmuls and embedding_bag's weighted sums. Recorded by torch.profiler (its
    timings are not used)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run(configs)
    calls = []
    for event in prof.events():
        if event.name in MATMUL_OPS:
            arity = 2 if event.name in ("aten::bmm", "aten::mm", "aten::mv") else 3
            calls.append((event.name, tuple(tuple(shape) for shape in event.input_shapes[:arity])))
        elif event.name in BAG_OPS:  # weight [rows, d], indices [bags * L], offsets [bags]
            calls.append(("bag", tuple(tuple(shape) for shape in event.input_shapes[:3])))
        elif event.name in SOFTMAX_OPS:  # the logits [M, n, C]
            calls.append((event.name, (tuple(event.input_shapes[0]),)))
    return calls


def matmul_flops(name: str, shapes) -> int:
    """2 per multiply-add: [.., m, k] x [.., k, n] (mv: [m, k] x [k])."""
    a, b = shapes[-2], shapes[-1]
    return 2 * math.prod(a) * (b[-1] if len(b) == len(a) else 1)


def _replay_operands(name: str, shapes) -> list[torch.Tensor]:
    if name in SOFTMAX_OPS:  # logits of a trained model's size, and labels
        (shape,) = shapes
        return [torch.randn(shape) * 30, torch.randint(shape[-1], shape[:-1])]
    if name != "bag":
        return [torch.randn(shape) for shape in shapes]
    (rows, width), (entries,), (bags,) = shapes
    indices = torch.randint(rows, (entries,))  # random rows, as random tokens are
    weights = torch.rand(entries)
    return [torch.randn(rows, width), indices, torch.arange(bags) * (entries // bags), weights]


def _replay_call(name: str, operands: list[torch.Tensor]) -> None:
    if name == "_SoftmaxCrossEntropy":
        logits = operands[0].requires_grad_(True)
        loss, _ = cross_entropy_and_accuracy(logits, operands[1])
        torch.autograd.grad(loss.sum(), [logits])
    elif name == "aten::_log_softmax":
        torch.log_softmax(operands[0], dim=-1).gather(-1, operands[1].unsqueeze(-1))
    elif name == "aten::argmax":
        operands[0].argmax(dim=-1)
    elif name == "bag":
        weight, indices, offsets, weights = operands
        torch.nn.functional.embedding_bag(indices, weight, offsets, mode="sum", per_sample_weights=weights)
    else:
        MATMUL_OPS[name](*operands)


def replay_seconds(calls) -> dict[str, float]:
    """CPU time of the recorded calls alone, per kind ("matmul", "bag", "cross-entropy"), in order, on contiguous
    random operands of the same shapes."""
    operands = {(name, shapes): _replay_operands(name, shapes) for name, shapes in calls}
    for name, shapes in calls[:5]:  # warm the kernels
        _replay_call(name, operands[name, shapes])
    seconds = {"matmul": 0.0, "bag": 0.0, "cross-entropy": 0.0}
    for name, shapes in calls:
        start = time.process_time()
        _replay_call(name, operands[name, shapes])
        seconds[KINDS.get(name, "matmul")] += time.process_time() - start
    return seconds


def timed(function, configs, peaks: list[float]) -> tuple[float, list[float]]:
    peaks.extend(sorted(matmul_gflops() for _ in range(3))[1:2])
    start = time.process_time()
    accuracies = function(configs)
    return time.process_time() - start, accuracies


def math_paths(cells: str, repeats: int) -> None:
    """Batched time per cell under each MKL setting, one fresh process per (round, setting)."""
    from recallkit.empirics.numerics import pinned_branch

    settings = {"MKL's own": "", f"pinned {pinned_branch()}": pinned_branch(), "COMPATIBLE": "COMPATIBLE"}
    times: dict[str, dict[str, list[float]]] = {label: {} for label in settings}
    for round_ in range(repeats):
        for label, value in settings.items():
            out = subprocess.run([sys.executable, __file__, "--cells", cells, "--batched-only"], capture_output=True,
                                 text=True, check=True, env=dict(os.environ, MKL_CBWR=value)).stdout
            for name, seconds in re.findall(r"^(\w+) batched ([0-9.]+) s$", out, re.M):
                times[label].setdefault(name, []).append(float(seconds))
            print(f"round {round_ + 1}/{repeats}, MKL_CBWR={value!r}: done", file=sys.stderr)
    base = times["MKL's own"]
    for label, cell_times in times.items():
        parts = [f"{name} {statistics.median(t):.2f} s ({statistics.median(t) / statistics.median(base[name]):.3f}x)"
                 for name, t in cell_times.items()]
        print(f"{label:>14}: " + "; ".join(parts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="anchor,tr_fig2,tr_fig5")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--math-paths", action="store_true", help="time each MKL code path against MKL's own choice")
    parser.add_argument("--batched-only", action="store_true", help="time one batched run per cell, nothing else")
    args = parser.parse_args()
    if args.math_paths:
        return math_paths(args.cells, args.repeats)
    torch.set_num_threads(args.threads)
    cells = {}
    for name in args.cells.split(","):
        if name == "anchor":
            configs = [dict(task="assoc_memory", model="linear", trainer="adamw", N=args.N, d=args.d, steps=args.steps,
                            lr=lr, seed=seed) for seed in range(args.seeds) for lr in LEARNING_RATES]
            cells[name] = (configs, plain_loop, f"assoc_memory linear adamw, N={args.N} d={args.d} steps={args.steps}, "
                                                f"{len(configs)} models ({args.seeds} seeds x {len(LEARNING_RATES)} lrs); "
                                                f"loop: torch.optim.AdamW per model")
        else:
            configs = quick_cell(name)
            c = configs[0]
            cells[name] = (configs, engine_loop, f"{QUICK_CELLS[name][0]} quick, {c['trainer']}, V={c['V']} N={c['N']} "
                                                 f"L={c['L']} d={c['d']}, {len(configs)} seeds; loop: the engine per model")
    if args.batched_only:
        for name, (configs, _, _) in cells.items():
            start = time.process_time()
            run_configs(configs, device="cpu", progress=False)
            print(f"{name} batched {time.process_time() - start:.3f} s")
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), cpu; CPU time, median of {args.repeats}")
    peaks: list[float] = []
    results = {}
    for name, (configs, loop, description) in cells.items():
        flops = sum(parse_config(c).task_config.train_flops(parse_config(c).trainer_config) for c in configs)
        batched_runs, loop_runs, replays = [], [], []
        batched = lambda cs: [r["accuracy"] for r in run_configs(cs, device="cpu", progress=False)]  # noqa: E731
        calls = counted_calls(batched, configs)
        for _ in range(args.repeats):
            replays.append(replay_seconds(calls))
            seconds, batched_accuracies = timed(batched, configs, peaks)
            batched_runs.append(seconds)
            seconds, loop_accuracies = timed(loop, configs, peaks)
            loop_runs.append(seconds)
        items = max(c["N"] for c in configs) if name == "anchor" else configs[0]["n_eval"]
        agree = sum(abs(a - b) <= 1.5 / items for a, b in zip(batched_accuracies, loop_accuracies))
        matmul_calls = [call for call in calls if call[0] in MATMUL_OPS]
        count = {kind: sum(KINDS.get(call[0]) == kind for call in calls) for kind in ("bag", "cross-entropy")}
        replayed = {kind: statistics.median(r[kind] for r in replays) for kind in replays[0]}
        matmuls = (replayed, sum(matmul_flops(*call) for call in matmul_calls), len(matmul_calls), count)
        results[name] = (statistics.median(batched_runs), statistics.median(loop_runs), flops, agree, len(configs), description,
                         matmuls)
    peak = statistics.median(peaks)
    print(f"dense 1024x1024 float32 matmul: {peak:.1f} GFLOP/s (median of {len(peaks)} measurements, "
          f"{min(peaks):.0f}..{max(peaks):.0f})")
    summary = []
    for name, (batched_s, loop_s, flops, agree, n, description, replayed) in results.items():
        seconds, matmul_work, matmul_count, count = replayed
        rate = flops / batched_s / 1e9
        print(f"[{name}] {description}")
        print(f"  accuracy agreement batched vs loop (within one item): {agree}/{n}; {flops / 1e9:.2f} GFLOP")
        print(f"  batched: {batched_s:.2f} s, {rate:.1f} GFLOP/s = {100 * rate / peak:.1f}% of the matmul rate")
        print(f"  loop:    {loop_s:.2f} s, {flops / loop_s / 1e9:.1f} GFLOP/s = {100 * flops / loop_s / 1e9 / peak:.1f}% "
              f"of the matmul rate; loop/batched {loop_s / batched_s:.1f}x")
        print(f"  replayed alone: {matmul_count} matmul calls ({matmul_work / 1e9:.2f} GFLOP done) {seconds['matmul']:.2f} s, "
              f"{100 * matmul_work / seconds['matmul'] / 1e9 / peak:.1f}% of the matmul rate; {count['bag']} bag sums "
              f"{seconds['bag']:.2f} s; {count['cross-entropy']} cross-entropy calls {seconds['cross-entropy']:.2f} s")
        counted_s = seconds["matmul"] + seconds["bag"]
        ceiling, floor = 100 * flops / counted_s / 1e9 / peak, 100 * flops / (counted_s + seconds["cross-entropy"]) / 1e9 / peak
        print(f"  ceiling, the counted work (matmuls, bag sums) alone: {ceiling:.1f}% of the matmul rate; with the "
              f"cross-entropy's passes too: {floor:.1f}%; everything else is "
              f"{100 * (1 - (counted_s + seconds['cross-entropy']) / batched_s):.0f}% of the batched time")
        summary.append(f"{name} {loop_s / batched_s:.1f}x loop, {100 * rate / peak:.0f}% of matmul "
                       f"(ceiling {ceiling:.0f}%, {floor:.0f}% with the cross-entropy)")
    print("; ".join(summary))


if __name__ == "__main__":
    main()

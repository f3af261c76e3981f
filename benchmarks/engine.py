"""Benchmark: the batched engine against a per-model loop, and against the machine's matmul rate, on three cells.

Cells (all on the CPU, one torch thread):
- ``anchor``, the benchmark cell: the associative-memory anchor's linear memory (AdamW, weight decay 0),
  8 seeds x 4 learning rates = 32 models of one shape, a fixed number of full-batch steps and no early
  stop (so both ways do the same arithmetic). Its loop trains each model alone with torch.optim.AdamW
  on 2-D tensors, the way one would write it without a model axis, from the same seeded draws; the
  accuracies of both ways are compared.
- ``tr_fig2``: the largest quick cell of tr_fig2_attention_only (three-step GD): V = 512, the line
  N = V^1.5, L = V^0.5, d = 512 (the quick preset's search.max), its 3 seeds, built from the experiment file.
- ``tr_fig5``: the largest quick cell of tr_fig5_adam (Adam, 16 full-batch epochs): V = 512, the line
  N = V log V, L = V, d = 512, its 3 seeds.
For the token-retrieval cells the loop is the same engine one model at a time (``run_config``), so the
ratio is what batching the seeds buys; they are large enough that the matmuls dominate either way.

Time is CPU time of this process (``time.process_time``; one thread, so it is the compute time even when
other jobs share the cores), the median of ``--repeats`` runs. FLOPs are the task's own FLOP model
(``task_config.train_flops``: 2 per multiply-add of the matmul-like work the training and final
evaluation need; the anchor counts forward E W^T and W^T U^T, and backward the gradient of the output
and of W, not of the fixed embeddings). The matmul rate is a 1024^3 float32 matmul on one thread,
measured in CPU time before every timed run; the median of all of them is the peak each cell is
divided by.

Matmuls alone: torch.profiler records the operand shapes of every matmul kernel (bmm, baddbmm, mm,
addmm, mv) one batched run calls, forward and backward; those calls are then replayed alone on random
contiguous operands of the same shapes, timed like the runs. Their time is the least any cell can take
with these kernels, so the cell's FLOPs over it is the ceiling of its rate were all other work (softmax,
gathers, the optimiser, Python) free; the line also gives the matmul work done, which may exceed what
the FLOP model counts (e.g. the dense backward of the bag sum). The last line holds every ratio.

    python benchmarks/engine.py [--cells anchor,tr_fig2,tr_fig5] [--repeats 3] [--d 16] [--N 64] [--steps 512] [--seeds 8]
"""
from __future__ import annotations

import argparse
import math
import statistics
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


def matmul_calls(run, configs) -> list[tuple[str, tuple[tuple[int, ...], ...]]]:
    """(op, operand shapes) of every matmul kernel one batched run calls, forward and backward, recorded
    by torch.profiler (its timings are not used)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        run(configs)
    calls = []
    for event in prof.events():
        if event.name in MATMUL_OPS:
            arity = 2 if event.name in ("aten::bmm", "aten::mm", "aten::mv") else 3
            calls.append((event.name, tuple(tuple(shape) for shape in event.input_shapes[:arity])))
    return calls


def matmul_flops(name: str, shapes) -> int:
    """2 per multiply-add: [.., m, k] x [.., k, n] (mv: [m, k] x [k])."""
    a, b = shapes[-2], shapes[-1]
    return 2 * math.prod(a) * (b[-1] if len(b) == len(a) else 1)


def replay_seconds(calls) -> float:
    """CPU time of the recorded matmul calls alone, in order, on contiguous random operands of the same shapes."""
    operands = {shapes: [torch.randn(shape) for shape in shapes] for _, shapes in calls}
    for name, shapes in calls[:5]:  # warm the kernels
        MATMUL_OPS[name](*operands[shapes])
    start = time.process_time()
    for name, shapes in calls:
        MATMUL_OPS[name](*operands[shapes])
    return time.process_time() - start


def timed(function, configs, peaks: list[float]) -> tuple[float, list[float]]:
    peaks.extend(sorted(matmul_gflops() for _ in range(3))[1:2])
    start = time.process_time()
    accuracies = function(configs)
    return time.process_time() - start, accuracies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="anchor,tr_fig2,tr_fig5")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
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
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), cpu; CPU time, median of {args.repeats}")
    peaks: list[float] = []
    results = {}
    for name, (configs, loop, description) in cells.items():
        flops = sum(parse_config(c).task_config.train_flops(parse_config(c).trainer_config) for c in configs)
        batched_runs, loop_runs, replays = [], [], []
        batched = lambda cs: [r["accuracy"] for r in run_configs(cs, device="cpu", progress=False)]  # noqa: E731
        calls = matmul_calls(batched, configs)
        for _ in range(args.repeats):
            replays.append(replay_seconds(calls))
            seconds, batched_accuracies = timed(batched, configs, peaks)
            batched_runs.append(seconds)
            seconds, loop_accuracies = timed(loop, configs, peaks)
            loop_runs.append(seconds)
        items = max(c["N"] for c in configs) if name == "anchor" else configs[0]["n_eval"]
        agree = sum(abs(a - b) <= 1.5 / items for a, b in zip(batched_accuracies, loop_accuracies))
        matmuls = (statistics.median(replays), sum(matmul_flops(*call) for call in calls), len(calls))
        results[name] = (statistics.median(batched_runs), statistics.median(loop_runs), flops, agree, len(configs), description,
                         matmuls)
    peak = statistics.median(peaks)
    print(f"dense 1024x1024 float32 matmul: {peak:.1f} GFLOP/s (median of {len(peaks)} measurements, "
          f"{min(peaks):.0f}..{max(peaks):.0f})")
    summary = []
    for name, (batched_s, loop_s, flops, agree, n, description, (matmul_s, matmul_work, calls)) in results.items():
        rate = flops / batched_s / 1e9
        print(f"[{name}] {description}")
        print(f"  accuracy agreement batched vs loop (within one item): {agree}/{n}; {flops / 1e9:.2f} GFLOP")
        print(f"  batched: {batched_s:.2f} s, {rate:.1f} GFLOP/s = {100 * rate / peak:.1f}% of the matmul rate")
        print(f"  loop:    {loop_s:.2f} s, {flops / loop_s / 1e9:.1f} GFLOP/s = {100 * flops / loop_s / 1e9 / peak:.1f}% "
              f"of the matmul rate; loop/batched {loop_s / batched_s:.1f}x")
        print(f"  matmuls alone: the run's {calls} matmul calls ({matmul_work / 1e9:.2f} GFLOP done) replayed with the "
              f"same shapes: {matmul_s:.2f} s, {100 * matmul_work / matmul_s / 1e9 / peak:.1f}% of the matmul rate; "
              f"{100 * (1 - matmul_s / batched_s):.0f}% of the batched time is other work")
        print(f"  ceiling were all other work free: {100 * flops / matmul_s / 1e9 / peak:.1f}% of the matmul rate")
        summary.append(f"{name} {loop_s / batched_s:.1f}x loop, {100 * rate / peak:.0f}% of matmul "
                       f"(matmuls alone {100 * flops / matmul_s / 1e9 / peak:.0f}%)")
    print("; ".join(summary))


if __name__ == "__main__":
    main()

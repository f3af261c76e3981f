"""Benchmark: the batched engine against a plain per-model Python loop, on one quick-preset cell.

The cell: the associative-memory anchor's linear memory (AdamW, weight decay 0), 8 seeds x 4 learning rates =
32 models of one shape, a fixed number of full-batch steps and no early stop (so both ways do the
same arithmetic). The plain loop trains each model alone with torch.optim.AdamW on 2-D tensors, the
way one would write it without a model axis; it uses the same seeded draws, and the two ways must
reach the same accuracies (checked below). It also prints the achieved GFLOP/s of both ways next to
a dense float32 matmul measured in the same run, and the ratio loop/batched as the LAST line.

    python benchmarks/engine.py [--threads 1] [--d 16] [--N 64] [--steps 512] [--seeds 8]
"""
from __future__ import annotations

import argparse
import time

import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.engine import run_configs
from recallkit.empirics.tasks import cross_entropy_and_accuracy
from recallkit.systems.assoc_memory.task import AssocMemory

LEARNING_RATES = (0.01, 0.03, 0.1, 0.3)


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
        accuracies.append(accuracy.item())
    return accuracies


def train_flops(N: int, d: int, steps: int, models: int) -> float:
    """Forward E W^T (N d d) and logits (N d N), backward about twice the forward; 2 flops a multiply-add."""
    return 3 * 2 * (N * d * d + N * N * d) * steps * models


def dense_matmul_gflops(size: int = 1024, repeats: int = 20) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--N", type=int, default=64)
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configs = [
        dict(task="assoc_memory", model="linear", trainer="adamw", N=args.N, d=args.d, steps=args.steps, lr=lr, seed=seed)
        for seed in range(args.seeds)
        for lr in LEARNING_RATES
    ]
    flops = train_flops(args.N, args.d, args.steps, len(configs))
    peak = dense_matmul_gflops()
    print(f"cell: assoc_memory linear adamw, N={args.N} d={args.d} steps={args.steps}, {len(configs)} models "
          f"({args.seeds} seeds x {len(LEARNING_RATES)} lrs); torch {torch.__version__}, {torch.get_num_threads()} thread(s), cpu")
    print(f"dense 1024x1024 float32 matmul: {peak:.1f} GFLOP/s")

    start = time.perf_counter()
    batched = run_configs(configs, device="cpu", progress=False)
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    looped = plain_loop(configs)
    loop_s = time.perf_counter() - start

    mismatches = sum(abs(row["accuracy"] - acc) > 1.5 / args.N for row, acc in zip(batched, looped))
    print(f"accuracy agreement (within one item): {len(configs) - mismatches}/{len(configs)} models; "
          f"mean accuracy batched {sum(r['accuracy'] for r in batched) / len(batched):.3f}, loop {sum(looped) / len(looped):.3f}")
    print(f"batched engine: {batched_s:.2f} s, {flops / batched_s / 1e9:.2f} GFLOP/s ({100 * flops / batched_s / 1e9 / peak:.1f}% of the matmul)")
    print(f"plain loop:     {loop_s:.2f} s, {flops / loop_s / 1e9:.2f} GFLOP/s ({100 * flops / loop_s / 1e9 / peak:.1f}% of the matmul)")
    print(f"batched {batched_s:.2f} s vs loop {loop_s:.2f} s: ratio {loop_s / batched_s:.1f}x")


if __name__ == "__main__":
    main()

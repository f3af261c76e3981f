"""Benchmark: where one step of the anchor benchmark cell goes, and the most its rate could be.

The cell of ``benchmarks/engine.py`` (the linear associative memory, N = 64, d = 16, 32 models, AdamW):
each step needs four matmuls per model ([d, d] x [d, N], [N, d] x [d, N], [d, N] x [N, N], [d, N] x [N, d]),
the softmax over each item's N logits (the column max, the shift, the floor that keeps exp off its slow
path, the exp, the column sum: five passes over the [32, 64, 64] logits, then the division by the sum,
folded into U^T P - U^T[labels] by one addcdiv over [32, 16, 64]) and the Adam update (eight elementwise
operations over [32, 16, 16]), as ``AssocMemory.gradients`` and ``trainers.adam`` run them. This times each group alone, 512 steps each, on random
operands of the cell's shapes, one thread, CPU time, median of --repeats, and prints the rate the cell
would reach if a step were only the matmuls, or only the matmuls and the softmax's passes, against the
1024^3 float32 matmul rate measured in the same run.

    python benchmarks/anchor_step.py [--repeats 5] [--steps 512]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from recallkit.empirics.trainers import _adam_step

M, N, D = 32, 64, 16
FLOPS_PER_STEP = 2 * M * (N * D * D + N * N * D + D * N * N + D * N * D)


def matmul_rate() -> float:
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    start = time.process_time()
    for _ in range(10):
        a @ b
    return 2 * 1024**3 * 10 / (time.process_time() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=512)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    gen = torch.Generator().manual_seed(0)
    U, E, W = (torch.randn(M, N, D, generator=gen), torch.randn(M, N, D, generator=gen), torch.randn(M, D, D, generator=gen))
    Ut, Et = U.transpose(1, 2).contiguous(), E.transpose(1, 2).contiguous()
    z0 = torch.bmm(U, torch.bmm(W, Et))
    z = z0.clone()
    signal = torch.randn(M, D, N, generator=gen)
    negative_targets, products = -Ut, torch.randn(M, D, N, generator=gen)  # -U^T[labels] and U^T exp(z - max)
    p = W.clone()
    g, m1, m2 = torch.randn(M, D, D, generator=gen), torch.zeros(M, D, D), torch.zeros(M, D, D)
    step_size = torch.full((M, 1, 1), 0.01)

    def matmuls():
        y = torch.bmm(W, Et)
        torch.bmm(U, y)
        torch.bmm(Ut, z0)
        torch.bmm(signal, E)

    def softmax_passes():
        column_max = z.amax(dim=1, keepdim=True)
        z.sub_(column_max).clamp_min_(-87.0).exp_()
        torch.addcdiv(negative_targets, products, z.sum(dim=1, keepdim=True))

    def adam_update():
        _adam_step(p, g, m1, m2, step_size, 0.5, None, in_place=True)

    def reset():
        z.copy_(z0)

    parts = {"matmuls": matmuls, "softmax passes": softmax_passes, "Adam update": adam_update,
             "(copy to reset the logits)": reset}
    seconds = {name: [] for name in parts}
    rates = []
    for _ in range(args.repeats):
        rates.append(matmul_rate())
        for name, part in parts.items():
            start = time.process_time()
            for _ in range(args.steps):
                if name == "softmax passes":
                    reset()
                part()
            seconds[name].append(time.process_time() - start)
    peak = statistics.median(rates)
    per_step = {name: statistics.median(s) / args.steps * 1e6 for name, s in seconds.items()}
    per_step["softmax passes"] -= per_step.pop("(copy to reset the logits)")
    print(f"torch {torch.__version__}, 1 thread, cpu; dense matmul {peak / 1e9:.1f} GFLOP/s; "
          f"{FLOPS_PER_STEP / 1e6:.2f} MFLOP per step; median of {args.repeats}")
    for name, us in per_step.items():
        print(f"  {name:16s} {us:6.1f} us per step")
    for label, us in (("matmuls alone", per_step["matmuls"]),
                      ("matmuls + softmax passes", per_step["matmuls"] + per_step["softmax passes"]),
                      ("matmuls + softmax passes + Adam", sum(per_step.values()))):
        print(f"  {label:32s} {us:6.1f} us per step = {100 * FLOPS_PER_STEP / (us * 1e-6) / peak:.1f}% of the matmul rate")


if __name__ == "__main__":
    main()

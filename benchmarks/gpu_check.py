"""GPU check: the engine on one CUDA device, measured against that device's own dense matmul rate.

    python benchmarks/gpu_check.py [--device cuda] [--cells tr_fig2,tr_fig4] [--repeats 3] [--smoke]

For each cell (the largest cell of a shipped experiment's ``gpu`` preset, all of its seeds):
- batched (one engine call for every seed) against alone (one call per seed): the wall time of each
  (``torch.cuda.synchronize`` around it, median of ``--repeats``), their ratio, and the batched FLOP rate
  as a fraction of a 4096^3 float32 matmul measured in the same run (TF32 off: torch's default);
- batched = alone: on CUDA, ``scatter_add``/``index_add``/``embedding_bag`` backward add in an order
  that is not fixed, so a model's floats may differ in the last bits between two runs or between
  batched and alone. What is reproducible is every result to float32 rounding: the check asserts the
  accuracies agree within 2 evaluation items and the losses within 1e-4 relative, and prints the
  largest differences seen. (On one CPU thread the two are bit-identical; tests/integration/
  test_batch_independence.py checks that.)
- memory: ``torch.cuda.max_memory_allocated`` of one model alone against the task's ``bytes_per_model``
  estimate (the one the engine chunks by and refuses too-large models with), ratio printed and checked
  within +-25%.

``--smoke`` shrinks every cell to a few seconds, to try the script on a CPU (``--device cpu``) before a
GPU is lent. benchmarks/gpu_check.sh runs this and a ``gpu`` preset sweep with a time limit.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.engine import run_configs
from recallkit.empirics.experiment import load_experiment

CELLS = {  # experiment whose gpu preset's largest cell is trained, and the line
    "tr_fig2": ("tr_fig2_attention_only", "N=V**1.5, L=V**0.5"),
    "tr_fig4": ("tr_fig4_mlp_width_rank2", None),
}
ACCURACY_ITEMS, LOSS_RTOL, MEMORY_TOLERANCE = 2, 1e-4, 0.25
CELL_SEEDS = 8


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_tflops(device: torch.device, size: int, repeats: int = 20) -> float:
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    a @ b
    sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e12


def largest_cell(name: str, smoke: bool) -> list[dict]:
    experiment_name, label = CELLS[name]
    experiment = load_experiment(experiment_name, "gpu")
    line = next(ln for ln in experiment.lines if label is None or ln.label == label)
    index = experiment.lines.index(line)
    base = max(experiment.values_of(index))
    search = line.search or experiment.search
    size = min(search.max, search.ceiling_size(experiment.base, base)) if search.method == "curve" else search.max
    if smoke:
        base, size = min(experiment.values_of(index)), 16
    # at most eight seeds: the check times one batched call against one call per model, and more models of the
    # largest cell only lengthen it (the preset's sweep, run after it, trains every seed)
    configs = [experiment.build_config(line, base, size, seed) for seed in experiment.seeds[:CELL_SEEDS]]
    if smoke:
        configs = [dict(c, n_eval=min(c.get("n_eval", 256), 256)) for c in configs[:2]]
    return configs


def timed(configs: list[dict], device: torch.device) -> tuple[float, list[dict]]:
    sync(device)
    start = time.perf_counter()
    out = run_configs(configs, device=device, progress=False)
    sync(device)
    return time.perf_counter() - start, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cells", default="tr_fig2,tr_fig4")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny cells: try the script on a CPU")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA device (use --device cpu --smoke to try the script)", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peak = statistics.median(matmul_tflops(device, 1024 if args.smoke else 4096) for _ in range(3))
    print(f"torch {torch.__version__}, device {device} ({name}); float32 matmul: {peak:.2f} TFLOP/s "
          f"(TF32 {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'})")
    failures, summary = [], []
    for cell in args.cells.split(","):
        configs = largest_cell(cell, args.smoke)
        c = configs[0]
        flops = sum(parse_config(cfg).task_config.train_flops(parse_config(cfg).trainer_config) for cfg in configs)
        timed(configs[:1], device)  # warm up kernels and the allocator
        batched_times, alone_times = [], []
        for _ in range(args.repeats):
            seconds, batched = timed(configs, device)
            batched_times.append(seconds)
            alone, seconds = [], 0.0
            for cfg in configs:
                s, out = timed([cfg], device)
                seconds += s
                alone += out
            alone_times.append(seconds)
        t_batched, t_alone = statistics.median(batched_times), statistics.median(alone_times)
        items = c.get("n_eval") or c.get("N")
        d_acc = max(abs(a["accuracy"] - b["accuracy"]) for a, b in zip(batched, alone))
        d_loss = max(abs(a["loss"] - b["loss"]) / max(abs(b["loss"]), 1e-12) for a, b in zip(batched, alone))
        same = d_acc <= ACCURACY_ITEMS / items + 1e-12 and d_loss <= LOSS_RTOL
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            base_memory = torch.cuda.memory_allocated(device)
            run_configs(configs[:1], device=device, progress=False)
            measured = torch.cuda.max_memory_allocated(device) - base_memory
        else:
            measured = None
        parsed = parse_config(configs[0])
        estimate = parsed.task_config.bytes_per_model(parsed.trainer_config)
        rate = flops / t_batched / 1e12
        print(f"[{cell}] {CELLS[cell][0]} gpu preset, {c['trainer']}, V={c.get('V')} N={c.get('N')} L={c.get('L')} "
              f"d={c.get('d')} m={c.get('m')}, {len(configs)} seeds, {flops / 1e12:.3f} TFLOP")
        print(f"  batched {t_batched:.2f} s ({rate:.2f} TFLOP/s = {100 * rate / peak:.1f}% of the matmul rate); "
              f"alone {t_alone:.2f} s; alone/batched {t_alone / t_batched:.1f}x")
        print(f"  batched vs alone: largest accuracy difference {d_acc:.5f} (allowed {ACCURACY_ITEMS}/{items}), "
              f"largest relative loss difference {d_loss:.2e} (allowed {LOSS_RTOL:g}): {'same' if same else 'DIFFERENT'}")
        if measured is not None:
            ratio = estimate / max(measured, 1)
            ok = abs(ratio - 1) <= MEMORY_TOLERANCE
            print(f"  memory of one model: estimate {estimate / 2**20:.0f} MiB, max_memory_allocated "
                  f"{measured / 2**20:.0f} MiB, ratio {ratio:.2f} ({'within' if ok else 'OUTSIDE'} +-25%)")
            failures += [] if ok else [f"{cell}: memory estimate ratio {ratio:.2f}"]
        failures += [] if same else [f"{cell}: batched != alone beyond float32 rounding"]
        summary.append(f"{cell} {t_alone / t_batched:.1f}x alone, {100 * rate / peak:.0f}% of matmul")
    print("; ".join(summary))
    if failures:
        print("gpu_check: " + "; ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

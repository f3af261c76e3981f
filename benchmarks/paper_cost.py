"""What a preset of a search experiment costs before it runs: trainings, FLOPs, memory per model, time.

    python benchmarks/paper_cost.py EXP [--preset paper] [--no-line-caps] [--cpu-gflops X] [--json]

EXP is a shipped experiment name or a path. The search itself is run (empirics.search, the real bracket,
widening and bisection) against a stand-in for training, so the count of trainings and the sizes they
probe are those of the real sweep *given where each line crosses each threshold*, which is not known
before training. The stand-in's answers, stated in the output per line:

- a line with its own cap on the searched size (``[[lines]] search = { max = ... }``, below the preset's
  ``search.max``) reaches no
  threshold below it: the cap is there because the line is known not to resolve (tr_fig2's L ~ V lines
  stay below accuracy 0.1 up to d = 2048), so its cells run to the cap, the most they can cost;
- every other line crosses the lowest threshold where the search's own first guess puts it
  (``search.start`` at the first base value, moved along the theory's predicted exponent: what the
  search probes first), and each further threshold 15% higher in size.

``--no-line-caps`` drops the lines' own caps (the lines then run to the experiment's search.max, as
before the caps existed), for comparison.

Each probed config is costed with its task's own models, the ones the engine uses
(``task_config.train_flops(trainer_config)`` and ``bytes_per_model``): FLOPs count the matmul-like
multiply-adds (x 2) of the training and final evaluation; time = FLOPs / (efficiency x peak), with the
peak of this CPU measured now (one thread, a 1024^3 float32 matmul, CPU time) and the efficiencies that
``benchmarks/engine.py`` measures on the largest quick cells (constants below), and for the GPU the H200's
dense float32 rate (no TF32: torch's default for float32 matmul) with the efficiency measured for three steps on
one H200 (tr_fig2's gpu preset, ``empirics.cost.GPU_EFFICIENCY``; Adam's is still assumed).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from recallkit.empirics.config import parse_config
# the rates every command prices its work with (empirics.cost): measured there, one place
from recallkit.empirics.cost import CPU_EFFICIENCY, GPU_EFFICIENCY
from recallkit.empirics.cost import GPU_FP32_TFLOPS as H200_FP32_TFLOPS
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.plan import Plan, plan_of
from recallkit.empirics.search import run_sweep
from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError

H200_MEMORY_GIB = 141
THRESHOLD_STEP = 1.15  # each further threshold is crossed 15% higher in size


def cpu_matmul_gflops(size: int = 1024, repeats: int = 10) -> float:
    """This CPU's dense float32 matmul rate on one thread, in CPU time (robust to other jobs waiting)."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    rates = []
    for _ in range(3):
        start = time.process_time()
        for _ in range(repeats):
            a @ b
        rates.append(2 * size**3 * repeats / max(time.process_time() - start, 1e-9) / 1e9)
    return sorted(rates)[1]


class Answers:
    """Where each (line, threshold) is crossed: d = answer(line, base) * THRESHOLD_STEP**k for the k-th threshold."""

    def __init__(self, planned: Plan, caps: bool):
        experiment = planned.experiment
        self.exp = experiment
        self.caps = caps
        self.assumption: dict[str, str] = {}
        self.anchor: dict[int, tuple[float, float, float, float]] = {}
        search = experiment.search
        b0 = experiment.base_values[0]
        for i, line in enumerate(experiment.lines):
            own = line.search
            if caps and own is not None and own.max < search.max:
                self.assumption[line.label] = (f"censored: reaches no threshold below its own cap "
                                               f"{experiment.size} = {own.max}")
                continue
            start = search.start.evaluate({experiment.base: b0}) if search.start is not None else math.sqrt(search.min * search.max)
            exponents = planned.search_exponents.get(line.label) or (0.5, 0.0)
            self.anchor[i] = (b0, start, *exponents)
            self.assumption[line.label] = (f"crosses {experiment.thresholds[0]} at {experiment.size} = {start:.0f} at "
                                           f"{experiment.base} = {b0} (search.start), then ~ {experiment.base}^{exponents[0]:.3g}"
                                           + (f" (log {experiment.base})^{exponents[1]:.3g}" if exponents[1] else ""))

    def crossing(self, line_index: int, base: int, threshold_index: int) -> float:
        if line_index not in self.anchor:
            return math.inf
        b0, start, x, y = self.anchor[line_index]
        size = start * (base / b0) ** x
        if y and base > 1 and b0 > 1:
            size *= (math.log(base) / math.log(b0)) ** y
        return size * THRESHOLD_STEP**threshold_index


def simulate(planned: Plan, answers: Answers) -> list[dict]:
    """The configs the sweep trains, found by running its search against the stated answers."""
    exp = planned.experiment
    lookup: dict[str, int] = {}

    def line_of(config: dict) -> int:
        key = json.dumps(config, sort_keys=True)
        if key not in lookup:
            for i, line in enumerate(exp.lines):
                try:
                    built = exp.build_config(line, config[exp.base], config[exp.size], config["seed"])
                except InputError:  # another line's size rule (m = d^3) need not allow this config's size
                    continue
                if built == config:
                    lookup[key] = i
                    break
        return lookup[key]

    trained: list[dict] = []

    def runner(configs, device=None, progress=False):
        out = []
        for config in configs:
            trained.append(config)
            li = line_of(config)
            reached = [t for k, t in enumerate(exp.thresholds)
                       if config[exp.size] >= answers.crossing(li, config[exp.base], k)]
            value = max(reached) if reached else 0.0
            if exp.kind == "max_capacity":  # capacity: a smaller N is easier
                value = max((t for k, t in enumerate(exp.thresholds)
                             if config[exp.size] <= answers.crossing(li, config[exp.base], k)), default=0.0)
            parsed = parse_config(config)
            out.append({exp.metric: value, "train_accuracy": value, "wall_time_s": 0.0,
                        "param_count": parsed.task_config.param_count() if hasattr(parsed.task_config, "param_count")
                        else config[exp.size]})
        return out

    with tempfile.TemporaryDirectory() as tmp, ResultStore(Path(tmp) / "simulated.db") as store:
        run_sweep(planned, store, LocalExecutor(runner), log=None)
    return trained


def estimate(name: str, preset: str, caps: bool, cpu_gflops: float | None) -> dict:
    experiment = load_experiment(name, preset)
    if experiment.kind == "grid":
        configs = [experiment.build_config(line, b, s, seed) for line in experiment.lines for b in experiment.base_values
                   for s in experiment.sizes for seed in experiment.seeds]
        assumption = {line.label: "grid: every cell is trained" for line in experiment.lines}
    else:
        if not caps:
            import dataclasses

            for line in experiment.lines:
                if line.search is not None:
                    ceiling = experiment.search.ceiling
                    line.search = dataclasses.replace(line.search, max=experiment.search.max, ceiling=ceiling)
        planned = plan_of(experiment)  # once, after the caps above: the search and the anchors read the same plan
        answers = Answers(planned, caps)
        configs = simulate(planned, answers)
        assumption = answers.assumption
    cpu_rate = cpu_gflops or cpu_matmul_gflops()
    trainer = "three_step" if experiment.trainer == "three_step" else "adam"
    by_base: dict[int, dict] = {}
    total_flops = 0
    largest = 0
    for config in configs:
        parsed = parse_config(config)
        flops = parsed.task_config.train_flops(parsed.trainer_config)
        memory = parsed.task_config.bytes_per_model(parsed.trainer_config)
        total_flops += flops
        largest = max(largest, memory)
        row = by_base.setdefault(config[experiment.base], {"trainings": 0, "flops": 0})
        row["trainings"] += 1
        row["flops"] += flops
    cpu_hours = total_flops / (CPU_EFFICIENCY[trainer] * cpu_rate * 1e9) / 3600
    gpu_minutes = total_flops / (GPU_EFFICIENCY[trainer] * H200_FP32_TFLOPS * 1e12) / 60
    return {
        "experiment": experiment.name, "preset": preset, "base": experiment.base, "line_caps": caps,
        "trainings": len(configs),
        "flops": total_flops, "largest_model_gib": largest / 2**30,
        "models_per_h200_chunk": int(0.5 * H200_MEMORY_GIB * 2**30 // max(1, largest)),
        "cpu": {"matmul_gflops_one_thread": cpu_rate, "efficiency": CPU_EFFICIENCY[trainer], "hours_one_core": cpu_hours},
        "gpu": {"name": "NVIDIA H200", "fp32_tflops": H200_FP32_TFLOPS, "efficiency": GPU_EFFICIENCY[trainer],
                "minutes": gpu_minutes},
        "by_base": {str(b): {"trainings": r["trainings"], "flops": r["flops"],
                             "share_of_flops": r["flops"] / max(1, total_flops)} for b, r in sorted(by_base.items())},
        "assumptions": assumption,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--no-line-caps", action="store_true", help="ignore the lines' own caps on the searched size")
    parser.add_argument("--cpu-gflops", type=float, default=None, help="this CPU's matmul rate (default: measured now)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = estimate(args.experiment, args.preset, not args.no_line_caps, args.cpu_gflops)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return
    base = result["base"]
    print(f"{result['experiment']} [{result['preset']}]{'' if result['line_caps'] else ' without the lines own caps'}: "
          f"{result['trainings']:,} trainings, {result['flops'] / 1e15:,.1f} PFLOP, largest model "
          f"{result['largest_model_gib']:,.2f} GiB")
    for value, row in result["by_base"].items():
        print(f"  at {base} {value}: {row['trainings']:5d} trainings, {row['share_of_flops'] * 100:5.1f}% of the FLOPs")
    cpu, gpu = result["cpu"], result["gpu"]
    print(f"this CPU: {cpu['hours_one_core']:,.1f} CPU-hours on one core "
          f"(matmul {cpu['matmul_gflops_one_thread']:.0f} GFLOP/s x efficiency {cpu['efficiency']:.2f})")
    print(f"{gpu['name']}: {gpu['minutes']:,.1f} minutes (float32 {gpu['fp32_tflops']:.0f} TFLOP/s x efficiency "
          f"{gpu['efficiency']:.2f}: for three steps measured on tr_fig2's gpu preset, for Adam assumed); {result['models_per_h200_chunk']:,} of "
          f"the largest models per chunk in "
          f"half of its {H200_MEMORY_GIB} GiB")
    print("assumed, per line (the search's real bracket and bisection were run against these answers):")
    for label, text in result["assumptions"].items():
        print(f"  {label}: {text}")


if __name__ == "__main__":
    main()

"""Do prices hold? Each run of a grid of extremes, its price (``empirics.cost.price``) against its time.

    python benchmarks/price_check.py [--rows SUBSTRING] [--repeats 1] [--measured-rates] [--rates]

The grid (:data:`ROWS`) holds the extremes the cost model must price: ``n_eval = 1e8`` fresh samples (the
attention-only model at its smallest and at the README's sizes, the dense-mass path, the attention-MLP model, and
after Adam), ``steps`` (or ``epochs``, or ``fit_steps``) up to 1e8 for every shipped task and model, and the
largest cells of the shipped experiments' paper presets (the largest base value at the search's largest size,
or, for the Adam tasks whose every step is a pass over N classes, the largest d at an N a step of which takes a
second; each row says which). None of them is run whole: a run's time is extrapolated from short samples of it
(its ``samples``: the same config with a few of its counts, ``n_eval``, ``steps``, ``epochs``, ``fit_steps`` or
``N``, set low and high), fitted as linear in each count, with the product of two counts where a row names a
``pair`` (an Adam step's time grows with N), and evaluated at the run's own counts. The time is CPU time of this
process on one torch thread (``time.process_time``: other jobs on the machine wait, they do not count), the best
of ``--repeats``. Early stop is left in where a shipped experiment has it; a sample of a few steps does not stop,
so the extrapolation, like the price, is the time of every step.

Each row prints its price by part (data, training, evaluation, the per-model overhead), the extrapolated time and
their ratio; the last line holds the largest and the smallest ratio and says whether every one lies within
[1/3, 3] (the exit status is 1 where one does not).

``--rates`` measures the per-operation rates (``empirics.cost.Rates``) on this machine and prints them beside the
shipped ones (``empirics.cost.CPU_RATES``): a 1024^3 float32 matmul; log_softmax, gather and argmax over
[items, 1024] logits; an out-of-place add; torch.randint into int16; and the calls of a small Adam step (its time
over its top-level operator count). ``--measured-rates`` prices the grid at the rates measured here instead of
the shipped ones, which checks what the cost model counts on a machine slower or faster than the one the rates
were measured on.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from recallkit.empirics import cost
from recallkit.empirics.engine import run_configs
from recallkit.empirics.tasks import loss_and_correct_sums

__all__ = ["main", "measure_rates", "Row", "ROWS"]

LOW, HIGH = 1 / 3, 3.0
CALLS_PER_SMALL_STEP = 110  # torch.profiler's top-level operators of one step of measure_rates' small Adam training


@dataclass(frozen=True)
class Row:
    """One run of the grid: ``config`` whole, and how to sample it: ``samples`` {count: (low, high)}; ``pair``: two
    of those counts whose product the fit includes."""

    group: str
    label: str
    config: dict
    samples: dict
    pair: tuple[str, str] | None = None


def _tr(model: str, trainer: str, **values) -> dict:
    steps = dict(eta=1.0, gamma=1e7) if trainer in ("three_step", "two_step_then_fit") else dict(lr=0.1)
    return {"task": "token_retrieval", "model": model, "trainer": trainer, "seed": 0, **steps, **values}


ROWS = [
    # n_eval up to 1e8: the evaluation of fresh samples (the runaway: priced at about a second, ran minutes)
    Row("n_eval", "attention-only, three steps, V=64 d=8 L=4 N=300, n_eval=1e8",
        _tr("attention-only", "three_step", V=64, d=8, L=4, N=300, n_eval=10**8), {"n_eval": (1000, 400_000)}),
    Row("n_eval", "attention-only, three steps, README sizes, n_eval=1e8",
        _tr("attention-only", "three_step", V=512, d=512, L=23, N=3194, n_eval=10**8), {"n_eval": (1000, 60_000)}),
    Row("n_eval", "attention-only, dense mass (V <= 2L), V=64 L=64 d=32, n_eval=1e8",
        _tr("attention-only", "three_step", V=64, d=32, L=64, N=300, n_eval=10**8), {"n_eval": (1000, 200_000)}),
    Row("n_eval", "attention-mlp relu_centred, three steps, V=256 d=16 m=256 L=16, n_eval=1e8",
        _tr("attention-mlp", "three_step", V=256, d=16, m=256, L=16, N=1000, n_eval=10**8, features="relu_centred"),
        {"n_eval": (1000, 100_000)}),
    Row("n_eval", "attention-only, Adam 100 steps, V=64 d=8 L=4 N=300, n_eval=1e8",
        _tr("attention-only", "adam", V=64, d=8, L=4, N=300, steps=100, n_eval=10**8), {"n_eval": (1000, 400_000)}),
    # steps up to 1e8: what a step costs however small the model
    Row("steps", "token retrieval attention-only, Adam full batch, V=16 d=8 L=4 N=64, steps=1e8",
        _tr("attention-only", "adam", V=16, d=8, L=4, N=64, n_eval=64, steps=10**8), {"steps": (10, 810)}),
    Row("steps", "token retrieval attention-only, AdamW batch 1, steps=1e8",
        _tr("attention-only", "adamw", V=16, d=8, L=4, N=64, n_eval=64, batch_size=1, steps=10**8),
        {"steps": (10, 810)}),
    Row("steps", "token retrieval attention-mlp, Adam batch 16 of N=64, epochs=1e8 (4e8 steps)",
        _tr("attention-mlp", "adam", V=16, d=8, m=16, L=4, N=64, n_eval=64, batch_size=16, epochs=10**8),
        {"epochs": (3, 203)}),
    Row("steps", "token retrieval attention-mlp, two steps then fit_steps=1e6 (its most)",
        _tr("attention-mlp", "two_step_then_fit", V=64, d=8, m=64, L=4, N=300, n_eval=64, fit_steps=10**6),
        {"fit_steps": (5, 405)}),
    Row("steps", "assoc_memory linear, AdamW, N=64 d=16, steps=1e8",
        {"task": "assoc_memory", "model": "linear", "trainer": "adamw", "N": 64, "d": 16, "lr": 1.0, "steps": 10**8},
        {"steps": (10, 2010)}),
    Row("steps", "assoc_memory mlp, AdamW, N=64 d=8 m=16, steps=1e8",
        {"task": "assoc_memory", "model": "mlp", "trainer": "adamw", "N": 64, "d": 8, "m": 16, "lr": 0.03,
         "steps": 10**8}, {"steps": (10, 810)}),
    Row("steps", "fact_bijections learned, Adam, N=32 R=4 d=8, steps=1e8",
        {"task": "fact_bijections", "model": "learned", "trainer": "adam", "N": 32, "R": 4, "d": 8, "lr": 0.01,
         "steps": 10**8}, {"steps": (10, 810)}),
    Row("steps", "fact_bijections frozen-subjects, Adam batch 4, steps=1e8",
        {"task": "fact_bijections", "model": "frozen-subjects", "trainer": "adam", "N": 32, "R": 4, "d": 8,
         "lr": 0.01, "batch_size": 4, "steps": 10**8}, {"steps": (10, 810)}),
    # the largest shipped sizes
    Row("largest", "tr_fig2 paper: V=4096, N=V^1.5, L=V^0.5, d=4096 (search.max)",
        _tr("attention-only", "three_step", V=4096, d=4096, L=64, N=262144, n_eval=4096), {"N": (256, 768)}),
    Row("largest", "tr_fig3 paper: V=2048, N=V^1.5, L=V^0.5, d=512 (search.max), m=d^2",
        _tr("attention-mlp", "three_step", V=2048, d=512, m=512**2, L=45, N=92681, n_eval=4096),
        {"N": (4, 16), "n_eval": (4, 8)}),
    Row("largest", "tr_fig4 paper: V=2048, N=V^1.5, L=V^0.5, d=64, m=d^3",
        _tr("attention-mlp", "three_step", V=2048, d=64, m=64**3, L=45, N=92681, n_eval=4096),
        {"N": (8, 72), "n_eval": (8, 72)}),
    Row("largest", "tr_fig1a paper: two steps then fit, V=4096, N=V^1.5, L=4, d=96 (search.max), m=d^2",
        _tr("attention-mlp", "two_step_then_fit", V=4096, d=96, m=96**2, L=4, N=262144, n_eval=2048, fit_steps=400),
        {"N": (128, 640), "fit_steps": (2, 10)}, pair=("N", "fit_steps")),
    Row("largest", "tr_fig6 paper: Adam full batch, V=4096, N=V^1.5, L=V^0.85, d=2048 (search.max), 16 epochs",
        _tr("attention-only", "adam", V=4096, d=2048, L=1180, N=262144, n_eval=4096, epochs=16),
        {"N": (256, 768), "epochs": (1, 3), "n_eval": (16, 48)}, pair=("N", "epochs")),
    # 16 epochs of N/16 items a step: 256 steps of 16384 items, written so (the same run) to sample the batch apart
    Row("largest", "tr_fig7 paper: Adam batch N/16, V=4096, N=V^1.5, L=V, d=2048 (search.max), 16 epochs",
        _tr("attention-only", "adam", V=4096, d=2048, L=4096, N=262144, n_eval=4096, steps=256, batch_size=16384),
        {"N": (1024, 4096), "steps": (2, 6), "batch_size": (64, 1024)}, pair=("steps", "batch_size")),
    Row("largest", "assoc_memory_linear paper: d=256 (its largest), N=8192, 4096 steps",
        {"task": "assoc_memory", "model": "linear", "trainer": "adamw", "N": 8192, "d": 256, "lr": 1000.0,
         "steps": 4096, "early_stop": 0.99}, {"steps": (1, 3)}),
    Row("largest", "assoc_memory_mlp paper: d=90 (its largest), m=8d, N=8192, 32768 steps",
        {"task": "assoc_memory", "model": "mlp", "trainer": "adamw", "N": 8192, "d": 90, "m": 720, "lr": 0.03,
         "steps": 32768, "early_stop": 0.99}, {"steps": (1, 3)}),
    Row("largest", "geo_capacity paper: frozen, R=4, d=128 (its largest), N=4096, 3000 steps",
        {"task": "fact_bijections", "model": "frozen", "trainer": "adam", "N": 4096, "R": 4, "d": 128, "lr": 0.01,
         "steps": 3000, "early_stop": 0.9999}, {"steps": (1, 3)}),
    Row("largest", "geo_dmin paper: learned, R=16, d=64, N=2048, 300 epochs",
        {"task": "fact_bijections", "model": "learned", "trainer": "adam", "N": 2048, "R": 16, "d": 64, "lr": 0.01,
         "epochs": 300, "early_stop": 0.99999}, {"epochs": (1, 3)}),
]


# ------------------------------------------------------------------------------------------------ rates
def _best(call, repeats: int = 3) -> float:
    call()
    best = math.inf
    for _ in range(repeats):
        started = time.process_time()
        call()
        best = min(best, time.process_time() - started)
    return best


def measure_rates() -> cost.Rates:
    """This machine's per-operation rates on one thread, measured as the shipped ones were."""
    torch.set_num_threads(1)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    matmul = 2 * 1024**3 * 4 / _best(lambda: [a @ b for _ in range(4)])
    rows, width = 1024, 1024
    logits, labels = torch.randn(1, rows, width), torch.randint(width, (1, rows))
    logit = _best(lambda: [loss_and_correct_sums(logits, labels) for _ in range(4)]) / (4 * rows * width)
    x, y = torch.randn(1 << 22), torch.empty(1 << 22)
    element = _best(lambda: [torch.add(x, 1.0, out=y) for _ in range(4)]) / (4 << 22)
    generator = torch.Generator().manual_seed(0)
    tokens = torch.empty(1 << 22, dtype=torch.int16)
    draw = _best(lambda: torch.randint(64, tokens.shape, generator=generator, dtype=torch.int16, out=tokens))
    draw /= 1 << 22
    # an operator call: a step of the smallest Adam training (token retrieval's attention-only model at V = 16, full
    # batch), its time over its operators (torch.profiler's top-level events: 110 a step)
    small = _tr("attention-only", "adam", V=16, d=8, L=4, N=64, n_eval=64)
    step = (_seconds({**small, "steps": 401}, 3) - _seconds({**small, "steps": 1}, 3)) / 400
    call = step / CALLS_PER_SMALL_STEP
    return replace(cost.CPU_RATES, matmul=matmul, logit=logit, element=element, draw=draw, call=call)


def _print_rates(measured: cost.Rates) -> None:
    shipped = cost.CPU_RATES
    print("per-operation rates, one thread (shipped: empirics.cost.CPU_RATES; measured here now)")
    for name, unit, scale in (("matmul", "GFLOP/s", 1e-9), ("logit", "ns", 1e9), ("element", "ns", 1e9),
                              ("draw", "ns", 1e9), ("call", "us", 1e6)):
        here, there = getattr(measured, name) * scale, getattr(shipped, name) * scale
        print(f"  {name:8s} shipped {there:9.3f} {unit:8s} measured {here:9.3f} {unit:8s} ratio {here / there:5.2f}")


# ----------------------------------------------------------------------------------------- extrapolation
def _seconds(config: dict, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        started = time.process_time()
        run_configs([config], device="cpu", progress=False)
        best = min(best, time.process_time() - started)
    return best


def _terms(row: Row, values: dict) -> list[float]:
    out = [1.0] + [float(values[key]) for key in row.samples]
    if row.pair is not None:
        out.append(float(values[row.pair[0]]) * float(values[row.pair[1]]))
    return out


def extrapolated(row: Row, repeats: int = 1) -> tuple[float, float]:
    """(the run's time extrapolated from its samples, the seconds the samples took)."""
    lows = {key: low for key, (low, _) in row.samples.items()}
    points = [dict(lows)]
    for key, (_, high) in row.samples.items():
        points.append({**lows, key: high})
    if row.pair is not None:
        points.append({**lows, **{key: row.samples[key][1] for key in row.pair}})
    design, times = [], []
    for point in points:
        times.append(_seconds({**row.config, **point}, repeats))
        design.append(_terms(row, point))
    coefficients = np.linalg.solve(np.array(design), np.array(times))
    whole = {key: row.config[key] for key in row.samples}
    return float(np.dot(coefficients, _terms(row, whole))), sum(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="", help="only the rows whose label or group holds this text")
    parser.add_argument("--repeats", type=int, default=1, help="best of this many timings of each sample")
    parser.add_argument("--rates", action="store_true", help="measure and print this machine's per-operation rates")
    parser.add_argument("--measured-rates", action="store_true", help="price at the rates measured here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rates = None
    if args.rates or args.measured_rates:
        measured = measure_rates()
        _print_rates(measured)
        rates = measured if args.measured_rates else None
        if not args.measured_rates and not args.rows:
            return 0
    run_configs([_tr("attention-only", "three_step", V=16, d=8, L=4, N=64, n_eval=64)], device="cpu", progress=False)
    rows = [row for row in ROWS if args.rows in row.label or args.rows == row.group]
    print(f"price (CPU-seconds, {'measured' if rates else 'shipped'} rates: data + train + evaluate + model) against "
          f"the time extrapolated from samples (CPU time, one thread)")
    print(f"{'group':8s} {'run':92s} {'data':>8s} {'train':>10s} {'evaluate':>10s} {'price':>10s} {'measured':>10s} "
          f"{'ratio':>6s} {'sampled':>8s}")
    ratios = []
    for row in rows:
        parts = cost.price(row.config, "cpu", rates)
        priced = sum(parts.values())
        measured, sampled = extrapolated(row, args.repeats)
        ratio = measured / priced
        ratios.append((ratio, row.label))
        flag = "" if LOW <= ratio <= HIGH else "  OUTSIDE [1/3, 3]"
        print(f"{row.group:8s} {row.label[:92]:92s} {parts.get('data', 0):8.1f} {parts.get('train', 0):10.1f} "
              f"{parts.get('evaluate', 0):10.1f} {priced:10.1f} {measured:10.1f} {ratio:6.2f} {sampled:7.1f}s{flag}",
              flush=True)
    if not ratios:
        print("no row matches --rows", file=sys.stderr)
        return 2
    top, bottom = max(ratios), min(ratios)
    inside = all(LOW <= ratio <= HIGH for ratio, _ in ratios)
    print(f"max ratio measured/price {top[0]:.2f} ({top[1]}); min {bottom[0]:.2f} ({bottom[1]}); {len(ratios)} runs, "
          f"{'every one within' if inside else 'NOT every one within'} [1/3, 3]")
    return 0 if inside else 1


if __name__ == "__main__":
    sys.exit(main())

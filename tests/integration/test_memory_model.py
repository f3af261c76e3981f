"""The memory model (each task config's ``bytes_per_model``) against measured peak RSS, and what it decides.

The engine chunks models by ``bytes_per_model`` and refuses a model that does not fit before allocating
anything, so the estimate must be close to what a training really holds: within +-25% of the peak
resident memory of a fresh process (``VmHWM``, reset through /proc/self/clear_refs and measured
against the RSS just before the training, after ``malloc_trim`` so freed memory of the warm-up is not
reused unseen). Each config is measured in its own processes: glibc's malloc keeps state from one
training to the next (its mmap threshold, raised by the buffers it freed, and the layout of its heap),
which moved the peak of a config trained after others in one process by -20% to +30%. Even a fresh
process's peak is a draw: where glibc's heap puts the freed buffers depends on address-space
randomisation and on Python's hash seed (with both fixed, the three_step bag config peaked at
60.0-60.1 MiB in 12 runs; with the seed varied it peaks at 44, 59 or 75 MiB over 38 MiB of live
tensors, a spread wider than the +-25% window), so a config's peak is the median of MEASURE_RUNS
fresh processes. The configs cover both trainers, the three attended-vector paths, the MLP, data-,
activation- and parameter-heavy shapes and the other two tasks; each holds 50-350 MiB.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from recallkit.empirics.config import ModelTooLarge, check_memory, parse_config

pytestmark = pytest.mark.integration

TR3 = dict(task="token_retrieval", model="attention-only", trainer="three_step", eta=1.0, gamma=10.0, n_eval=1024, seed=0)
TRA = dict(task="token_retrieval", model="attention-only", trainer="adam", lr=0.1, epochs=2, n_eval=1024, seed=0)
CONFIGS = {
    "three_step dense mass, data-heavy": dict(TR3, V=512, L=1024, d=32, N=60000),
    "three_step bag, sparse backward": dict(TR3, V=4096, L=64, d=32, N=30000),
    "three_step parameter-heavy": dict(TR3, V=256, L=16, d=2048, N=1000),
    "adam full batch, dense mass": dict(TRA, V=1024, L=1024, d=64, N=10000),
    "adam minibatch, mlp": dict(TRA, model="attention-mlp", m=2048, V=512, L=22, d=64, N=20000, batch_size=5000, epochs=1),
    "assoc_memory linear": dict(task="assoc_memory", model="linear", trainer="adamw", lr=1.0, steps=4, N=6000, d=64, seed=0),
    "fact_bijections learned": dict(task="fact_bijections", model="learned", trainer="adam", lr=0.01, steps=3, N=2048, R=4,
                                    d=64, seed=0),
}

MEASURE_RUNS = 5  # fresh processes per config; their median is compared (module docstring)
MEASURE = r"""
import ctypes, json, resource, sys
import torch
torch.set_num_threads(1)
from recallkit.empirics.engine import run_configs
libc = ctypes.CDLL("libc.so.6")
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
def peak():  # VmHWM: the peak RSS since the last reset through clear_refs (ru_maxrss is never reset)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
out = {}
for name, config in json.loads(sys.argv[1]).items():
    tiny = {k: (min(v, 8) if k in ("V", "N", "d", "m", "L", "R", "n_eval") else v) for k, v in config.items()}
    tiny.pop("batch_size", None)
    run_configs([tiny], device="cpu", progress=False)  # load the code paths first
    libc.malloc_trim(0)
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak RSS to the current RSS
    before = rss()
    run_configs([config], device="cpu", progress=False)
    out[name] = peak() - before
print(json.dumps(out))
"""


def _can_measure() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim
        return True
    except (OSError, AttributeError):
        return False


@pytest.mark.slow  # about 100 s, and sensitive to its context: see below
@pytest.mark.skipif(not _can_measure(), reason="needs Linux with glibc (/proc/self/clear_refs, malloc_trim)")
def test_bytes_per_model_is_within_25_percent_of_the_measured_peak_rss():
    """Run alone (``python -m pytest -m slow tests/integration/test_memory_model.py``): it passes there, ratios
    0.83-1.19. Inside the whole default run, after the other tests, the same fresh subprocesses measured peaks
    15-40% lower on the same code (the three_step bag config 41 MiB against 60 alone; five runs each, all equal),
    so what glibc keeps resident depends on the environment the subprocess inherits, and the +-25% window on
    RSS cannot hold in every context. Kept out of the default run until the estimate is checked against a
    measure that does not depend on the allocator (the live-tensor peak)."""
    runs = {name: [] for name in CONFIGS}
    for name, config in CONFIGS.items():  # fresh processes per config (module docstring)
        for _ in range(MEASURE_RUNS):
            result = subprocess.run([sys.executable, "-c", MEASURE, json.dumps({name: config})], capture_output=True,
                                    text=True, timeout=600, cwd=Path(__file__).parent)
            assert result.returncode == 0, result.stderr[-2000:]
            runs[name].append(json.loads(result.stdout.strip().splitlines()[-1])[name])
    rows = []
    for name, config in CONFIGS.items():
        parsed = parse_config(config)
        estimate = parsed.task_config.bytes_per_model(parsed.trainer_config)
        measured = statistics.median(runs[name])
        rows.append((name, estimate / 2**20, measured / 2**20, estimate / measured, [r / 2**20 for r in runs[name]]))
    table = "\n".join(f"{n:36s} estimate {e:7.0f} MiB  measured {m:7.0f} MiB  ratio {r:.2f}  (runs "
                      + " ".join(f"{x:.0f}" for x in xs) + ")" for n, e, m, r, xs in rows)
    assert all(0.75 <= r <= 1.25 for _, _, _, r, _ in rows), table


def test_the_largest_paper_point_is_refused_before_allocation_where_it_does_not_fit():
    """tr_fig5's largest paper cell (V = 4096, N = V^1.5, L = V, d = 2048, full-batch Adam) needs about 32 GiB:
    refused in one line on a 16 GiB device; tokens are int16, so the same point fits on a 141 GiB GPU."""
    config = parse_config(dict(task="token_retrieval", model="attention-only", trainer="adam", lr=0.1, epochs=16,
                               V=4096, N=262144, L=4096, d=2048))
    estimate = config.task_config.bytes_per_model(config.trainer_config)
    assert 20 * 2**30 < estimate < 48 * 2**30
    assert config.task_config.token_bytes == 2
    with pytest.raises(ModelTooLarge, match=r"^one model \(V=4096, N=262144, d=2048, L=4096, m=2048\) needs about "
                                            r"[\d.]+ GiB, more than the 16.0 GiB of memory of this device$"):
        check_memory(config, available=16 * 2**30)
    check_memory(config, available=141 * 2**30)

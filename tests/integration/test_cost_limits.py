"""Work is priced before it runs: every command that trains estimates its cost (the tasks' FLOP models,
empirics.cost) and refuses work above the limit in one line that gives the estimate and the flag that accepts
it (``--max-cost``), within seconds; the memory model refuses a model larger than what is free before
anything is allocated. Each case goes through the installed ``recallkit`` command."""
from __future__ import annotations

import os
import re
import resource
import select
import shutil
import subprocess
import time

import pytest

from recallkit.empirics.config import parse_config
from recallkit.empirics.cost import MAX_COST_ENV, CostTooHigh, PricedExecutor, budget, estimate
from recallkit.empirics.experiment import resolve_experiment
from tests.experiment_texts import attention_only_grid, probe_grid

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg"}
ENV.pop("RECALLKIT_MAX_COST", None)  # the default limit (2h), whatever the caller's environment says
ANSWER_SECONDS = 20  # a refusal comes back within this (startup, planning and pricing on a loaded 2-core CPU)
GIVE_UP_SECONDS = 30  # the code before the limit trained on here; the test then fails instead of waiting
COST_LINE = (r"estimated [\d,.]+ CPU-(hours|minutes|seconds) \([\d.e+]+ FLOP\) for [\d,]+ runs?.*, above the 2h "
             r"limit; pass --max-cost \d+[smh] to run it")
README_SIZES = {"V": 512, "d": 512, "L": 23, "N": 3194}  # the README's one training run


def _sets(**values) -> list[str]:
    """``--set key=value`` flags: the README's sizes, replaced and extended by ``values``."""
    return [flag for key, value in {**README_SIZES, **values}.items() for flag in ("--set", f"{key}={value}")]


def _run(args, cwd, limit_memory: int | None = None):
    """(result, seconds) of ``recallkit *args``; the test fails if it has not answered in GIVE_UP_SECONDS."""
    def preexec():
        if limit_memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_memory, limit_memory))

    started = time.perf_counter()
    try:
        result = subprocess.run([RECALLKIT, *args], cwd=cwd, env=ENV, capture_output=True, text=True,
                                timeout=GIVE_UP_SECONDS, preexec_fn=preexec)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"recallkit {' '.join(args[:3])} ... was still running after {GIVE_UP_SECONDS} s with stderr "
                    f"{(exc.stderr or b'')[-300:]!r}")
    return result, time.perf_counter() - started


def _refusal(result, seconds) -> str:
    """The one line a refusal prints (exit 2, no traceback, within ANSWER_SECONDS)."""
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 2, result.stderr[-3000:]
    assert seconds < ANSWER_SECONDS, f"answered after {seconds:.1f} s"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("trainer, settings", [
    ("adam", dict(lr=0.1, steps=100000000)),
    ("adam", dict(lr=0.1, epochs=100000000)),
    ("adam", dict(lr=0.1, epochs=1000000, batch_size=1)),
    # the attention-only evaluation reads d * V per item (label space): V = 2048, d = 4096 is 3.5 CPU-hours
    ("three_step", dict(eta=1, gamma=1e7, n_eval=100000000, d=4096, V=2048)),
], ids=["steps", "epochs", "minibatch-of-one", "n_eval"])
def test_a_runaway_training_is_refused_with_its_estimate_and_the_flag(tmp_path, trainer, settings):
    result, seconds = _run(["train", "token_retrieval", "--model", "attention-only", "--trainer", trainer,
                            "--device", "cpu", *_sets(**settings)], tmp_path)
    line = _refusal(result, seconds)
    assert re.fullmatch(r"error: recallkit train: " + COST_LINE + r".*", line), line
    assert "for 1 run," in line


def test_a_long_training_under_the_limit_says_so_within_seconds(tmp_path):
    # n_eval = 1e8 at the README's sizes: about 7 CPU-minutes, under the limit; it must not be silent
    started = time.perf_counter()
    process = subprocess.Popen([RECALLKIT, "train", "token_retrieval", "--model", "attention-only", "--trainer",
                                "three_step", "--device", "cpu", *_sets(eta=1, gamma=1e7, n_eval=100000000)],
                               cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # the code before the estimate printed nothing until the training ended
        ready, _, _ = select.select([process.stderr], [], [], GIVE_UP_SECONDS)
        first = process.stderr.readline() if ready else ""
        seconds = time.perf_counter() - started
    finally:
        process.kill()
        process.wait()
    assert seconds < ANSWER_SECONDS, f"first line after {seconds:.1f} s"
    assert re.fullmatch(r"recallkit train: estimated [\d,.]+ CPU-minutes \([\d.e+]+ FLOP\) for 1 run, under the 2h "
                        r"limit\n", first), first


def test_the_flag_lets_a_run_above_the_limit_proceed(tmp_path):
    config = dict(task="assoc_memory", model="linear", trainer="adamw", N=64, d=16, lr=1.0, steps=2000, seed=0)
    args = ["train", "assoc_memory", "--model", "linear", "--trainer", "adamw", "--device", "cpu", "--set", "N=64",
            "--set", "d=16", "--set", "lr=1", "--set", "steps=2000"]
    price = estimate([parse_config(config)], "cpu").seconds
    below, above = f"{price / 2:.3f}s", f"{price * 1.5:.3f}s"
    refused, seconds = _run([*args, "--max-cost", below], tmp_path)
    line = _refusal(refused, seconds)
    assert re.search(r"above the [\d.]+s limit; pass --max-cost \d+s to run it", line), line
    accepted, _ = _run([*args, "--max-cost", above], tmp_path)
    assert accepted.returncode == 0, accepted.stderr
    assert "accuracy" in accepted.stdout


def test_a_search_is_priced_round_by_round_against_one_budget(monkeypatch):
    monkeypatch.delenv(MAX_COST_ENV, raising=False)
    config = {"task": "assoc_memory", "model": "linear", "trainer": "adamw", "N": 64, "d": 16, "lr": 1.0,
              "steps": 2000, "seed": 0}
    price = estimate([config], "cpu").seconds
    trained = []

    class Engine:  # stands in for the executor the priced one wraps
        def run(self, configs):
            trained.extend(configs)
            return [{} for _ in configs]

    executor = PricedExecutor(Engine(), "cpu")
    with budget(price * 2.5):
        assert os.environ[MAX_COST_ENV] == f"{price * 2.5!r}s"  # what the processes it starts inherit
        executor.run([config])
        executor.run([config])
        with pytest.raises(CostTooHigh, match=r"for 3 runs \(2 of them trained already in this command\)"):
            executor.run([config])
    assert len(trained) == 2  # the refused round trained nothing
    assert MAX_COST_ENV not in os.environ


@pytest.mark.parametrize("value", ["2x", "-1h", "h", "0m"])
def test_a_bad_max_cost_is_one_line(tmp_path, value):
    result, seconds = _run(["train", "assoc_memory", "--model", "linear", "--trainer", "adamw", "--set", "N=8",
                            "--set", "d=4", "--set", "lr=1", "--set", "steps=1", f"--max-cost={value}"], tmp_path)
    line = _refusal(result, seconds)
    assert line == f"error: --max-cost: expected a positive duration such as 2h, 30m, 90s or inf, got {value!r}", line


def test_a_model_larger_than_the_free_memory_is_refused_before_allocation(tmp_path):
    # m = 2**20: about 10 GiB; under a 6 GiB address-space limit the code before the check died in the
    # allocator (DefaultCPUAllocator: can't allocate memory) with a traceback, since the machine had more
    result, seconds = _run(["train", "token_retrieval", "--model", "attention-mlp", "--trainer", "three_step",
                            "--device", "cpu", *_sets(m=1048576, eta=1, gamma=1e7)], tmp_path,
                           limit_memory=6 << 30)
    line = _refusal(result, seconds)
    assert re.fullmatch(r"error: one model \(V=512, N=3194, d=512, L=23, m=1048576\) needs about "
                        r"[\d.]+ GiB, more than the [\d.]+ GiB (left under this process's memory limit \(ulimit -v\)|"
                        r"available on this machine)", line), line  # the machine's, where it has less left than 6 GiB


STEPS = """
name = "runaway_steps"
description = "Adam with 1e8 steps per run"
pack = "token_retrieval_attn"
task = "token_retrieval"
model = "attention-only"
trainer = "adam"
kind = "min_size"
thresholds = [0.5]

[[lines]]
scaling = "N=V*log(V), L=V"

[fixed]
lr = 0.1
steps = 1e8
n_eval = 256

[search]
min = 8
max = 256

[presets.quick]
V = [16, 32]
seeds = [0]
"""

GRID = attention_only_grid("runaway_grid", "a heatmap of 150,000 cells, under the run limit of 200,000",
                           "N=V*log(V), L=V**0.5") + """
[fixed]
eta = 0.001
gamma = "1000.0*L**2/(1/V + 1/N)"
n_eval = 4096

[presets.quick]
V = [128, 256, 512]
sizes = [32, 64, 128, 256, 512]
seeds = SEEDS
"""


def _search_to_16384_at_4096() -> str:
    """The shipped tr_fig2 experiment with its quick preset at V = 4096 and search.max = 16384 (six seeds: the first
    round alone is then about 2.7 CPU-hours)."""
    text = resolve_experiment("tr_fig2_attention_only").read_text()
    quick, after = text.index("[presets.quick]"), text.index("[presets.gpu]")
    preset = ('[presets.quick]\nV = [4096]\nseeds = [0, 1, 2, 3, 4, 5]\nlines = ["N=V**1.5, L=V**0.5"]\n'
              'search = { max = 16384 }\n\n')
    return text[:quick] + preset + text[after:]


@pytest.mark.parametrize("name, text, flags", [
    # a bisection draws its progress bar before the first round; it is not part of the answer
    ("steps", STEPS, ["--no-progress"]),
    ("grid", GRID.replace("SEEDS", str(list(range(10000)))), []),
    ("search_max", _search_to_16384_at_4096(), []),
], ids=["fixed-steps-1e8", "grid-150k-cells", "search-max-16384-at-V-4096"])
def test_a_runaway_sweep_is_refused_before_it_trains(tmp_path, name, text, flags):
    (tmp_path / f"{name}.toml").write_text(text)
    result, seconds = _run(["sweep", f"{name}.toml", "--store", "s.db", "--device", "cpu", *flags], tmp_path)
    line = _refusal(result, seconds)
    assert re.fullmatch(r"error: .*" + COST_LINE + r".*", line), line




def test_a_probe_grid_too_large_for_memory_is_refused_before_allocation(tmp_path):
    (tmp_path / "probe.toml").write_text(probe_grid("runaway_probe", vary="{ N = [2000, 4000, 100000000] }",
                                                    seeds="[0]", n_test=96))
    result, seconds = _run(["probe", "probe.toml", "--pack", "token_retrieval_attn", "--no-store"], tmp_path)
    line = _refusal(result, seconds)
    assert re.fullmatch(r"error: probe runaway_probe: one probe row \(V=256, N=100000000, d=32, L=16, n_test=96\) "
                        r"needs about [\d,.]+ GiB, more than the [\d,.]+ GiB (available on this machine|left under .*)",
                        line), line


def test_a_probe_grid_too_long_is_refused_before_its_first_row(tmp_path):
    (tmp_path / "probe.toml").write_text(probe_grid("runaway_probe", vary="{ V = [128, 512], N = [2000, 8000] }",
                                                    seeds=str(list(range(5000))), n_test=96))
    result, seconds = _run(["probe", "probe.toml", "--pack", "token_retrieval_attn", "--no-store"], tmp_path)
    line = _refusal(result, seconds)
    assert re.fullmatch(r"error: probe runaway_probe: " + COST_LINE + r".*", line), line
    assert "for 25,000 runs" in line

"""Work is bounded before it starts: an experiment that plans too many runs, or a model too large for the
device, is refused in one line (exit 2) before anything is built or allocated."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from recallkit.empirics.config import ModelTooLarge, check_memory, parse_config
from recallkit.empirics.experiment import resolve_experiment

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg"}


def _run(args, cwd, extra_env=None):
    return subprocess.run([RECALLKIT, *args], cwd=cwd, env={**ENV, **(extra_env or {})}, capture_output=True,
                          text=True, timeout=120)


def test_a_huge_heatmap_is_refused_with_the_estimate_and_the_override(tmp_path):
    text = resolve_experiment("tr_fig2_heatmap").read_text()
    quick = text.index("[presets.quick]")
    seeds = text.index("seeds = [0]", quick)
    text = text[:seeds] + "seeds = " + str(list(range(20000))) + text[seeds + len("seeds = [0]"):]
    (tmp_path / "huge.toml").write_text(text)
    started = time.perf_counter()
    result = _run(["sweep", "huge.toml", "--store", "s.db"], tmp_path)
    assert time.perf_counter() - started < 30
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert "plans about 300,000 trained models, more than the limit 200,000" in line and "--max-runs" in line
    assert not (tmp_path / "s.db").exists() or (tmp_path / "s.db").stat().st_size < 50_000
    # the override is honoured: a lower limit refuses the shipped quick preset too
    lowered = _run(["sweep", "tr_fig2_heatmap", "--store", "s.db", "--max-runs", "10"], tmp_path)
    assert lowered.returncode == 2 and "more than the limit 10" in lowered.stderr


def test_sizes_that_each_pass_their_limit_but_not_together_are_refused_before_allocation(tmp_path):
    result = _run(["train", "token_retrieval", "--model", "attention-only", "--trainer", "three_step",
                   "--set", "V=10000000", "--set", "d=16384", "--set", "L=4", "--set", "N=1000",
                   "--set", "eta=1", "--set", "gamma=1"], tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert re.fullmatch(r"error: one model \(V=10000000, .*\) needs about [\d,.]+ GiB, more than the [\d,.]+ GiB of "
                        r"memory of this device\n", result.stderr), result.stderr


def test_memory_check_uses_every_size_together():
    config = parse_config(dict(task="assoc_memory", model="linear", trainer="adamw", N=4096, d=64, lr=1.0, steps=1))
    check_memory(config, available=1 << 34)  # fits in 16 GiB
    with pytest.raises(ModelTooLarge, match=r"N=4096, d=64"):
        check_memory(config, available=1 << 20)

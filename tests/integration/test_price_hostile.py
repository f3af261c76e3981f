"""Hostile work through the installed ``recallkit`` command: what a run does is priced before it starts, so a run
that would take minutes is refused under a limit of seconds (exit 2, one line with the estimate and the flag), and a
search's ``reach`` (how far a curve goes, the largest size it trains) must be a positive expression in the base.

Before, ``n_eval = 1e8`` fresh samples were priced by their matmuls alone (about a second) and ran for minutes past
a 30 s limit, and ``search.reach = "-V"`` or ``"0"`` was accepted.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import pytest

from recallkit.empirics.experiment import resolve_experiment
from tests.experiment_texts import attention_only_grid

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")
ENV = {k: v for k, v in os.environ.items() if k not in ("RECALLKIT_MAX_COST", "RECALLKIT_STORE")}
ENV["MPLBACKEND"] = "Agg"
GIVE_UP_SECONDS = 40  # the code before the fix trained here for minutes; the test then fails instead of waiting


def _refusal(args: list[str], cwd) -> str:
    """The one line ``recallkit ARGS`` prints on stderr as it exits 2, after 'error: '."""
    assert RECALLKIT, "the recallkit console script is not installed"
    started = time.perf_counter()
    try:
        result = subprocess.run([RECALLKIT, *args], cwd=cwd, env=ENV, capture_output=True, text=True,
                                timeout=GIVE_UP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"recallkit {' '.join(args[:4])} ... was still running after {time.perf_counter() - started:.0f} s")
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:], result.stdout[-2000:])
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, result.stderr[-2000:]
    assert result.stderr.startswith("error: "), result.stderr
    return result.stderr.strip()[len("error: "):]


def _sets(**values) -> list[str]:
    return [flag for key, value in values.items() for flag in ("--set", f"{key}={value}")]


# ----------------------------------------------------------------------------------------------------------- prices
TINY = dict(V=64, d=8, L=4, N=300)


@pytest.mark.parametrize("model, trainer, settings, limit", [
    # the run: priced at about a second, it evaluates 10^8 samples of 64 logits each (over a minute)
    ("attention-only", "three_step", dict(**TINY, eta=1, gamma=1e7), "30s"),
    ("attention-mlp", "three_step", dict(V=256, d=16, m=256, L=16, N=1000, eta=1, gamma=1e7), "2m"),
    ("attention-only", "adam", dict(**TINY, lr=0.1, steps=100), "30s"),
], ids=["attention-only", "attention-mlp", "adam"])
def test_a_hundred_million_fresh_samples_are_priced_above_a_limit_of_seconds(tmp_path, model, trainer, settings, limit):
    line = _refusal(["train", "token_retrieval", "--model", model, "--trainer", trainer, "--device", "cpu",
                     "--max-cost", limit, *_sets(**settings, n_eval=100000000)], tmp_path)
    assert re.fullmatch(r"recallkit train: estimated [\d,.]+ CPU-(minutes|seconds) \([\d.e+]+ FLOP\) for 1 run, above "
                        rf"the {limit} limit; pass --max-cost \d+[sm] to run it \(or set RECALLKIT_MAX_COST\)",
                        line), line


GRID = attention_only_grid("eval_grid", "two cells of 10^8 fresh samples each", "N=V*log(V), L=4") + """
[fixed]
eta = 1.0
gamma = 1e7
n_eval = 100000000

[presets.quick]
V = [64]
sizes = [8, 16]
seeds = [0]
"""


def test_a_grid_of_a_hundred_million_fresh_samples_a_cell_is_refused_before_it_trains(tmp_path):
    (tmp_path / "eval_grid.toml").write_text(GRID, encoding="utf-8")
    line = _refusal(["sweep", "eval_grid.toml", "--store", "s.db", "--device", "cpu", "--max-cost", "1m"], tmp_path)
    assert re.search(r"estimated [\d,.]+ CPU-(minutes|seconds) \([\d.e+]+ FLOP\) for 2 runs, above the 1m limit; "
                     r"pass --max-cost \d+[sm] to run it", line), line


# ---------------------------------------------------------------------------------------------------- search.reach
def _with_reach(search: str = "", line: str = "", preset: str = "") -> str:
    """The shipped tr_fig2_attention_only (a curve search) with ``reach`` set in [search], on its first line, or in
    its quick preset's search."""
    text = resolve_experiment("tr_fig2_attention_only").read_text(encoding="utf-8")
    if search:
        text = text.replace('ceiling = "2*V"\n', f'ceiling = "2*V"\nreach = {search}\n', 1)
    if line:
        text = text.replace('scaling = "N=V*log(V), L=V**0.5"\n',
                            f'scaling = "N=V*log(V), L=V**0.5"\nsearch = {{ reach = {line} }}\n', 1)
    if preset:
        quick = 'search = { max = 512, ceiling = "min(2*V, 512)" }'
        assert quick in text
        text = text.replace(quick, quick[:-2] + f", reach = {preset} }}", 1)
    return text


@pytest.mark.parametrize("where, text, expected", [
    ("search.reach", _with_reach(search='"-V"'), "'-V' is -64 at V=64; expected a positive expression in the base V"),
    ("search.reach", _with_reach(search='"0"'), "'0' is 0 at V=64; expected a positive expression in the base V"),
    ("search.reach", _with_reach(search="0"), "'0' is 0 at V=64; expected a positive expression in the base V"),
    ("search.reach", _with_reach(search='"V - 100"'), "'V - 100' is -36 at V=64; expected a positive expression"),
    ("search.reach", _with_reach(search='"8*d"'), "'8*d' uses d; expected a positive expression in the base V"),
    ("lines[0].search.reach", _with_reach(line='"-V"'), "'-V' is -64 at V=64; expected a positive expression"),
    ("presets.quick.search.reach", _with_reach(preset='"-2*V"'), "'-2*V' is -128 at V=64; expected a positive"),
], ids=["minus-V", "zero-text", "zero-number", "negative-at-the-smallest-V", "not-the-base", "a-lines-reach",
        "a-presets-reach"])
def test_a_reach_that_is_not_a_positive_size_is_refused_at_load(tmp_path, where, text, expected):
    (tmp_path / "reach.toml").write_text(text, encoding="utf-8")
    # --max-runs 1: the code before the check refused the plan for its size, never its reach, and trained nothing
    line = _refusal(["sweep", "reach.toml", "--store", "s.db", "--device", "cpu", "--max-runs", "1"], tmp_path)
    assert line.startswith(f"reach.toml: {where}: "), line
    assert expected in line, line


def test_a_negative_reach_is_refused_by_fit_too(tmp_path):
    (tmp_path / "reach.toml").write_text(_with_reach(search='"-V"'), encoding="utf-8")
    line = _refusal(["fit", "reach.toml", "--store", "s.db", "--no-run"], tmp_path)
    assert line.startswith("reach.toml: search.reach: '-V' is -64 at V=64"), line

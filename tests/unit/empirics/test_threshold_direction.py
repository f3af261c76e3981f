"""direction = "lower" in min_size / max_capacity searches: a size reaches t when its metric is at most t (a loss),
thresholds are then any positive numbers, and relative thresholds stay with higher-is-better metrics."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.experiment import experiment_from_dict
from recallkit.empirics.search import run_sweep
from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError
from tests.experiment_texts import TINY_THREE_STEP_BODY


def fake_loss(config: dict) -> float:
    """A loss that falls with d (min size, V given) or rises with N (capacity); 1.0 at the boundary size."""
    if "V" in config:
        return (0.5 * config["V"] ** 0.75 * (1 + 0.05 * config["seed"]) / config["d"]) ** 2
    return (config["N"] / (config["d"] ** 2 / 2 * (1 + 0.05 * config["seed"]))) ** 2


def fake_runner(configs, device=None, progress=False):
    # accuracy is kept at 0 so that a search still reading it (metric >= t) could not find these answers
    return [{"accuracy": 0.0, "train_accuracy": 0.0, "loss": fake_loss(c), "param_count": c.get("d", 1) ** 2,
             "wall_time_s": 0.0, "device": "cpu", "threads": 1} for c in configs]


def min_size_loss(**top) -> dict:
    return {
        "name": "loss_min", "task": "token_retrieval", "model": "attention-only", "trainer": "three_step",
        "kind": "min_size", "metric": "loss", "direction": "lower", "thresholds": [0.05, 0.5, 2.0],
        "lines": [{"scaling": "N=V*log(V), L=V**0.5"}], "fixed": {"eta": 1.0, "gamma": 1e7},
        "search": {"min": 4, "max": 1024}, "presets": {"quick": {"V": [64, 128, 256], "seeds": [0, 1]}}, **top,
    }


@pytest.fixture
def store(tmp_path):
    with ResultStore(tmp_path / "s.db") as s:
        yield s


def test_lower_finds_the_smallest_size_whose_loss_is_at_most_the_threshold(store):
    exp = experiment_from_dict(min_size_loss(), "loss.toml")
    result = run_sweep(exp, store, LocalExecutor(fake_runner), log=None)
    assert len(result.points) == 3 * 2 * 3
    assert not result.violations
    for p in result.points:
        expected = next(d for d in range(4, 1025)
                        if fake_loss({"V": p.base_value, "d": d, "seed": p.seed}) <= p.threshold)
        assert not p.censored, p.censor_reason
        assert p.values["d"] == expected, (p.base_value, p.seed, p.threshold)
        assert p.metric_value <= p.threshold
    # a smaller loss needs a larger model
    by = {(p.base_value, p.seed, p.threshold): p.values["d"] for p in result.points}
    assert by[(256, 0, 0.05)] > by[(256, 0, 0.5)] > by[(256, 0, 2.0)]


def test_lower_finds_the_largest_capacity_whose_loss_is_at_most_the_threshold(store):
    raw = min_size_loss(kind="max_capacity", thresholds=[0.25, 4.0], task="assoc_memory", model="linear",
                        trainer="adamw", pack="assoc_memory",
                        lines=[{"scaling": "", "theory_scaling": "m=d", "label": "linear"}],
                        fixed={"lr": 1.0, "steps": 10},
                        search={"min": 8, "max": 2048}, presets={"quick": {"d": [16, 32], "seeds": [0]}})
    exp = experiment_from_dict(raw, "cap.toml")
    result = run_sweep(exp, store, LocalExecutor(fake_runner), log=None)
    assert len(result.points) == 2 * 2
    for p in result.points:
        expected = max(n for n in range(8, 2049) if fake_loss({"N": n, "d": p.base_value, "seed": 0}) <= p.threshold)
        assert not p.censored, p.censor_reason
        assert p.values["N"] == expected, (p.base_value, p.threshold)


def test_higher_stays_the_default_and_reads_as_before():
    raw = min_size_loss(thresholds=[0.5])
    del raw["direction"]
    higher, lower = experiment_from_dict(raw, "loss.toml"), experiment_from_dict(min_size_loss(), "loss.toml")
    assert higher.direction == "higher" and lower.direction == "lower"
    assert higher.reaches(0.5, 0.5) and not higher.reaches(0.4, 0.5)
    assert lower.reaches(0.5, 0.5) and not lower.reaches(0.6, 0.5)
    # the shipped (higher) experiments' dicts read as before; a lower one says so
    assert "direction" not in higher.to_dict() and lower.to_dict()["direction"] == "lower"


def test_a_threshold_above_one_is_a_number_for_lower():
    assert experiment_from_dict(min_size_loss(), "loss.toml").thresholds == [0.05, 0.5, 2.0]


@pytest.mark.parametrize("top,expected", [
    ({"thresholds": [0.5, -1.0]}, "x.toml: thresholds[1]: expected a positive number (direction = 'lower'), got -1"),
    ({"relative_thresholds": [0.5], "search": {"min": 4, "max": 1024, "method": "curve", "ceiling": "4*V"}},
     "x.toml: relative_thresholds: only with direction = 'higher'"),
    ({"search": {"min": 4, "max": 1024, "method": "curve"}},
     "x.toml: direction: 'lower' needs search.method = 'bisect'"),
    ({"kind": "grid", "presets": {"quick": {"V": [64], "seeds": [0], "sizes": [4, 8]}}},
     "x.toml: direction: only used with kind = 'min_size', 'max_capacity' or 'law' (this experiment is grid)"),
])
def test_what_lower_does_not_take_is_one_line(top, expected):
    with pytest.raises(InputError) as info:
        experiment_from_dict(min_size_loss(**top), "x.toml")
    assert str(info.value).startswith(expected), str(info.value)


LOSS_TOML = """
name = "loss_cli"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
metric = "loss"
{direction}
thresholds = [0.5, 2.0]
""" + TINY_THREE_STEP_BODY + """min = 2
max = 64
[presets.quick]
V = [32]
seeds = [0]
"""


def recallkit(*args):
    exe = shutil.which("recallkit")
    assert exe, "the recallkit command is not installed"
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, check=False)


TOO_HIGH = ("loss.toml: thresholds[1]: expected a number in (0, 1], got 2.0 (a threshold above 1 needs "
            "direction = 'lower')")


@pytest.mark.parametrize("direction,expected", [
    ("", TOO_HIGH),
    ('direction = "higher"', TOO_HIGH),
    ('direction = "lower"\nrelative_thresholds = [0.5]',
     "loss.toml: relative_thresholds: only with direction = 'higher'"),
])
def test_the_cli_refuses_what_its_direction_does_not_take_in_one_line(tmp_path, direction, expected):
    toml = tmp_path / "loss.toml"
    toml.write_text(LOSS_TOML.format(direction=direction))
    out = recallkit("sweep", str(toml), "--store", str(tmp_path / "r.db"), "--no-progress")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert expected in lines[0], lines[0]

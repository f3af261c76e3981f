"""Search on a geometric grid of sizes, base values per line, and the training-budget check."""
from __future__ import annotations

import math

import pytest

from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.experiment import experiment_from_dict
from recallkit.empirics.search import replay, run_sweep
from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError

GRID = 2 ** 0.25


def capacity(config: dict, budget_exponent: float) -> float:
    """The fake model's capacity: d**2 / 2 at 10 steps, growing as steps**budget_exponent."""
    scale = 3.0 if config["model"] == "mlp" else 1.0  # the second line stores more
    return scale * config["d"] ** 2 / 2 * (1 + 0.05 * config["seed"]) * (config["steps"] / 10) ** budget_exponent


class CapacityRunner:
    def __init__(self, budget_exponent: float = 0.0):
        self.budget_exponent = budget_exponent
        self.calls: list[list[dict]] = []

    def __call__(self, configs, device=None, progress=False):
        self.calls.append(list(configs))
        out = []
        for c in configs:
            acc = 1.0 if c["N"] <= capacity(c, self.budget_exponent) else 0.9
            out.append({"accuracy": acc, "train_accuracy": acc, "param_count": c["d"] ** 2, "wall_time_s": 0.0,
                        "device": "cpu", "threads": 1})
        return out


def raw_experiment(**search) -> dict:
    return {
        "name": "fake_grid", "task": "assoc_memory", "model": "linear", "trainer": "adamw", "kind": "max_capacity",
        "thresholds": [1.0],
        "lines": [{"scaling": "", "theory_scaling": "m=d", "label": "linear"}, {"scaling": "m=d", "label": "mlp", "model": "mlp"}],
        "fixed": {"lr": 1.0, "steps": 10},
        "search": {"min": 2, "max": 100000, "start": "d**2/3", "grid": "2**(1/4)", **search},
        "presets": {"quick": {"d": {"linear": [8, 12, 16], "mlp": [4, 6]}, "seeds": [0, 1]}},
    }


@pytest.fixture
def store(tmp_path):
    with ResultStore(tmp_path / "s.db") as s:
        yield s


def on_grid(n: int) -> bool:
    return any(round(GRID ** k) == n for k in range(0, 80))


def test_grid_answer_is_the_largest_grid_size_stored_and_its_neighbour_was_probed(store):
    exp = experiment_from_dict(raw_experiment(), "grid.toml")
    runner = CapacityRunner()
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    grid = exp.search.grid_sizes()
    assert grid[:12] == [2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 19]
    assert all(on_grid(c["N"]) for call in runner.calls for c in call)
    for p in result.points:
        config = {"model": "mlp" if p.line == "mlp" else "linear", "d": p.values["d"], "seed": p.seed, "steps": 10}
        expected = max(n for n in grid if n <= capacity(config, 0.0))
        assert p.values["N"] == expected and not p.censored
        above = grid[grid.index(expected) + 1]
        probed = {r.size_value: r.metric_value for r in result.runs if r.line == p.line and r.base_value == p.values["d"]
                  and r.seed == p.seed}
        assert probed[above] < 1.0  # the answer is known to one grid step (0.25 in log2 N)


def test_each_line_sweeps_its_own_base_values(store):
    exp = experiment_from_dict(raw_experiment(), "grid.toml")
    assert exp.values_of(0) == [8, 12, 16] and exp.values_of(1) == [4, 6] and exp.base_values == [4, 6, 8, 12, 16]
    result = run_sweep(exp, store, LocalExecutor(CapacityRunner()), log=None)
    assert sorted({(p.line, p.values["d"]) for p in result.points}) == [
        ("linear", 8), ("linear", 12), ("linear", 16), ("mlp", 4), ("mlp", 6)]
    assert {r.base_value for r in result.runs if r.line == "mlp"} == {4, 6}


@pytest.mark.parametrize("exponent,flagged", [(0.0, False), (0.5, True)])
def test_budget_check_probes_the_failed_neighbour_with_three_times_the_steps(store, exponent, flagged):
    exp = experiment_from_dict(raw_experiment(budget_factor=3, budget_key="steps"), "grid.toml")
    runner = CapacityRunner(exponent)
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    grid = exp.search.grid_sizes()
    checked = [p for p in result.points if p.budget_check is not None]
    assert sorted({(p.line, p.values["d"]) for p in checked}) == [("linear", 16), ("mlp", 6)]  # largest d only
    for p in checked:
        check = p.budget_check
        assert check["value"] == 30 and check["N"] == grid[grid.index(p.values["N"]) + 1] and check["answer"] == p.values["N"]
        assert check["reached"] is flagged and p.budget_flagged is flagged
    assert not any(p.budget_flagged for p in result.points if p.budget_check is None)
    assert len(result.budget_runs) == 4 and all(r["config_hash"] for r in result.budget_runs)
    # the larger-budget runs are stored: a rerun trains nothing and replay gives the same points
    again = run_sweep(exp, store, LocalExecutor(CapacityRunner(exponent)), log=None)
    assert again.computed == 0 and again.points == result.points
    assert replay(exp, store).points == result.points


@pytest.mark.parametrize("search,preset,match", [
    ({"grid": 1.0}, None, r"search.grid: expected a ratio > 1"),
    ({"grid": "2**x"}, None, r"search.grid: unknown symbol 'x'"),
    ({"budget_factor": 1}, None, r"search.budget_factor: expected a number > 1"),
    ({"budget_factor": 3, "budget_key": "epochs"}, None, r"search.budget_key: 'epochs' is not a parameter of line 'linear'"),
    ({}, {"linear": [8]}, r"presets.quick.d: no values for line 'mlp'"),
    ({}, {"linear": [8], "mlp": [4], "other": [2]}, r"presets.quick.d: no line labelled 'other'"),
])
def test_bad_grid_budget_and_per_line_values_are_one_line_errors(search, preset, match):
    raw = raw_experiment(**search)
    if preset is not None:
        raw["presets"]["quick"]["d"] = preset
    with pytest.raises(InputError, match=match) as info:
        experiment_from_dict(raw, "bad.toml")
    assert "\n" not in str(info.value) and str(info.value).startswith("bad.toml")


def test_without_a_grid_nothing_changes(store):
    raw = raw_experiment()
    del raw["search"]["grid"]
    raw["presets"]["quick"]["d"] = [8]
    exp = experiment_from_dict(raw, "plain.toml")
    assert exp.search.grid_sizes() is None and exp.to_dict()["search"]["grid"] is None
    result = run_sweep(exp, store, LocalExecutor(CapacityRunner()), log=None)
    for p in result.points:  # every integer is a candidate: the exact capacity
        config = {"model": "mlp" if p.line == "mlp" else "linear", "d": 8, "seed": p.seed, "steps": 10}
        assert p.values["N"] == math.floor(capacity(config, 0.0))

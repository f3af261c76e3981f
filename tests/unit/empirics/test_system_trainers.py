"""A trainer a system registers for itself, with no optimiser steps: a closed-form least-squares fit from a test
system runs through the engine without a ``steps`` key (and without reporting ``steps_run``), its stored runs are
reused by a second sweep, an unknown name lists every trainer, and the cost check prices it by the trainer's own
cost model, or says that it has none and lets it run."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch

from recallkit import registry
from recallkit.empirics import cost
from recallkit.empirics.config import parse_config, trainers
from recallkit.empirics.engine import run_configs
from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.search import run_sweep
from recallkit.empirics.store import ResultStore
from recallkit.empirics.tasks import generator
from recallkit.registry import Task, Trainer
from recallkit.theory.errors import InputError
from tests.toy_configs import SizeNdConfig
from tests.toy_plugin import ToySystem

__all__: list[str] = []

SYSTEM_NAME = "least_squares_test"
TASK_NAME = "least_squares_toy"


class ToyConfig(SizeNdConfig):
    """Linear regression y = <w*, x> + noise with x ~ N(0, I_d): N training samples, d dimensions."""

    MAX_N: ClassVar[int] = 100_000
    param_count = property(lambda self: self.d)

    def bytes_per_model(self, trainer_config) -> int:
        return 8 * (self.N * self.d + self.d * self.d + 2 * self.N)


NOISE = 0.1
EVAL_SAMPLES = 256


class ToyProblem:
    """Each model's data from its own seed; ``test_error`` on fresh samples."""

    def __init__(self, configs, device: torch.device):
        task = configs[0].task_config
        X, y, Xt, yt = [], [], [], []
        for c in configs:
            gen = generator(c.seed, "instance")
            w = torch.randn(task.d, generator=gen, dtype=torch.float64)
            x = torch.randn(task.N, task.d, generator=generator(c.seed, "train"), dtype=torch.float64)
            x_eval = torch.randn(EVAL_SAMPLES, task.d, generator=generator(c.seed, "eval"), dtype=torch.float64)
            noise = NOISE * torch.randn(task.N, generator=generator(c.seed, "train"), dtype=torch.float64)
            X.append(x), y.append(x @ w + noise), Xt.append(x_eval), yt.append(x_eval @ w)
        self.X, self.y = torch.stack(X).to(device), torch.stack(y).to(device)
        self.X_eval, self.y_eval = torch.stack(Xt).to(device), torch.stack(yt).to(device)
        self.params = {}
        self.n_train = task.N

    @torch.no_grad()
    def evaluate(self, params) -> dict[str, torch.Tensor]:
        error = ((torch.einsum("mnd,md->mn", self.X_eval, params["w"]) - self.y_eval) ** 2).mean(1)
        train = ((torch.einsum("mnd,md->mn", self.X, params["w"]) - self.y) ** 2).mean(1)
        return {"test_error": error, "loss": train, "accuracy": 1 / (1 + error), "train_accuracy": 1 / (1 + train)}


@dataclass(frozen=True)
class RidgeConfig:
    """The closed-form trainer's one key; no steps, no learning rate."""

    ridge: float = 1e-8

    def __post_init__(self) -> None:
        if isinstance(self.ridge, bool) or not isinstance(self.ridge, (int, float)) or self.ridge < 0:
            raise InputError(f"ridge: expected a number >= 0, got {self.ridge!r}")
        object.__setattr__(self, "ridge", float(self.ridge))


def fit_ridge(problem, cfgs, sizes):
    """w = (X^T X + n ridge I)^-1 X^T y for every model at once; reports no steps_run (it takes none)."""
    X, y = problem.X, problem.y
    n, d = X.shape[1], X.shape[2]
    ridge = torch.tensor([c.trainer_config.ridge for c in cfgs], dtype=X.dtype, device=X.device)
    gram = X.transpose(1, 2) @ X + n * ridge[:, None, None] * torch.eye(d, dtype=X.dtype, device=X.device)
    return {"w": torch.linalg.solve(gram, (X.transpose(1, 2) @ y[..., None])[..., 0])}, {}


def ridge_flops(task_config, trainer_config) -> int:
    """The Gram matrix, its solve and the evaluation: 2 N d^2 + 2 d^3 / 3 + 2 (N + 256) d."""
    n, d = task_config.N, task_config.d
    return 2 * n * d * d + 2 * d**3 // 3 + 2 * (n + EVAL_SAMPLES) * d


RIDGE = Trainer("ridge_test", RidgeConfig, f"{__name__}:fit_ridge", per_model=("ridge",), cost=f"{__name__}:ridge_flops")
RIDGE_UNPRICED = Trainer("ridge_unpriced_test", RidgeConfig, f"{__name__}:fit_ridge", per_model=("ridge",))

PACK = """
[pack]
name = "least_squares_toy"
title = "least squares toy (test)"
variables = ["N", "d"]
base = "d"
size = "N"
param_count = "d"

[[terms]]
name = "signal"
role = "signal"
expr = "N"
provenance = "derived-here"

[[terms]]
name = "noise"
role = "noise"
expr = "d"
provenance = "derived-here"

[defaults]
scaling = "N=d**k"
axes = ["k"]
box = { k = [0.5, 2] }
"""

EXPERIMENT = """
name = "least_squares_grid"
description = "closed-form least squares on a small grid (test)"
pack = "least_squares_toy"
task = "least_squares_toy"
model = "linear"
trainer = "ridge_test"
kind = "grid"
base = "d"
size = "N"
thresholds = [0.9]

[[lines]]
scaling = ""
theory_scaling = "N=d"
label = "toy"

[fixed]
ridge = 1e-8

[presets.quick]
d = [4, 8]
sizes = [16, 64]
seeds = [0, 1]
"""


@pytest.fixture
def system(tmp_path):
    """The test system, registered for one test (its pack in its own folder), always removed again."""
    (tmp_path / "packs").mkdir()
    (tmp_path / "packs" / "least_squares_toy.toml").write_text(PACK)
    task = Task(TASK_NAME, config=f"{__name__}:ToyConfig", problem=f"{__name__}:ToyProblem",
                trainers=("ridge_test", "ridge_unpriced_test"))
    registry.register(ToySystem(SYSTEM_NAME, tmp_path, title="least squares test system", tasks=(task,),
                                trainers=(f"{__name__}:RIDGE", f"{__name__}:RIDGE_UNPRICED")))
    yield tmp_path
    registry.unregister(SYSTEM_NAME)
    assert "ridge_test" not in trainers()


def _config(seed: int = 0, trainer: str = "ridge_test", **keys) -> dict:
    return {"task": TASK_NAME, "model": "linear", "trainer": trainer, "seed": seed, "N": 64, "d": 8, **keys}


def test_unknown_trainer_is_one_line_naming_the_field_and_every_trainer(system):
    with pytest.raises(InputError) as caught:
        parse_config(_config(trainer="rigde"))
    assert str(caught.value) == ("trainer: expected one of three_step, two_step_then_fit, adam, adamw, ridge_test, "
                                 "ridge_unpriced_test, got 'rigde'")


def test_system_trainer_runs_without_a_steps_key(system):
    rows = run_configs([_config(0), _config(1, ridge=0.0)], device="cpu", progress=False)
    assert [row["steps_run"] for row in rows] == [0, 0]  # a closed form takes no steps and need not say so
    # least squares with 64 samples in 8 dimensions: test error about noise^2 d / (N - d) = 0.0014
    assert all(0 < row["test_error"] < 0.01 for row in rows)
    assert "steps" not in parse_config(_config(0)).to_dict()


def test_stored_runs_of_a_system_trainer_are_reused(system):
    path = system / "least_squares_grid.toml"
    path.write_text(EXPERIMENT)
    experiment = load_experiment(path)
    with ResultStore(system / "store.db") as store:
        first = run_sweep(experiment, store, LocalExecutor(device="cpu"), log=None)
        second = run_sweep(experiment, store, LocalExecutor(device="cpu"), log=None)
    assert (first.reused, first.computed, first.failed) == (0, 8, 0)
    assert (second.reused, second.computed, second.failed) == (8, 0, 0)
    assert len(second.runs) == 8
    assert sorted(r.metric_value for r in first.runs) == sorted(r.metric_value for r in second.runs)


def test_cost_check_prices_a_system_trainer_by_its_own_cost_model(system):
    work = cost.estimate([_config(0)])
    assert work.flops == ridge_flops(ToyConfig("linear", 64, 8), RidgeConfig())
    assert "no cost model" not in work.describe()


def test_cost_check_says_a_trainer_has_no_cost_model_and_does_not_refuse_it(system):
    work = cost.estimate([_config(seed, trainer="ridge_unpriced_test") for seed in range(3)])
    assert work.runs == 3 and work.flops == 0
    assert work.describe().endswith("; trainer ridge_unpriced_test has no cost model (each run is priced at the "
                                    "per-run overhead only)")
    cost.refuse_above(work, cost.DEFAULT_MAX_COST, "test")  # does not raise


class _Echo:
    """An executor that trains nothing: each config's seed back as its metrics."""

    def run(self, configs):
        return [{"seed": c["seed"]} for c in configs]


def test_a_search_says_once_that_a_trainer_has_no_cost_model(system, capsys):
    executor = cost.PricedExecutor(_Echo(), device="cpu")
    executor.run([_config(0, trainer="ridge_unpriced_test"), _config(1, trainer="ridge_unpriced_test")])
    executor.run([_config(2, trainer="ridge_unpriced_test"), _config(3)])
    assert capsys.readouterr().err.splitlines() == [
        "search round: trainer ridge_unpriced_test has no cost model (each run is priced at the per-run overhead only)"]

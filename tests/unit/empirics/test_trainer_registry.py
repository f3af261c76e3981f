"""Trainers are a registry a system extends: a closed-form trainer (a memory written down, no steps) from a
test system trains through the engine like a shipped one, and a trainer name is registered once."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from recallkit import registry
from recallkit.empirics.config import TRAINERS, parse_config, trainers
from recallkit.empirics.engine import run_configs
from recallkit.empirics.tasks import cross_entropy_and_accuracy, generator, unit_sphere
from recallkit.registry import RegistryError, Task, Trainer
from recallkit.systems.assoc_memory.task import key_value_embeddings
from recallkit.theory.errors import InputError
from tests.toy_configs import SizeNdConfig
from tests.toy_plugin import ToySystem

__all__: list[str] = []

SYSTEM_NAME = "closed_form_test"
TASK_NAME = "closed_form_memory"


class OuterConfig(SizeNdConfig):
    """A linear memory W of N unit keys and values in R^d (the task of the test system)."""

    param_count = property(lambda self: self.d * self.d)

    def bytes_per_model(self, trainer_config) -> int:
        return 4 * (2 * self.N * self.d + self.d * self.d + self.N * self.N)


class OuterMemory:
    """Keys E and values U [M, N, d] from each model's own stream; item i should recall value i."""

    def __init__(self, configs, device: torch.device):
        task = configs[0].task_config
        self.E, self.U = key_value_embeddings(configs, device)  # the anchor's memory: keys and values
        self.labels = torch.arange(task.N, device=device).expand(len(configs), task.N)
        self.params = {"W": torch.zeros(len(configs), task.d, task.d, device=device)}
        self.n_train = task.N

    def loss(self, params, idx=None):
        logits = torch.bmm(torch.bmm(self.E, params["W"].transpose(1, 2)), self.U.transpose(1, 2))
        return cross_entropy_and_accuracy(logits, self.labels)

    @torch.no_grad()
    def evaluate(self, params) -> dict[str, torch.Tensor]:
        loss, accuracy = self.loss(params)
        accuracy = accuracy.value()
        return {"accuracy": accuracy, "train_accuracy": accuracy, "loss": loss,
                "w_norm": params["W"].flatten(1).norm(dim=1)}

    def train_accuracy(self, params) -> torch.Tensor:
        return self.evaluate(params)["accuracy"]


@dataclass(frozen=True)
class HebbianConfig:
    """The closed-form trainer's one key: the scale of the written memory."""

    scale: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.scale, bool) or not isinstance(self.scale, (int, float)) or self.scale <= 0:
            raise InputError(f"scale: expected a positive number, got {self.scale!r}")
        object.__setattr__(self, "scale", float(self.scale))


CALLS: list[tuple[int, dict[str, int]]] = []


def write_memory(problem, cfgs, sizes):
    """W = scale * sum_i u_i e_i^T for every model at once: no gradient step."""
    CALLS.append((len(cfgs), dict(sizes)))
    scale = torch.tensor([c.trainer_config.scale for c in cfgs], device=problem.E.device)
    W = scale[:, None, None] * torch.bmm(problem.U.transpose(1, 2), problem.E)
    return {"W": W}, {"steps_run": torch.zeros(len(cfgs)), "scale_used": scale}


HEBBIAN = Trainer("hebbian", HebbianConfig, f"{__name__}:write_memory", per_model=("scale",))
CLASHES_WITH_ADAM = Trainer("adam", HebbianConfig, f"{__name__}:write_memory")
NOT_A_TRAINER = "write_memory is a function, not a Trainer"


def _system(root, name: str = SYSTEM_NAME, trainer_refs=(f"{__name__}:HEBBIAN",), tasks=True) -> ToySystem:
    task = Task(TASK_NAME, config=f"{__name__}:OuterConfig", problem=f"{__name__}:OuterMemory", trainers=("hebbian",))
    return ToySystem(name, root, title="closed-form test system", tasks=(task,) if tasks else (),
                     trainers=tuple(trainer_refs))


@pytest.fixture
def registered(tmp_path):
    """Registers the test system for one test, and always removes what the test registered."""
    names: list[str] = []

    def add(**kwargs) -> ToySystem:
        system = _system(tmp_path, **kwargs)
        names.append(system.name)
        return registry.register(system)

    yield add
    for name in names:
        registry.unregister(name)
    assert "hebbian" not in trainers()


def _config(seed: int, scale: float) -> dict:
    return {"task": TASK_NAME, "model": "linear", "trainer": "hebbian", "seed": seed, "N": 6, "d": 32,
            "scale": scale}


def test_closed_form_trainer_of_a_system_trains_through_the_engine(registered):
    registered()
    CALLS.clear()
    configs = [_config(0, 1.0), _config(1, 2.5)]
    rows = run_configs(configs, device="cpu", progress=False)
    assert CALLS == [(2, {"N": 6, "d": 32})]  # one chunk: both models share a shape
    assert [row["scale_used"] for row in rows] == [1.0, 2.5]
    assert [row["steps_run"] for row in rows] == [0, 0]
    for seed, scale, row in zip((0, 1), (1.0, 2.5), rows):
        gen = generator(seed, "instance")
        E, U = unit_sphere(6, 32, gen), unit_sphere(6, 32, gen)
        expected = (scale * U.T @ E).norm().item()
        assert row["w_norm"] == pytest.approx(expected, rel=1e-5)
        assert row["accuracy"] == 1.0  # 6 nearly orthogonal keys in 32 dimensions are all recalled
        assert row["config_hash"] == run_configs([configs[seed]], device="cpu", progress=False)[0]["config_hash"]
    assert parse_config(configs[1]).to_dict()["scale"] == 2.5


def test_unknown_trainer_names_the_registered_ones_too(registered):
    registered()
    with pytest.raises(InputError, match=r"^trainer: expected one of three_step, two_step_then_fit, adam, adamw, "
                                         r"hebbian, got 'nope'$"):
        parse_config({**_config(0, 1.0), "trainer": "nope"})


def test_a_shipped_task_does_not_take_a_system_trainer_it_does_not_list(registered):
    registered()
    with pytest.raises(InputError, match="^trainer: hebbian does not apply to task assoc_memory"):
        parse_config({"task": "assoc_memory", "model": "linear", "trainer": "hebbian", "N": 8, "d": 4})


def test_trainer_named_like_a_shipped_one_is_a_registry_error(registered):
    registered(trainer_refs=(f"{__name__}:CLASHES_WITH_ADAM",))
    with pytest.raises(RegistryError, match=rf"^system {SYSTEM_NAME}: trainer 'adam' is already registered by "
                                            r"recallkit \(a shipped trainer\)$"):
        parse_config(_config(0, 1.0))
    assert TRAINERS["adam"].config_class().__name__ == "AdamConfig"


def test_trainer_two_systems_register_is_a_registry_error(registered):
    registered()
    registered(name="second_closed_form", tasks=False)
    with pytest.raises(RegistryError, match=r"^system second_closed_form: trainer 'hebbian' is already registered "
                                            rf"by system {SYSTEM_NAME}$"):
        trainers()


def test_trainer_reference_that_is_not_a_trainer_is_a_registry_error(registered):
    registered(trainer_refs=(f"{__name__}:NOT_A_TRAINER",))
    with pytest.raises(RegistryError, match=rf"^system {SYSTEM_NAME}: trainers: {__name__}:NOT_A_TRAINER: expected "
                                            r"a recallkit.registry.Trainer, got str$"):
        trainers()

"""Every part of a run's cost is priced (empirics.cost): its data (the instance and the samples drawn), its training
and its evaluation, each from the operations its task counts (``task_config.work``) at one measured rate per kind.

Before, a run was priced by its matmul FLOPs and a fixed time per step: evaluating 10^8 fresh samples (``n_eval``),
which is mostly softmaxes over V logits and drawn tokens, was priced at about a second for a run of minutes, and
drawing the samples was not priced at all. ``benchmarks/price_check.py`` checks the prices against timed runs.
"""
from __future__ import annotations

import math

import pytest

from recallkit.empirics import cost
from recallkit.empirics.config import parse_config

TR = dict(task="token_retrieval", seed=0, V=64, d=8, L=4, N=300, n_eval=4096)
THREE = dict(eta=1.0, gamma=1e7)
ADAM = dict(lr=0.1, steps=100)
# one config of every shipped task, model and trainer
CONFIGS = {
    "tr attention-only three_step": {**TR, "model": "attention-only", "trainer": "three_step", **THREE},
    "tr attention-mlp three_step": {**TR, "model": "attention-mlp", "trainer": "three_step", "m": 64, **THREE},
    "tr attention-mlp two_step_then_fit": {**TR, "model": "attention-mlp", "trainer": "two_step_then_fit", "m": 64,
                                           "fit_steps": 10, **THREE},
    "tr attention-only adam": {**TR, "model": "attention-only", "trainer": "adam", **ADAM},
    "tr attention-mlp adamw minibatch": {**TR, "model": "attention-mlp", "trainer": "adamw", "m": 64, "batch_size": 16,
                                         "lr": 0.1, "epochs": 3, "early_stop": 0.9},
    "assoc linear adamw": {"task": "assoc_memory", "model": "linear", "trainer": "adamw", "N": 64, "d": 16, **ADAM},
    "assoc mlp adam minibatch": {"task": "assoc_memory", "model": "mlp", "trainer": "adam", "N": 64, "d": 8, "m": 16,
                                 "batch_size": 8, **ADAM},
    "geo learned adam": {"task": "fact_bijections", "model": "learned", "trainer": "adam", "N": 32, "R": 4, "d": 8,
                         **ADAM},
    "geo frozen adam epochs": {"task": "fact_bijections", "model": "frozen", "trainer": "adam", "N": 32, "R": 4,
                               "d": 8, "lr": 0.1, "epochs": 5, "batch_size": 16},
}


@pytest.mark.parametrize("name", CONFIGS)
def test_every_phase_of_every_shipped_task_is_priced(name):
    config = CONFIGS[name]
    parsed = parse_config(config)
    work = cost.task_work(parsed.trainer, parsed.task_config, parsed.trainer_config)
    assert work is not None, f"{name}: its task has no work model"
    assert set(work) == set(cost.PHASES)
    assert work["data"]["draws"] > 0  # the instance and the samples are drawn
    for phase in ("train", "evaluate"):
        for kind in ("flops", "logits", "elements", "calls"):
            assert work[phase][kind] > 0, (name, phase, kind, work[phase])
    parts = cost.price(config)
    assert set(parts) == {"data", "train", "evaluate", "model"}
    assert all(seconds > 0 and math.isfinite(seconds) for seconds in parts.values()), parts
    # the price the budget charges is the sum of its parts
    assert cost.estimate([config]).seconds == pytest.approx(sum(parts.values()))


def _rise(config: dict, key: str, low: int, high: int) -> dict[str, float]:
    """How much each part of the price grows when ``key`` goes from ``low`` to ``high``, per unit of it."""
    before, after = cost.price({**config, key: low}), cost.price({**config, key: high})
    return {part: (after[part] - before[part]) / (high - low) for part in before}


def test_the_evaluation_of_fresh_samples_is_priced_as_its_softmaxes_and_draws():
    # the run: n_eval = 1e8 at V = 64 was priced at 1.7 CPU-seconds and took more than a minute
    config = CONFIGS["tr attention-only three_step"]
    huge = cost.price({**config, "n_eval": 10**8})
    assert huge["evaluate"] > 30, huge  # 10^8 samples x 64 logits through log_softmax and argmax alone: 27 s
    assert huge["data"] > 2, huge  # 10^8 x 5 tokens and positions drawn
    per_sample = _rise(config, "n_eval", 10**6, 2 * 10**6)
    assert per_sample["train"] == 0 and per_sample["model"] == 0
    # linear in n_eval: a logit of each of the V labels and L + 1 draws per sample at least
    assert per_sample["evaluate"] >= 64 * cost.LOGIT_SECONDS
    assert per_sample["data"] >= 5 * cost.DRAW_SECONDS


@pytest.mark.parametrize("name", ["tr attention-only adam", "assoc linear adamw", "geo learned adam"])
def test_every_step_is_priced_with_its_calls_and_its_update(name):
    per_step = _rise(CONFIGS[name], "steps", 10**6, 2 * 10**6)
    # a step's operator calls at least: 12 for the linear memory's written-out gradient, about a hundred otherwise
    assert per_step["train"] >= 12 * cost.CALL_SECONDS, per_step
    assert per_step["evaluate"] == 0


def test_the_training_items_and_the_samples_are_priced_in_proportion():
    config = CONFIGS["tr attention-only three_step"]
    per_item = _rise(config, "N", 10**5, 2 * 10**5)
    assert per_item["train"] > 0 and per_item["evaluate"] > 0 and per_item["data"] > 0, per_item


def test_a_task_without_a_work_model_is_priced_as_before():
    class Plain:  # a plug-in task config with a FLOP model only
        n_train = 10

        def sizes(self):
            return {}

        def train_flops(self, trainer_config):
            return 2e9

    trainer = parse_config(CONFIGS["tr attention-only adam"]).trainer_config
    flops, seconds, counted, parts = cost._model_cost.__wrapped__("adam", Plain(), trainer, "CPU")
    assert counted and flops == 2e9
    assert dict(parts) == pytest.approx({"train": 2e9 / cost.CPU_RATES.flop_rate(trainer) + 100 * cost.STEP_SECONDS,
                                         "model": cost.MODEL_SECONDS})
    assert seconds == pytest.approx(sum(dict(parts).values()))


def test_a_gpu_run_draws_its_data_at_the_cpu_rate():
    config = {**CONFIGS["tr attention-only three_step"], "n_eval": 10**7}
    cpu, gpu = cost.price(config, "cpu"), cost.price(config, "cuda")
    assert gpu["data"] == pytest.approx(cpu["data"])  # the seeded generators are CPU generators
    assert gpu["evaluate"] < cpu["evaluate"]


def test_the_rates_can_be_replaced_for_a_machine_measured_apart():
    config = CONFIGS["tr attention-only three_step"]
    slower = cost.Rates(logit=2 * cost.LOGIT_SECONDS, element=2 * cost.ELEMENT_SECONDS, draw=2 * cost.DRAW_SECONDS,
                        call=2 * cost.CALL_SECONDS, matmul=cost.CPU_MATMUL_GFLOPS * 1e9 / 2)
    shipped, doubled = cost.price(config), cost.price(config, "cpu", slower)
    for part in ("data", "train", "evaluate"):
        assert doubled[part] == pytest.approx(2 * shipped[part]), part

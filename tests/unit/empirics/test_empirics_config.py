import pytest

from recallkit.empirics.config import RunConfig, config_hash, evaluate, parse_config, shape_key
from recallkit.theory.errors import InputError

TR = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=64, d=16, L=4, N=200, eta=1.0, gamma=10.0)


def test_round_trip_fills_defaults_and_hash_is_stable():
    cfg = parse_config(TR)
    flat = cfg.to_dict()
    assert flat["seed"] == 0 and flat["n_eval"] == 4096 and flat["features"] == "relu"
    assert RunConfig.from_dict(flat) == cfg
    assert config_hash(TR) == config_hash(flat) == config_hash(cfg)
    assert len(config_hash(TR)) == 16
    assert config_hash({**TR, "gamma": 10}) == config_hash(TR)  # 10 and 10.0 are the same config
    assert config_hash({**TR, "seed": 1}) != config_hash(TR)


def test_shape_key_ignores_per_model_numbers_only():
    assert shape_key(parse_config(TR)) == shape_key(parse_config({**TR, "seed": 3, "gamma": 5.0, "eta": 0.1}))
    assert shape_key(parse_config(TR)) != shape_key(parse_config({**TR, "d": 17}))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"d": -3}, "d: expected a positive integer <= 16384, got -3"),
        ({"d": 100000}, "d: expected a positive integer"),
        ({"V": 2.5}, "V: expected a positive integer"),
        ({"task": "nope"}, "task: expected one of"),
        ({"model": "mlp"}, "model: expected one of attention-only, attention-mlp"),
        ({"trainer": "sgd"}, "trainer: expected one of"),
        ({"colour": 1}, "colour: unknown key"),
        ({"m": 32}, "m: attention-only has no MLP width"),
        ({"gamma": "Q*d"}, "gamma"),
        ({"eta": -1.0}, "eta: expected a positive number"),
        ({"seed": -1}, "seed: expected an integer >= 0"),
    ],
)
def test_bad_configs_give_one_line_errors_naming_the_key(change, message):
    with pytest.raises(InputError) as info:
        parse_config({**TR, **change})
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_required_keys_and_trainer_task_pairing():
    with pytest.raises(InputError, match="^N: required for task token_retrieval"):
        parse_config({k: v for k, v in TR.items() if k != "N"})
    with pytest.raises(InputError, match="three_step does not apply to task assoc_memory"):
        parse_config(dict(task="assoc_memory", model="linear", trainer="three_step", N=10, d=4, eta=1, gamma=1))
    with pytest.raises(InputError, match="exactly one of epochs or steps"):
        parse_config(dict(task="assoc_memory", model="linear", trainer="adam", N=10, d=4, lr=0.1))
    with pytest.raises(InputError, match="only the adamw trainer takes weight_decay"):
        parse_config(dict(task="assoc_memory", model="linear", trainer="adam", N=10, d=4, lr=0.1, steps=2, weight_decay=0.1))
    with pytest.raises(InputError, match="^where.toml: m: the mlp model needs"):
        RunConfig.from_dict(dict(task="assoc_memory", model="mlp", trainer="adamw", N=10, d=4, lr=0.1, steps=2), where="where.toml")


def test_expressions_are_evaluated_at_the_sizes():
    cfg = parse_config(dict(task="token_retrieval", model="attention-only", trainer="adam", V=64, d=16, L=4, N=100, lr="1/sqrt(d)", epochs=2, batch_size="floor(N/16)"))
    sizes = cfg.task_config.sizes()
    assert evaluate(cfg.trainer_config.lr, "lr", sizes) == pytest.approx(0.25)
    assert cfg.trainer_config.resolved_batch_size(sizes, 100) == 6
    with pytest.raises(InputError, match="gamma"):
        parse_config({**TR, "gamma": "__import__('os')"})


def test_param_counts_follow_the_papers():
    assert parse_config(TR).param_count == 16 * 16
    mlp = parse_config({**TR, "model": "attention-mlp", "m": 40})
    assert mlp.param_count == 40 * 16 and mlp.task_config.trainable_params == 40 * 16 + 16 * 16
    assert parse_config(dict(task="assoc_memory", model="mlp", trainer="adamw", N=10, d=4, m=8, lr=0.1, steps=2)).param_count == 32
    fb = parse_config(dict(task="fact_bijections", model="frozen-subjects", trainer="adam", N=10, R=3, d=4, m=8, lr=0.1, steps=2))
    assert fb.param_count == 3 * 4 + 2 * 8 * 4 + 8 + 10 * 4


def test_expressions_must_use_the_tasks_own_sizes():
    with pytest.raises(InputError, match="^lr: expression 'V/100' uses V, which this task does not have"):
        parse_config(dict(task="assoc_memory", model="linear", trainer="adamw", N=10, d=4, lr="V/100", steps=2))
    with pytest.raises(InputError, match="^batch_size: 'N/100' gives 0, expected at least 1"):
        parse_config(dict(task="assoc_memory", model="linear", trainer="adamw", N=10, d=4, lr=0.1, steps=2, batch_size="N/100"))


def test_device_choice():
    import torch

    from recallkit.empirics.device import describe, resolve_device

    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device(None).type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert describe(torch.device("cpu")) == "cpu"
    with pytest.raises(InputError, match="^--device: expected one of auto, cpu, cuda"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="torch sees no CUDA device"):
            resolve_device("cuda")

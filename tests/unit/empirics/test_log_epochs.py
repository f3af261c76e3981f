"""log_epochs: the accuracy after epochs 1, 2, 4, ... measured inside one Adam run is exactly what a run of
that many epochs gives (full batch and minibatch), and a config without it keeps its store key."""
import pytest

from recallkit.empirics.config import config_hash, parse_config
from recallkit.empirics.engine import run_configs
from recallkit.theory.errors import InputError

BASE = dict(task="token_retrieval", model="attention-only", trainer="adam", V=16, N=64, L=4, d=8, lr=0.1,
            n_eval=256)


@pytest.mark.parametrize("batch", [None, 16])
def test_each_logged_epoch_equals_a_run_of_that_many_epochs(batch):
    extra = {} if batch is None else {"batch_size": batch}
    logged, *short = run_configs([dict(BASE, epochs=8, log_epochs=1, seed=3, **extra)]
                                 + [dict(BASE, epochs=k, seed=3, **extra) for k in (1, 2, 4)], progress=False)
    assert {k for k in logged if "_epoch_" in k} == {f"{m}_epoch_{e}" for m in ("accuracy", "train_accuracy")
                                                   for e in (1, 2, 4)}
    for k, run in zip((1, 2, 4), short):
        assert logged[f"accuracy_epoch_{k}"] == run["accuracy"]
        assert logged[f"train_accuracy_epoch_{k}"] == run["train_accuracy"]
    assert len({logged[f"accuracy_epoch_{k}"] for k in (1, 2, 4)} | {logged["accuracy"]}) > 1  # it does learn


def test_log_epochs_is_left_out_of_the_store_key_while_off_and_needs_epochs():
    plain = dict(BASE, epochs=4, seed=0)
    assert config_hash(parse_config(plain)) == config_hash(parse_config(dict(plain, log_epochs=0)))
    assert config_hash(parse_config(plain)) != config_hash(parse_config(dict(plain, log_epochs=1)))
    with pytest.raises(InputError, match="log_epochs: needs epochs"):
        parse_config(dict(BASE, steps=4, log_epochs=1, seed=0))
    with pytest.raises(InputError, match="log_epochs: expected 0 or 1"):
        parse_config(dict(BASE, epochs=4, log_epochs=2, seed=0))


def test_the_flop_model_counts_the_logged_evaluations():
    from recallkit.empirics.config import evaluations

    plain = parse_config(dict(BASE, epochs=16, seed=0))
    logged = parse_config(dict(BASE, epochs=16, log_epochs=1, seed=0))
    assert evaluations(plain.trainer_config) == 1 and evaluations(logged.trainer_config) == 5  # end, 1, 2, 4, 8
    assert evaluations(parse_config(dict(BASE, epochs=17, log_epochs=1, seed=0)).trainer_config) == 6
    one_more = parse_config(dict(BASE, epochs=16, seed=0, n_eval=2 * BASE["n_eval"]))  # one evaluation's fresh part
    extra = logged.task_config.train_flops(logged.trainer_config) - plain.task_config.train_flops(plain.trainer_config)
    fresh = one_more.task_config.train_flops(one_more.trainer_config) - plain.task_config.train_flops(plain.trainer_config)
    assert extra > 4 * fresh > 0  # four more evaluations, each of the fresh samples and of the training items


def test_epochs_after_every_model_stopped_hold_the_final_model():
    """Early stop ends the training before epoch 1 here (any accuracy above 0): every logged epoch is then the
    final model, as an epochs = k run of the same config would be."""
    (run,) = run_configs([dict(BASE, epochs=8, log_epochs=1, early_stop=0.0, seed=1)], progress=False)
    (short,) = run_configs([dict(BASE, epochs=2, early_stop=0.0, seed=1)], progress=False)
    assert run["steps_run"] == 0
    assert [run[f"accuracy_epoch_{k}"] for k in (1, 2, 4)] == [run["accuracy"]] * 3 == [short["accuracy"]] * 3

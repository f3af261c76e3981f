"""The one memory check of a run now (``cost.check_free_memory``): a model larger than the device's total
memory is refused naming the device (freeing memory would not help), one that fits the device but not what
is free now names what bounds it, and each distinct config is estimated once."""
import pytest

from recallkit.empirics import cost
from recallkit.empirics.config import ModelTooLarge, parse_config

GIB = 2**30


def _config(N: int) -> dict:
    return dict(task="assoc_memory", model="linear", trainer="adamw", N=N, d=64, lr=1.0, steps=1)


def _bytes(config: dict) -> int:
    parsed = parse_config(config)
    return parsed.task_config.bytes_per_model(parsed.trainer_config)


@pytest.fixture
def memory(monkeypatch):
    """Set the device's total and what is free now (with the bound's words)."""
    def set_(total: int, free: int, words: str = "left under this process's cgroup memory limit"):
        monkeypatch.setattr(cost, "memory_available", lambda device=None: total)
        monkeypatch.setattr(cost, "free_memory", lambda device=None: (free, words))
    return set_


def test_a_model_above_the_device_total_names_the_device_even_where_less_is_free(memory):
    need = _bytes(_config(4096))
    memory(total=need - 1, free=need // 2)
    with pytest.raises(ModelTooLarge, match=r"of memory of this device$"):
        cost.check_free_memory([_config(4096)], where="w")


def test_a_model_that_fits_the_device_but_not_what_is_free_names_the_free_bound(memory):
    need = _bytes(_config(4096))
    memory(total=need * 4, free=need - 1)
    with pytest.raises(ModelTooLarge, match=r"^w: one model \(N=4096, d=64\) needs about .* GiB left under this "
                                            r"process's cgroup memory limit$"):
        cost.check_free_memory([_config(4096)], where="w")


def test_a_model_within_both_bounds_passes_and_no_config_reads_no_memory(memory, monkeypatch):
    need = _bytes(_config(4096))
    memory(total=need * 4, free=need * 2)
    cost.check_free_memory([_config(4096), _config(4096)])
    monkeypatch.setattr(cost, "free_memory", lambda device=None: pytest.fail("read memory with nothing to check"))
    cost.check_free_memory([])

"""How many models of one shape the engine trains together (empirics.engine.models_per_chunk)."""
import pytest
import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.engine import CPU_BATCH_PASS_BYTES, models_per_chunk, run_configs, split_evenly

LARGE = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=512, d=512, N=11585, L=22,
             eta=1e-3, gamma=1e8, n_eval=4096)  # tr_fig2's largest quick cell: a 16 MiB pass per model
SMALL = dict(LARGE, V=64, d=16, N=512, L=8, n_eval=256)
PLENTY = 1 << 40  # a memory budget that limits nothing


def test_on_the_cpu_models_whose_pass_leaves_the_cache_train_one_at_a_time():
    large = parse_config(LARGE)
    assert large.task_config.pass_bytes(large.trainer_config) > CPU_BATCH_PASS_BYTES // 2
    assert models_per_chunk(large, torch.device("cpu"), PLENTY) == 1
    small = parse_config(SMALL)
    assert models_per_chunk(small, torch.device("cpu"), PLENTY) == CPU_BATCH_PASS_BYTES // small.task_config.pass_bytes(small.trainer_config)
    assert models_per_chunk(small, torch.device("cpu"), PLENTY) > 8


def test_the_cache_cap_is_for_the_cpu_only_and_memory_still_binds():
    large = parse_config(LARGE)
    per_model = large.task_config.bytes_per_model(large.trainer_config)
    assert models_per_chunk(large, torch.device("cuda"), PLENTY) == PLENTY // per_model
    assert models_per_chunk(large, torch.device("cuda"), 3 * per_model) == 3
    assert models_per_chunk(large, torch.device("cuda"), per_model // 2) == 1
    adam = parse_config(dict(task="assoc_memory", model="linear", trainer="adamw", N=64, d=16, steps=10, lr=0.1))
    assert not hasattr(adam.task_config, "pass_bytes")  # no pass counted: only the memory budget
    assert models_per_chunk(adam, torch.device("cpu"), 5 * adam.task_config.bytes_per_model(adam.trainer_config)) == 5


@pytest.mark.parametrize("n, most, sizes", [(7, 3, [3, 2, 2]), (6, 5, [3, 3]), (4, 1, [1, 1, 1, 1]), (5, 9, [5]), (0, 2, [])])
def test_split_evenly(n, most, sizes):
    parts = split_evenly(list(range(n)), most)
    assert [len(p) for p in parts] == sizes
    assert [i for p in parts for i in p] == list(range(n))


def test_run_configs_batches_small_shapes_together():
    rows = run_configs([{**SMALL, "seed": s} for s in range(3)], progress=False)
    assert [r["batched_models"] for r in rows] == [3, 3, 3]

"""The three fact_bijections models: what each trains, what it counts, and that they share their draws."""
import pytest
import torch

from recallkit.empirics.config import parse_config
from recallkit.empirics.engine import run_configs
from recallkit.empirics.tasks import build_problem
from recallkit.theory.errors import InputError

BASE = dict(task="fact_bijections", trainer="adam", N=10, R=3, d=8, lr=0.01, steps=1, seed=0)


def problem(model):
    return build_problem([parse_config({**BASE, "model": model})], torch.device("cpu"))


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_frozen_keeps_subjects_and_attributes_at_the_learned_models_initial_draw():
    learned, subjects_only, frozen = problem("learned"), problem("frozen-subjects"), problem("frozen")
    assert set(learned.params) == {"Es", "Er", "W1", "b1", "W2", "U"}
    assert set(subjects_only.params) == {"Er", "W1", "b1", "W2", "U"}
    assert set(frozen.params) == {"Er", "W1", "b1", "W2"}
    assert torch.equal(frozen.frozen_subjects, learned.params["Es"])
    assert torch.equal(frozen.frozen_unembedding, learned.params["U"])
    # rows on the unit sphere, as the paper's random embeddings
    assert torch.allclose(frozen.frozen_unembedding.norm(dim=-1), torch.ones(1, 10))
    for name in ("Er", "W1", "W2"):
        assert torch.equal(frozen.params[name], learned.params[name])
    # same weights -> same logits: the models differ only in what is trained
    facts = torch.arange(30)[None]
    assert torch.equal(frozen.forward(frozen.params, facts), learned.forward(learned.params, facts))


def test_param_count_counts_every_learned_per_entity_table():
    counts = {m: parse_config({**BASE, "model": m}) for m in ("learned", "frozen-subjects", "frozen")}
    rest = 3 * 8 + 2 * 32 * 8 + 32  # E_r, W1, W2, b1 (m = 4d = 32)
    assert counts["learned"].param_count == 2 * 10 * 8 + rest
    assert counts["frozen-subjects"].param_count == 10 * 8 + rest
    assert counts["frozen"].param_count == rest
    assert [counts[m].task_config.learned_entity_tables for m in counts] == [2, 1, 0]


def test_unknown_model_is_one_line():
    with pytest.raises(InputError, match="^model: expected one of learned, frozen-subjects, frozen, got 'frozn'$"):
        parse_config({**BASE, "model": "frozn"})


def test_frozen_tables_do_not_move_and_the_frozen_model_stores_less():
    # N = 64, R = 4, d = 8: measured 1.0 / 1.0 / 0.48 and 0.49 (seeds 0, 1; 1000 full-batch Adam steps)
    config = dict(BASE, N=64, R=4, d=8, steps=1000, early_stop=1 - 0.5 / 256)
    out = {m: run_configs([{**config, "model": m, "seed": s} for s in (0, 1)], progress=False)
           for m in ("learned", "frozen")}
    assert [o["accuracy"] for o in out["learned"]] == [1.0, 1.0]
    assert all(0.3 < o["accuracy"] < 0.7 for o in out["frozen"])
    again = run_configs([{**config, "model": "frozen", "seed": 1}], progress=False)[0]
    assert again["accuracy"] == out["frozen"][1]["accuracy"]  # same seed, same number, alone or batched

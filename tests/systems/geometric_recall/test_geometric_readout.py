"""Readout probes: two decoders, the shuffled-label control, the superposition R^2 and the size rule."""
import numpy as np
import pytest

from recallkit.systems.geometric_recall import runners as g
from recallkit.theory.errors import InputError


def as_model(subjects, built):
    return g.TrainedFactModel(model="x", seed=0, bijections=built.bijections, subject_embeddings=subjects,
                              relation_embeddings=built.relation_embeddings, w1=built.w1, b1=built.b1, w2=built.w2,
                              unembedding=built.unembedding, train_accuracy=1.0, steps_run=0, config={})


def test_the_construction_is_read_out_exactly_by_both_decoders_and_not_by_the_control():
    built = g.construction_as_model(g.build_construction(256, 2, 8, codes="binary"))  # d = 18 <= 192 / 8
    probe = g.readout_probe(built, test_fraction=0.25, seed=0)
    assert probe["linear"]["test"] == 1.0 and probe["logit"]["test"] == 1.0
    assert probe["shuffled"]["test"] < 0.05 and probe["selectivity"] > 0.95
    assert probe["superposition"]["r2"] == pytest.approx(1.0) and probe["superposition"]["chance"] == 2 * 18 / 256
    assert probe["n_train_subjects"] == 192 and probe["linear"]["ridge"] in g.RIDGE_GRID


def test_random_subject_embeddings_read_out_at_chance_and_fit_at_the_chance_r2():
    built = g.build_construction(256, 2, 8, codes="binary")
    rng = np.random.default_rng(0)
    model = as_model(rng.standard_normal((256, 18)), built)
    model.unembedding = rng.standard_normal((256, 18))  # full-rank attribute vectors, as the frozen model's
    probe = g.readout_probe(model, seed=0)
    assert probe["linear"]["test"] < 0.05 and probe["logit"]["test"] < 0.05
    assert abs(probe["superposition"]["r2"] - probe["superposition"]["chance"]) < 0.06


def test_too_few_training_subjects_is_one_line():
    built = g.construction_as_model(g.build_construction(64, 2, 6, codes="binary"))  # d = 14: needs 112
    with pytest.raises(InputError, match=r"^probes: 48 training subjects for a 14 x 14 readout; the protocol needs "
                                         r"at least 8 d = 112"):
        g.readout_probe(built)
    with pytest.raises(InputError, match=r"probes: 192 training subjects \(N = 256, test_fraction = 0.25\) for d = 32"):
        g.run_probe_experiment(256, [2], [16, 32], [0])


def test_shipped_presets_follow_the_protocol():
    for preset in ("quick", "paper"):
        s = g.load_geometric_experiment("geometric_probes", preset)["settings"]
        assert s["N"] * (1 - s["test_fraction"]) >= 8 * max(s["d"]) and set(s["R"]) >= {2, 4}
        assert {"learned", "frozen"} <= set(s["models"])


def test_one_r_or_d_reads_as_a_list_and_a_bad_one_is_named(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[geometric]\nname="p"\nkind="probes"\n[geometric.presets.quick]\nN=128\nR=2\nd=[4, 8]\n')
    settings = g.load_geometric_experiment(path)["settings"]
    assert settings["R"] == [2] and settings["d"] == [4, 8]
    path.write_text('[geometric]\nname="p"\nkind="probes"\n[geometric.presets.quick]\nN=128\nR=[2, 0]\nd=8\n')
    with pytest.raises(InputError, match=r"presets.quick.R: expected a positive integer or list of positive integers"):
        g.load_geometric_experiment(path)

"""Linear readout probes, zero-shot transfer and multi-hop on small trained models (a few seconds)."""
import json

import numpy as np

from recallkit.systems.geometric_recall import runners as g


def test_probe_is_perfect_on_the_construction_and_chance_on_noise():
    built = g.build_construction(128, 3, 20, seed=0)
    probe = g.linear_readout_probe(built.subject_embeddings, built.unembedding, built.bijections)
    assert probe["test_accuracy"] == 1.0
    rng = np.random.default_rng(0)
    noise = g.linear_readout_probe(rng.standard_normal((128, 60)), built.unembedding, built.bijections)
    assert noise["test_accuracy"] < 0.2  # held-out subjects: random embeddings carry no attribute code


def test_trained_snapshot_matches_engine_accuracy_and_stops_at_100_percent():
    models = g.train_fact_models(32, 2, 8, "learned", [0, 1], steps=1500)
    for m in models:
        assert m.train_accuracy == 1.0 and m.accuracy() == 1.0  # numpy forward = engine forward
        assert m.steps_run < 1500
    frozen = g.train_fact_models(32, 2, 8, "frozen-subjects", [0], steps=1500)[0]
    again = g.train_fact_models(32, 2, 8, "frozen-subjects", [0], steps=1500)[0]
    np.testing.assert_array_equal(frozen.unembedding, again.unembedding)  # same seed, same numbers


def test_too_small_d_fails_the_full_accuracy_criterion():
    (m,) = g.train_fact_models(32, 4, 2, "learned", [0], steps=300)
    assert m.train_accuracy < 1.0 and m.accuracy() < 1.0


def test_zero_shot_smart_init_beats_random_and_embedding_training_helps():
    (trained,) = g.train_fact_models(64, 2, 24, "learned", [0], steps=300, stop_at_full_accuracy=False)
    out = g.zero_shot_transfer(trained, seed=0, steps=60)
    assert out["smart"]["accuracy_no_training"] > out["random"]["accuracy_no_training"] + 0.2
    assert out["random"]["accuracy_after"] > out["random"]["accuracy_no_training"]
    json.dumps(out)


def test_composites_and_chain_of_thought():
    base = np.array([[1, 2, 0], [2, 0, 1]])
    maps, chains = g.composite_bijections(base, 2)
    assert chains[1] == (0, 1) and list(maps[1]) == [0, 1, 2]  # pi_1 after pi_0 is the identity here
    (one_hop,) = g.train_fact_models(16, 2, 8, "learned", [0], steps=1500)
    assert g.chain_of_thought_accuracy(one_hop, 3) == 1.0  # exact one-hop recall gives exact chains
    one_hop.unembedding[[0, 1]] = one_hop.unembedding[[1, 0]]  # break two answers: chains through them fail
    assert g.chain_of_thought_accuracy(one_hop, 2) < 1.0


def test_grid_bisection_finds_the_first_success():
    calls = []
    value, probes = g.smallest_succeeding_on_grid([1, 2, 4, 8, 16, 32], lambda d: calls.append(d) or d >= 5)
    assert value == 8 and probes == {32: True, 4: False, 8: True} and calls == [32, 4, 8]
    assert g.smallest_succeeding_on_grid([1, 2], lambda d: False)[0] is None

"""The runners' fast paths give the numbers of the plain computations they replace."""
import math

import numpy as np
import pytest

from recallkit.systems.geometric_recall.runners import (
    _ChainModels, all_queries, build_construction, build_meet_in_the_middle, smallest_working_k,
    strict_argmax_correct, train_fact_models,
)


def _strict_by_copy(logits, answers):
    # the definition: the answer's logit beats every other one (a tie fails)
    target = logits[np.arange(len(answers)), answers]
    others = logits.copy()
    others[np.arange(len(answers)), answers] = -np.inf
    return target > others.max(axis=1)


def test_strict_argmax_counts_ties_and_nans_as_wrong_like_the_definition():
    rng = np.random.default_rng(0)
    logits = rng.integers(-2, 3, size=(400, 6)).astype(float)  # small integers: many ties
    logits[5, 2] = np.nan
    logits[7] = np.nan
    answers = rng.integers(0, 6, size=400)
    answers[5] = 2
    got = strict_argmax_correct(logits, answers)
    assert np.array_equal(got, _strict_by_copy(logits, answers))
    assert 0 < got.sum() < 400 and not got[5] and not got[7]


@pytest.mark.parametrize("n,r,k,codes", [(64, 1, 6, "binary"), (64, 3, 5, "random"), (100, 4, 14, "random"),
                                         (128, 2, 7, "binary")])
def test_relation_by_relation_logits_are_the_dense_ones(n, r, k, codes):
    built = build_construction(n, r, k, seed=1, codes=codes)
    subjects, relations, answers = all_queries(built.bijections)
    dense = built.logits(subjects, relations)
    for relation in range(r):
        rows = relations == relation
        assert np.array_equal(built.relation_logits(relation), dense[rows])
    assert built.accuracy() == float(strict_argmax_correct(dense, answers).mean())


def test_a_construction_with_fractional_weights_is_scored_densely():
    built = build_construction(64, 3, 6, seed=0, gain=0.3)  # not exact in float64: the plain network decides
    assert not built._exact()
    subjects, relations, answers = all_queries(built.bijections)
    assert built.accuracy() == float(strict_argmax_correct(built.logits(subjects, relations), answers).mean())


@pytest.mark.parametrize("n,r,codes", [(16, 1, "random"), (64, 2, "random"), (200, 3, "random"), (64, 3, "binary")])
def test_smallest_working_k_is_the_first_k_at_full_accuracy(n, r, codes):
    start = math.ceil(math.log2(n))
    scanned = next(k for k in range(start, 65) if build_construction(n, r, k, seed=2, codes=codes).accuracy() == 1.0)
    assert smallest_working_k(n, r, seed=2, codes=codes) == scanned


def test_meet_in_the_middle_chain_logits_are_the_dense_ones_below_the_stated_d_too():
    built = build_meet_in_the_middle(32, 2, 3, k=4, seed=1)  # one bit short: ties, some chains wrong
    subjects = np.arange(32)
    for chain in range(built.n_relations):
        assert np.array_equal(built.chain_logits(chain), built.logits(subjects, np.full(32, chain)))
    assert built.accuracy() < 1.0


def test_the_one_hop_model_is_the_no_cot_model_of_one_hop():
    # the multi-hop runner trains it once for both: with the base bijections as an explicit override it is the same
    models = _ChainModels(16, 2, seeds=[3], model="learned", lr=1e-2, steps=60, device="cpu")
    shared = models.no_cot(3, 1, 4)
    (overridden,) = train_fact_models(16, 2, 4, "learned", [3], lr=1e-2, steps=60, bijections_override=[models.base[3]])
    assert np.array_equal(shared.bijections, overridden.bijections)
    for name in ("subject_embeddings", "w1", "w2", "unembedding"):
        assert np.array_equal(getattr(shared, name), getattr(overridden, name))
    assert models.no_cot(3, 1, 4) is shared  # asked again (d_fixed after the grid search): not retrained


def test_the_seeds_trained_together_are_the_models_trained_alone():
    # the multi-hop runner trains every seed's model of a (hops, d) in one batch: each must be its own model
    together = _ChainModels(16, 2, seeds=[3, 5], model="learned", lr=1e-2, steps=60, device="cpu")
    for seed in (3, 5):
        alone = _ChainModels(16, 2, seeds=[seed], model="learned", lr=1e-2, steps=60, device="cpu").no_cot(seed, 2, 4)
        batched = together.no_cot(seed, 2, 4)
        assert batched.seed == alone.seed == seed and batched.steps_run == alone.steps_run
        assert np.array_equal(batched.bijections, alone.bijections)
        for name in ("subject_embeddings", "relation_embeddings", "w1", "w2", "unembedding"):
            assert np.array_equal(getattr(batched, name), getattr(alone, name))
    assert len(together._trained) == 2  # the second seed's model came from the first seed's batch

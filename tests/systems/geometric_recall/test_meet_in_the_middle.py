"""Multi-hop recall without chain-of-thought: the meet-in-the-middle construction, and the counting bound
over every learned table."""
import math

import pytest

from recallkit import registry
from recallkit.systems.geometric_recall.config import FactBijectionsConfig
from recallkit.systems.geometric_recall.runners import (
    build_meet_in_the_middle, counting_lower_bound_d, load_geometric_experiment, meet_in_the_middle_d,
    run_construction_experiment,
)
from recallkit.theory.errors import InputError
from recallkit.theory.pack import load_pack
from recallkit.theory.regions import compute_regions

EXPERIMENTS = registry.get("geometric_recall").experiments_dir


@pytest.mark.parametrize("n,r,h,d", [(256, 4, 2, 68), (256, 8, 2, 134), (128, 4, 3, 146)])
def test_stated_d_matches_the_measured_numbers(n, r, h, d):
    # (R^ceil(h/2) + R^floor(h/2)) log2 N + h log2 R
    assert meet_in_the_middle_d(n, r, h) == d


@pytest.mark.parametrize("n,r,h", [(256, 4, 2), (256, 8, 2), (128, 4, 3)])
def test_exact_at_the_stated_d_at_the_measured_points(n, r, h):
    built = build_meet_in_the_middle(n, r, h, seed=0)
    assert built.d == meet_in_the_middle_d(n, r, h)
    assert built.accuracy() == 1.0


GRID = [(n, r, h) for n in (8, 20, 32) for r in (1, 2, 3, 4) for h in (1, 2, 3)]


@pytest.mark.parametrize("n,r,h", GRID)
def test_exact_at_the_stated_d_over_a_grid_and_not_one_bit_less(n, r, h):
    built = build_meet_in_the_middle(n, r, h, seed=1)
    assert built.d == meet_in_the_middle_d(n, r, h)
    assert built.n_relations == r**h and built.bijections.shape == (r**h, n)
    assert built.accuracy() == 1.0
    # one bit less: fewer codes than entities, so two pre-images share a code and the answer ties
    assert build_meet_in_the_middle(n, r, h, k=math.ceil(math.log2(n)) - 1, seed=1).accuracy() < 1.0


def test_it_answers_the_composed_chains_not_the_base_relations():
    built = build_meet_in_the_middle(32, 3, 2, seed=2)
    # row (r1, r2) of the chain table is pi_r2(pi_r1(s))
    base = built.base_bijections
    assert (built.bijections[1 * 3 + 2] == base[2][base[1]]).all()
    assert built.accuracy() == 1.0


def test_bad_hops_is_one_line():
    with pytest.raises(InputError, match="hops: expected a positive integer") as info:
        build_meet_in_the_middle(16, 2, 0)
    assert "\n" not in str(info.value)


def test_counting_bound_counts_every_learned_table():
    n, r = 1024, 4
    bits = r * math.lgamma(n + 1) / math.log(2)
    bound = counting_lower_bound_d(n, r)
    # at the bound, the learned model's trainable parameters (E_s, U, E_r, W1, b1, W2) hold R log2(N!) bits
    assert FactBijectionsConfig("learned", n, r, math.ceil(bound)).param_count >= bits
    assert FactBijectionsConfig("learned", n, r, math.floor(bound)).param_count < bits
    # the subject table alone needs about twice as many coordinates: U is learned too
    subjects_only = counting_lower_bound_d(n, r, model=None)
    assert subjects_only == pytest.approx(bits / n)
    assert 0.4 < bound / subjects_only < 0.5
    # the frozen control learns no per-entity table: its facts must fit in E_r and the MLP
    frozen = counting_lower_bound_d(n, r, model="frozen")
    assert FactBijectionsConfig("frozen", n, r, math.ceil(frozen)).param_count >= bits > \
        FactBijectionsConfig("frozen", n, r, math.floor(frozen)).param_count
    assert frozen > subjects_only


def test_experiment_verifies_the_grid_and_names_what_it_skipped():
    out = run_construction_experiment([16], [1], [0], codes=["binary"], mitm_n=[16, 32], mitm_r=[2, 4],
                                      mitm_hops=[2, 3], mitm_max_chains=16)
    mitm = out["meet_in_the_middle"]
    ran = {(p["N"], p["R"], p["hops"]) for p in mitm["points"]}
    assert ran == {(16, 2, 2), (16, 2, 3), (16, 4, 2), (32, 2, 2), (32, 2, 3), (32, 4, 2)}
    assert {(p["N"], p["R"], p["hops"]) for p in mitm["skipped"]} == {(16, 4, 3), (32, 4, 3)}
    for p in mitm["points"]:
        assert p["d"] == p["d_stated"] == meet_in_the_middle_d(p["N"], p["R"], p["hops"])
        assert p["accuracy_at_stated"] == 1.0 and p["accuracy_one_bit_less"] < 1.0
    assert mitm["verdict"] == "consistent" and out["verdict"] == "consistent"
    assert "meet-in-the-middle" in out["verdict_reason"]
    # every point carries the counting bound over every learned table and the subject table's alone
    assert all(p["counting_bound_d"] < p["counting_bound_d_subjects"] for p in out["points"])


def test_without_the_grid_the_experiment_is_as_before():
    out = run_construction_experiment([16], [1], [0], codes=["binary"])
    assert "meet_in_the_middle" not in out


def test_shipped_quick_preset_covers_the_measured_points():
    settings = load_geometric_experiment(EXPERIMENTS / "geometric_construction.toml", "quick")["settings"]
    grid = {(n, r, h) for n in settings["mitm_N"] for r in settings["mitm_R"] for h in settings["mitm_hops"]
            if r**h <= settings["mitm_max_chains"]}
    assert {(256, 4, 2), (256, 8, 2), (128, 4, 3)} <= grid


def test_pack_states_the_construction_cost_the_counting_bound_and_the_open_part():
    pack = load_pack("geometric_recall")
    terms = {t.name: t for t in pack.terms}
    assert "ceil" in terms["chains_no_cot"].source and terms["chains_no_cot"].provenance == "derived-here"
    assert pack.param_count.free_symbols and str(pack.param_count) == "2*N*d"
    (bound,) = pack.lower_bounds
    assert bound.provenance == "derived-here" and "every learned table" in bound.note
    open_facts = [f for f in pack.facts if f.text.startswith("Open:") and "h >= 3" in f.text]
    assert len(open_facts) == 1 and open_facts[0].provenance == "derived-here"
    diagram = compute_regions(pack)
    assert diagram.corollary_agrees is True


def test_chain_by_chain_logits_are_the_networks_logits():
    import numpy as np

    built = build_meet_in_the_middle(20, 3, 3, seed=4)
    subjects = np.arange(20)
    for chain in (0, 13, 26):
        assert np.array_equal(built.chain_logits(chain), built.logits(subjects, np.full(20, chain)))

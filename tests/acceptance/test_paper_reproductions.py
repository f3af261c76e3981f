"""The paper's reproductions a user is promised, through the public API: every check that the quick preset of
``recallkit report`` decides ``consistent`` (a fitted scaling line at one threshold, or a comparative claim),
reproduced with ``recallkit.assert_scaling`` and ``recallkit.assert_claim``.

The expected verdicts are the ones a cold run of the main job (quick preset, empty store) wrote to its
summary.json; a check that run left inconclusive or inconsistent is not asserted here. ``expect`` lists the
verdicts of the fits at the threshold the test picks (``threshold=0.1``, or ``threshold="0.5 x ceiling"`` for a
relative one), and the test then asserts each consistent line of that threshold by name.

Slow: each experiment trains its quick preset once, into a store of its own shared by its tests
(assoc_memory_mlp about a minute on 2 cores; the cold main job trained all of these and more in about
14 minutes). Run with ``python -m pytest tests/acceptance -m slow``.

RECALLKIT_ACCEPTANCE_STORE=/path/to/store.db points every test at an existing results store instead (for
example a copy of the one ``recallkit report`` filled), so that only what it lacks is trained. The tests
may write to it (links of reused runs, any missing run), so give them a copy.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import recallkit
from recallkit.empirics.records import threshold_text

pytestmark = [pytest.mark.slow, pytest.mark.acceptance]

STORE_VARIABLE = "RECALLKIT_ACCEPTANCE_STORE"

BOTH = ("consistent", "inconclusive")

# (experiment, threshold, relative?, its lines consistent there, how many of its other lines were inconclusive
# there, the verdicts assert_scaling accepts for the fits at that threshold)
SCALING = [
    ("assoc_memory_linear", 0.99, False, ["linear"], 0, "consistent"),
    ("assoc_memory_mlp", 0.99, False, ["alpha=4"], 0, "consistent"),
    ("tr_fig1a_capacity", 0.5, False, ["L=4, m=d**2"], 2, BOTH),
    # the cold run of 2026-12-07: every prediction a priori (the schedule's attention, the form's own ceiling), the
    # rank-2 and centred packs with the system's one finite-size treatment (DERIVATION.md §11.8)
    ("tr_fig2_attention_only", 0.1, False, ["N=V**1.5, L=V**0.25"], 2, BOTH),
    ("tr_fig2_attention_only", 0.25, True, ["N=V**1.5, L=V**0.5"], 2, BOTH),
    ("tr_centring", 0.1, False, ["centred, N=4 V log V, L=8"], 1, BOTH),
    ("tr_fig3_attention_mlp_rank2", 0.1, False, ["N=V**1.5, L=V**0.25, m=d**2", "N=V*log(V), L=V**0.25, m=d**2"], 0,
     BOTH),
    ("tr_fig3_attention_mlp_rank2", 0.25, True, ["N=V**1.5, L=V**0.25, m=d**2", "N=V*log(V), L=V**0.25, m=d**2"], 0,
     BOTH),
    ("tr_fig3_attention_mlp_rank2", 0.5, True, ["N=V**1.5, L=V**0.25, m=d**2", "N=V*log(V), L=V**0.25, m=d**2"], 0,
     BOTH),
    ("tr_fig4_mlp_width_rank2", 0.1, False, ["N=V**1.5, L=V**0.25, m=d**2"], 2, BOTH),
    ("tr_fig4_mlp_width_rank2", 0.25, True,
     ["N=V**1.5, L=V**0.25, m=d", "N=V**1.5, L=V**0.25, m=d**2", "N=V**1.5, L=V**0.25, m=d**3"], 0, BOTH),
    ("tr_fig4_mlp_width_rank2", 0.5, True,
     ["N=V**1.5, L=V**0.25, m=d", "N=V**1.5, L=V**0.25, m=d**2", "N=V**1.5, L=V**0.25, m=d**3"], 0, BOTH),
]

# (experiment, claim id, the thresholds it is judged at): consistent at each of them in the cold run
CLAIMS = [
    ("tr_fig1a_capacity", "fig1a-rise-L05", [0.25, 0.5]),
    ("tr_fig1a_capacity", "fig1a-rise-L025", [0.25, 0.5]),
    ("tr_fig2_attention_only", "fig2c-n-regime-L05", [0.1]),
    ("tr_centring", "centring-level", [0.1, 0.2]),
    ("tr_centring", "centring-slope", [0.1, 0.2]),
    ("tr_fig3_attention_mlp_rank2", "fig3c-n-regime-L025", [0.1]),
    ("tr_fig4_mlp_width_rank2", "fig4c-width-L025", [0.1, 0.25, 0.5]),
    ("tr_fig5_adam", "fig5-epochs", [0.25, 0.5, 0.75]),
    ("tr_fig5_adam", "fig5-epochs-8v4", [0.25, 0.5, 0.75]),
]


@pytest.fixture(scope="module")
def store_for(tmp_path_factory):
    """experiment -> its results store: one per experiment, so each trains once for all its tests (or the
    store RECALLKIT_ACCEPTANCE_STORE names, for all of them)."""
    given = os.environ.get(STORE_VARIABLE)
    if given:
        if not Path(given).is_file():
            pytest.fail(f"{STORE_VARIABLE}: {given} is not a file; expected the path of an existing results store",
                        pytrace=False)
        return lambda experiment: Path(given)
    stores: dict[str, Path] = {}

    def store(experiment: str) -> Path:
        if experiment not in stores:
            stores[experiment] = tmp_path_factory.mktemp(experiment) / "store.db"
        return stores[experiment]

    return store


@pytest.mark.parametrize("experiment, threshold, relative, consistent, inconclusive, expect", SCALING,
                         ids=[f"{e}-{t}{'-relative' if r else ''}" for e, t, r, *_ in SCALING])
def test_scaling_line_is_consistent(store_for, experiment, threshold, relative, consistent, inconclusive, expect):
    label = threshold_text(threshold, relative) if relative else threshold  # as the report names a relative one
    fitted = recallkit.assert_scaling(experiment, expect=expect, preset="quick", threshold=label,
                                      store=store_for(experiment))
    mine = fitted.fits
    assert all(fit.threshold == threshold and bool(fit.extra.get("threshold_relative")) == relative for fit in mine)
    verdicts = {fit.line: fit.verdict.verdict for fit in mine}
    assert {line: verdicts.get(line) for line in consistent} == dict.fromkeys(consistent, "consistent"), verdicts
    assert len(mine) == len(verdicts) == len(consistent) + inconclusive, verdicts


@pytest.mark.parametrize("experiment, claim, thresholds", CLAIMS, ids=[claim for _, claim, _ in CLAIMS])
def test_claim_is_consistent(store_for, experiment, claim, thresholds):
    results = recallkit.assert_claim(experiment, claim, expect="consistent", preset="quick",
                                     store=store_for(experiment))
    assert {result.id for result in results} == {claim}
    assert sorted(result.a.threshold for result in results) == thresholds

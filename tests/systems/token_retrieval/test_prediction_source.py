"""Where token retrieval's tested predictions come from (DERIVATION.md §11.8): the one finite-size form and the packs
it covers (the centred pack now among them), the runs the probed constants were measured on, and the all-terms form's
own ceiling (its accuracy at a given d, the inverse of the d it solves for), through the prediction source."""
import inspect
import math

import pytest

from recallkit import theory
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan_of, realised_rows
from recallkit.systems.token_retrieval import judge
from recallkit.systems.token_retrieval.judge import (ARGMAX_ACCURACY, FINITE_SIZE_FORM, PROBED_CONSTANTS_CALIBRATION,
                                                     all_terms_accuracy, all_terms_prediction, argmax_snr,
                                                     finite_size_factor, hits_cap)
from recallkit.systems.token_retrieval.predictions import PREDICTION_SOURCE, TokenRetrievalPredictions
from recallkit.theory.pack import load_pack
from recallkit.theory.realised import realised_prediction

# tr_fig2_attention_only's quick rows of N = V^1.5, L = V^0.5 and its runs' mean attention (test_argmax_finite_size.py)
QUICK = {"points": [{"V": 64, "N": 512, "L": 8}, {"V": 128, "N": 1448, "L": 11}, {"V": 256, "N": 4096, "L": 16},
                    {"V": 512, "N": 11585, "L": 22}],
         "constants": [{"A": 0.27496}, {"A": 0.19963}, {"A": 0.14564}, {"A": 0.11084}]}
CEILING_SIZES = {64: 128, 128: 256, 256: 512, 512: 1024}  # d = 2V
PLAIN, CENTRED = "token_retrieval_attn", "token_retrieval_attn_centred"
UNCOVERED = ("token_retrieval_rank2_attended", "token_retrieval_capacity")


@pytest.mark.parametrize("level", [0.1, 0.15])
def test_the_all_terms_accuracy_at_the_solved_d_is_the_level_asked_for(level):
    """all_terms_accuracy reads the all-terms form the other way: at the d all_terms_prediction solves for a level,
    it gives that level back (the solver stops at 1e-4 in log d)."""
    found = all_terms_prediction(PLAIN, QUICK, {p["V"]: level for p in QUICK["points"]})
    assert found["slope"] is not None and len(found["d"]) == 4
    back = all_terms_accuracy(PLAIN, QUICK, found["d"])
    assert back == pytest.approx({V: level for V in found["d"]}, abs=1e-3)
    # and it is a function of d: more dimensions, more accuracy
    more = all_terms_accuracy(PLAIN, QUICK, {V: 2 * d for V, d in found["d"].items()})
    assert all(more[V] > back[V] + 0.01 for V in back)


def test_the_forms_ceiling_lies_between_chance_and_the_cap_of_the_counts():
    ceiling = all_terms_accuracy(PLAIN, QUICK, CEILING_SIZES)
    assert set(ceiling) == set(CEILING_SIZES)
    for point, constants in zip(QUICK["points"], QUICK["constants"]):
        V = point["V"]
        assert 1 / V < ceiling[V] < hits_cap(V, point["N"], point["L"], constants["A"])
    # str keys (a fit document's) are read too, and a row without a size is left out
    by_text = all_terms_accuracy(PLAIN, QUICK, {"64": 128, "128": 256})
    assert by_text == pytest.approx({64: ceiling[64], 128: ceiling[128]})
    # no all-terms form: no a priori ceiling
    for pack in (CENTRED, "token_retrieval", "token_retrieval_rank2", *UNCOVERED):
        assert all_terms_accuracy(pack, QUICK, CEILING_SIZES) is None


def test_the_centred_pack_takes_the_argmax_and_the_finite_l_normalisers():
    row, measured = {"V": 256, "N": 5678, "L": 8}, {"config": {"kappa": 1.0}}
    for term in ("signal", "grad_noise", "noise_self", "trigger_overlap"):
        factor = finite_size_factor(CENTRED, term, row, measured)
        assert isinstance(factor, float) and factor > 0
        # the centred pack's terms are the plain pack's: the same normalisers and the same argmax
        assert factor == pytest.approx(finite_size_factor(PLAIN, term, row, measured))
    bare = finite_size_factor(CENTRED, "grad_noise", row, measured, accuracy=None)
    assert finite_size_factor(CENTRED, "grad_noise", row, measured) / bare == pytest.approx(
        argmax_snr(0.1, 256) / math.sqrt(math.log(256)))
    at_level = finite_size_factor(CENTRED, "grad_noise", row, {**measured, "target": 0.2, "target_metric": "accuracy"})
    assert at_level / bare == pytest.approx(argmax_snr(0.2, 256) / math.sqrt(math.log(256)))
    constants = finite_size_factor(CENTRED, None, row, measured)
    assert constants["source"] == "the kappa schedule" and constants["kappa_prime"] == 1.0
    assert constants["accuracy"] == 0.1 and constants["argmax_snr"] == pytest.approx(argmax_snr(0.1, 256))
    assert constants["A"] == pytest.approx(math.e / (math.e + 7))


def test_the_rank2_pack_takes_the_argmax_and_the_uncovered_packs_get_none():
    row, measured = {"V": 128, "N": 1448, "L": 3}, {"attention_mass": 0.5}
    for term in ("kernel_crosstalk", "mlp_noise"):
        bare = finite_size_factor("token_retrieval_rank2", term, row, measured, accuracy=None)
        assert finite_size_factor("token_retrieval_rank2", term, row, measured) / bare == pytest.approx(
            argmax_snr(0.1, 128) / math.sqrt(math.log(128)))
    for pack in UNCOVERED:
        assert finite_size_factor(pack, "signal", row, measured) is None
        assert finite_size_factor(pack, None, row, measured) is None


def test_one_declaration_covers_every_pack_it_names_term_by_term():
    assert FINITE_SIZE_FORM.covers == (PLAIN, CENTRED, "token_retrieval", "token_retrieval_rank2")
    assert ARGMAX_ACCURACY == {pack: 0.1 for pack in FINITE_SIZE_FORM.covers}
    for pack in FINITE_SIZE_FORM.covers:
        table = judge._pack_normalisers(pack)
        kept = [t.name for t in load_pack(pack).terms if t.role in ("signal", "noise")]
        assert kept and all(name in table for name in kept), pack
    assert not set(UNCOVERED) & set(FINITE_SIZE_FORM.covers)
    assert all(judge._pack_normalisers(pack) is None for pack in UNCOVERED)


def _centred_slope(level):
    """tr_centring's centred line at the quick preset, as compare's finite-size form takes it without measured
    attention: the config's kappa (1), the argmax at the check's level."""
    plan = plan_of(load_experiment("tr_centring", preset="quick"))
    experiment, pack = plan.experiment, plan.pack
    line = next(line for line in experiment.lines if line.label.startswith("centred"))
    rows = realised_rows(experiment, pack, line)

    def factor(term, row):
        plain = {k: v for k, v in row.items() if not k.startswith("_")}
        return finite_size_factor(pack.name, term, plain, {"config": row["_config"], "target": level,
                                                           "target_metric": "accuracy"})

    return realised_prediction(pack, theory.parse_scaling(line.scaling), rows, factors=factor)["slope"]


def test_the_centred_line_is_predicted_with_the_argmax_at_its_two_levels():
    """DERIVATION.md §11.8: 1.559 at 0.1 and 1.400 at 0.2 over V = 64..512 (the union bound gave 1.195 at both)."""
    assert _centred_slope(0.1) == pytest.approx(1.559, abs=0.002)
    assert _centred_slope(0.2) == pytest.approx(1.400, abs=0.002)


def test_the_prediction_source_names_the_form_and_where_it_was_chosen():
    assert isinstance(PREDICTION_SOURCE, TokenRetrievalPredictions)
    for pack in FINITE_SIZE_FORM.covers:
        form = PREDICTION_SOURCE.form(pack)
        assert set(form) == {"name", "covers", "selected_on", "selected_experiment", "derivation"}
        assert form["selected_on"] == ["quick", "medium", "gpu"] and pack in form["covers"]
        assert form["selected_experiment"] == "tr_fig2_attention_only"
        assert form["derivation"] == "DERIVATION.md §11"
    for pack in UNCOVERED:
        assert PREDICTION_SOURCE.form(pack) is None
    # the presets named are tr_fig2_attention_only's
    for preset in FINITE_SIZE_FORM.selected_on:
        assert load_experiment(FINITE_SIZE_FORM.selected_experiment, preset=preset).base_values


def test_the_prediction_source_names_the_runs_of_the_probed_constants():
    (record,) = PREDICTION_SOURCE.calibrations(PLAIN)
    assert set(record) == {"experiment", "preset", "seeds", "base_values", "lines", "description"}
    assert record == PROBED_CONSTANTS_CALIBRATION.to_dict()
    quick = load_experiment(record["experiment"], preset=record["preset"])
    assert record["preset"] == "quick" and record["base_values"] == quick.base_values == [64, 128, 256, 512]
    assert sorted(record["lines"]) == sorted(line.label for line in quick.lines)
    # the seeds the probes ran at (boundary_terms' default), a subset of the preset's
    assert record["seeds"] == list(inspect.signature(judge.boundary_terms).parameters["seeds"].default) == [0, 1]
    assert set(record["seeds"]) <= set(quick.seeds)
    for pack in (CENTRED, "token_retrieval", "token_retrieval_rank2", *UNCOVERED):
        assert PREDICTION_SOURCE.calibrations(pack) == []


def test_the_prediction_source_gives_the_forms_ceiling_where_there_is_one():
    assert PREDICTION_SOURCE.ceiling(PLAIN, QUICK, CEILING_SIZES) == all_terms_accuracy(PLAIN, QUICK, CEILING_SIZES)
    assert PREDICTION_SOURCE.ceiling(CENTRED, QUICK, CEILING_SIZES) is None
    assert PREDICTION_SOURCE.ceiling("token_retrieval_capacity", QUICK, CEILING_SIZES) is None

"""Every noise term at once (DERIVATION.md §11.3): a check of the attention-only model is tested against the d at which
the argmax over V labels is right with the check's own probability, every term at its probed constant, the d-dependent
terms as one Gaussian spread, the label counts as the Poisson counts they are (the correct label's count is the
test token's), the exact hits of the test input's noise tokens (DERIVATION.md §4.5) and the coincidences of training
noise tokens with the test's tokens (§4.4), no constant fitted to the boundaries. The numbers below are the second GPU
run of tr_fig2_attention_only's gpu preset (V = 128..2048, 16 seeds, one H200): out of sample for every constant used."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
from recallkit.compare.assertions import fit_boundary_points, realised_predictions
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan_of
from recallkit.theory.errors import InputError
from recallkit.systems.token_retrieval.judge import (
    ALL_TERMS_CONSTANTS,
    PROBED_CONSTANTS,
    all_terms_prediction,
    coincidence_share,
    count_cap,
    count_mixture_accuracy,
    count_mixture_tau,
    hits_cap,
    sum_of_terms_prediction,
)

# the GPU run's realised rows and its runs' mean attention on the informative position (its finite-size constants A)
GPU_ROWS = {
    "N=V**1.5, L=V**0.5": ([(128, 1448, 11), (256, 4096, 16), (512, 11585, 22), (1024, 32768, 32), (2048, 92681, 45)],
                           [0.20167, 0.14604, 0.11073, 0.07853, 0.05708]),
    "N=V**1.5, L=V**0.25": ([(128, 1448, 3), (256, 4096, 4), (512, 11585, 4), (1024, 32768, 5), (2048, 92681, 6)],
                            [0.49535, 0.41504, 0.41436, 0.35777, 0.31535]),
    "N=V*log(V), L=V**0.5": ([(128, 621, 11), (256, 1419, 16), (512, 3194, 22), (1024, 7097, 32), (2048, 15615, 45)],
                             [0.20892, 0.14695, 0.11096, 0.07878, 0.05729]),
}
# its ceilings: seed-mean accuracy at d = 2V, V = 128 .. 2048
GPU_CEILINGS = {
    "N=V*log(V), L=V**0.5": [0.138, 0.1542, 0.1214, 0.1237, 0.1139],
    "N=V**1.5, L=V**0.5": [0.2515, 0.2793, 0.3134, 0.396, 0.4663],
    "N=V**1.5, L=V**0.25": [0.3391, 0.4133, 0.5034, 0.6302, 0.7371],
}
# what it measured (seed-curve fits: slope and 90% interval): every check with a slope (the other two, N ~ V log V at
# 0.125 and 0.15, lie above that line's ceiling at V >= 512: censored)
MEASURED = {("N=V**1.5, L=V**0.5", 0.1): (1.538, 1.485, 1.592), ("N=V**1.5, L=V**0.5", 0.125): (1.444, 1.383, 1.504),
            ("N=V**1.5, L=V**0.5", 0.15): (1.386, 1.315, 1.457),
            ("N=V**1.5, L=V**0.5", "0.25 x ceiling"): (2.010, 1.937, 2.083),
            ("N=V**1.5, L=V**0.5", "0.5 x ceiling"): (1.812, 1.718, 1.906),
            ("N=V**1.5, L=V**0.25", 0.1): (1.497, 1.432, 1.562), ("N=V**1.5, L=V**0.25", 0.125): (1.527, 1.392, 1.661),
            ("N=V**1.5, L=V**0.25", 0.15): (1.347, 1.267, 1.428),
            ("N=V**1.5, L=V**0.25", "0.25 x ceiling"): (1.826, 1.767, 1.884),
            ("N=V**1.5, L=V**0.25", "0.5 x ceiling"): (1.684, 1.586, 1.782),
            ("N=V*log(V), L=V**0.5", 0.1): (2.369, 2.270, 2.468),
            ("N=V*log(V), L=V**0.5", "0.25 x ceiling"): (2.185, 2.082, 2.288),
            ("N=V*log(V), L=V**0.5", "0.5 x ceiling"): (2.156, 1.970, 2.342)}
BINDING_01 = {"N=V**1.5, L=V**0.5": 1.763, "N=V**1.5, L=V**0.25": 1.476}


def _finite_size(label):
    rows, masses = GPU_ROWS[label]
    return {"points": [{"V": V, "N": N, "L": L} for V, N, L in rows], "constants": [{"A": a} for a in masses]}


def _line(label):
    """The line as sum_of_terms_prediction reads it: the attention-only pack and the GPU run's realised rows."""
    return {"pack": "token_retrieval_attn", "realised": {"finite_size": _finite_size(label)}}


def _at(level, label):
    if isinstance(level, str):  # a fraction of each V's ceiling
        fraction = float(level.split()[0])
        return {V: fraction * c for (V, _, _), c in zip(GPU_ROWS[label][0], GPU_CEILINGS[label])}
    return {V: level for V, _, _ in GPU_ROWS[label][0]}


N_LOG_N_01 = ("N=V*log(V), L=V**0.5", 0.1)
@pytest.mark.parametrize("label, level", sorted(set(MEASURED) - {N_LOG_N_01}, key=str))
def test_every_term_at_once_is_consistent_with_the_gpu_run(label, level):
    """Each of these checks' 90% interval lies inside the +-0.25 band around the prediction: the run decides these 12
    'consistent', out of sample (the constants were probed at V <= 512 on the CPU). With the counts folded into one
    Gaussian spread it decided 9 of the 13."""
    found = all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(level, label))
    _, low, high = MEASURED[(label, level)]
    assert found["slope"] - 0.25 <= low and high <= found["slope"] + 0.25


def test_the_coincidences_make_n_v_log_v_at_01_steeper_than_the_gpu_run_measured():
    """The twelfth: the coincidences (§4.4) lower that line's cap to 0.15 at V = 2048, and 0.1 comes near it, so the
    prediction steepens from 2.28 (without the coincidences) to 2.55 against the 2.37 measured: inside the band, but
    the run's interval is not, so it cannot decide it (the medium preset, V = 64..1024, measured 2.55 and reads it
    consistent). The level is the run's: 3499 at V = 2048 against 3332 measured (1974 without the coincidences; 2466
    before §11.5 and §11.6)."""
    label, level = N_LOG_N_01
    found = all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(level, label))
    slope, low, _ = MEASURED[N_LOG_N_01]
    assert found["slope"] == pytest.approx(2.548, abs=0.002)
    # the parameter count compare fits over a subset of V (where a point is censored) is the pack's d^2
    assert found["param_count"] == {V: pytest.approx(d * d) for V, d in found["d"].items()}
    assert abs(found["slope"] - slope) < 0.25 and not (found["slope"] - 0.25 <= low)
    line = _line(label)
    without = sum_of_terms_prediction(line, None, None, accuracy=_at(level, label), constants=PROBED_CONSTANTS, C=1.0,
                                      counts="mean_bias_counts", exact_hits=True, own_counts=True)
    assert without["slope"] == pytest.approx(2.282, abs=0.002)
    assert 3331.9 / found["d"][2048] < 3331.9 / without["d"][2048] - 0.5
    assert found["d"][2048] == pytest.approx(3331.9, rel=0.1)


@pytest.mark.parametrize("level", ["0.25 x ceiling", "0.5 x ceiling"])
def test_the_counts_kept_as_counts_decide_the_n_v_log_v_fractions_of_the_ceiling(level):
    """On N ~ V log V (a few samples per token) the label counts are far from one Gaussian spread: folded into one,
    the prediction is 0.28-0.38 steeper than what the run measured, and the run cannot decide it; kept as Poisson
    counts (with the exact hits, the coincidences and the own counts), it is within 0.1."""
    label = "N=V*log(V), L=V**0.5"
    found = all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(level, label))
    slope, low, high = MEASURED[(label, level)]
    assert abs(found["slope"] - slope) < 0.1
    assert found["slope_gaussian_counts"] - slope > 0.25
    assert (found["slope_gaussian_counts"] - slope) - abs(found["slope"] - slope) > 0.15
    assert not (found["slope_gaussian_counts"] - 0.25 <= low and high <= found["slope_gaussian_counts"] + 0.25)


@pytest.mark.parametrize("level", [0.125, 0.15])
def test_the_exact_hits_and_the_own_counts_bring_the_higher_levels_of_n_v15_l_v05_down(level):
    """The labels of the test input's noise tokens get a d-free share of the signal (r = 0.38 of it per count at
    L = 45 here): the other cap besides the counts. With them (their own labels in the mixture, their overlaps with the
    other labels as one more spread, §11.5) the predictions for N = V^1.5, L = V^0.5 at 0.125 and 0.15 come down by
    0.05-0.07; with the own-sample terms at each label's own count (§11.6) by 0.08-0.09 more, to 1.50 and 1.42 against
    the 1.44 and 1.39 the run measured. (The coincidences are taken in all.)"""
    label = "N=V**1.5, L=V**0.5"
    line = _line(label)
    common = {"accuracy": _at(level, label), "constants": PROBED_CONSTANTS, "C": 1.0, "counts": "mean_bias_counts",
              "coincidences": True}
    without = sum_of_terms_prediction(line, None, None, own_counts=True, **common)["slope"]
    with_hits = sum_of_terms_prediction(line, None, None, exact_hits=True, own_counts=True, **common)["slope"]
    one_tau = sum_of_terms_prediction(line, None, None, exact_hits=True, **common)["slope"]
    _, low, high = MEASURED[(label, level)]
    assert without - with_hits > 0.04 and one_tau - with_hits > 0.07
    assert abs(with_hits - MEASURED[(label, level)][0]) < 0.07
    assert with_hits - 0.25 <= low and high <= with_hits + 0.25
    assert with_hits == pytest.approx(all_terms_prediction("token_retrieval_attn", _finite_size(label),
                                                           _at(level, label))["slope"])


def test_the_pinned_slopes_and_levels():
    slopes, gaussian, at_2048 = {}, {}, {}
    for label in GPU_ROWS:
        found = all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(0.1, label))
        slopes[label], gaussian[label], at_2048[label] = found["slope"], found["slope_gaussian_counts"], found["d"][2048]
    assert slopes == pytest.approx({"N=V**1.5, L=V**0.5": 1.585, "N=V**1.5, L=V**0.25": 1.499,
                                    "N=V*log(V), L=V**0.5": 2.548}, abs=0.002)
    assert gaussian == pytest.approx({"N=V**1.5, L=V**0.5": 1.591, "N=V**1.5, L=V**0.25": 1.454,
                                      "N=V*log(V), L=V**0.5": 2.645}, abs=0.002)
    # the levels: every line within 10% of the d the run measured at V = 2048 (623, 346 and 3332: 615, 353 and 3499
    # now; N ~ V log V was
    # 1.35 times too small before the hits' overlaps, the coincidences' coherent mean and the own counts, §11.5,
    # §11.6, and 1.9 times before the coincidences)
    assert at_2048["N=V**1.5, L=V**0.5"] == pytest.approx(623.5, rel=0.1)
    assert at_2048["N=V**1.5, L=V**0.25"] == pytest.approx(346.3, rel=0.1)
    assert at_2048["N=V*log(V), L=V**0.5"] == pytest.approx(3331.9, rel=0.1)


def test_the_count_mixture_is_its_model():
    """count_mixture_accuracy against a simulation of the model it integrates: counts Poisson(N/V), label k's logit
    n_k + tau z_k, the correct label's (its count the test token's) 2 n_x + tau z_0, with hits the labels of the
    L - 1 noise tokens r n_k more, and with the coincidences every label rho n_k more and a spread sqrt(tau^2 + q n_k)."""
    rng = np.random.default_rng(0)
    V, N, trials = 128, 621, 20000
    for tau, hits, r, rho, q in ((0.5, 0, 0.0, 0, 0), (2.0, 0, 0.0, 0, 0), (0.5, 10, 0.38, 0, 0), (2.0, 10, 0.38, 0, 0),
                                 (0.5, 10, 0.38, 0.15, 0.03), (0.3, 10, 0.38, 0.15, 0.3)):
        counts = rng.poisson(N / V, size=(trials, V))
        logits = (1 + rho) * counts + np.sqrt(tau ** 2 + q * counts) * rng.standard_normal((trials, V))
        logits[:, 0] += counts[:, 0]  # the correct label: label 0, its count the test token's
        logits[:, 1:1 + hits] += r * counts[:, 1:1 + hits]  # the labels of the noise tokens: labels 1..hits
        simulated = float(np.mean(np.argmax(logits, axis=1) == 0))
        assert count_mixture_accuracy(V, N, tau, 1.0, hits, r, rho, q) == pytest.approx(
            simulated, abs=4 * math.sqrt(0.25 / trials))
    # with spreads that grow with the counts (§11.6): a wrong label of count m gets v1 m + v2 m^2 + w n_x^2 more
    # variance, the correct label v1 n_x + v2c n_x^2; large enough here to move the accuracy well past the tolerance
    for tau, grown in ((0.5, (0.05, 0.04, 0.02, 0.01)), (1.0, (0.1, 0.08, 0.03, 0.04))):
        v1, v2, v2c, w = grown
        counts = rng.poisson(N / V, size=(trials, V))
        n_x = counts[:, :1]
        spread = np.sqrt(tau ** 2 + (0.03 + v1) * counts + v2 * counts ** 2 + w * n_x ** 2)
        spread[:, 0] = np.sqrt(tau ** 2 + (0.03 + v1) * n_x[:, 0] + v2c * n_x[:, 0] ** 2)
        logits = 1.15 * counts + spread * rng.standard_normal((trials, V))
        logits[:, 0] += counts[:, 0]
        logits[:, 1:11] += 0.38 * counts[:, 1:11]
        simulated = float(np.mean(np.argmax(logits, axis=1) == 0))
        grown_form = count_mixture_accuracy(V, N, tau, 1.0, 10, 0.38, 0.15, 0.03, grown=grown)
        assert grown_form == pytest.approx(simulated, abs=4 * math.sqrt(0.25 / trials))
        assert abs(grown_form - count_mixture_accuracy(V, N, tau, 1.0, 10, 0.38, 0.15, 0.03)) > 8 * math.sqrt(0.25 / trials)
    # its limits: the count cap as the Gaussian noise vanishes (ties broken at random there, counted half in the cap),
    # chance as it swamps the counts; the hits lower the cap (0.85 -> 0.59 at V = 1024, N = V^1.5, L = 32 and the
    # attention 0.0785); and the spread the solver returns gives back the accuracy asked for
    assert count_mixture_accuracy(1024, 7097, 1e-3) == pytest.approx(count_cap(1024, 7097), abs=0.01)
    assert count_mixture_accuracy(1024, 7097, 1e3) == pytest.approx(1 / 1024, rel=0.05)
    r = (1 - 0.0785) / (31 * 0.0785)
    assert count_mixture_accuracy(1024, 32768, 1e-3, 1.0, 31, r) == pytest.approx(0.591, abs=0.002)
    tau = count_mixture_tau(0.1, 1024, 7097)
    assert count_mixture_accuracy(1024, 7097, tau) == pytest.approx(0.1, abs=1e-5)
    assert count_mixture_tau(0.5, 1024, 7097) == 0.0  # above the cap (0.27): out of reach at any d
    assert [count_mixture_accuracy(1024, 7097, t) for t in (0.5, 1, 2, 4)] == sorted(
        [count_mixture_accuracy(1024, 7097, t) for t in (0.5, 1, 2, 4)], reverse=True)


def test_a_higher_level_needs_more_d_and_the_floor_sets_how_the_slope_moves_with_it():
    # N ~ V log V: a level nearer the cap of the counts, hits and coincidences needs more d and (the cap not rising
    # with V) a steeper slope; a level at or above the cap at some V has no finite d there
    label = "N=V*log(V), L=V**0.5"
    found = {level: all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(level, label))
             for level in (0.1, 0.125, 0.15, 0.25)}
    assert all(found[0.125]["d"][V] > found[0.1]["d"][V] for V in found[0.1]["d"])
    assert found[0.125]["slope"] > found[0.1]["slope"] + 0.2
    assert found[0.15]["cap"][2048] < 0.1505 and found[0.15]["slope"] is None  # the cap reaches 0.15 at V = 2048
    # and the check says so (compare then tests it against the binding terms): only V = 2048 is out of reach
    assert found[0.15]["note"].endswith("no d for this check's level where it is at or above the cap of the counts, "
                                        "hits and coincidences: 0.15 at V = 2048 (cap 0.150)")
    assert "no d for this check's level" not in found[0.125]["note"]
    assert found[0.25]["slope"] is None  # a level the counts and hits keep out of reach has no finite d: no prediction
    # and the line names the effect: its label-count cap does not rise with V
    assert "label counts, the exact hits and the coincidences cap this line's accuracy at 0.15-0.22" in found[0.1]["note"]
    # N ~ V^1.5: the floor falls away as V grows, so a higher level is shallower (the run: 1.538, 1.444, 1.386)
    label = "N=V**1.5, L=V**0.5"
    slopes = [all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(level, label))["slope"]
              for level in (0.1, 0.125, 0.15)]
    assert slopes == sorted(slopes, reverse=True) and slopes[0] - slopes[-1] > 0.05
    assert "note" not in all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(0.1, label))


def test_no_prediction_outside_what_it_covers():
    label = "N=V**1.5, L=V**0.5"
    fs, targets = _finite_size(label), _at(0.1, label)
    assert all_terms_prediction("token_retrieval", fs, targets) is None  # the attention-MLP pack: no probed constants
    for bad in ({**targets, 2048: 1 / 4096}, {**targets, 2048: 1.0}, {V: t for V, t in targets.items() if V != 512}):
        assert all_terms_prediction("token_retrieval_attn", fs, bad)["slope"] is None  # below chance, at 1, missing
    assert set(ALL_TERMS_CONSTANTS) == {"token_retrieval_attn"} and ALL_TERMS_CONSTANTS["token_retrieval_attn"] is PROBED_CONSTANTS


def test_a_given_constant_is_the_fitted_one_when_the_boundary_is_its_own_prediction():
    label = "N=V**1.5, L=V**0.5"
    line = _line(label)
    given = sum_of_terms_prediction(line, None, None, accuracy=0.1, constants=PROBED_CONSTANTS, C=1.3)
    fitted = sum_of_terms_prediction(line, {512: given["d"][512]}, 512, accuracy=0.1, constants=PROBED_CONSTANTS)
    assert fitted["C"] == pytest.approx(1.3, rel=1e-6)
    assert fitted["slope"] == pytest.approx(given["slope"], abs=1e-6)
    per_V = sum_of_terms_prediction(line, None, None, accuracy=_at(0.1, label), constants=PROBED_CONSTANTS, C=1.3)
    assert per_V["d"] == pytest.approx(given["d"])


def _realised_at_01(label="N=V**1.5, L=V**0.5"):
    """compare's realised predictions for one line of the gpu preset, with the GPU run's attention and a 0.1 check."""
    plan = plan_of(load_experiment("tr_fig2_attention_only", preset="gpu"))
    rows, masses = GPU_ROWS[label]
    runs = [SimpleNamespace(line=label, base_value=V, measured={"attention_mass": a}) for (V, _, _), a in zip(rows, masses)]
    points = [SimpleNamespace(line=label, threshold=0.1, relative=False, seed=None, base_value=V, threshold_value=0.1,
                              ceiling={"mean": 0.3}) for V, _, _ in rows]
    return realised_predictions(plan, SimpleNamespace(runs=runs, points=points))[label]


def test_compare_tests_each_check_against_every_term_and_keeps_the_binding_terms_verdict_beside():
    label = "N=V**1.5, L=V**0.5"
    rows = GPU_ROWS[label][0]
    both = _realised_at_01(label)
    # the form at the GPU runs' measured attention: the conditional reading, tested here on its own
    found = {key: value for key, value in {**both, **both["conditional"]}.items() if key != "conditional"}
    assert found["all_terms_by_check"]["0.1"]["slope"] == pytest.approx(1.585, abs=0.002)
    boundary = [{"line": label, "threshold": 0.1, "seed": s, "V": V, "d": 0.9 * V ** 0.79, "param_count": 0.81 * V ** 1.58}
                for V, _, _ in rows for s in (0, 1, 2)]
    # as compare has it: tested a priori (the attention from the config's schedule), the runs' reading beside it
    pack_prediction = {"pack": "token_retrieval_attn", "slope": 1.5, "log_power": 0}
    apriori = fit_boundary_points(boundary, {label: pack_prediction}, realised={label: both})[0]
    assert apriori.extra["predicted_slope_all_terms"] == pytest.approx(1.579, abs=0.002)
    assert apriori.extra["predicted_slope_conditional"] == pytest.approx(1.585, abs=0.002)
    assert apriori.extra["conditional_reading_on"] == ["finite-size constants"]
    inputs = {i["name"]: i["evidence"] for i in apriori.extra["tested_prediction"]["inputs"]}
    assert inputs == {"pack terms": "a priori", "realised grid": "a priori", "finite-size constants": "a priori",
                      "level": "a priori", "probed constants": "calibration"}
    result = fit_boundary_points(boundary, {label: {"slope": 1.5, "log_power": 0}}, realised={label: found})[0]
    out = result.to_dict()
    assert out["predicted_slope"] == pytest.approx(1.585, abs=0.002)
    assert result.extra["prediction_compared"] == "all terms"
    assert result.extra["predicted_slope_finite_size"] == pytest.approx(BINDING_01[label], abs=0.02)
    assert result.extra["verdict_binding_terms"] in ("consistent", "inconsistent", "inconclusive")
    assert set(result.extra["all_terms_d"]) == {str(V) for V, _, _ in rows}
    assert "prediction_note" not in result.extra  # this line's count cap rises with V: no note
    assert math.isclose(out["slope"], 1.58, abs_tol=1e-6)
    # the form with the counts folded into one Gaussian stays beside the tested one, in the record and on fit's output
    assert out["predicted_slope_all_terms_gaussian_counts"] == pytest.approx(1.591, abs=0.002)
    from recallkit.cli_fit import format_table

    shown = format_table({"fits": [out], "experiment": "tr_fig2_attention_only", "preset": "gpu", "kind": "min_size",
                          "store": "s.db"})
    assert "predictions: all terms 1.585, all terms with Gaussian counts 1.591, finite-size" in shown


def test_the_label_count_cap_bounds_the_ceilings_and_moves_with_v_as_they_do():
    """The count cap (the accuracy at d -> infinity from the label counts, which are the test tokens' counts) is an
    upper bound on every measured ceiling; it falls slowly on N ~ V log V, where the ceilings are flat, and rises
    towards 1 on N ~ V^1.5, where they rise."""
    from recallkit.theory.errors import InputError

    for label, ceilings in GPU_CEILINGS.items():
        caps = [count_cap(V, N) for V, N, _ in GPU_ROWS[label][0]]
        # with the exact hits (§4.5) the cap is lower, still above every ceiling, and moves the same way
        with_hits = [hits_cap(V, N, L, a) for (V, N, L), a in zip(*GPU_ROWS[label])]
        for bound in (caps, with_hits):
            assert all(cap > ceiling for cap, ceiling in zip(bound, ceilings))
            rising = label.startswith("N=V**1.5")
            assert (bound == sorted(bound)) == rising and (bound == sorted(bound, reverse=True)) != rising
        assert all(h < c - 0.05 for h, c in zip(with_hits, caps))
    assert count_cap(128, 621) == pytest.approx(0.335, abs=0.001)
    assert count_cap(2048, 92681) == pytest.approx(0.935, abs=0.001)
    assert count_cap(2, 10**4) == pytest.approx(1.0)
    with pytest.raises(InputError, match="count_cap"):
        count_cap(1, 10)


def test_a_failing_all_terms_hook_keeps_the_finite_size_prediction(monkeypatch):
    """The all-terms form is computed after the finite-size one, in its own try: if it fails, the check is still
    tested against the binding terms' finite-size prediction, and the failure is kept beside it."""
    from recallkit.systems.token_retrieval import judge

    def broken(*args):
        raise ValueError("f(a) and f(b) must have different signs")

    monkeypatch.setattr(judge, "all_terms_prediction", broken)
    label = "N=V**1.5, L=V**0.5"
    found = _realised_at_01(label)
    assert found["finite_size"]["slope"] == pytest.approx(BINDING_01[label], abs=0.02)
    assert "different signs" in found["all_terms_error"] and "all_terms_by_check" not in found


def _inputs(V, N, L, d, seeds=range(6)):
    """Per test input of the probes at (V, N, L, d) over ``seeds`` (256 inputs each, those whose token was seen in
    training): (the seed's test attention A, the label counts, the components as arrays, the input's index, its label,
    the mask of its wrong labels other than the hits, the signal per training sample)."""
    import torch
    from recallkit.systems.token_retrieval.term_probes import ProbeConfig, ThreeStepModel, decompose

    for seed in seeds:
        cfg = ProbeConfig(V=V, N=N, d=d, L=L, n_test=256, seed=seed)
        result, model = decompose(cfg), ThreeStepModel(cfg)
        counts = torch.bincount(model.train["labels"], minlength=V).double().numpy()
        comp = {k: v.numpy() for k, v in result["components"].items()}
        hit_labels = model.perm[model.test["tokens"]].numpy()
        for i, y in enumerate(result["labels"].numpy()):
            if counts[y] == 0:
                continue
            wrong = np.ones(V, dtype=bool)
            wrong[hit_labels[i]] = False
            wrong[y] = False
            yield result["norms"]["A_test"], counts, comp, i, y, wrong, comp["signal"][i, y] / counts[y]


def test_the_hits_overlaps_and_the_coincidences_coherent_mean_are_what_the_probes_measure():
    """Two parts of the noise that the all-terms form once took as independent of the mean bias (DERIVATION.md §11.5).
    Within each test input, over the wrong labels other than the hits, the label counts regressed out, in units of the
    signal per training sample, at V = 64, N = 512, L = 8, d = 128 (six seeds; 12 gave the same to 3%):
    - the coincidences in the other labels' samples (mean rho per sample) ride on the mean bias's overlap sum: twice
      their covariance with the mean bias is 2 m rho N / d (m the mean bias's own coefficient), measured 1.38 against
      1.39; an independent term would have none;
    - a training informative token that is a noise token of the test input (the exact hits, §4.5) reaches the other
      labels through u_k . u_{y_n}: variance r^2 (L - 1) lam (lam + 1) / d and twice its covariance with the mean bias
      2 m r (L - 1) lam / d, measured 1.19 and 1.30 times those (the noise tokens' attention is uneven, the
      derivation's r is the even split);
    - on the hit labels themselves the probe's localisation_hits gives each r of the signal per count."""
    from recallkit.systems.token_retrieval.judge import exact_hit_share

    V, N, L, d = 64, 512, 8, 128
    lam, overlap = N / V, N / d
    found = {"mean_bias": [], "coherent": [], "hits": [], "hits_mean_bias": [], "hit_lead": []}
    masses = []
    for A, counts, comp, i, y, wrong, per_count in _inputs(V, N, L, d):
        masses.append(A)
        X = np.column_stack([np.ones(wrong.sum()), counts[wrong]])

        def rest(c, i=i, X=X, wrong=wrong, per_count=per_count):
            v = c[i, wrong]
            return (v - X @ np.linalg.lstsq(X, v, rcond=None)[0]) / per_count

        mb, co, hi = rest(comp["mean_bias"]), rest(comp["grad_noise_positions_coincidences"]), rest(comp["grad_noise_hits"])
        found["mean_bias"].append(mb.var())
        found["coherent"].append(2 * np.mean(mb * co))
        found["hits"].append(hi.var())
        found["hits_mean_bias"].append(2 * np.mean(mb * hi))
        others = np.flatnonzero(~wrong & (np.arange(V) != y))  # the hit labels
        found["hit_lead"].extend(comp["localisation_hits"][i, others] / per_count / np.maximum(counts[others], 1))
    measured = {k: float(np.mean(v)) for k, v in found.items()}
    A = float(np.mean(masses))
    rho, _ = coincidence_share(V, L, A)
    hits, r = exact_hit_share(L, A)
    m = math.sqrt(measured["mean_bias"] / overlap)
    assert measured["coherent"] == pytest.approx(2 * m * rho * overlap, rel=0.1)
    assert measured["hits"] == pytest.approx(hits * r * r * lam * (lam + 1) / d, rel=0.3)
    assert measured["hits_mean_bias"] == pytest.approx(2 * m * hits * r * lam / d, rel=0.4)
    assert measured["hit_lead"] == pytest.approx(r, rel=0.2)
    # and the form takes them so: against the mean bias, the coincidences in the other labels' samples weigh
    # (2 m rho + rho^2 + q) / m^2 of it (about 2 rho; taken as independent, (rho^2 + q) / m^2, a fifth of that), the
    # hits' overlaps (r^2 (L - 1) lam (lam + 1) / d + 2 (m + rho) r (L - 1) lam / d) / (m^2 N / d)
    from recallkit.systems.token_retrieval.judge import HIT_OVERLAPS, POSITION_COINCIDENCES

    line = {"pack": "token_retrieval_attn",
            "realised": {"finite_size": {"points": [{"V": V, "N": N, "L": L}, {"V": 128, "N": 1448, "L": 11}],
                                         "constants": [{"A": A}, {"A": 0.2}]}}}
    shares = sum_of_terms_prediction(line, None, None, accuracy=0.125, constants=PROBED_CONSTANTS, C=1.0,
                                     counts="mean_bias_counts", exact_hits=True, coincidences=True)["shares"][V]
    # in the form m is the mean bias's probed constant over the signal's (their normalisers cancel)
    m, q = PROBED_CONSTANTS["mean_bias"] / PROBED_CONSTANTS["signal"], coincidence_share(V, L, A)[1]
    assert shares[POSITION_COINCIDENCES] / shares["mean_bias"] == pytest.approx(
        (2 * m * rho + rho * rho + q) / (m * m), rel=0.01)
    assert shares[HIT_OVERLAPS] / shares["mean_bias"] == pytest.approx(
        (hits * r * r * lam * (lam + 1) + 2 * (m + rho) * hits * r * lam) / (m * m * N), rel=0.01)


def test_the_own_sample_terms_grow_with_the_label_count_as_the_form_takes_them():
    """The terms that sum over a label's own samples (DERIVATION.md §11.6), over the wrong labels (hits and the correct
    label left aside) at V = 64, N = 512, L = 8, d = 55, four seeds, in units of the signal per sample: token_crosstalk,
    trigger_crosstalk and mean_bias_counts_attention (three of embedding_crosstalk's four) and localisation are the
    label's count times one per-label factor, so their variance goes as the count squared; grad_noise_label (the
    fourth) follows the test token's count and not the label's, and carries 1 / (2 + g^2) of the four's variance,
    g = 1 + kappa' (1 - A) (crosstalk_factor)."""
    from recallkit.systems.token_retrieval.judge import crosstalk_factor, own_count_spread

    V, N, L, d = 64, 512, 8, 55
    lam = N / V
    parts = {"own": ("token_crosstalk", "trigger_crosstalk", "mean_bias_counts_attention"), "label": ("grad_noise_label",),
             "localisation": ("localisation",)}
    values, counts_of, masses = {k: [] for k in parts}, [], []
    for A, counts, comp, i, _, wrong, per_count in _inputs(V, N, L, d):
        masses.append(A)
        for key, names in parts.items():
            v = sum(comp[name][i, wrong] for name in names) / per_count
            values[key].append(v - v.mean())
        counts_of.append(counts[wrong])
    n = np.concatenate(counts_of)
    bins = [(n >= lo * lam) & (n < hi * lam) for lo, hi in ((0, 0.6), (0.6, 0.9), (0.9, 1.1), (1.1, 1.4), (1.4, 9))]
    variance = {k: np.concatenate(v) for k, v in values.items()}
    # the power of the count the variance grows with, over five bins of the label's count (0.4 to 1.6 times lam)
    power = {k: float(np.polyfit(np.log([n[b].mean() for b in bins]), np.log([v[b].var() for b in bins]), 1)[0])
             for k, v in variance.items()}
    assert 1.5 < power["own"] < 2.5 and 1.5 < power["localisation"] < 2.5
    assert abs(power["label"]) < 0.3
    g = crosstalk_factor(L, float(np.mean(masses)))
    assert variance["label"].var() / (variance["label"].var() + variance["own"].var()) == pytest.approx(
        1 / (2 + g * g), abs=0.06)
    # the form's split of a term's spread over the Poisson counts into these parts (g = 1.5: 2 + g^2 = 4.25)
    v1, v2, v2_correct, w = own_count_spread({"embedding_crosstalk": 2.0, "localisation": 1.0, "noise_self": 0.5}, lam, 1.5)
    second = lam * lam + lam
    assert (v1, w * second) == pytest.approx((0.5 / lam, 2.0 / 4.25))
    assert v2 * second == pytest.approx(2.0 * 3.25 / 4.25 + 1.0) and v2_correct * second == pytest.approx(2.0 * 2.25 / 4.25 + 1.0)
    with pytest.raises(InputError, match="own_counts needs counts"):
        sum_of_terms_prediction(_line("N=V**1.5, L=V**0.5"), None, None, accuracy=0.1, C=1.0, own_counts=True)


@pytest.mark.parametrize("L, d", [(2, 28), (8, 55)])
def test_the_trigger_content_terms_are_what_the_probes_measure(L, d):
    """embedding_crosstalk's four parts and trigger_overlap, derived (DERIVATION.md §11.6), in units of the signal per
    sample, over the wrong labels other than the hits, V = 64, N = 512, four seeds: grad_noise_label, token_crosstalk and
    trigger_crosstalk 1 / d each per count squared; mean_bias_counts_attention moves with trigger_crosstalk's
    e_{x_k} . z, so the two together are g^2 / d, g = 1 + kappa' (1 - A); trigger_overlap (the same e . z on the other
    labels' token groups) g^2 V lam (lam + 1) / d^2. Measured at L = 2 and 8 (g^2 = 1.44 and 2.70): 1.46 and 2.64 for
    the pair, 3.45 and 4.53 for the four (2 + g^2: 3.44 and 4.70), 1.21 and 2.71 for trigger_overlap. The probed
    constants of embedding_crosstalk and trigger_overlap (2.39 and 1.86) are medians over lines where g differs."""
    from recallkit.systems.token_retrieval.judge import crosstalk_factor

    V, N = 64, 512
    lam = N / V
    found, masses = {"pair": [], "four": [], "overlap": []}, []
    for A, counts, comp, i, y, wrong, per_count in _inputs(V, N, L, d, seeds=range(4)):
        masses.append(A)
        n = counts[wrong]

        def part(*names, comp=comp, i=i, wrong=wrong, per_count=per_count):
            return sum(comp[name][i, wrong] for name in names) / per_count

        pair = part("trigger_crosstalk", "mean_bias_counts_attention")
        # grad_noise_label follows the test token's count: per count squared it is over n_x^2, the others over n_k^2
        found["pair"].append(pair.var() * d / np.mean(n * n))
        found["four"].append((pair + part("token_crosstalk")).var() * d / np.mean(n * n)
                             + part("grad_noise_label").var() * d / counts[y] ** 2)
        found["overlap"].append(part("trigger_crosstalk_grouped", "mean_bias_attention").var() * d * d
                                / (V * lam * (lam + 1)))
    g = crosstalk_factor(L, float(np.mean(masses)))
    measured = {k: float(np.mean(v)) for k, v in found.items()}
    assert measured["pair"] == pytest.approx(g * g, rel=0.1)
    assert measured["four"] == pytest.approx(2 + g * g, rel=0.1)
    assert measured["overlap"] == pytest.approx(g * g, rel=0.2)


def test_the_coincidences_are_what_the_probes_measure():
    """A training sample's noise token that is a token of the test input adds e . e = 1 (DERIVATION.md §4.4). The probe
    splits it out of noise_self (the label's own samples) and grad_noise_positions (the others'): its mean per
    training sample of a label is (1 - A) / (A^2 V) signal units exactly, its spread over the labels sqrt((rho^2 + q)
    N / V) and sqrt((rho^2 + q) N / d) (coincidence_share). Measured at 72 rows around the quick preset's boundaries
    these are 1.00 [0.94, 1.05], 1.00 [0.92, 1.05] and 1.00 [0.88, 1.22] of the derivation; here one row of
    N ~ V log V, L = V^0.5 at its boundary (V = 256, d = 273), two seeds."""
    import torch
    from recallkit.systems.token_retrieval.term_probes import (
        ProbeConfig,
        ThreeStepModel,
        decompose,
    )

    V, N, L, d = 256, 1419, 16, 273
    for seed in (0, 1):
        cfg = ProbeConfig(V=V, N=N, d=d, L=L, n_test=256, seed=seed)
        result = decompose(cfg)
        comp, labels = result["components"], result["labels"]
        idx = torch.arange(len(labels))
        counts = torch.bincount(ThreeStepModel(cfg).train["labels"], minlength=V).double()
        per_count = float(comp["signal"][idx, labels].sum() / counts[labels].sum())  # the signal per training sample
        rho, q = coincidence_share(V, L, result["norms"]["A_test"])
        own = comp["noise_self_coincidences"] / per_count
        assert float(np.polyfit(counts.numpy(), own.mean(0).numpy(), 1)[0]) == pytest.approx(rho, rel=0.08)
        mask = torch.ones_like(own, dtype=torch.bool)
        mask[idx, labels] = False

        n_test = len(labels)

        def spread(c, mask=mask, n=n_test):
            return float(c[mask].reshape(n, -1).std(1).mean())

        assert spread(own) == pytest.approx(math.sqrt((rho * rho + q) * N / V), rel=0.1)
        assert spread(comp["grad_noise_positions_coincidences"] / per_count) == pytest.approx(
            math.sqrt((rho * rho + q) * N / d), rel=0.15)
        # and they are what noise_self carried beyond its order: without them its spread is near its finite-size form
        assert spread(comp["noise_self"] / per_count) < spread((comp["noise_self"] + comp["noise_self_coincidences"])
                                                               / per_count) * 0.8
    assert coincidence_share(V, 1, 0.5) == (0.0, 0.0)
    assert coincidence_share(512, 22, 0.1) == pytest.approx(((1 - 0.1) / (0.01 * 512), (9 / 21) ** 2 * 21 * (1 + 21 * (9 / 21) ** 2) / 512),
                                                            abs=1e-6)

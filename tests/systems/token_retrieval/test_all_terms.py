"""Every noise term at once (DERIVATION.md §11.3): a check of the attention-only model is tested against the d at which
the signal is the argmax's signal-to-noise ratio at the check's own level times the spread of the summed noise, each
term at its probed constant, no constant fitted to the boundaries. On the first GPU run of tr_fig2_attention_only
(V = 128..2048, 8 seeds, one H200) it predicts the absolute thresholds of the N = V^1.5 lines within 0.05, where the
binding terms alone were 0.18-0.23 too steep at L = V^0.5."""
import math
from types import SimpleNamespace

import pytest
from recallkit.compare.assertions import fit_boundary_points, realised_predictions
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan_of
from recallkit.systems.token_retrieval.judge import (
    ALL_TERMS_CONSTANTS,
    PROBED_CONSTANTS,
    all_terms_prediction,
    sum_of_terms_prediction,
)

# the GPU run's realised rows and its runs' mean attention on the informative position (its finite-size constants A)
GPU_ROWS = {
    "N=V**1.5, L=V**0.5": ([(128, 1448, 11), (256, 4096, 16), (512, 11585, 22), (1024, 32768, 32), (2048, 92681, 45)],
                           [0.20089, 0.14604, 0.11106, 0.07844, 0.05707]),
    "N=V**1.5, L=V**0.25": ([(128, 1448, 3), (256, 4096, 4), (512, 11585, 4), (1024, 32768, 5), (2048, 92681, 6)],
                            [0.49463, 0.41513, 0.41391, 0.35763, 0.31529]),
    "N=V*log(V), L=V**0.5": ([(128, 621, 11), (256, 1419, 16), (512, 3194, 22), (1024, 7097, 32), (2048, 15615, 45)],
                             [0.20582, 0.14792, 0.11036, 0.07816, 0.05736]),
}
# what that run measured at accuracy 0.1 (seed-curve fits, 90% interval) and what the binding terms alone predicted
MEASURED_01 = {"N=V**1.5, L=V**0.5": (1.585, 1.517, 1.652), "N=V**1.5, L=V**0.25": (1.501, 1.420, 1.582)}
BINDING_01 = {"N=V**1.5, L=V**0.5": 1.763, "N=V**1.5, L=V**0.25": 1.476}


def _finite_size(label):
    rows, masses = GPU_ROWS[label]
    return {"points": [{"V": V, "N": N, "L": L} for V, N, L in rows], "constants": [{"A": a} for a in masses]}


def _at(level, label):
    return {V: level for V, _, _ in GPU_ROWS[label][0]}


@pytest.mark.parametrize("label", sorted(MEASURED_01))
def test_every_term_at_once_predicts_the_gpu_runs_absolute_thresholds(label):
    found = all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(0.1, label))
    slope, low, high = MEASURED_01[label]
    assert low - 0.05 < found["slope"] < high + 0.05  # the measured interval, give or take 0.05
    assert abs(found["slope"] - slope) < abs(BINDING_01[label] - slope) + 0.05
    # and it is a prediction of the level too, not only of the slope: the d at V = 2048 within 30% of the run's
    measured_d = {"N=V**1.5, L=V**0.5": 635.7, "N=V**1.5, L=V**0.25": 337.8}[label]
    assert found["d"][2048] == pytest.approx(measured_d, rel=0.3)
    assert set(found["shares"][2048]) >= {"mean_bias", "mean_bias_counts", "grad_noise"}


def test_the_pinned_slopes():
    slopes = {label: all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(0.1, label))["slope"]
              for label in GPU_ROWS}
    assert slopes == pytest.approx({"N=V**1.5, L=V**0.5": 1.606, "N=V**1.5, L=V**0.25": 1.457,
                                    "N=V*log(V), L=V**0.5": 2.532}, abs=0.002)


def test_a_higher_level_needs_more_d_and_the_floor_sets_how_the_slope_moves_with_it():
    # N ~ V log V: the label-count floor does not fall with V, so a level nearer the cap it sets is steeper
    label = "N=V*log(V), L=V**0.5"
    found = {level: all_terms_prediction("token_retrieval_attn", _finite_size(label), _at(level, label))
             for level in (0.1, 0.2, 0.3)}
    assert all(found[0.2]["d"][V] > found[0.1]["d"][V] for V in found[0.1]["d"])
    assert found[0.2]["slope"] > found[0.1]["slope"] + 0.3
    assert found[0.3]["slope"] is None  # a level the floor alone keeps out of reach has no finite d: no prediction
    # and the line names the effect: its label-count cap does not rise with V
    assert "label counts cap this line's accuracy at 0.26-0.33" in found[0.1]["note"]
    # N ~ V^1.5: the floor falls away as V grows, so a higher level is shallower (the run: 1.585, 1.555, 1.473)
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
    line = {"pack": "token_retrieval_attn", "realised": {"finite_size": _finite_size(label)}}
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
    found = _realised_at_01(label)
    assert found["all_terms_by_check"]["0.1"]["slope"] == pytest.approx(1.606, abs=0.002)
    boundary = [{"line": label, "threshold": 0.1, "seed": s, "V": V, "d": 0.9 * V ** 0.79, "param_count": 0.81 * V ** 1.58}
                for V, _, _ in rows for s in (0, 1, 2)]
    result = fit_boundary_points(boundary, {label: {"slope": 1.5, "log_power": 0}}, realised={label: found})[0]
    out = result.to_dict()
    assert out["predicted_slope"] == pytest.approx(1.606, abs=0.002)
    assert result.extra["prediction_compared"] == "all terms"
    assert result.extra["predicted_slope_finite_size"] == pytest.approx(BINDING_01[label], abs=0.02)
    assert result.extra["verdict_binding_terms"] in ("consistent", "inconsistent", "inconclusive")
    assert set(result.extra["all_terms_d"]) == {str(V) for V, _, _ in rows}
    assert "prediction_note" not in result.extra  # this line's count cap rises with V: no note
    assert math.isclose(out["slope"], 1.58, abs_tol=1e-6)


# the GPU run's ceilings: seed-mean accuracy at d = 2V, V = 128 .. 2048
GPU_CEILINGS = {
    "N=V*log(V), L=V**0.5": [0.131, 0.139, 0.123, 0.125, 0.116],
    "N=V**1.5, L=V**0.5": [0.267, 0.298, 0.298, 0.405, 0.461],
    "N=V**1.5, L=V**0.25": [0.332, 0.434, 0.578, 0.629, 0.743],
}


def test_the_label_count_cap_bounds_the_ceilings_and_moves_with_v_as_they_do():
    """The count cap (the accuracy at d -> infinity from the label counts, which are the test tokens' counts) is an
    upper bound on every measured ceiling; it falls slowly on N ~ V log V, where the ceilings are flat, and rises
    towards 1 on N ~ V^1.5, where they rise."""
    from recallkit.systems.token_retrieval.judge import count_cap
    from recallkit.theory.errors import InputError

    for label, ceilings in GPU_CEILINGS.items():
        caps = [count_cap(V, N) for V, N, _ in GPU_ROWS[label][0]]
        assert all(cap > ceiling for cap, ceiling in zip(caps, ceilings))
        rising = label.startswith("N=V**1.5")
        assert (caps == sorted(caps)) == rising and (caps == sorted(caps, reverse=True)) != rising
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

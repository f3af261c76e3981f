"""The finite-size prediction of end-to-end fits: the token-retrieval hook (exact finite-L softmax weights at
the measured attention) and a small real curve sweep judged against the realised and finite-size predictions."""
import math

import pytest
import torch

from recallkit import registry
from recallkit.systems.token_retrieval.judge import finite_normalisers, finite_size_factor, step_two_gap


def test_the_hook_is_registered_and_inverts_the_measured_attention():
    hook = registry.system_of_pack("token_retrieval_rank2").finite_size
    assert hook == "recallkit.systems.token_retrieval:recallkit_finite_size"  # the plug-in's hook, over the judge's
    assert registry.load_object(hook)("token_retrieval_attn", "signal", {"L": 16}, {"attention_mass": 0.2}) == \
        pytest.approx(finite_size_factor("token_retrieval_attn", "signal", {"L": 16}, {"attention_mass": 0.2}))
    kappa, source = step_two_gap(16, {"attention_mass": math.e / (math.e + 15)})
    assert kappa == pytest.approx(1.0) and source == "measured attention mass"
    assert step_two_gap(16, {"config": {"kappa": 2.0}})[0] == 2.0
    assert step_two_gap(4, {})[0] == pytest.approx(0.75)
    A = 0.2
    # signal ~ A_train A_test: asymptotically 1/L each, so the factor is (A L)^2
    assert finite_size_factor("token_retrieval_attn", "signal", {"L": 16}, {"attention_mass": A}) == pytest.approx((16 * A) ** 2)
    # the rank-2 signal ~ A^4 / (|t|_train |t|_test), |t| ~ L^-1/2 asymptotically
    norms = finite_normalisers(16, math.log(A * 15 / (1 - A)))
    expected = (16 * A) ** 4 / (norms["t_test"] * 16 ** 0.5) ** 2
    assert finite_size_factor("token_retrieval_rank2", "signal", {"L": 16}, {"attention_mass": A}) == pytest.approx(expected)
    assert finite_size_factor("token_retrieval_rank2_attended", "signal", {"L": 16}, {"attention_mass": A}) is None
    assert finite_size_factor("token_retrieval_attn", None, {"L": 16}, {"attention_mass": A})["A"] == pytest.approx(A)


TINY = """
name = "tiny_curve"
pack = "token_retrieval_attn"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
kind = "min_size"
thresholds = [0.2]
relative_thresholds = [0.5]
[[lines]]
scaling = "N=V**1.5, L=V**0.5"
[fixed]
eta = 0.001
gamma = "1000.0*L**2/(1/V + 1/N)"
n_eval = 256
[search]
method = "curve"
min = 4
max = 64
points = 4
ratio = 1.5
resolution = 0.3
ceiling = "2*V"
start = "V/2"
[presets.quick]
V = [16, 24, 32]
seeds = [0, 1, 2]
"""


def test_a_real_curve_sweep_is_judged_against_the_finite_size_prediction(tmp_path):
    from recallkit.assertions import sweep_and_fit

    torch.set_num_threads(1)
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    fits = sweep_and_fit(str(path), store=str(tmp_path / "s.db"), run=True).to_dict()
    prediction = fits["predictions"]["N=V**1.5, L=V**0.5"]["realised"]
    assert prediction["realised"]["slope"] is not None and prediction["finite_size"]["slope"] is not None
    assert [c["L"] for c in prediction["finite_size"]["constants"]] == [4, 4, 5]  # floored L is what was run
    for fit in fits["fits"]:
        # the attention-only pack's checks are tested against every term at once (DERIVATION.md §11.3), with the
        # binding terms' finite-size slope and its verdict beside
        assert fit["method"] == "curve" and fit["prediction_compared"] == "all terms"
        assert fit["predicted_slope"] == pytest.approx(fit["predicted_slope_all_terms"])
        assert fit["predicted_slope_finite_size"] is not None
        if fit["slope"] is not None:
            assert fit["verdict_binding_terms"] in ("consistent", "inconsistent", "inconclusive")
        assert fit["predicted_slope_asymptotic"] == pytest.approx(1.5)
        assert fit["verdict_asymptotic"] in ("consistent", "inconsistent", "inconclusive")
    assert {f["threshold_relative"] for f in fits["fits"]} == {False, True}

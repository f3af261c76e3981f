"""theory.realised: the pack's prediction at the sizes an experiment actually runs."""
import math

import pytest

from recallkit.theory import load_pack, predict
from recallkit.theory.realised import realised_prediction


def test_exact_powers_over_a_wide_range_recover_the_asymptotic_slope():
    pack = load_pack("token_retrieval_rank2")
    rows = [dict(V=V, N=V ** 1.5, L=V ** 0.25) for V in (2.0 ** 20, 2.0 ** 40, 2.0 ** 60)]
    found = realised_prediction(pack, "N=V**1.5, L=V**0.25, m=d**3", rows)
    assert found["slope"] == pytest.approx(float(predict(pack, "N=V**1.5, L=V**0.25, m=d**3").slope), abs=0.06)
    assert set(found["terms"]) == {"kernel_crosstalk", "kernel_samples"}


def test_floored_l_steepens_the_realised_slope():
    pack = load_pack("token_retrieval_attn")
    exact = [dict(V=V, N=V ** 1.5, L=V ** 0.25) for V in (64, 128, 256)]
    floored = [dict(V=V, N=math.floor(V ** 1.5), L=math.floor(V ** 0.25 + 1e-9)) for V in (64, 128, 256)]
    a = realised_prediction(pack, "N=V**1.5, L=V**0.25", exact)["slope"]
    b = realised_prediction(pack, "N=V**1.5, L=V**0.25", floored)["slope"]
    assert [r["L"] for r in floored] == [2, 3, 4] and b > a + 0.2


def test_a_finite_size_factor_moves_the_prediction_and_none_drops_it():
    pack = load_pack("token_retrieval_attn")
    rows = [dict(V=V, N=V ** 1.5, L=V ** 0.5) for V in (64, 256, 1024)]
    plain = realised_prediction(pack, "N=V**1.5, L=V**0.5", rows)["slope"]
    # the signal falls an extra factor L^-1 faster: grad_noise (~ 1/d) needs d larger by L, d^2 by L^2 = V
    steeper = realised_prediction(pack, "N=V**1.5, L=V**0.5", rows,
                                  factors=lambda term, row: 1 / row["L"] if term == "signal" else 1.0)["slope"]
    assert steeper == pytest.approx(plain + 1.0, abs=0.05)
    assert realised_prediction(pack, "N=V**1.5, L=V**0.5", rows, factors=lambda term, row: None)["slope"] is None

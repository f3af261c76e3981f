"""theory.realised: the pack's prediction at the sizes an experiment actually runs."""
import math

import pytest

from recallkit.theory import load_pack, predict
from recallkit.theory.realised import realised_prediction
from tests.experiment_texts import linear_memory_experiment


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


_CONSTANT_PACK = """
[pack]
name = "constant_line"
title = "A memory whose constant g the line gives a number"
reference = "test"
variables = ["N", "d", "m"]
constants = ["g"]
base = "N"
size = "d"
param_count = "{count}"

[[terms]]
name = "capacity"
role = "signal"
expr = "m*d"
provenance = "derived-here"
reference = "test"

[[terms]]
name = "facts"
role = "noise"
expr = "{noise}"
provenance = "derived-here"
reference = "test"

[defaults]
scaling = "m=d**k, g=1"
axes = ["k"]
box = {{ k = [0.5, 2] }}
"""


def _constant_pack(tmp_path, count: str, noise: str):
    path = tmp_path / "constant_line.toml"
    path.write_text(_CONSTANT_PACK.format(count=count, noise=noise), encoding="utf-8")
    return load_pack(path)


def test_a_constant_the_line_gives_a_number_is_substituted_in_the_terms(tmp_path):
    # N**g at g = 2 against m*d = d**2: d = N, so the count d**2 grows as N**2
    pack = _constant_pack(tmp_path, "m*d", "N**g")
    found = realised_prediction(pack, "m=d, g=2", [dict(N=64.0), dict(N=256.0), dict(N=1024.0)])
    assert found["slope"] == pytest.approx(2.0, abs=1e-6)
    assert found["slope"] == pytest.approx(float(predict(pack, "m=d, g=2").slope), abs=1e-6)


def test_a_constant_the_line_gives_a_number_is_substituted_in_the_parameter_count(tmp_path):
    pack = _constant_pack(tmp_path, "g*m*d", "N")
    found = realised_prediction(pack, "m=d, g=3", [dict(N=64.0), dict(N=256.0)])
    assert found["slope"] == pytest.approx(1.0, abs=1e-6)
    assert [p["param_count"] for p in found["points"]] == pytest.approx([3 * 64.0, 3 * 256.0], rel=1e-6)


def test_a_parameter_count_constant_with_no_number_is_one_input_error(tmp_path):
    from recallkit.theory.errors import InputError
    pack = _constant_pack(tmp_path, "g*m*d", "N")
    with pytest.raises(InputError, match=r"constant_line.*param_count.*\bg\b.*scaling"):
        realised_prediction(pack, "m=d", [dict(N=64.0), dict(N=256.0)])


_CONSTANT_EXPERIMENT = linear_memory_experiment(
    "constant_line_dmin", "linear memory, smallest d at each N, a pack constant given by the line", pack="{pack}",
    kind="min_size", base="N", size="d", theory_scaling="m=d, g=2",
    search='min = 2\nmax = 64\nstart = "2*N**0.5"\nbracket = 1.4', quick="N = [8, 16, 32]\nseeds = [0]\nsearch = { resolution = 0.2 }")


def test_fit_of_a_line_that_gives_a_pack_constant_a_number_completes(tmp_path):
    import shutil
    import subprocess
    _constant_pack(tmp_path, "g*m*d", "N")
    experiment = tmp_path / "constant_line_dmin.toml"
    experiment.write_text(_CONSTANT_EXPERIMENT.replace("{pack}", (tmp_path / "constant_line.toml").as_posix()),
                          encoding="utf-8")
    store = tmp_path / "store.db"
    cli = shutil.which("recallkit")
    assert cli is not None
    swept = subprocess.run([cli, "sweep", str(experiment), "--store", str(store), "--no-progress"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert swept.returncode == 0, swept.stderr
    fitted = subprocess.run([cli, "fit", str(experiment), "--store", str(store), "--json"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert "Traceback" not in fitted.stderr
    assert fitted.returncode == 0, fitted.stderr
    assert "realised" in fitted.stdout

"""Predicted slopes along fully specified lines, against hand computation."""
from __future__ import annotations

import pytest

from recallkit import theory
from recallkit.theory.errors import InputError


def test_example_pack_lines():
    pack = theory.load_pack("example")
    # N = V log V, L = V^(1/2): finite_sample V^2 L^2 / N = V^2/log V beats crosstalk V^(3/2) log V
    p = theory.predict(pack, "N=V*log(V), L=V**0.5").to_dict()
    assert (p["dominant"], p["slope_exact"], p["log_power"]) == ("finite_sample", "2", "-1")
    assert (p["size_exponent"], p["size_log_power"]) == ("1", "-1/2")
    assert p["slope"] == 2.0
    # N = V^1.5, L = V^0.5: both demand d^2 ~ V^(3/2); crosstalk has one more log, so it binds
    p = theory.predict(pack, "N=V**1.5, L=V**0.5").to_dict()
    assert (p["dominant"], p["slope_exact"], p["log_power"], p["tied_with"]) == ("crosstalk", "3/2", "1", [])
    assert p["slope"] == 1.5
    assert p["lower_bounds"][0]["gap_exponent"] == "1/2"


def test_assoc_memory_lines():
    pack = theory.load_pack("assoc_memory")
    linear = theory.predict(pack, "m=d").to_dict()  # d^2 ~ N log N
    assert (linear["slope_exact"], linear["log_power"]) == ("1", "1")
    assert (linear["size_exponent"], linear["size_log_power"]) == ("1/2", "1/2")
    wide = theory.predict(pack, "m=d**2").to_dict()  # d^3 ~ N log N
    assert (wide["slope_exact"], wide["size_exponent"], wide["size_log_power"]) == ("1", "1/3", "1/3")
    assert wide["lower_bounds"][0]["gap_exponent"] == "0" and wide["lower_bounds"][0]["gap_log_power"] == "0"


def test_geometric_recall_single_hop_is_tied_and_log_only():
    p = theory.predict(theory.load_pack("geometric_recall"), "R=16, h=1").to_dict()
    assert p["dominant"] == "single_hop" and p["tied_with"] == ["chains_no_cot"]
    assert (p["size_exponent"], p["size_log_power"]) == ("0", "1")  # d ~ log N at fixed R
    # without chain of thought, the meet-in-the-middle construction's cost R^ceil(h/2) log N: d ~ N^1 at h = 3
    p = theory.predict(theory.load_pack("geometric_recall"), "R=N**0.5, h=3").to_dict()
    assert (p["dominant"], p["size_exponent"], p["slope_exact"]) == ("chains_no_cot", "1", "2")


def test_free_exponents_and_infeasible_lines():
    with pytest.raises(InputError, match="free exponent\\(s\\) a"):
        theory.predict(theory.load_pack("example"), "N=V**a, L=V**0.5")
    raw = {
        "pack": {"name": "t", "variables": ["V", "N", "d"], "base": "V", "size": "d", "param_count": "d"},
        "terms": [{"name": "s", "role": "signal", "expr": "d*N", "provenance": "derived-here"},
                  {"name": "fixed", "role": "noise", "expr": "V**2*d", "provenance": "derived-here"},
                  {"name": "vocab", "role": "noise", "expr": "V", "provenance": "derived-here"}],
    }
    p = theory.predict(theory.pack_from_dict(raw, "t.toml"), "N=V").to_dict()
    assert p["infeasible"] == ["fixed"] and p["dominant"] == "vocab"

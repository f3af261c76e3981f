"""The token-retrieval packs: provenance, pointers into the derivation, and the engine's regions and
slopes against the corollary derived by hand in systems/token_retrieval/DERIVATION.md §6."""
import re
from pathlib import Path

import pytest
import sympy as sp

from recallkit.theory.pack import load_pack
from recallkit.theory.predict import predict
from recallkit.theory.regions import compute_regions

DERIVATION = Path(__file__).resolve().parents[3] / "systems" / "token_retrieval" / "DERIVATION.md"
PACKS = ("token_retrieval_attn", "token_retrieval")


def _sections() -> set[str]:
    return set(re.findall(r"^#+\s+(§[0-9.]+)", DERIVATION.read_text(), flags=re.M))


@pytest.mark.parametrize("name", PACKS)
def test_every_term_is_derived_here_with_a_pointer_into_the_derivation(name):
    pack = load_pack(name)
    sections = _sections()
    assert pack.terms, name
    for item in list(pack.terms) + list(pack.lower_bounds):
        assert item.provenance == "derived-here", item.name
        match = re.fullmatch(r"systems/token_retrieval/DERIVATION\.md (§[0-9.]+)", item.reference)
        assert match and match.group(1) in sections, (item.name, item.reference)
    reported = " ".join(f.text for f in pack.facts if f.provenance == "paper-reported")
    for phrase in ("c in (0, 1)", "V log V", "mean bias", "gradient noise", "MLP noise", "multiplicative"):
        assert phrase in reported


def _required(name, scaling):
    prediction = predict(load_pack(name), scaling).to_dict()
    return sp.Rational(prediction["slope_exact"]), prediction["dominant"], set(prediction.get("tied_with") or [])


# hand-derived in §6.2 / §6.3: (scaling, required param-count exponent, binding terms)
ATTENTION_ONLY = [
    ("N=V, L=V**(1/4)", 2, {"mean_bias"}),                                   # (a,c) = (1, 1/4)
    ("N=V*log(V), L=V**(1/2)", 2, {"mean_bias", "grad_noise_positions", "noise_self"}),  # (1, 1/2)
    ("N=V**(3/2), L=V**(1/2)", sp.Rational(3, 2), {"grad_noise", "grad_noise_positions"}),  # (1.5, 0.5)
    ("N=V**2, L=V**(1/2)", sp.Rational(3, 2), {"grad_noise"}),                # (2, 0.5)
    ("N=V, L=V**(3/4)", 3, {"noise_self"}),                                   # (1, 0.75)
    # (1.5, 0.75): noise_self and grad_noise_positions both need d ~ V; noise_self carries log V
    # against grad_noise_positions' sqrt(log V), so it binds
    ("N=V**(3/2), L=V**(3/4)", 2, {"noise_self"}),
]


@pytest.mark.parametrize("scaling, exponent, binding", ATTENTION_ONLY)
def test_attention_only_slopes_match_the_hand_corollary(scaling, exponent, binding):
    slope, dominant, tied = _required("token_retrieval_attn", scaling)
    assert slope == exponent
    assert {dominant} | tied == binding


@pytest.mark.parametrize("scaling, exponent, binding", ATTENTION_ONLY)
def test_attention_mlp_needs_the_same_d_so_m_d_grows_by_k_plus_1_over_2(scaling, exponent, binding):
    # §6.3: with m = d^k the attention terms still bind on d alone; m*d = d^(k+1)
    for k in (2, 3):
        slope, dominant, tied = _required("token_retrieval", f"{scaling}, m=d**{k}")
        assert slope == sp.Rational(exponent) * (k + 1) / 2
        assert {dominant} | tied == binding


def test_mlp_noise_is_gradient_noise_with_d_squared_replaced_by_m_d():
    # §5.2, §6.3: at m = d the MLP noise ties with the gradient noise; it binds only for m << d
    slope, dominant, tied = _required("token_retrieval", "N=V**2, L=V**(1/2), m=d")
    assert slope == sp.Rational(3, 2) and {dominant} | tied == {"grad_noise", "mlp_noise"}
    slope, dominant, tied = _required("token_retrieval", "N=V**2, L=V**(1/2), m=d**(1/2)")
    assert (slope, dominant, tied) == (sp.Rational(3, 2), "mlp_noise", set())


@pytest.mark.parametrize("name, scaling", [("token_retrieval_attn", None),
                                           ("token_retrieval", None),
                                           ("token_retrieval", "N=V**a, L=V**c, m=d**3")])
def test_regions_agree_with_the_stated_corollary(name, scaling):
    diagram = compute_regions(load_pack(name), scaling, axes="a,c").to_dict()
    dominants = {region["dominant"] for region in diagram["regions"]}
    assert dominants == {"mean_bias", "grad_noise", "grad_noise_positions", "noise_self"}
    if scaling is None:
        assert diagram["corollary_agrees"] is True
    # Assumption 1 shows up as the feasibility of the count part of the mean bias
    assert any(f["term"] == "mean_bias_counts" for f in diagram["feasibility"])

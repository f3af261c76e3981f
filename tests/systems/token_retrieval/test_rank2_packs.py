"""The rank-2 packs (DERIVATION.md §5.4): provenance, and the slopes the engine computes against the
ones derived by hand. The claim they encode: with a rank-r feature map on the content, m = d and
m = d^r need the same slope of log(m*d) (the MLP noise binds), m = d^(r+1) is steeper by (r+2)/(r+1);
on the attended input the shared trigger linearises the map and the width stops helping."""
import re
from pathlib import Path

import pytest
import sympy as sp

from recallkit.theory.pack import load_pack
from recallkit.theory.predict import predict
from recallkit.theory.regions import compute_regions

DERIVATION = Path(__file__).resolve().parents[3] / "systems" / "token_retrieval" / "DERIVATION.md"
PACKS = ("token_retrieval_rank2", "token_retrieval_rank2_attended")


@pytest.mark.parametrize("name", PACKS)
def test_every_term_is_derived_here_in_section_5_4(name):
    pack = load_pack(name)
    assert "### §5.4" in DERIVATION.read_text()
    for term in pack.terms:
        assert term.provenance == "derived-here", term.name
        assert re.fullmatch(r"systems/token_retrieval/DERIVATION\.md §5\.4", term.reference), term.name


def _slope(name, scaling):
    prediction = predict(load_pack(name), scaling).to_dict()
    return sp.Rational(prediction["slope_exact"]), {prediction["dominant"], *(prediction.get("tied_with") or [])}


# (line, k, slope of log(m d), binding terms), derived by hand in §5.4
CONTENT = [
    ("N=V**1.5, L=V**0.25", 1, sp.Rational(3, 2), {"mlp_noise", "mlp_noise_samples"}),
    ("N=V**1.5, L=V**0.25", 2, sp.Rational(3, 2), {"kernel_crosstalk", "kernel_samples", "mlp_noise", "mlp_noise_samples"}),
    ("N=V**1.5, L=V**0.25", 3, sp.Rational(2), {"kernel_crosstalk", "kernel_samples"}),
    ("N=V**1.5, L=V**0.5", 1, sp.Rational(5, 2), {"mlp_noise_samples"}),
    ("N=V**1.5, L=V**0.5", 2, sp.Rational(5, 2), {"kernel_samples", "mlp_noise_samples"}),
    ("N=V**1.5, L=V**0.5", 3, sp.Rational(10, 3), {"kernel_samples"}),
]


@pytest.mark.parametrize("line, k, slope, binding", CONTENT)
def test_content_pack_width_helps_up_to_d_squared(line, k, slope, binding):
    assert _slope("token_retrieval_rank2", f"{line}, m=d**{k}") == (slope, binding)


def test_d_cubed_is_steeper_by_four_thirds_at_large_n():
    one, _ = _slope("token_retrieval_rank2", "N=V**1.5, L=V**0.25, m=d**2")
    three, _ = _slope("token_retrieval_rank2", "N=V**1.5, L=V**0.25, m=d**3")
    assert three / one == sp.Rational(4, 3)


def test_attended_input_is_linearised_like_relu():
    """m = d^k on the attended input: the linearisation term binds with the ReLU pack's (1 + c)(k + 1)/2."""
    for k, slope in ((2, sp.Rational(15, 8)), (3, sp.Rational(5, 2))):
        got, binding = _slope("token_retrieval_rank2_attended", f"N=V**1.5, L=V**0.25, m=d**{k}")
        assert got == slope and binding == {"linearisation"}
        relu, _ = _slope("token_retrieval", f"N=V**1.5, L=V**0.25, m=d**{k}")
        assert got == relu


def test_regions_of_the_content_pack_cover_the_box():
    diagram = compute_regions(load_pack("token_retrieval_rank2")).to_dict()
    names = {region["dominant"] for region in diagram["regions"]}
    assert {"kernel_crosstalk", "kernel_samples", "label_count"} <= names

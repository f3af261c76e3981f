"""The mean-bias-free pack token_retrieval_attn_centred (DERIVATION.md §10): token_retrieval_attn without its two
mean-bias terms. Where the plain pack's mean bias binds, the centred model's exponent of d^2 along N = V^a,
L = V^c is lower by min(3 - 2a - c, 2 - a - 2c), derived by hand; the engine must compute the same, and the
feasibility condition N >= V log V (from mean_bias_counts) must be gone."""
from pathlib import Path

import pytest
import sympy as sp

from recallkit.theory.pack import load_pack
from recallkit.theory.predict import predict
from recallkit.theory.regions import compute_regions

DERIVATION = Path(__file__).resolve().parents[3] / "systems" / "token_retrieval" / "DERIVATION.md"
PLAIN, CENTRED = "token_retrieval_attn", "token_retrieval_attn_centred"


def test_the_pack_is_the_plain_one_without_the_mean_bias_terms():
    plain, centred = load_pack(PLAIN), load_pack(CENTRED)
    kept = {t.name: t for t in centred.terms}
    assert set(kept) == {t.name for t in plain.terms} - {"mean_bias", "mean_bias_counts"}
    for term in plain.terms:
        if term.name in kept:  # each remaining term keeps its expression, provenance and reference
            assert (kept[term.name].expr, kept[term.name].provenance, kept[term.name].reference) == (
                term.expr, term.provenance, term.reference), term.name
    # the lower bounds hold for classes of estimators, whatever the algorithm: the centred pack keeps every one
    bounds = lambda pack: [(b.name, b.expr, b.provenance, b.reference) for b in pack.lower_bounds]  # noqa: E731
    assert bounds(centred) == bounds(plain)
    assert "## §10" in DERIVATION.read_text(encoding="utf-8")


def test_mean_bias_region_and_feasibility_are_gone():
    plain = compute_regions(load_pack(PLAIN)).to_dict()
    centred = compute_regions(load_pack(CENTRED)).to_dict()
    assert "mean_bias" in {r["dominant"] for r in plain["regions"]} and plain["feasibility"]
    assert {r["dominant"] for r in centred["regions"]} == {"grad_noise", "grad_noise_positions", "noise_self"}
    assert centred["feasibility"] == []
    assert centred.get("corollary_agrees", True)


def _exponent(name: str, a, c) -> tuple[sp.Rational, str]:
    prediction = predict(load_pack(name), f"N=V**({a}), L=V**({c})").to_dict()
    return sp.nsimplify(prediction["slope_exact"]), prediction["dominant"]


# (a, c) inside the plain pack's mean-bias region (a <= (3-c)/2, a + 2c <= 2, c <= 1/2), the corner (1, 0) excluded
# by the domain c > 0 and approached at c = 1/100
POINTS = [(1, sp.Rational(1, 100)), (1, sp.Rational(3, 10)), (sp.Rational(6, 5), sp.Rational(1, 10)),
          (sp.Rational(13, 10), sp.Rational(1, 5)), (sp.Rational(11, 10), sp.Rational(2, 5))]


@pytest.mark.parametrize("a, c", POINTS)
def test_exponent_gain_where_the_mean_bias_binds(a, c):
    plain, dominant = _exponent(PLAIN, a, c)
    centred, _ = _exponent(CENTRED, a, c)
    assert dominant == "mean_bias" and plain == 4 - 2 * a
    assert plain - centred == min(3 - 2 * a - c, 2 - a - 2 * c)


def test_no_gain_outside_the_mean_bias_region():
    for a, c in ((2, sp.Rational(1, 2)), (sp.Rational(3, 2), sp.Rational(9, 10))):
        plain, dominant = _exponent(PLAIN, a, c)
        assert dominant != "mean_bias" and _exponent(CENTRED, a, c)[0] == plain


def test_the_experiment_line_gains_one():
    """N = V log V at fixed L (a = 1, c = 0): slope 2 against 1, the largest gain."""
    plain = predict(load_pack(PLAIN), "N=V*log(V), L=8").to_dict()
    centred = predict(load_pack(CENTRED), "N=V*log(V), L=8").to_dict()
    assert (plain["dominant"], sp.Rational(plain["slope_exact"])) == ("mean_bias", 2)
    assert (centred["dominant"], sp.Rational(centred["slope_exact"])) == ("grad_noise", 1)

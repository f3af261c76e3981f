"""What each bound of a pack covers, and the gap of the upper bound to the strongest lower bound, region by region.

A lower bound holds for a class (every estimator, p-bit models, ...) and must name it; the failure condition of one
named estimator is a different kind of entry and never counts as a lower bound. The token-retrieval numbers are the
hand check of systems/token_retrieval/DERIVATION.md §7.3.
"""
from __future__ import annotations

import pytest
import sympy as sp

from recallkit import theory
from recallkit.theory.errors import InputError
from recallkit.theory.symbols import EXPONENTS

a, c = EXPONENTS["a"], EXPONENTS["c"]


def _same(text: str, expected) -> bool:
    return sp.simplify(sp.sympify(text, locals={"a": a, "c": c}) - expected) == 0


def _raw(bounds: list[dict]) -> dict:
    return {
        "pack": {"name": "hand", "variables": ["V", "N", "L", "d"], "base": "V", "size": "d", "param_count": "d**2",
                 "domain": ["a >= 1", "0 < c < 1"]},
        "terms": [{"name": "signal", "role": "signal", "expr": "1/L", "provenance": "derived-here"},
                  {"name": "crosstalk", "role": "noise", "expr": "1/d", "provenance": "derived-here"},
                  {"name": "finite_sample", "role": "noise", "expr": "V/(sqrt(N)*d)", "provenance": "derived-here"}],
        "lower_bounds": bounds,
    }


def test_every_lower_bound_of_a_shipped_pack_names_its_class():
    lower = []
    for name in theory.list_packs():
        for bound in theory.load_pack(name).lower_bounds:
            assert bound.kind in ("lower-bound", "estimator-failure"), (name, bound.name)
            if bound.kind == "lower-bound":
                assert bound.bound_class.strip(), (name, bound.name)
                lower.append((name, bound.name))
            else:
                assert bound.estimator.strip() and not bound.bound_class, (name, bound.name)
    assert ("token_retrieval_attn", "counting") in lower and ("assoc_memory", "counting") in lower


@pytest.mark.parametrize("pack", ["token_retrieval_attn", "token_retrieval"])
def test_the_first_gradient_entries_are_one_estimators_failure_conditions(pack):
    bounds = {bound.name: bound for bound in theory.load_pack(pack).lower_bounds}
    for name in ("first_gradient_positions", "first_gradient_self"):
        assert bounds[name].kind == "estimator-failure"
        assert "correlation" in bounds[name].estimator and "oracle" in bounds[name].estimator
    assert bounds["counting"].kind == "lower-bound" and "every estimator" in bounds["counting"].bound_class


def test_a_lower_bound_without_its_class_is_one_line_naming_the_field():
    with pytest.raises(InputError) as info:
        theory.pack_from_dict(_raw([{"name": "counting", "expr": "V*log(V)", "provenance": "derived-here"}]),
                              "hand.toml")
    message = str(info.value)
    assert "\n" not in message and "hand.toml: lower_bounds[0]" in message and "'class'" in message


def test_a_failure_condition_names_its_estimator_and_covers_no_class():
    entry = {"name": "readout", "expr": "V**2*L/N", "provenance": "derived-here", "kind": "estimator-failure"}
    with pytest.raises(InputError, match=r"lower_bounds\[0\].*'estimator'"):
        theory.pack_from_dict(_raw([entry]), "hand.toml")
    with pytest.raises(InputError, match=r"lower_bounds\[0\]\.class: .*estimator-failure"):
        theory.pack_from_dict(_raw([{**entry, "estimator": "a readout", "class": "every estimator"}]), "hand.toml")
    with pytest.raises(InputError, match=r"lower_bounds\[0\]\.kind: expected one of lower-bound, estimator-failure"):
        theory.pack_from_dict(_raw([{**entry, "kind": "bound"}]), "hand.toml")
    bound = theory.pack_from_dict(_raw([{**entry, "estimator": "a readout"}]), "hand.toml").lower_bounds[0]
    assert bound.to_dict()["kind"] == "estimator-failure" and bound.to_dict()["estimator"] == "a readout"


# DERIVATION.md §7.3, hand check: region -> (upper-bound exponent, its log power, {strongest lower bound: (gap, gap's
# log power)}). Two bounds over a class in the attention-only pack: counting, V log V (every estimator), and the
# gradient-access bound V^2 L log V / N of §7.4 (estimators of the noisy first gradient), the stronger where a < 1 + c.
HAND_CHECK = {
    "mean_bias": (4 - 2 * a, 2, {"counting": (3 - 2 * a, 1), "first_gradient_access": (2 - a - c, 1)}),
    "grad_noise": (1 + c, 1, {"counting": (c, 0)}),
    "grad_noise_positions": (2 + 2 * c - a, 1, {"first_gradient_access": (c, 0)}),
    "noise_self": (2 + 4 * c - 2 * a, 2, {"first_gradient_access": (3 * c - a, 1)}),
}
CLASS_WORDS = {"counting": "every estimator", "first_gradient_access": "first gradient"}


def test_the_gap_to_the_strongest_bound_matches_the_hand_check():
    regions = theory.compute_regions(theory.load_pack("token_retrieval_attn")).to_dict()["regions"]
    assert sorted(region["dominant"] for region in regions) == sorted(HAND_CHECK)
    for region in regions:
        upper, upper_log, pieces = HAND_CHECK[region["dominant"]]
        assert _same(region["required_param_exponent"], upper) and _same(region["log_power"], upper_log)
        got = {piece["name"]: piece for piece in region["strongest_bound_gaps"]}
        assert sorted(got) == sorted(pieces), region["dominant"]
        for name, (gap, gap_log) in pieces.items():
            assert CLASS_WORDS[name] in got[name]["class"], region["dominant"]
            assert _same(got[name]["gap_exponent"], gap) and _same(got[name]["gap_log_power"], gap_log), name
        if len(got) == 1:  # one bound is strongest over the whole region
            assert next(iter(got.values()))["vertices"] == region["vertices"]
    # mean_bias is cut on a = 1 + c, from (1, 0) to (4/3, 1/3): gradient access above, counting below
    mean_bias = next(r for r in regions if r["dominant"] == "mean_bias")
    cut = {p["name"]: sorted(map(tuple, p["vertices"])) for p in mean_bias["strongest_bound_gaps"]}
    assert cut == {"counting": [("1", "0"), ("3/2", "0"), ("4/3", "1/3")],
                   "first_gradient_access": [("1", "0"), ("1", "1/2"), ("4/3", "1/3")]}


def test_a_failure_condition_is_never_the_strongest_bound_even_where_it_is_largest():
    # at (a, c) = (1, 1/2), inside noise_self, first_gradient_positions (2 + c - a = 3/2) exceeds counting (1)
    regions = theory.compute_regions(theory.load_pack("token_retrieval_attn")).to_dict()["regions"]
    region = next(r for r in regions if r["dominant"] == "noise_self")
    assert ["1", "1/2"] in region["vertices"]
    kinds = {gap["name"]: gap["kind"] for gap in region["lower_bound_gaps"]}
    assert kinds == {"counting": "lower-bound", "first_gradient_positions": "estimator-failure",
                     "first_gradient_self": "estimator-failure", "first_gradient_access": "lower-bound"}
    # first_gradient_positions has the same exponent as the gradient-access lower bound; only the latter counts
    assert [piece["name"] for piece in region["strongest_bound_gaps"]] == ["first_gradient_access"]


def test_the_strongest_bound_is_split_where_two_bounds_cross_inside_a_region():
    # signal 1/L: crosstalk needs d^2 >= V^(2c), finite_sample d^2 >= V^(2 + 2c - a), so finite_sample binds on
    # 1 <= a <= 2. The bounds V (class A) and V^2 L / N (class B) cross on a = 1 + c, inside that region.
    raw = _raw([{"name": "small", "expr": "V", "provenance": "derived-here", "class": "class A"},
                {"name": "sampled", "expr": "V**2*L/N", "provenance": "derived-here", "class": "class B"}])
    pack = theory.pack_from_dict(raw, "hand.toml")
    diagram = theory.compute_regions(pack, "N=V**a, L=V**c", ("a", "c"), box={"a": (1, 3), "c": (0, 1)})
    region = next(r for r in diagram.to_dict()["regions"] if r["dominant"] == "finite_sample")
    pieces = {piece["name"]: piece for piece in region["strongest_bound_gaps"]}
    assert set(pieces) == {"small", "sampled"} and pieces["sampled"]["class"] == "class B"
    # gap to V^(2 + c - a): c; gap to V: 1 + 2c - a
    assert _same(pieces["sampled"]["gap_exponent"], c) and _same(pieces["small"]["gap_exponent"], 1 + 2 * c - a)
    # the pieces tile the region: sampled where 2 + c - a >= 1, i.e. a <= 1 + c
    for vertex in pieces["sampled"]["vertices_float"]:
        assert vertex[0] <= 1 + vertex[1] + 1e-12
    for vertex in pieces["small"]["vertices_float"]:
        assert vertex[0] >= 1 + vertex[1] - 1e-12


def test_predict_reports_the_gap_to_the_strongest_lower_bound_on_a_line():
    # N = V^1.5, L = V^0.5: grad_noise and grad_noise_positions tie at d^2 ~ V^(3/2) log V; counting is V log V
    document = theory.predict(theory.load_pack("token_retrieval_attn"), "N=V**1.5, L=V**0.5").to_dict()
    strongest = document["strongest_bound"]
    assert strongest["name"] == "counting" and "every estimator" in strongest["class"]
    assert strongest["gap_exponent"] == "1/2" and strongest["gap_log_power"] == "0"
    assert {gap["name"]: gap["kind"] for gap in document["lower_bounds"]}["first_gradient_self"] == "estimator-failure"


def test_the_phase_diagram_shows_each_regions_gap_and_names_what_a_bound_covers():
    from recallkit.reports.phase import draw_phase_diagram

    pack = theory.load_pack("token_retrieval_attn")
    figure = draw_phase_diagram(theory.compute_regions(pack).to_dict())
    labels = figure.axes[0].get_legend_handles_labels()[1]
    region = next(label for label in labels if label.startswith("grad_noise:"))
    assert "gap to counting" in region and "{c}" in region
    # one axis: the bounds are drawn as curves, a failure condition labelled as what it is
    line = theory.compute_regions(pack, "N=V**a, L=V**0.5", ("a",), box={"a": (1, 2.5)}).to_dict()
    labels = draw_phase_diagram(line).axes[0].get_legend_handles_labels()[1]
    assert any(label.startswith("lower bound") and "every estimator" in label for label in labels)
    failure = [label for label in labels if "first_gradient_positions" in label]
    assert failure and all(label.startswith("failure condition of one estimator") for label in failure)


def test_the_report_gap_page_says_what_each_bound_covers():
    from recallkit.reports.pdf import lower_bound_gap_page

    diagram = theory.compute_regions(theory.load_pack("token_retrieval_attn")).to_dict()
    texts = " ".join(t.get_text() for t in lower_bound_gap_page(diagram, "bounds").texts).replace("\n", " ")
    assert "counting: lower bound over every estimator" in texts
    assert "first_gradient_positions: failure condition of one estimator" in texts and "not a lower bound" in texts
    assert "no gap is taken to them" in texts

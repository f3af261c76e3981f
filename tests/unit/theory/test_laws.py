"""[[laws]]: a pack states a metric as a sum (or max) of power laws in its variables; along a scaling the theory gives
each term's exponent in the base, the regions of the free exponents where each term dominates and, in each, the
exponent of the metric against every variable of the law."""
from __future__ import annotations

import pytest

from recallkit import theory
from recallkit.theory.errors import InputError
from recallkit.theory.pack import pack_from_dict
from recallkit.theory.schema import loads_toml

__all__ = ["LAW_PACK"]

# error = d^-1 + n^-(1/2): along n = d**a the approximation term d^-1 dominates for a > 2, the sample term for a < 2
LAW_PACK = """
[pack]
name = "toy_law"
title = "A law in a dimension d and a sample count n"
variables = ["d"]

[[variables]]
name = "n"
meaning = "number of training samples"
domain = "integer"

[[laws]]
name = "excess_error"
metric = "error"
reference = "a toy rate"

[[laws.terms]]
name = "approximation"
expr = "d**-1"
provenance = "derived-here"
reference = "toy"

[[laws.terms]]
name = "estimation"
expr = "n**(-1/2)"
provenance = "paper-reported"

[defaults]
box = { a = [0, 4] }
"""


def load(text: str = LAW_PACK, label: str = "toy.toml"):
    return pack_from_dict(loads_toml(text, label), label)


def by_dominant(document: dict) -> dict[str, dict]:
    return {region["dominant"]: region for region in document["regions"]}


@pytest.mark.parametrize("combine", ["sum", "max"])
def test_each_term_dominates_on_its_side_of_a_equal_2(combine):
    text = LAW_PACK if combine == "sum" else LAW_PACK.replace('metric = "error"', 'metric = "error"\ncombine = "max"')
    pack = load(text)
    document = theory.law_exponents(pack, "excess_error", "n=d**a")
    assert (document["metric"], document["combine"], document["base"], document["axes"]) == (
        "error", combine, "d", ["a"])
    assert {term["name"]: term["exponent"] for term in document["terms"]} == {
        "approximation": "-1", "estimation": "-a/2"}
    regions = by_dominant(document)
    assert set(regions) == {"approximation", "estimation"}
    # the boundary at a = 2: the sample term where n grows slower than d**2
    assert regions["estimation"]["vertices"] == [["0"], ["2"]]
    assert regions["approximation"]["vertices"] == [["2"], ["4"]]
    assert regions["estimation"]["exponent"] == "-a/2"
    assert regions["approximation"]["exponent"] == "-1"
    assert regions["estimation"]["variables"] == {"d": {"exponent": "0", "log_power": "0"},
                                                  "n": {"exponent": "-1/2", "log_power": "0"}}
    assert regions["approximation"]["variables"] == {"d": {"exponent": "-1", "log_power": "0"},
                                                     "n": {"exponent": "0", "log_power": "0"}}


def test_a_fully_specified_line_has_one_dominant_term():
    document = theory.law_exponents(load(), "excess_error", "n=d**3")
    assert document["axes"] == []
    (region,) = document["regions"]
    assert (region["dominant"], region["exponent"], region["exponent_float"]) == ("approximation", "-1", -1.0)


def test_the_laws_own_variable_may_be_the_base():
    document = theory.law_exponents(load(), "excess_error", "d=n**b")
    assert document["base"] == "n"
    regions = by_dominant(document)
    assert regions["approximation"]["vertices"] == [["0"], ["1/2"]]
    assert regions["approximation"]["exponent"] == "-b"


def test_predict_laws_and_show_carry_the_laws():
    pack = load()
    (document,) = theory.predict_laws(pack, "n=d**a")
    assert document["law"] == "excess_error"
    shown = pack.to_dict()["laws"][0]
    assert (shown["name"], shown["metric"], shown["combine"]) == ("excess_error", "error", "sum")
    assert [(t["name"], t["provenance"]) for t in shown["terms"]] == [
        ("approximation", "derived-here"), ("estimation", "paper-reported")]


def test_a_pack_with_conditions_and_laws_predicts_both():
    # the condition m*d >= V solved for the width m; the law read along the same line, in its base V
    text = (LAW_PACK.replace('variables = ["d"]', 'variables = ["V", "d", "m"]\nbase = "V"\nsize = "m"\n'
                             'param_count = "m*d"')
            + '\n[[terms]]\nname = "signal"\nrole = "signal"\nexpr = "m*d"\nprovenance = "derived-here"\n'
            + '\n[[terms]]\nname = "noise"\nrole = "noise"\nexpr = "V"\nprovenance = "derived-here"\n')
    pack = load(text)
    document = theory.predict(pack, "n=V**4, d=V").to_dict()
    assert (document["dominant"], document["slope_exact"]) == ("noise", "1")
    (law,) = document["laws"]
    assert (law["base"], law["regions"][0]["dominant"], law["regions"][0]["exponent"]) == ("V", "approximation", "-1")
    # a line that leaves two of the law's variables free gives the condition and says why the law has no exponent
    text = text.replace('expr = "d**-1"', 'expr = "d**-1*m**-1"')
    (law,) = theory.predict(load(text), "n=V**4, d=V").to_dict()["laws"]
    assert set(law) == {"law", "metric", "combine", "error"} and "m" in law["error"], law


def test_a_pack_without_laws_predicts_as_before():
    document = theory.predict(theory.load_pack("example"), "N=V*log(V), L=V**0.5").to_dict()
    assert "laws" not in document
    assert "laws" not in theory.load_pack("example").to_dict()


def test_a_laws_only_pack_has_no_condition_to_solve():
    with pytest.raises(InputError, match=r"^toy.toml: .*no success condition"):
        theory.predict(load(), "n=d**2")


@pytest.mark.parametrize("old, new, expected", [
    ('provenance = "paper-reported"\n', "", r"^toy.toml: laws\[0\].terms\[1\]: missing required field 'provenance'$"),
    ('metric = "error"', 'metric = "error"\ncombine = "mean"',
     r"^toy.toml: laws\[0\].combine: expected one of sum, max, got 'mean'$"),
    ('expr = "n**(-1/2)"', 'expr = "m**(-1/2)"', r"^toy.toml: laws\[0\].terms\[1\].expr: .*'m'"),
    ('name = "estimation"', 'name = "approximation"', r"^toy.toml: laws\[0\].terms: duplicate name 'approximation'$"),
    ('metric = "error"\n', "", r"^toy.toml: laws\[0\]: missing required field 'metric'$"),
])
def test_a_bad_law_is_one_line_naming_file_and_field(old, new, expected):
    text = LAW_PACK.replace(old, new, 1)
    assert text != LAW_PACK
    with pytest.raises(InputError, match=expected) as caught:
        load(text)
    assert "\n" not in str(caught.value)


def test_an_unknown_law_is_named():
    with pytest.raises(InputError, match=r"^law 'risk': .*excess_error"):
        theory.law_exponents(load(), "risk", "n=d**a")


def test_a_variable_left_unscaled_is_named():
    with pytest.raises(InputError, match=r"variable"):
        theory.law_exponents(load(), "excess_error", "")


def test_an_exponent_against_a_variable_takes_the_value_the_line_sets(tmp_path):
    """A law's exponent text was printed unsubstituted ("-alpha") where the line fixes alpha = 1/2."""
    from tests.unit.empirics.test_pack_constants import PACK

    from recallkit import theory
    from recallkit.theory.laws import law_exponents

    path = tmp_path / "alpha_pack.toml"
    path.write_text(PACK, encoding="utf-8")
    pack = theory.load_pack(path)
    fixed = law_exponents(pack, "test_error", "n=p**2, alpha=1/2")
    width = next(t for t in fixed["terms"] if t["name"] == "width")
    assert width["variables"]["p"] == {"exponent": "-1/2", "log_power": "0"}
    assert width["exponent"] == "-1/2"
    other = law_exponents(pack, "test_error", "n=p**2, alpha=3/4")
    assert next(t for t in other["terms"] if t["name"] == "width")["variables"]["p"]["exponent"] == "-3/4"


def test_lines_at_two_values_of_a_pack_variable_get_a_note_on_the_phase_diagram(tmp_path):
    """Two lines of one law at alpha = 1/2 and alpha = 3/4 were drawn on one diagram with no word that its regions
    are those of one value only."""
    from tests.unit.empirics.test_pack_constants import PACK

    from recallkit import theory
    from recallkit.theory.summary import pack_pieces

    path = tmp_path / "alpha_pack.toml"
    path.write_text(PACK, encoding="utf-8")
    pack = theory.load_pack(path)
    pieces = pack_pieces(pack, [("half", "n=p**2, alpha=1/2"), ("three quarters", "n=p**2, alpha=3/4")])
    notes = [n for n in pieces.get("notes", []) if "regions are drawn at alpha = 1/2" in n]
    assert len(notes) == 1 and "three quarters: alpha = 3/4" in notes[0], pieces.get("notes")
    same = pack_pieces(pack, [("half", "n=p**2, alpha=1/2"), ("again", "n=2*p**2, alpha=1/2")])
    assert not [n for n in same.get("notes", []) if "regions are drawn at" in n]

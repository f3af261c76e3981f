"""A pack may declare its own variables ([[variables]]: name, meaning, domain): they are positive symbols that its
terms, lower bounds, parameter count and scalings use like the built-in V N d L m R eta gamma, so a law stated in
a sample count n and a distribution exponent alpha is read, predicted and drawn; a bad declaration is one line."""
from __future__ import annotations

import textwrap

import pytest
import sympy as sp

from recallkit import theory
from recallkit.theory.errors import InputError
from recallkit.theory.symbols import VARIABLES, V, d
from tests.pack_texts import MINIMAL_PACK, SIGNAL_AND_CROSSTALK, pack_load_error, write_pack

__all__: list[str] = []

# signal d^2 against a log term and a finite-sample term V^2 / n^alpha: with n = V^2 the second binds while
# alpha < 1/2 (d^2 >= V^(2 - 2 alpha)), the first above it (d^2 >= V log V)
SAMPLES_PACK = textwrap.dedent(
    """
    [pack]
    name = "samples"
    title = "a law in a sample count and a distribution exponent"
    variables = ["V", "d"]
    base = "V"
    size = "d"
    param_count = "d**2"

    [[variables]]
    name = "n"
    meaning = "number of training samples"
    domain = "integer"

    [[variables]]
    name = "alpha"
    meaning = "exponent of the input distribution's power law"

    """ + SIGNAL_AND_CROSSTALK.format(crosstalk="V*log(V)") + """
    [[terms]]
    name = "finite_sample"
    role = "noise"
    expr = "V**2/n**alpha"
    provenance = "derived-here"

    [[lower_bounds]]
    name = "samples_seen"
    expr = "n"
    provenance = "derived-here"
    class = "every estimator that stores each sample"

    [defaults]
    scaling = "n=V**2, alpha=a"
    axes = ["a"]
    box = { a = [0, 1] }
    """
)


def write(tmp_path, text: str):
    return write_pack(tmp_path, text, "samples.toml")


def load_error(tmp_path, text: str) -> str:
    return pack_load_error(tmp_path, text, "samples.toml")


def with_declaration(declaration: str, text: str = SAMPLES_PACK) -> str:
    """``text`` with its first [[variables]] entry replaced by ``declaration``."""
    first = '[[variables]]\nname = "n"\nmeaning = "number of training samples"\ndomain = "integer"\n'
    assert first in text
    return text.replace(first, declaration)


def test_declared_variables_load_as_positive_symbols_beside_the_built_in_ones(tmp_path):
    pack = theory.load_pack(write(tmp_path, SAMPLES_PACK))
    n, alpha = sp.Symbol("n", positive=True), sp.Symbol("alpha", positive=True)
    assert dict(pack.variables) == {"V": V, "d": d, "n": n, "alpha": alpha}
    assert pack.variables["n"].is_positive and pack.variables["alpha"].is_positive
    assert [(v.name, v.meaning, v.domain) for v in pack.declared_variables] == [
        ("n", "number of training samples", "integer"),
        ("alpha", "exponent of the input distribution's power law", "real")]
    assert pack.terms[2].expr == V**2 / n**alpha
    assert pack.lower_bounds[0].expr == n
    assert pack.symbol_table() == {"V": V, "d": d, "n": n, "alpha": alpha}
    assert "n" not in VARIABLES  # the built-in vocabulary is not widened by a pack


def test_a_pack_with_declared_variables_predicts(tmp_path):
    pack = theory.load_pack(write(tmp_path, SAMPLES_PACK))
    small = theory.predict(pack, "n=V**2, alpha=1/4")
    assert (small.dominant, small.slope, small.log_power) == ("finite_sample", sp.Rational(3, 2), 0)
    assert small.lower_bounds[0]["exponent"] == "2"  # n = V^2 samples
    large = theory.predict(pack, "n=V**2, alpha=1")
    assert (large.dominant, large.slope, large.log_power) == ("crosstalk", 1, 1)
    # a scaling may name a declared variable on its right-hand side too
    assert theory.predict(pack, "alpha=1/4, n=V**(8*alpha)").slope == sp.Rational(3, 2)


def test_a_pack_with_declared_variables_draws_its_regions(tmp_path):
    pack = theory.load_pack(write(tmp_path, SAMPLES_PACK))
    diagram = theory.compute_regions(pack)
    regions = {region.dominant: region for region in diagram.regions}
    assert set(regions) == {"finite_sample", "crosstalk"}
    assert diagram.axis_labels == ["a  (alpha = a)"]


def test_a_declared_variable_may_be_the_base(tmp_path):
    text = SAMPLES_PACK.replace('base = "V"', 'base = "n"')
    text = text[:text.index("[defaults]")]  # its default scaling sets n, which is now the base
    pack = theory.load_pack(write(tmp_path, text))
    prediction = theory.predict(pack, "V=n**(1/2), alpha=1")
    # d^2 >= max(V log V, V^2 / n) = max(n^(1/2) log n / 2, 1): the first binds
    assert (prediction.base, prediction.dominant, prediction.slope, prediction.log_power) == ("n", "crosstalk",
                                                                                             sp.Rational(1, 2), 1)


def test_a_declared_variable_the_scaling_leaves_free_is_one_line_naming_it(tmp_path):
    pack = theory.load_pack(write(tmp_path, SAMPLES_PACK))
    with pytest.raises(InputError) as info:
        theory.predict(pack, "alpha=1/4")
    message = str(info.value)
    assert "\n" not in message and "variable n has no scaling; add e.g. 'n=V**c'" in message, message


def test_an_undeclared_name_names_the_field_and_the_allowed_names(tmp_path):
    message = load_error(tmp_path, SAMPLES_PACK.replace('"V**2/n**alpha"', '"V**2/n**beta"'))
    assert "terms[2].expr: unknown symbol 'beta'" in message, message
    assert "allowed: V, alpha, d, n" in message, message


def test_a_scaling_naming_an_undeclared_variable_is_one_line(tmp_path):
    pack = theory.load_pack(write(tmp_path, SAMPLES_PACK))
    with pytest.raises(InputError) as info:
        theory.predict(pack, "n=V**beta, alpha=1")
    message = str(info.value)
    assert "\n" not in message and "unknown symbol 'beta'" in message and "n" in message, message


@pytest.mark.parametrize("name", ["a", "x", "log", "floor", "V", "N", "gamma"])
def test_a_reserved_or_built_in_name_is_refused(tmp_path, name):
    message = load_error(tmp_path, with_declaration(f'[[variables]]\nname = "{name}"\nmeaning = "m"\n')
                         .replace("/n**alpha", "/alpha"))
    assert f"variables[0].name: {name!r} " in message, message
    assert "built-in variable" in message or "reserved" in message, message


def test_a_name_that_is_not_an_identifier_is_refused(tmp_path):
    message = load_error(tmp_path, with_declaration('[[variables]]\nname = "2n"\nmeaning = "m"\n'))
    assert "variables[0].name: expected an identifier" in message, message


def test_a_clash_with_a_constant_is_refused(tmp_path):
    text = SAMPLES_PACK.replace('param_count = "d**2"', 'param_count = "d**2"\nconstants = ["n"]')
    message = load_error(tmp_path, text)
    assert "variables[0].name: 'n' is a constant of this pack (pack.constants)" in message, message


def test_a_bad_domain_is_refused(tmp_path):
    message = load_error(tmp_path, with_declaration(
        '[[variables]]\nname = "n"\nmeaning = "samples"\ndomain = "complex"\n'))
    assert "variables[0].domain: expected one of integer, real, got 'complex'" in message, message


def test_a_missing_meaning_is_refused(tmp_path):
    message = load_error(tmp_path, with_declaration('[[variables]]\nname = "n"\n'))
    assert "variables[0]: missing required field 'meaning'" in message, message


def test_a_variable_declared_twice_is_refused(tmp_path):
    message = load_error(tmp_path, with_declaration(
        '[[variables]]\nname = "alpha"\nmeaning = "again"\n').replace("/n**alpha", "/alpha"))
    assert "variables: duplicate name 'alpha'" in message, message


def test_variables_must_be_an_array_of_tables(tmp_path):
    message = load_error(tmp_path, 'variables = ["n"]\n' + MINIMAL_PACK)
    assert "variables: expected an array of tables ([[...]])" in message, message


def test_a_pack_without_declarations_keeps_the_built_in_variables():
    pack = theory.load_pack("example")
    assert dict(pack.variables) == {name: VARIABLES[name] for name in ("V", "N", "L", "d")}
    assert pack.declared_variables == ()
    assert "declared_variables" not in pack.to_dict()


def test_a_line_sits_on_the_phase_diagram_at_its_declared_variables_value(tmp_path):
    """An axis that is a declared variable itself (alpha = a), not an exponent of the base: a line with alpha = 1/4
    sits at a = 1/4 (it was placed at 0, the exponent of the constant 1/4 in V)."""
    from recallkit.theory.summary import line_points

    pack = theory.load_pack(write(tmp_path, SAMPLES_PACK))
    diagram = theory.compute_regions(pack)
    assert (diagram.scaling, tuple(diagram.axes)) == ("n=V**2, alpha=a", ("a",))
    lines, notes = line_points(pack, diagram, [("quarter", "n=V**2, alpha=1/4"), ("free", "n=V**2, alpha=V")])
    assert lines == [{"label": "quarter", "point": [0.25]}]
    assert len(notes) == 1 and notes[0].startswith("line 'free' not drawn on the phase diagram")


def test_a_line_sits_at_its_exponent_of_the_variable_its_axis_raises_not_of_the_packs_base():
    """assoc_memory's diagram raises d (m = d^k) while its base is N: the line m = d sat at k = 0 (the exponent of N
    in d), outside the drawn box, so its legend entry had no line."""
    from recallkit.theory.summary import line_points

    pack = theory.load_pack("assoc_memory")
    diagram = theory.compute_regions(pack)
    assert (diagram.scaling, tuple(diagram.axes), pack.base) == ("m=d**k", ("k",), "N")
    lines, notes = line_points(pack, diagram, [("linear", "m=d"), ("mlp", "m=4*d"), ("square", "m=d**2")])
    assert [line["point"] for line in lines] == [[1.0], [1.0], [2.0]] and notes == []

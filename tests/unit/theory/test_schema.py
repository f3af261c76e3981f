"""theory.schema: one function checks a table against a declared section, in each file kind's own words."""
from __future__ import annotations

import pytest

from recallkit.theory.errors import InputError
from recallkit.theory.schema import (
    REQUIRED, Field, Section, check_value, converts, describe, integer, number, options, text, validate,
)

SECTION = Section("[demo]", (
    Field("name", (text(),), "identifier", REQUIRED),
    Field("kind", (options(("a", "b")),), "a | b", "a"),
    Field("ratio", (number(), number(1, closed="neither", expected="a number > 1")), "spacing", 2.0),
    Field("steps", (integer(1),), "training steps", lambda values, context: 10 if values["kind"] == "a" else REQUIRED),
    Field("tags", (), "free list", []),
))


def test_values_are_converted_and_defaults_filled():
    values = validate({"name": "x", "ratio": 3}, SECTION, "f.toml: demo")
    assert values == {"name": "x", "kind": "a", "ratio": 3.0, "steps": 10, "tags": []}
    assert isinstance(values["ratio"], float)
    # a default list is a copy: two results never share it
    assert validate({"name": "y"}, SECTION, "w")["tags"] is not values["tags"]


@pytest.mark.parametrize("table, message", [
    ({"name": "x", "colour": 1}, "f.toml: demo: unknown key 'colour' (expected one of: kind, name, ratio, steps, tags)"),
    ({}, "f.toml: demo.name: expected a non-empty string, got None"),
    ({"name": "x", "kind": "c"}, "f.toml: demo.kind: expected one of a, b, got 'c'"),
    ({"name": "x", "ratio": True}, "f.toml: demo.ratio: expected a number, got True"),
    ({"name": "x", "ratio": 1}, "f.toml: demo.ratio: expected a number > 1, got 1.0"),
    ({"name": "x", "kind": "b"}, "f.toml: demo.steps: expected a positive integer, got None"),
    ([1], "f.toml: demo: expected a table"),
])
def test_each_failure_is_one_line_naming_the_field(table, message):
    with pytest.raises(InputError) as info:
        validate(table, SECTION, "f.toml: demo")
    assert str(info.value) == message


def test_a_file_kind_keeps_its_own_wording():
    packish = Section("[pack]", SECTION.fields, unknown="{where}: unknown key {key!r} (allowed: {allowed})",
                      missing="{where}: missing required field {key!r}")
    with pytest.raises(InputError, match=r"^p: pack: missing required field 'name'$"):
        validate({}, packish, "p: pack")
    with pytest.raises(InputError, match=r"^p: pack: unknown key 'z' \(allowed: kind, name, ratio, steps, tags\)$"):
        validate({"z": 1}, packish, "p: pack")
    listing = Section("[s]", SECTION.fields, unknown="{where}: unknown key(s) {keys}")
    with pytest.raises(InputError, match=r"^s: unknown key\(s\) y, z$"):
        validate({"name": "x", "z": 1, "y": 2}, listing, "s")
    assert validate({"name": "x", "z": 1}, Section("[o]", SECTION.fields, open=True), "o")["name"] == "x"


def test_converters_see_the_fields_checked_before_and_the_context():
    def below_cap(value, at, context):
        if value > context["cap"]:
            raise InputError(f"{at}: {value} is above the cap {context['cap']} of {context['name']}")
        return value

    field = Field("steps", (integer(1), converts(below_cap)), "steps")
    capped = Section("[c]", (SECTION.fields[0], field))
    assert validate({"name": "x", "steps": 3}, capped, "c", context={"cap": 5})["steps"] == 3
    with pytest.raises(InputError, match=r"^c\.steps: 9 is above the cap 5 of x$"):
        validate({"name": "x", "steps": 9}, capped, "c", context={"cap": 5})
    assert check_value(field, 4, "here", {"cap": 4, "name": "n"}) == 4


def test_describe_lists_every_field_with_its_meaning():
    lines = describe(SECTION)
    assert lines[0] == "name: required; identifier"
    assert lines[2] == "ratio: default 2.0; spacing"
    assert len(lines) == len(SECTION.fields)

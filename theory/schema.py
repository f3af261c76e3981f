"""Declarative tables of the sections of recallkit's TOML files, and the one function that checks a table.

Every file kind (experiment files, theory packs, a system's own experiment sections) describes each of its
sections as a :class:`Section`: a tuple of :class:`Field` (name, rules, meaning in a few words, default,
required or not). :func:`validate` checks a TOML table against a section and returns its values, converted
and with defaults filled in; whatever fails is one :class:`InputError` line naming the file and the field
and what was expected, e.g. ``x.toml: search.ratio: expected a number > 1, got 0.5``.

A field's :class:`Rule` chain runs in order: each rule tests the value (as the rule before it left it) and
may convert it. A rule's message is a template over ``at`` (the field's place, e.g. ``x.toml: search.min``),
``expected``, ``got`` (repr of the value being tested), ``raw`` (repr of the value as written) and the
context's names (e.g. ``size``), so each file kind keeps its own wording. Cross-field conditions (max > min,
a line label that must exist) stay with the reader that builds the result from the validated values.

:func:`loads_toml` reads a TOML document into the tables checked here, refusing one nested deeper than
``MAX_TOML_NESTING`` before parsing it; ``text(printable=True)`` refuses control and format characters in text
that a terminal will show.

This module is pure Python: any stage, and any system, may import it.
"""
from __future__ import annotations

import copy
import math
import re
import tomllib
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from recallkit.theory.errors import InputError

__all__ = [
    "MAX_TOML_NESTING", "REQUIRED", "Field", "Rule", "Section", "boolean", "check_keys", "check_value", "converts",
    "describe", "describe_character", "integer", "list_of", "loads_toml", "number", "only_when", "options",
    "required_when", "satisfies", "table", "text", "validate",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


# A field's default when it has none: the file must give it (a default function may also return it).
REQUIRED: Any = _Required()
_MESSAGE = "{at}: expected {expected}, got {got}"


@dataclass(frozen=True)
class Rule:
    """One condition on a value: ``test(value)`` must hold, else ``message`` is raised; then ``convert``
    (``(value, at, context) -> value``, which may raise its own InputError naming ``at``) is applied."""

    expected: str
    test: Callable[[Any], bool] = lambda value: True
    convert: Callable[[Any, str, Mapping[str, Any]], Any] | None = None
    message: str = _MESSAGE


@dataclass(frozen=True)
class Field:
    """One key of a section. ``default``: a value, :data:`REQUIRED`, or a function of the values checked
    before this field (and the context) that returns either. ``missing``: the message when a required
    field is absent (default: the section's; without one, its rules are applied to None)."""

    name: str
    rules: tuple[Rule, ...]
    meaning: str
    default: Any = None
    missing: str | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class Section:
    """A table of a file: its fields in the order they are checked, and the wording of its own messages.

    Message templates: ``not_table`` over ``where`` and ``got``; ``unknown`` over ``where``, ``key`` (the
    first unknown key), ``keys`` (all of them) and ``allowed``; ``missing`` over ``where``, ``at`` and
    ``key``. ``missing`` set: every absent required field is reported (in field order, or by name with
    ``sort_missing``) before any value is checked. ``open``: keys that are not fields are allowed (the caller
    reads or ignores them)."""

    name: str
    fields: tuple[Field, ...]
    not_table: str = "{where}: expected a table"
    unknown: str = "{where}: unknown key {key!r} (expected one of: {allowed})"
    missing: str | None = None
    sort_missing: bool = False
    open: bool = False

    def keys(self) -> set[str]:
        return {f.name for f in self.fields}

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


def _fail(template: str, at: str, expected: str, value: Any, raw: Any, context: Mapping[str, Any]) -> InputError:
    return InputError(template.format(**{**context, "at": at, "expected": expected, "got": repr(value),
                                         "raw": repr(raw), "type": type(value).__name__}))


def check_value(field: Field, value: Any, at: str, context: Mapping[str, Any] = {}) -> Any:
    """``value`` through ``field``'s rules: the converted value, or the first failing rule's InputError."""
    raw = value
    for rule in field.rules:
        if not rule.test(value):
            raise _fail(rule.message, at, rule.expected, value, raw, context)
        if rule.convert is not None:
            value = rule.convert(value, at, context)
    return value


def check_keys(table: Mapping[str, Any], section: Section, where: str, extra: Iterable[str] = (),
               context: Mapping[str, Any] = {}) -> None:
    """InputError naming the first key of ``table`` that ``section`` (plus ``extra``) does not declare."""
    allowed = section.keys() | set(extra)
    unknown = [key for key in table if key not in allowed]
    if unknown and not section.open:
        raise InputError(section.unknown.format(**context, where=where, key=unknown[0], allowed=", ".join(
            sorted(allowed)), keys=", ".join(sorted(unknown))))


def validate(table: Any, section: Section, where: str, *, prefix: str | None = None, extra: Iterable[str] = (),
             context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check ``table`` against ``section`` and return {field: value} for every field (absent optional ones
    get their default). ``where`` names the table in messages (``x.toml: search``); a field's place is
    ``prefix + name`` (default ``where + "."``). ``extra``: further keys allowed (checked by the caller);
    ``context``: names the rules' converters and messages may use (e.g. ``size``)."""
    context = dict(context or {})
    if not isinstance(table, dict):
        raise InputError(section.not_table.format(**context, where=where, got=repr(table)))
    check_keys(table, section, where, extra, context)
    prefix = f"{where}." if prefix is None else prefix
    if section.missing is not None:
        for f in sorted(section.fields, key=lambda f: f.name) if section.sort_missing else section.fields:
            if f.required and f.name not in table:
                raise InputError((f.missing or section.missing).format(**context, where=where, at=prefix + f.name,
                                                                       key=f.name))
    values: dict[str, Any] = {}
    for f in section.fields:
        at = prefix + f.name
        if f.name in table:
            values[f.name] = check_value(f, table[f.name], at, {**context, **values})
            continue
        # a copy: a default list or table must not be shared by the results of two calls
        default = f.default(values, context) if callable(f.default) else f.default
        default = copy.copy(default) if isinstance(default, (dict, list)) else default
        if default is not REQUIRED:
            values[f.name] = default
        elif f.missing is not None:
            raise InputError(f.missing.format(**context, where=where, at=at, key=f.name))
        else:  # absent is None: the first rule says what was expected
            values[f.name] = check_value(f, None, at, {**context, **values})
    return values


def describe(section: Section) -> list[str]:
    """One line per field: name, required or its default, and meaning (for docs and --help texts)."""
    def shown(f: Field) -> str:
        if f.required:
            return "required"
        return "default depends on other keys" if callable(f.default) else f"default {f.default!r}"
    return [f"{f.name}: {shown(f)}; {f.meaning}" for f in section.fields]


# -- the rule vocabulary -----------------------------------------------------------------------------------
def satisfies(test: Callable[[Any], bool], expected: str, message: str = _MESSAGE,
              convert: Callable[[Any, str, Mapping[str, Any]], Any] | None = None) -> Rule:
    """Any condition, with its own wording."""
    return Rule(expected, test, convert, message)


def required_when(name: str, *values: Any, otherwise: Any = None) -> Callable[[Mapping[str, Any], Mapping[str, Any]],
                                                                           Any]:
    """A field's default: REQUIRED where the field ``name`` (checked before it) took one of ``values``, else
    ``otherwise``. Some fields mean something only for one kind of entry and are owed by that kind."""
    return lambda checked, context: REQUIRED if checked.get(name) in values else otherwise


def only_when(name: str, *values: Any) -> Rule:
    """No condition on the value, but the field may be given only where the field ``name`` (checked before it)
    took one of ``values``: given elsewhere it would be read as saying something it does not."""
    def convert(value: Any, at: str, context: Mapping[str, Any]) -> Any:
        if context.get(name) not in values:
            raise InputError(f"{at}: given for {name} = {context.get(name)!r}; it belongs only to {name} = "
                             f"{' or '.join(repr(v) for v in values)}")
        return value
    return Rule("", convert=convert)


def converts(function: Callable[[Any, str, Mapping[str, Any]], Any]) -> Rule:
    """No condition: ``function(value, at, context)`` turns the value into what the reader keeps."""
    return Rule("", convert=function)


def text(expected: str = "a non-empty string", nonempty: bool = True, message: str = _MESSAGE,
         printable: bool = False) -> Rule:
    """A string (not blank unless ``nonempty`` is False). ``printable``: without control or format characters
    (tab and newline allowed), so that a terminal shows it as written, with no escape sequence or reordering."""
    return Rule(expected, lambda v: isinstance(v, str) and (bool(v.strip()) or not nonempty),
                _check_printable if printable else None, message)


def describe_character(char: str) -> str:
    """A character as a message shows it: printable ASCII quoted (``'^'``), anything else by code point and name
    (``U+00A0 NO-BREAK SPACE``, ``U+001B``), so that a message never carries an invisible or escape character."""
    if " " < char <= "~":
        return repr(char)
    name = unicodedata.name(char, "")
    return f"U+{ord(char):04X}" + (f" {name}" if name else "")


# Cc: C0/C1 controls (ESC starts terminal escape sequences, CR overwrites a line); Cf: invisible format
# characters such as the bidirectional overrides; Zl, Zp: line and paragraph separators
_UNPRINTABLE = frozenset(("Cc", "Cf", "Zl", "Zp"))


def _check_printable(value: str, at: str, context: Mapping[str, Any]) -> str:
    for position, char in enumerate(value):
        if char not in "\t\n" and unicodedata.category(char) in _UNPRINTABLE:
            raise InputError(f"{at}: control or format character {describe_character(char)} at position {position} "
                             f"(expected printable text; tabs and newlines are allowed)")
    return value


def boolean(expected: str = "true or false") -> Rule:
    return Rule(expected, lambda v: isinstance(v, bool))


def _is_real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def number(low: float | None = None, high: float | None = None, closed: str = "both",
           expected: str | None = None, message: str = _MESSAGE, as_float: bool = True) -> Rule:
    """A finite real number (not a boolean) in the interval from ``low`` to ``high`` (None: unbounded;
    ``closed``: "both", "left", "right" or "neither"), kept as a float unless ``as_float`` is False."""
    left, right = closed in ("both", "left"), closed in ("both", "right")

    def test(v: Any) -> bool:
        return _is_real(v) and (low is None or v > low or (left and v == low)) and (
            high is None or v < high or (right and v == high))
    if expected is None:
        expected = "a number"
    return Rule(expected, test, (lambda v, at, ctx: float(v)) if as_float else None, message)


def integer(low: int | None = None, high: int | None = None, expected: str | None = None,
            message: str = _MESSAGE) -> Rule:
    """An integer (not a boolean) with ``low <= value <= high`` where given."""
    def test(v: Any) -> bool:
        return (isinstance(v, int) and not isinstance(v, bool) and (low is None or v >= low)
                and (high is None or v <= high))
    return Rule(expected or ("a positive integer" if low == 1 and high is None else "an integer"), test,
                message=message)


def options(values: Iterable[Any], expected: str | None = None, message: str = _MESSAGE) -> Rule:
    """One of ``values``."""
    values = tuple(values)
    return Rule(expected or f"one of {', '.join(map(str, values))}",
                lambda v: not isinstance(v, bool) and v in values, message=message)


def table(expected: str = "a table", message: str = _MESSAGE) -> Rule:
    return Rule(expected, lambda v: isinstance(v, dict), message=message)


def list_of(item: Callable[[Any], bool], expected: str, nonempty: bool = True, message: str = _MESSAGE) -> Rule:
    """A list whose every item passes ``item`` (and that is not empty, if ``nonempty``)."""
    return Rule(expected, lambda v: isinstance(v, list) and (bool(v) or not nonempty) and all(map(item, v)),
                message=message)


# -- TOML documents ----------------------------------------------------------------------------------------
MAX_TOML_NESTING = 64  # levels of arrays, inline tables and dotted-key parts a file may nest

# what cannot nest anything: strings of the four kinds and comments (blanked before nesting is measured)
_TOML_OPAQUE = re.compile(r'"""(?:\\.|[^\\])*?"""|\'\'\'.*?\'\'\'|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*', re.S)
_TOML_BRACKETS = re.compile(r"[\[\]{}]")
_TOML_DOTTED = re.compile(r"(?:[A-Za-z0-9_-]+[ \t]*\.[ \t]*){%d,}" % MAX_TOML_NESTING)


def _nesting_error(text: str, label: str) -> InputError | None:
    """The error for a document nested deeper than MAX_TOML_NESTING, else None. tomllib recurses once per level
    (a RecursionError past about a thousand) and takes time quadratic in a dotted key's length (minutes at
    100,000 parts), so depth is measured first, on the text with strings and comments blanked out."""
    blanked = _TOML_OPAQUE.sub(lambda m: "s" + "\n" * m.group().count("\n"), text)
    depth = 0
    for match in _TOML_BRACKETS.finditer(blanked):
        depth += 1 if match.group() in "[{" else -1
        if depth > MAX_TOML_NESTING:
            break
    else:
        match = _TOML_DOTTED.search(blanked)
        if match is None:
            return None
    line = blanked.count("\n", 0, match.start()) + 1
    return InputError(f"{label}: malformed TOML: nested deeper than {MAX_TOML_NESTING} levels (arrays, inline "
                      f"tables or dotted keys) at line {line}")


def loads_toml(text: str, label: str) -> dict[str, Any]:
    """Parse a TOML document, refusing one nested deeper than MAX_TOML_NESTING before parsing it; every failure is
    one InputError line starting with ``label`` (the file)."""
    error = _nesting_error(text, label)
    if error is not None:
        raise error
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line L, column C)"
        raise InputError(f"{label}: malformed TOML: {exc}") from None
    except RecursionError:  # not reached below the limit above; kept so that no traceback can escape
        raise InputError(f"{label}: malformed TOML: nested deeper than Python's TOML reader can follow") from None

"""Theorem packs: a theorem's signal and noise terms, read from TOML without executing anything.

The file format is documented in docs/ARCHITECTURE.md ("theory: packs"). Every expression goes
through :func:`theory.expr.parse_expression` with only the pack's variables (the built-in ones it lists in
``[pack].variables`` and those it declares in ``[[variables]]``) and constants in scope. Every validation failure is one :class:`InputError` line naming the file and
the field, e.g. ``my.toml: terms[1].role: expected 'signal' or 'noise', got 'nosie'``.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import sympy as sp

from recallkit import registry
from recallkit.theory.errors import InputError
from recallkit.theory.expr import FUNCTIONS, parse_expression, parse_linear_constraints
from recallkit.theory.scaling import to_monomial
from recallkit.theory.schema import (
    REQUIRED, Field, Rule, Section, check_value, converts, list_of, loads_toml, only_when, options, required_when,
    satisfies, table, text, validate,
)
from recallkit.theory.symbols import EXPONENTS, RESERVED_NAMES, VARIABLES, constant_symbol, variable_symbol

__all__ = ["BOUND_KINDS", "COMBINES", "Corollary", "DOMAINS", "Fact", "Law", "LawTerm", "list_packs", "load_pack",
           "LowerBound", "MAX_TERMS", "Pack", "pack_from_dict", "PACKS_DIR", "PROVENANCES", "resolve_pack_path", "ROLES",
           "shipped_packs", "Term", "Variable"]


PACKS_DIR = Path(__file__).resolve().parent / "packs"

ROLES = ("signal", "noise")
PROVENANCES = ("paper-verbatim", "paper-reported", "anchor", "derived-here")
# what a [[lower_bounds]] entry is: a lower bound over a class (all estimators, p-bit models, estimators that see
# the gradient at initialisation under a stated noise), or the condition under which one named estimator fails,
# which bounds nothing but that estimator
BOUND_KINDS = ("lower-bound", "estimator-failure")
# what values a declared variable takes: an experiment floors an integer one, as it does the built-in sizes
DOMAINS = ("integer", "real")
# how a law's terms make up its metric: their sum or their maximum (asymptotically alike: the largest term dominates)
COMBINES = ("sum", "max")

_IDENTIFIER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

MAX_TERMS = 120
_COROLLARY_RESERVED = {"scaling", "axes"}


@dataclass(frozen=True)
class LawTerm:
    """One term of a law: a power law (a product of powers of the pack's variables and constants, with log factors).
    What every written term of a pack carries; a condition's :class:`Term` adds its role."""

    name: str
    expr: sp.Expr
    provenance: str      # one of PROVENANCES
    reference: str = ""
    note: str = ""
    source: str = ""     # the expression text as written in the pack

    def to_dict(self) -> dict[str, Any]:
        return self._written()

    def _written(self, **after_name: Any) -> dict[str, Any]:
        return {"name": self.name, **after_name, "expr": str(self.expr), "latex": sp.latex(self.expr),
                "source": self.source, "provenance": self.provenance, "reference": self.reference, "note": self.note}


@dataclass(frozen=True)
class Term(LawTerm):
    """One named term of a theorem: its role in the success condition and where it comes from."""

    role: str = field(kw_only=True)  # "signal" | "noise"

    def to_dict(self) -> dict[str, Any]:
        return self._written(role=self.role)


@dataclass(frozen=True)
class LowerBound:
    """An entry of ``[[lower_bounds]]``: with kind "lower-bound", a lower bound on the pack's parameter count over
    the class ``bound_class`` (e.g. counting, N*log2(N) bits, every estimator with p-bit parameters); with kind
    "estimator-failure", the parameter count below which the one estimator ``estimator`` fails (not a lower bound)."""

    name: str
    expr: sp.Expr
    provenance: str
    reference: str = ""
    note: str = ""
    source: str = ""
    kind: str = "lower-bound"
    bound_class: str = ""  # the TOML key is "class", a Python keyword
    estimator: str = ""

    @property
    def is_lower_bound(self) -> bool:
        return self.kind == "lower-bound"

    @property
    def covers(self) -> str:
        """What the entry holds for, in words: its class, or the one estimator."""
        return (f"lower bound over {self.bound_class}" if self.is_lower_bound
                else f"failure condition of one estimator: {self.estimator}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expr": str(self.expr), "latex": sp.latex(self.expr), "source": self.source,
                "provenance": self.provenance, "reference": self.reference, "note": self.note, "kind": self.kind,
                "class": self.bound_class, "estimator": self.estimator}


@dataclass(frozen=True)
class Fact:
    """A statement a source makes in words (kept as text, never turned into a formula)."""

    text: str
    provenance: str
    reference: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "provenance": self.provenance, "reference": self.reference}


@dataclass(frozen=True)
class Variable:
    """An entry of ``[[variables]]``: a variable the pack states its law in beside the built-in ones (its symbol is
    positive whatever its domain, as the built-in sizes' are, so that sympy may combine powers and split logs)."""

    name: str
    meaning: str
    domain: str = "real"  # one of DOMAINS

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "meaning": self.meaning, "domain": self.domain}



@dataclass(frozen=True)
class Law:
    """An entry of ``[[laws]]``: a measured quantity ``metric`` stated as the sum (or max) of power-law terms, e.g.
    error ~ d^-(alpha-1) + n^-beta. It states how the metric scales, not a condition for success."""

    name: str
    metric: str
    terms: tuple[LawTerm, ...]
    combine: str = "sum"  # one of COMBINES
    reference: str = ""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "metric": self.metric, "combine": self.combine, "reference": self.reference,
                "note": self.note, "terms": [term.to_dict() for term in self.terms]}


@dataclass(frozen=True)
class Corollary:
    """A hand-stated corollary: dominant noise term -> required param-count exponent (a cross-check)."""

    exponents: dict[str, sp.Expr]
    scaling: str | None = None
    axes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Pack:
    """A theorem: one signal term, noise terms, a parameter count and the variables it is stated in.

    Success condition: signal >= C * noise_i for every noise term i (C a constant). A pack may state laws
    (``laws``) beside the condition or instead of it; one with laws only has no terms, and its ``base``, ``size``
    and ``param_count`` are "", "" and None unless it gives them.

    ``variables``: name -> positive symbol of every variable the pack is stated in, the built-in ones it lists
    in ``[pack].variables`` and then those it declares (``declared_variables``); a sequence of names given in
    code is turned into that table.
    """

    name: str
    path: str
    title: str
    reference: str
    description: str
    variables: Mapping[str, sp.Symbol]
    constants: tuple[str, ...]
    base: str
    size: str
    param_count: sp.Expr | None
    domain: tuple[str, ...]
    terms: tuple[Term, ...]
    lower_bounds: tuple[LowerBound, ...] = ()
    facts: tuple[Fact, ...] = ()
    corollary: Corollary | None = None
    default_scaling: str | None = None
    default_axes: tuple[str, ...] | None = None
    default_box: dict[str, tuple[float, float]] = field(default_factory=dict)
    declared_variables: tuple[Variable, ...] = ()
    laws: tuple[Law, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.variables, Mapping):  # names, as a Pack built in code gave them before
            object.__setattr__(self, "variables", {name: variable_symbol(name) for name in self.variables})

    @property
    def signal(self) -> Term:
        return next(term for term in self.terms if term.role == "signal")

    @property
    def noise_terms(self) -> tuple[Term, ...]:
        return tuple(term for term in self.terms if term.role == "noise")

    def symbol_table(self) -> dict[str, sp.Symbol]:
        """Names an expression of this pack may use."""
        table = dict(self.variables)
        table.update({name: constant_symbol(name) for name in self.constants})
        return table

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "path": self.path, "title": self.title, "reference": self.reference,
            "description": self.description, "variables": list(self.variables),
            "constants": list(self.constants), "base": self.base, "size": self.size,
            "param_count": None if self.param_count is None else str(self.param_count),
            "param_count_latex": None if self.param_count is None else sp.latex(self.param_count),
            "domain": list(self.domain), "terms": [term.to_dict() for term in self.terms],
            "lower_bounds": [bound.to_dict() for bound in self.lower_bounds],
            "facts": [fact.to_dict() for fact in self.facts],
            "corollary": None if self.corollary is None else {
                "scaling": self.corollary.scaling, "axes": list(self.corollary.axes or []),
                "exponents": {k: str(v) for k, v in self.corollary.exponents.items()}},
            "defaults": {"scaling": self.default_scaling, "axes": list(self.default_axes or []),
                         "box": {k: list(v) for k, v in self.default_box.items()}},
            # only where there are some: the documents of packs that declare none stay as they were
            **({"declared_variables": [v.to_dict() for v in self.declared_variables]}
               if self.declared_variables else {}),
            **({"laws": [law.to_dict() for law in self.laws]} if self.laws else {}),
        }


# ---------------------------------------------------------------------------------------------
def shipped_packs() -> dict[str, Path]:
    """Pack name -> file: the generic ones in theory/packs/ and every registered system's packs/."""
    found = {path.stem: path for path in PACKS_DIR.glob("*.toml")}
    try:
        found.update(registry.pack_paths())
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    return found


def list_packs() -> list[str]:
    """Names of the packs that ship with recallkit or its registered systems (sorted)."""
    return sorted(shipped_packs())


def resolve_pack_path(name_or_path: str | Path) -> tuple[Path, str]:
    """Return (path, label used in error messages) for a shipped pack name or a TOML path."""
    text = str(name_or_path)
    if _IDENTIFIER_RE.match(text):
        # a registered name wins over a file or folder of that name in the working directory, which a plugin's
        # own layout (a package folder named like its pack) puts there; such a file is named as ./NAME
        packs = shipped_packs()
        if text in packs:
            return packs[text], f"pack {text}"
        if not Path(text).is_file():
            raise InputError(f"pack {text!r}: no such pack (shipped: {', '.join(sorted(packs))}; "
                             f"or give a path to a .toml file)")
    path = Path(text)
    if not path.is_file():
        raise InputError(f"{text}: pack file not found")
    return path, text


# Packs loaded in this process, keyed by (file, its size, its modification time, the label errors name it by): a
# Pack is frozen, so one object serves every reader, and an edited file is read again.
_LOADED: dict[tuple[str, int, int, str], Pack] = {}


def load_pack(name_or_path: str | Path) -> Pack:
    """Load and validate a pack by shipped name (``"example"``) or path to a TOML file (read once per process
    while the file is unchanged)."""
    path, label = resolve_pack_path(name_or_path)
    try:
        stat = path.stat()
    except OSError:
        return _read_pack(path, label)
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, label)
    if key not in _LOADED:
        _LOADED[key] = _read_pack(path, label)
    return _LOADED[key]


def _read_pack(path: Path, label: str) -> Pack:
    try:
        raw = loads_toml(path.read_text(encoding="utf-8"), label)
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return pack_from_dict(raw, label)


def pack_from_dict(raw: dict[str, Any], label: str = "pack") -> Pack:
    """Validate a parsed TOML document against the pack's section tables and build the :class:`Pack` (``label``
    prefixes errors)."""
    # [[variables]] is checked before [pack] (whose fields may name its variables), against [pack]'s constants as
    # written: a name is a variable or a constant, not both
    head = raw.get("pack") if isinstance(raw, dict) else None
    constants = head.get("constants") if isinstance(head, dict) else None
    # a pack stating laws only has no condition, so neither [[terms]] nor what solving one needs (base, size,
    # param_count) is owed; a pack with a condition is read exactly as before
    laws_only = isinstance(raw, dict) and "laws" in raw and "terms" not in raw
    context = {"pack_constants": constants if isinstance(constants, list) else [], "laws_only": laws_only}
    v = validate(raw, _LAWS_ONLY_FILE if laws_only else _FILE, label, prefix=f"{label}: ", context=context)
    head, defaults = v["pack"], v["defaults"] or {}
    return Pack(
        name=head["name"], path=label, title=head["title"], reference=head["reference"],
        description=head["description"], variables=_symbols(head, constants=False),
        constants=tuple(head["constants"]),
        base=head["base"], size=head["size"], param_count=head["param_count"], domain=tuple(head["domain"]),
        terms=v["terms"], lower_bounds=v["lower_bounds"], facts=v["facts"], corollary=v["corollary"],
        default_scaling=defaults.get("scaling"), default_axes=defaults.get("axes"),
        default_box=defaults.get("box", {}), declared_variables=v["variables"], laws=v["laws"])


# -- the sections of a pack file, one declarative table each (see docs/ARCHITECTURE.md, "theory: packs") ------
def _symbols(head: dict[str, Any], constants: bool = True) -> dict[str, sp.Symbol]:
    """The names an expression of the pack may use: its variables (built-in and declared) and constants."""
    symbols = {name: variable_symbol(name) for name in head["variables"]}
    if constants:
        symbols.update({name: constant_symbol(name) for name in head.get("constants", [])})
    return symbols


def _known_variables(value: list[str], at: str, context: Mapping[str, Any]) -> list[str]:
    """The listed built-in variables, then the declared ones not listed: every variable of the pack, in order."""
    declared = [variable.name for variable in context.get("declared", ())]
    for index, var in enumerate(value):
        if var not in VARIABLES and var not in declared:
            allowed = ", ".join([*VARIABLES, *declared])
            raise InputError(f"{at}[{index}]: unknown variable {var!r} (allowed: {allowed}; declare a new one in "
                             f"[[variables]])")
    return list(value) + [name for name in declared if name not in value]


def _new_variable(value: str, at: str, context: Mapping[str, Any]) -> str:
    if value in VARIABLES:
        raise InputError(f"{at}: {value!r} is a built-in variable (list it in pack.variables; declare only new names)")
    if value in RESERVED_NAMES or value in FUNCTIONS:
        raise InputError(f"{at}: {value!r} is reserved (an exponent of the scalings, a function or the size "
                         f"exponent x); choose another name")
    if value in context.get("pack_constants", ()):
        raise InputError(f"{at}: {value!r} is a constant of this pack (pack.constants); a name is a variable or a "
                         f"constant, not both")
    return value


def _new_constants(value: list[str], at: str, context: Mapping[str, Any]) -> list[str]:
    for index, const in enumerate(value):
        if not _IDENTIFIER_RE.match(const) or const in RESERVED_NAMES:
            raise InputError(f"{at}[{index}]: {const!r} must be a new identifier "
                             f"(not a variable, exponent or function name)")
    return list(value)


def _a_variable(value: Any, at: str, context: Mapping[str, Any]) -> str:
    variables = context["variables"]
    if not isinstance(value, str) or value not in variables:
        raise InputError(f"{at}: expected one of pack.variables {variables}, got {value!r}")
    if "base" in context and value == context["base"]:  # the size, checked after the base
        raise InputError(f"{at}: must differ from pack.base ({value!r})")
    return value


def _constraints(value: list[str], at: str, context: Mapping[str, Any]) -> list[str]:
    for index, constraint in enumerate(value):
        parse_linear_constraints(constraint, EXPONENTS, f"{at}[{index}]")
    return list(value)


def _table_of(section: Section) -> Rule:
    return converts(lambda value, at, context: validate(value, section, at, context=context))


_ALLOWED = "{where}: unknown key {key!r} (allowed: {allowed})"
_MISSING = "{where}: missing required field {key!r}"
_CHECKED = {"unknown": _ALLOWED, "missing": _MISSING, "sort_missing": True}  # the pack's wording for keys
# printable: a pack's text is printed by `recallkit theory show` and in reports, where a control character would
# reach the terminal (an escape sequence) or reorder what is shown (a bidirectional override)
_STRING = text("a string", nonempty=False, message="{at}: expected {expected}, got {type} {got}", printable=True)
_IDENTIFIER = (_STRING, satisfies(lambda v: bool(_IDENTIFIER_RE.match(v)), "an identifier (letters, digits, _)"))
_STRINGS = list_of(lambda v: isinstance(v, str), "a list of strings", nonempty=False)
_TABLES = list_of(lambda v: isinstance(v, dict), "", nonempty=False, message="{at}: expected an array of tables ([[...]])")
_EXPRESSION = (_STRING, converts(lambda v, at, context: parse_expression(v, context["symbols"], at)))
_PROVENANCE = (options(PROVENANCES),)
_VARIABLE = Section("[[variables]]", (
    Field("name", _IDENTIFIER + (converts(_new_variable),),
          "identifier: not a built-in variable, exponent, function or constant", REQUIRED),
    Field("meaning", (text("a non-empty string", message="{at}: expected {expected}, got {type} {got}",
                           printable=True),), "what it stands for, in words", REQUIRED),
    Field("domain", (options(DOMAINS),), "integer | real: the values an experiment gives it", "real"),
), **_CHECKED)


def _declared(value: list[dict], at: str, context: Mapping[str, Any]) -> tuple[Variable, ...]:
    variables = tuple(Variable(**validate(entry, _VARIABLE, f"{at}[{index}]", context=context))
                      for index, entry in enumerate(value))
    _unique([variable.name for variable in variables], at)
    return variables


def _head(value: Any, at: str, context: Mapping[str, Any]) -> dict[str, Any]:
    # the file's [[variables]] reach the head's fields as "declared" (the head has a field "variables" of its own)
    return validate(value, _LAWS_ONLY_HEAD if context.get("laws_only") else _HEAD, at,
                    context={"declared": context.get("variables", ())})


_HEAD = Section("[pack]", (
    Field("name", _IDENTIFIER, "identifier of the pack", REQUIRED),
    Field("variables", (_STRINGS, converts(_known_variables)), "the sizes the theorem is stated in", REQUIRED),
    Field("constants", (_STRINGS, converts(_new_constants)), "names of the theorem's constants", []),
    Field("base", (converts(_a_variable),), "the grid variable, one of variables", REQUIRED),
    Field("size", (converts(_a_variable),), "the searched variable, another of variables", REQUIRED),
    Field("param_count", (_STRING, converts(lambda v, at, context: parse_expression(v, _symbols(context), at))),
          "the parameter count, an expression", REQUIRED),
    Field("domain", (_STRINGS, converts(_constraints)), "linear constraints on the exponents", []),
    Field("title", (_STRING,), "shown in reports", ""),
    Field("reference", (_STRING,), "where the theorem is stated", ""),
    Field("description", (_STRING,), "free text", ""),
), not_table="{where}: expected a table [pack]", **_CHECKED)
_LAWS_ONLY_HEAD = replace(_HEAD, fields=tuple(
    replace(f, default={"base": "", "size": "", "param_count": None}[f.name])
    if f.name in ("base", "size", "param_count") else f for f in _HEAD.fields))
_TERM = Section("[[terms]]", (
    Field("name", _IDENTIFIER, "identifier, unique among the terms", REQUIRED),
    Field("role", (options(ROLES, "'signal' or 'noise'"),), "signal | noise", REQUIRED),
    Field("expr", _EXPRESSION, "the term, an expression in variables and constants", REQUIRED),
    Field("provenance", _PROVENANCE, "one of PROVENANCES", REQUIRED),
    Field("reference", (_STRING,), "where it is stated", ""),
    Field("note", (_STRING,), "free text", ""),
), **_CHECKED)
_NAMED = text("a non-empty string", message="{at}: expected {expected}, got {type} {got}", printable=True)
_BOUND = Section("[[lower_bounds]]", tuple(f for f in _TERM.fields if f.name != "role") + (
    Field("kind", (options(BOUND_KINDS),), "lower-bound (holds for a class) | estimator-failure (one estimator)",
          "lower-bound"),
    Field("class", (only_when("kind", "lower-bound"), _NAMED),
          "kind lower-bound: the class it holds for, e.g. 'every estimator with p-bit parameters (counting)'",
          required_when("kind", "lower-bound", otherwise=""),
          missing="{where}: missing required field 'class' (a lower bound names the class it holds for, e.g. "
                  "'every estimator with p-bit parameters'; the failure condition of one estimator is kind = "
                  "'estimator-failure' with its estimator named in 'estimator')"),
    Field("estimator", (only_when("kind", "estimator-failure"), _NAMED),
          "kind estimator-failure: the one estimator that fails below the bound",
          required_when("kind", "estimator-failure", otherwise=""),
          missing="{where}: missing required field 'estimator' (kind 'estimator-failure' names the one estimator "
                  "that fails below it)"),
), **_CHECKED)
_FACT = Section("[[facts]]", (
    Field("text", (_STRING,), "the statement in words", REQUIRED),
    Field("provenance", _PROVENANCE, "one of PROVENANCES", REQUIRED),
    Field("reference", (_STRING,), "where it is stated", ""),
), **_CHECKED)


_LAW_TERM = Section("[[laws.terms]]", (
    Field("name", _IDENTIFIER, "identifier, unique among the law's terms", REQUIRED),
    Field("expr", _EXPRESSION, "the term, a product of powers (and logs) of variables and constants", REQUIRED),
    Field("provenance", _PROVENANCE, "one of PROVENANCES", REQUIRED),
    Field("reference", (_STRING,), "where it is stated", ""),
    Field("note", (_STRING,), "free text", ""),
), **_CHECKED)


def _law_terms(value: Any, at: str, context: Mapping[str, Any]) -> tuple[LawTerm, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(entry, dict) for entry in value):
        raise InputError(f"{at}: expected a non-empty array of [[laws.terms]] tables")
    if len(value) > MAX_TERMS:  # the same region computation as the condition's terms, so the same limit
        raise InputError(f"{at}: {len(value)} terms, at most {MAX_TERMS} are allowed")
    terms = tuple(LawTerm(**validate(entry, _LAW_TERM, f"{at}[{index}]", context=context), source=entry["expr"])
                  for index, entry in enumerate(value))
    _unique([term.name for term in terms], at)
    _check_power_laws(terms, at, context["variables"])
    return terms


def _placements(expr: sp.Expr, variables: Mapping[str, sp.Symbol]) -> tuple[set[str], set[str], dict[str, sp.Expr]]:
    """(the variables ``expr`` uses outside any exponent, those it uses inside one, the first power or ``exp`` each of
    the latter sits in the exponent of)."""
    symbols = {symbol: name for name, symbol in variables.items()}
    outside: set[str] = set()
    inside: set[str] = set()
    where_in: dict[str, sp.Expr] = {}

    def walk(node: sp.Expr, in_exponent: bool, power_of: sp.Expr | None) -> None:
        if node in symbols:
            (inside if in_exponent else outside).add(symbols[node])
            if in_exponent:
                where_in.setdefault(symbols[node], power_of)
            return
        if isinstance(node, (sp.Pow, sp.exp)):
            power_base, power = (node.base, node.exp) if isinstance(node, sp.Pow) else (sp.E, node.args[0])
            walk(power_base, in_exponent, power_of)
            walk(power, True, power_of if in_exponent else node)
            return
        for arg in node.args:
            walk(arg, in_exponent, power_of)

    walk(expr, False, None)
    return outside, inside, where_in


def _not_a_product(expr: sp.Expr, variables: Mapping[str, sp.Symbol]) -> sp.Expr | None:
    """The first sum, Min or Max outside any exponent that holds a variable (a term is a product, not a sum)."""
    if isinstance(expr, (sp.Pow, sp.exp)):
        return _not_a_product(expr.as_base_exp()[0] if isinstance(expr, sp.Pow) else sp.Integer(1), variables)
    if isinstance(expr, (sp.Add, sp.Min, sp.Max)) and expr.free_symbols & set(variables.values()):
        return expr
    for arg in expr.args:
        found = _not_a_product(arg, variables)
        if found is not None:
            return found
    return None


_TERM_FORM = "a positive coefficient times powers and logs of the pack's variables, such as 'd**-1' or 'n**(-alpha)'"


def _check_power_laws(terms: tuple[LawTerm, ...], at: str, variables: Mapping[str, sp.Symbol]) -> None:
    """Each term of a law is what docs/adding-a-system.md ("Laws") allows, a power law a fit can recover: a
    positive coefficient times powers and logs of the pack's variables (``c * v1**e1 * log(v2)**k * ...``). An
    exponent holds numbers, constants and declared variables that the law uses in exponents only (a law's exponent,
    such as alpha in ``p**(-alpha)``, which a line sets to a number): a built-in size in an exponent (``2**d``), a
    variable that is also a power's base (``d**d``) or ``exp`` of a variable (``exp(d)``) is not a power law. One-line
    InputError naming the term's field otherwise."""
    placed = [_placements(term.expr, variables) for term in terms]
    bases = set().union(*(outside for outside, _, _ in placed))
    for index, (term, (outside, inside, where_in)) in enumerate(zip(terms, placed)):
        where = f"{at}[{index}].expr"
        for name in sorted(inside):
            power = where_in[name]
            if isinstance(power, sp.exp) or power.as_base_exp()[0] == sp.E:
                raise InputError(f"{where}: {sp.sstr(power)} is exponential in {name}, not a power law; expected "
                                 f"{_TERM_FORM}")
            if name in bases or name in VARIABLES:
                raise InputError(f"{where}: {name} appears in an exponent ({sp.sstr(power)}); an exponent holds "
                                 f"numbers, constants and declared variables the law uses in exponents only: expected "
                                 f"{_TERM_FORM}")
        mixed = _not_a_product(term.expr, variables)
        if mixed is not None:
            parts = ("a sum, not a product; its parts are terms of their own" if isinstance(mixed, sp.Add) else
                     "a Min or Max, not a product; its parts are terms of their own (combine = 'max' for a maximum)")
            raise InputError(f"{where}: {sp.sstr(mixed)} is {parts}: expected {_TERM_FORM}")
        coefficient = term.expr
        for name in sorted(outside):
            coefficient = to_monomial(coefficient, name, where, variables).coefficient
        coefficient = sp.simplify(coefficient)
        if coefficient.is_zero:
            raise InputError(f"{where}: {term.source!r} is 0; expected {_TERM_FORM}")
        if coefficient.is_extended_negative:
            raise InputError(f"{where}: {term.source!r} has the negative coefficient {sp.sstr(coefficient)}; expected "
                             f"{_TERM_FORM} (the metric, a sum or maximum of such terms, is fitted on a log scale)")


_LAW = Section("[[laws]]", (
    Field("name", _IDENTIFIER, "identifier, unique among the laws", REQUIRED),
    Field("metric", (_NAMED,), "the measured quantity the law states, e.g. 'error'", REQUIRED),
    Field("combine", (options(COMBINES),), "sum | max: how the terms make up the metric", "sum"),
    Field("reference", (_STRING,), "where it is stated", ""),
    Field("note", (_STRING,), "free text", ""),
    Field("terms", (converts(_law_terms),), "[[laws.terms]]: the power-law terms", REQUIRED),
), **_CHECKED)


def _laws(value: list[dict], at: str, context: Mapping[str, Any]) -> tuple[Law, ...]:
    symbols = {"symbols": _symbols(context["pack"]), "variables": _symbols(context["pack"], constants=False)}
    laws = tuple(Law(**validate(entry, _LAW, f"{at}[{index}]", context=symbols)) for index, entry in enumerate(value))
    _unique([law.name for law in laws], at)
    return laws


def _box(value: dict, at: str, context: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    for axis in value:
        _string(axis, f"{at}: a key")  # it is shown in the messages of _interval
    return {axis: _interval(axis, bounds, f"{at}.{axis}") for axis, bounds in value.items()}


_DEFAULTS = Section("[defaults]", (
    Field("scaling", (_STRING,), "the line drawn by default"),
    Field("axes", (converts(lambda v, at, context: _axes(v, at)),), "one or two exponent names"),
    Field("box", (table(message="{at}: expected a table, got {type}"), converts(_box)), "exponent ranges", {}),
), not_table="{where}: expected a table [defaults]", unknown=_ALLOWED)


def _terms(value: Any, at: str, context: Mapping[str, Any]) -> tuple[Term, ...]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{at}: expected a non-empty array of [[terms]] tables")
    if len(value) > MAX_TERMS:
        # the exact region computation grows faster than linearly in the number of terms (about 6 s at 100
        # on a 2-core CPU); a theorem with more terms than this is better split into packs
        raise InputError(f"{at}: {len(value)} terms, at most {MAX_TERMS} are allowed "
                         f"(split the theorem into several packs)")
    symbols = {"symbols": _symbols(context["pack"])}
    terms = tuple(Term(**validate(entry, _TERM, f"{at}[{index}]", context=symbols), source=entry["expr"])
                  for index, entry in enumerate(value))
    _unique([term.name for term in terms], at)
    signals = [term for term in terms if term.role == "signal"]
    if len(signals) != 1:
        raise InputError(f"{at}: expected exactly one term with role 'signal', found {len(signals)}")
    if not any(term.role == "noise" for term in terms):
        raise InputError(f"{at}: expected at least one term with role 'noise', found none")
    return terms


def _bounds(value: list[dict], at: str, context: Mapping[str, Any]) -> tuple[LowerBound, ...]:
    symbols = {"symbols": _symbols(context["pack"])}
    bounds = []
    for index, entry in enumerate(value):
        fields = validate(entry, _BOUND, f"{at}[{index}]", context=symbols)
        bound_class = fields.pop("class")
        bounds.append(LowerBound(**fields, bound_class=bound_class, source=entry["expr"]))
    bounds = tuple(bounds)
    _unique([bound.name for bound in bounds], at)
    return bounds


def _facts(value: list[dict], at: str, context: Mapping[str, Any]) -> tuple[Fact, ...]:
    return tuple(Fact(**validate(entry, _FACT, f"{at}[{index}]")) for index, entry in enumerate(value))


def _corollary(value: Any, at: str, context: Mapping[str, Any]) -> Corollary:
    """The hand-stated corollary: an exponent per noise term, plus optional scaling and axes."""
    table = _table(value, at)
    noise_names = {term.name for term in context["terms"] if term.role == "noise"}
    exponents = {}
    for key, text_ in table.items():
        _string(key, f"{at}: a key")  # it is shown in the messages below
        if key in _COROLLARY_RESERVED:
            continue
        if key not in noise_names:
            raise InputError(f"{at}.{key}: not a noise term of this pack "
                             f"(noise terms: {', '.join(sorted(noise_names))})")
        exponents[key] = parse_expression(_string(text_, f"{at}.{key}"), EXPONENTS, f"{at}.{key}")
    return Corollary(exponents=exponents,
                     scaling=_string(table["scaling"], f"{at}.scaling") if "scaling" in table else None,
                     axes=_axes(table["axes"], f"{at}.axes") if "axes" in table else None)


_FILE = Section("pack file", (
    # first: the head and the terms may name the variables declared here
    Field("variables", (_TABLES, converts(_declared)), "[[variables]]: the pack's own variables", ()),
    Field("pack", (table(message="{at}: expected a table [pack]"), converts(_head)), "the theorem's head",
          REQUIRED),
    Field("laws", (_TABLES, converts(_laws)), "[[laws]]: metrics stated as sums (or maxima) of power laws", ()),
    Field("terms", (converts(_terms),), "[[terms]]: one signal term and the noise terms", REQUIRED),
    Field("lower_bounds", (_TABLES, converts(_bounds)), "[[lower_bounds]] on the parameter count", ()),
    Field("facts", (_TABLES, converts(_facts)), "[[facts]]: statements kept as text", ()),
    Field("defaults", (_table_of(_DEFAULTS),), "[defaults]: scaling, axes and box of the default figure"),
    Field("corollary", (converts(_corollary),), "[corollary]: dominant noise term -> exponent (a cross-check)"),
), **_CHECKED)


_LAWS_ONLY_FILE = replace(_FILE, fields=tuple(replace(f, default=()) if f.name == "terms" else f
                                               for f in _FILE.fields))


# -- small validators (each raises a one-line InputError naming the field) ---------------------
def _string(value: Any, where: str) -> str:
    return check_value(Field("", (_STRING,), ""), value, where)


def _table(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def _unique(names: list[str], where: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise InputError(f"{where}: duplicate name {name!r}")
        seen.add(name)


def _axes(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    names = check_value(Field("axes", (_STRINGS,), "exponent names"), value, where)
    if not 1 <= len(names) <= 2:
        raise InputError(f"{where}: expected one or two exponent names, got {names}")
    for name in names:
        if name not in EXPONENTS:
            raise InputError(f"{where}: unknown exponent {name!r} (allowed: {', '.join(EXPONENTS)})")
    if len(set(names)) != len(names):
        raise InputError(f"{where}: axes must differ, got {names}")
    return tuple(names)


def _interval(axis: str, value: Any, where: str) -> tuple[float, float]:
    if axis not in EXPONENTS:
        raise InputError(f"{where}: unknown exponent {axis!r} (allowed: {', '.join(EXPONENTS)})")
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            or not all(math.isfinite(v) and abs(v) <= 1000 for v in value)
            or not value[0] < value[1]):
        raise InputError(f"{where}: expected [low, high], finite numbers within [-1000, 1000] with low < high, "
                         f"got {value!r}")
    return (value[0], value[1])

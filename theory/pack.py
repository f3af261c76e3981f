"""Theorem packs: a theorem's signal and noise terms, read from TOML without executing anything.

The file format is documented in docs/ARCHITECTURE.md ("theory: packs"). Every expression goes
through :func:`theory.expr.parse_expression` with only the pack's declared variables and
constants in scope. Every validation failure is one :class:`InputError` line naming the file and
the field, e.g. ``my.toml: terms[1].role: expected 'signal' or 'noise', got 'nosie'``.
"""
from __future__ import annotations

import math

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy as sp

from recallkit.theory.errors import InputError
from recallkit.theory.expr import parse_expression, parse_linear_constraints
from recallkit.theory.symbols import EXPONENTS, RESERVED_NAMES, VARIABLES, constant_symbol

PACKS_DIR = Path(__file__).resolve().parent / "packs"

ROLES = ("signal", "noise")
PROVENANCES = ("paper-verbatim", "paper-reported", "anchor", "derived-here")

_IDENTIFIER_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

_TOP_KEYS = {"pack", "terms", "lower_bounds", "facts", "corollary", "defaults"}
MAX_TERMS = 120
_PACK_KEYS = {"name", "title", "reference", "description", "variables", "constants", "base", "size",
              "param_count", "domain"}
_TERM_KEYS = {"name", "role", "expr", "provenance", "reference", "note"}
_BOUND_KEYS = {"name", "expr", "provenance", "reference", "note"}
_FACT_KEYS = {"text", "provenance", "reference"}
_DEFAULT_KEYS = {"scaling", "axes", "box"}
_COROLLARY_RESERVED = {"scaling", "axes"}


@dataclass(frozen=True)
class Term:
    """One named term of a theorem: its role in the success condition and where it comes from."""

    name: str
    role: str            # "signal" | "noise"
    expr: sp.Expr
    provenance: str      # one of PROVENANCES
    reference: str = ""
    note: str = ""
    source: str = ""     # the expression text as written in the pack

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "expr": str(self.expr), "latex": sp.latex(self.expr),
                "source": self.source, "provenance": self.provenance, "reference": self.reference,
                "note": self.note}


@dataclass(frozen=True)
class LowerBound:
    """A lower bound on the pack's parameter count, e.g. the counting bound N*log2(N) bits."""

    name: str
    expr: sp.Expr
    provenance: str
    reference: str = ""
    note: str = ""
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expr": str(self.expr), "latex": sp.latex(self.expr), "source": self.source,
                "provenance": self.provenance, "reference": self.reference, "note": self.note}


@dataclass(frozen=True)
class Fact:
    """A statement a source makes in words (kept as text, never turned into a formula)."""

    text: str
    provenance: str
    reference: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "provenance": self.provenance, "reference": self.reference}


@dataclass(frozen=True)
class Corollary:
    """A hand-stated corollary: dominant noise term -> required param-count exponent (a cross-check)."""

    exponents: dict[str, sp.Expr]
    scaling: str | None = None
    axes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Pack:
    """A theorem: one signal term, noise terms, a parameter count and the variables it is stated in.

    Success condition: signal >= C * noise_i for every noise term i (C a constant).
    """

    name: str
    path: str
    title: str
    reference: str
    description: str
    variables: tuple[str, ...]
    constants: tuple[str, ...]
    base: str
    size: str
    param_count: sp.Expr
    domain: tuple[str, ...]
    terms: tuple[Term, ...]
    lower_bounds: tuple[LowerBound, ...] = ()
    facts: tuple[Fact, ...] = ()
    corollary: Corollary | None = None
    default_scaling: str | None = None
    default_axes: tuple[str, ...] | None = None
    default_box: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def signal(self) -> Term:
        return next(term for term in self.terms if term.role == "signal")

    @property
    def noise_terms(self) -> tuple[Term, ...]:
        return tuple(term for term in self.terms if term.role == "noise")

    def symbol_table(self) -> dict[str, sp.Symbol]:
        """Names an expression of this pack may use."""
        table = {name: VARIABLES[name] for name in self.variables}
        table.update({name: constant_symbol(name) for name in self.constants})
        return table

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "path": self.path, "title": self.title, "reference": self.reference,
            "description": self.description, "variables": list(self.variables),
            "constants": list(self.constants), "base": self.base, "size": self.size,
            "param_count": str(self.param_count), "param_count_latex": sp.latex(self.param_count),
            "domain": list(self.domain), "terms": [term.to_dict() for term in self.terms],
            "lower_bounds": [bound.to_dict() for bound in self.lower_bounds],
            "facts": [fact.to_dict() for fact in self.facts],
            "corollary": None if self.corollary is None else {
                "scaling": self.corollary.scaling, "axes": list(self.corollary.axes or []),
                "exponents": {k: str(v) for k, v in self.corollary.exponents.items()}},
            "defaults": {"scaling": self.default_scaling, "axes": list(self.default_axes or []),
                         "box": {k: list(v) for k, v in self.default_box.items()}},
        }


# ---------------------------------------------------------------------------------------------
def shipped_packs() -> dict[str, Path]:
    """Pack name -> file: the generic ones in theory/packs/ and every registered system's packs/."""
    from recallkit import registry

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
    if _IDENTIFIER_RE.match(text) and not Path(text).exists():
        packs = shipped_packs()
        if text not in packs:
            raise InputError(f"pack {text!r}: no such pack (shipped: {', '.join(sorted(packs))}; "
                             f"or give a path to a .toml file)")
        return packs[text], f"pack {text}"
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
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:  # its message carries "(at line L, column C)"
        raise InputError(f"{label}: malformed TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return pack_from_dict(raw, label)


def pack_from_dict(raw: dict[str, Any], label: str = "pack") -> Pack:
    """Validate a parsed TOML document and build the :class:`Pack` (``label`` prefixes errors)."""
    _check_keys(raw, _TOP_KEYS, label, required={"pack", "terms"})
    head = raw["pack"]
    if not isinstance(head, dict):
        raise InputError(f"{label}: pack: expected a table [pack]")
    _check_keys(head, _PACK_KEYS, f"{label}: pack", required={"name", "variables", "base", "size", "param_count"})

    name = _identifier(head["name"], f"{label}: pack.name")
    variables = _string_list(head["variables"], f"{label}: pack.variables")
    for index, var in enumerate(variables):
        if var not in VARIABLES:
            raise InputError(f"{label}: pack.variables[{index}]: unknown variable {var!r} "
                             f"(allowed: {', '.join(VARIABLES)})")
    constants = _string_list(head.get("constants", []), f"{label}: pack.constants")
    for index, const in enumerate(constants):
        if not _IDENTIFIER_RE.match(const) or const in RESERVED_NAMES:
            raise InputError(f"{label}: pack.constants[{index}]: {const!r} must be a new identifier "
                             f"(not a variable, exponent or function name)")
    for key in ("base", "size"):
        value = head[key]
        if not isinstance(value, str) or value not in variables:
            raise InputError(f"{label}: pack.{key}: expected one of pack.variables {variables}, got {value!r}")
    if head["base"] == head["size"]:
        raise InputError(f"{label}: pack.size: must differ from pack.base ({head['base']!r})")

    symbols = {name_: VARIABLES[name_] for name_ in variables}
    symbols.update({name_: constant_symbol(name_) for name_ in constants})
    param_count = parse_expression(_string(head["param_count"], f"{label}: pack.param_count"), symbols,
                                   f"{label}: pack.param_count")
    domain = _string_list(head.get("domain", []), f"{label}: pack.domain")
    for index, constraint in enumerate(domain):
        parse_linear_constraints(constraint, EXPONENTS, f"{label}: pack.domain[{index}]")

    terms = []
    raw_terms = raw["terms"]
    if not isinstance(raw_terms, list) or not raw_terms:
        raise InputError(f"{label}: terms: expected a non-empty array of [[terms]] tables")
    if len(raw_terms) > MAX_TERMS:
        # the exact region computation grows faster than linearly in the number of terms (about 6 s at 100
        # on a 2-core CPU); a theorem with more terms than this is better split into packs
        raise InputError(f"{label}: terms: {len(raw_terms)} terms, at most {MAX_TERMS} are allowed "
                         f"(split the theorem into several packs)")
    for index, entry in enumerate(raw_terms):
        where = f"{label}: terms[{index}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: expected a table")
        _check_keys(entry, _TERM_KEYS, where, required={"name", "role", "expr", "provenance"})
        role = entry["role"]
        if role not in ROLES:
            raise InputError(f"{where}.role: expected 'signal' or 'noise', got {role!r}")
        source = _string(entry["expr"], f"{where}.expr")
        terms.append(Term(
            name=_identifier(entry["name"], f"{where}.name"), role=role,
            expr=parse_expression(source, symbols, f"{where}.expr"),
            provenance=_provenance(entry["provenance"], f"{where}.provenance"),
            reference=_string(entry.get("reference", ""), f"{where}.reference"),
            note=_string(entry.get("note", ""), f"{where}.note"), source=source))
    _unique([term.name for term in terms], f"{label}: terms")
    signals = [term for term in terms if term.role == "signal"]
    if len(signals) != 1:
        raise InputError(f"{label}: terms: expected exactly one term with role 'signal', found {len(signals)}")
    if not any(term.role == "noise" for term in terms):
        raise InputError(f"{label}: terms: expected at least one term with role 'noise', found none")

    bounds = []
    for index, entry in enumerate(_table_list(raw.get("lower_bounds", []), f"{label}: lower_bounds")):
        where = f"{label}: lower_bounds[{index}]"
        _check_keys(entry, _BOUND_KEYS, where, required={"name", "expr", "provenance"})
        source = _string(entry["expr"], f"{where}.expr")
        bounds.append(LowerBound(
            name=_identifier(entry["name"], f"{where}.name"),
            expr=parse_expression(source, symbols, f"{where}.expr"),
            provenance=_provenance(entry["provenance"], f"{where}.provenance"),
            reference=_string(entry.get("reference", ""), f"{where}.reference"),
            note=_string(entry.get("note", ""), f"{where}.note"), source=source))
    _unique([bound.name for bound in bounds], f"{label}: lower_bounds")

    facts = []
    for index, entry in enumerate(_table_list(raw.get("facts", []), f"{label}: facts")):
        where = f"{label}: facts[{index}]"
        _check_keys(entry, _FACT_KEYS, where, required={"text", "provenance"})
        facts.append(Fact(text=_string(entry["text"], f"{where}.text"),
                          provenance=_provenance(entry["provenance"], f"{where}.provenance"),
                          reference=_string(entry.get("reference", ""), f"{where}.reference")))

    default_scaling, default_axes, default_box = None, None, {}
    if "defaults" in raw:
        defaults = raw["defaults"]
        if not isinstance(defaults, dict):
            raise InputError(f"{label}: defaults: expected a table [defaults]")
        _check_keys(defaults, _DEFAULT_KEYS, f"{label}: defaults")
        if "scaling" in defaults:
            default_scaling = _string(defaults["scaling"], f"{label}: defaults.scaling")
        if "axes" in defaults:
            default_axes = _axes(defaults["axes"], f"{label}: defaults.axes")
        for axis, bounds_ in _table(defaults.get("box", {}), f"{label}: defaults.box").items():
            default_box[axis] = _interval(axis, bounds_, f"{label}: defaults.box.{axis}")

    corollary = None
    if "corollary" in raw:
        table = _table(raw["corollary"], f"{label}: corollary")
        noise_names = {term.name for term in terms if term.role == "noise"}
        exponents = {}
        for key, value in table.items():
            if key in _COROLLARY_RESERVED:
                continue
            if key not in noise_names:
                raise InputError(f"{label}: corollary.{key}: not a noise term of this pack "
                                 f"(noise terms: {', '.join(sorted(noise_names))})")
            exponents[key] = parse_expression(_string(value, f"{label}: corollary.{key}"), EXPONENTS,
                                              f"{label}: corollary.{key}")
        corollary = Corollary(
            exponents=exponents,
            scaling=_string(table["scaling"], f"{label}: corollary.scaling") if "scaling" in table else None,
            axes=_axes(table["axes"], f"{label}: corollary.axes") if "axes" in table else None)

    return Pack(
        name=name, path=label, title=_string(head.get("title", ""), f"{label}: pack.title"),
        reference=_string(head.get("reference", ""), f"{label}: pack.reference"),
        description=_string(head.get("description", ""), f"{label}: pack.description"),
        variables=tuple(variables), constants=tuple(constants), base=head["base"], size=head["size"],
        param_count=param_count, domain=tuple(domain), terms=tuple(terms), lower_bounds=tuple(bounds),
        facts=tuple(facts), corollary=corollary, default_scaling=default_scaling,
        default_axes=default_axes, default_box=default_box)


# -- small validators (each raises a one-line InputError naming the field) ---------------------
def _check_keys(table: dict, allowed: set[str], where: str, required: set[str] = frozenset()) -> None:
    for key in table:
        if key not in allowed:
            raise InputError(f"{where}: unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(required):
        if key not in table:
            raise InputError(f"{where}: missing required field {key!r}")


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
    return value


def _identifier(value: Any, where: str) -> str:
    text = _string(value, where)
    if not _IDENTIFIER_RE.match(text):
        raise InputError(f"{where}: expected an identifier (letters, digits, _), got {text!r}")
    return text


def _string_list(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InputError(f"{where}: expected a list of strings, got {value!r}")
    return list(value)


def _table(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def _table_list(value: Any, where: str) -> list[dict]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InputError(f"{where}: expected an array of tables ([[...]])")
    return value


def _provenance(value: Any, where: str) -> str:
    if value not in PROVENANCES:
        raise InputError(f"{where}: expected one of {', '.join(PROVENANCES)}, got {value!r}")
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
    names = _string_list(value, where)
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

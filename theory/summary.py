"""The theory side of a report entry: a pack's terms, its default phase diagram and where each experiment line
sits on it, as the plain dicts the report pages draw.

:func:`default_regions` keeps each loaded pack's diagram for the life of the process (an edited pack file loads
as a new pack and is computed again): several experiments of one report share a pack, and the exact symbolic
computation takes a second or more.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from recallkit.theory.errors import InputError, RecallkitError
from recallkit.theory.laws import law_exponents, law_regions
from recallkit.theory.pack import Pack, load_pack
from recallkit.theory.regions import RegionDiagram, compute_regions
from recallkit.theory.scaling import parse_scaling, to_monomial
from sympy import sstr

__all__ = ["default_regions", "law_line_points", "law_scaling", "line_points", "pack_pieces"]

# id(pack) -> (the pack, its diagram or the error computing it). load_pack returns one Pack object per unchanged
# file, so an edited pack is a new object and is computed again; the pack is kept in the entry, so an id is never
# taken for another object's.
_REGIONS: dict[int, tuple[Pack, RegionDiagram | RecallkitError]] = {}


def default_regions(pack: Pack) -> RegionDiagram:
    """The pack's phase diagram with its default scaling, axes and box (computed once per process and loaded pack);
    a pack without one raises the same RecallkitError every time."""
    entry = _REGIONS.get(id(pack))
    if entry is None or entry[0] is not pack:
        try:
            entry = (pack, compute_regions(pack))
        except RecallkitError as exc:
            entry = (pack, exc)
        _REGIONS[id(pack)] = entry
    if isinstance(entry[1], RecallkitError):
        raise entry[1]
    return entry[1]


def pack_pieces(pack: Pack | str | Path | None, line_scalings: list[tuple[str, str]]) -> dict[str, Any]:
    """Terms, the phase diagram from the pack's defaults, and each experiment line as a point on it.
    ``pack``: a loaded pack (a plan's), or a pack's name or path; ``line_scalings``: (label, scaling) pairs."""
    if not pack:
        return {}
    if isinstance(pack, (str, Path)):
        pack = load_pack(pack)
    pieces: dict[str, Any] = {
        "pack": pack.name,
        "reference": pack.reference,
        "terms": [t.to_dict() for t in pack.terms],
        "lower_bounds": [lb.to_dict() for lb in pack.lower_bounds],
    }
    if pack.laws and not pack.terms:
        return _law_pieces(pack, pieces, line_scalings)
    try:
        diagram = default_regions(pack)
    except RecallkitError as exc:
        pieces.setdefault("notes", []).append(f"no phase diagram: {exc}")
        return pieces
    pieces["regions"] = diagram.to_dict()
    return _with_lines(pieces, *line_points(pack, diagram, line_scalings))


def _with_lines(pieces: dict[str, Any], phase_lines: list, notes: list[str]) -> dict[str, Any]:
    """``pieces`` with the lines placed on its diagram (``phase_lines``) and the notes of those that could not be."""
    if notes:
        pieces.setdefault("notes", []).extend(notes)
    if phase_lines:
        pieces["phase_lines"] = phase_lines
    return pieces


def _law_pieces(pack: Pack, pieces: dict[str, Any], line_scalings: list[tuple[str, str]]) -> dict[str, Any]:
    """A pack of laws only: its law's regions (``theory.laws.law_regions``) along :func:`law_scaling`, with the
    lines on them, under the keys a condition's phase diagram uses."""
    try:
        document = law_regions(pack, None, law_scaling(pack, line_scalings))
    except RecallkitError as exc:
        pieces.setdefault("notes", []).append(f"no phase diagram: {exc}")
        return pieces
    pieces["regions"] = document
    phase_lines, notes = law_line_points(pack, document, line_scalings)
    return _with_lines(pieces, phase_lines, notes + _other_constants(pack, line_scalings))


def _other_constants(pack: Pack, line_scalings: list[tuple[str, str]]) -> list[str]:
    """A note for each variable of the pack that the lines set to different numbers: the regions are drawn at the
    first line's value, so a line at another value sits on a diagram that is not its own."""
    values: dict[str, dict[str, str]] = {}
    for label, text in line_scalings:
        try:
            entries = parse_scaling(text, constants=pack.constants, variables=pack.variables).entries
        except RecallkitError:
            continue  # the line's own note says why it is not drawn
        for variable, expr in entries:
            if expr.is_number:
                values.setdefault(variable, {})[label] = sstr(expr)
    notes = []
    for variable, by_line in values.items():
        if len(set(by_line.values())) > 1:
            first_label, first = next(iter(by_line.items()))
            others = "; ".join(f"{label}: {variable} = {value}" for label, value in by_line.items() if value != first)
            notes.append(f"the phase diagram's regions are drawn at {variable} = {first} (line {first_label!r}); the "
                         f"lines at another {variable} are placed by their exponents on it, but their own regions "
                         f"differ ({others})")
    return notes


def law_scaling(pack: Pack, line_scalings: list[tuple[str, str]]) -> str | None:
    """The scaling a law's regions are drawn along in a report: the pack's [defaults] scaling, else the first
    line's with each entry that sets a variable of the pack's law made ``base**a`` (the next ``base**c``), base
    being the law's variable the line leaves free; so "n=2*p**2" is drawn as "n=p**a" and lies at a = 2."""
    if pack.default_scaling is not None or not line_scalings:
        return None
    line = line_scalings[0][1]
    along = law_exponents(pack, pack.laws[0], line)
    base = along["base"]
    # the variables the law is a power of (alpha in p**-alpha is not: it stays the number the line gives it)
    used = set(along["variables"])
    names = iter(("a", "c"))
    entries = []
    for variable, expr in parse_scaling(line, constants=pack.constants, variables=pack.variables).entries:
        free = next(names, None) if variable in used else None
        entries.append(f"{variable}={base}**{free}" if free else f"{variable}={sstr(expr)}")
    return ", ".join(entries)


def line_points(pack, diagram, line_scalings: list[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    """Where each experiment line (label, scaling such as "N=V**1.5, L=V**0.5") sits on a phase diagram:
    ``[{"label", "point": [exponent per axis]}]``, and a note for each line that cannot be placed."""
    return _place_lines(pack, list(diagram.axes), diagram.scaling, pack.base, line_scalings)


def law_line_points(pack: Pack, document: dict[str, Any],
                    line_scalings: list[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    """:func:`line_points` on a law's regions (``theory.laws.law_regions``): a line's exponents are taken in the
    law's base along the drawn scaling."""
    return _place_lines(pack, list(document["axes"]), document["scaling"], document["base"], line_scalings)


def _place_lines(pack, axes: list[str], scaling: str, base: str,
                 line_scalings: list[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    variables = getattr(pack, "variables", None) or None
    # Which model variable each axis exponent drives, e.g. {"a": "N", "c": "L"} from "N=V**a, L=V**c", and the axes
    # that are a (declared) variable itself, e.g. "alpha=a": there the line's value is the point, not an exponent.
    axis_variable: dict[str, str] = {}
    # the variable each axis is an exponent of: the other symbol of its entry ("m=d**k": d), else the pack's base
    axis_base: dict[str, str] = {}
    direct: set[str] = set()
    for variable, expr in parse_scaling(scaling, variables=variables).entries:
        for symbol in expr.free_symbols:
            if symbol.name in axes:
                axis_variable[symbol.name] = variable
                others = [other.name for other in expr.free_symbols if other.name not in axes]
                axis_base[symbol.name] = others[0] if len(others) == 1 else base
                if expr == symbol:
                    direct.add(symbol.name)
    phase_lines, notes = [], []
    for label, scaling_text in line_scalings:
        try:
            line = dict(parse_scaling(scaling_text, variables=variables).entries)
            point = []
            for axis in axes:
                expr = line.get(axis_variable.get(axis, ""))
                if expr is None:
                    raise InputError(f"line {label!r} does not set the variable behind axis {axis}")
                if axis in direct:
                    if not expr.is_number:
                        raise InputError(f"line {label!r} sets {axis_variable[axis]} = {expr}, not a number, and "
                                         f"axis {axis} is that variable itself")
                    point.append(float(expr))
                    continue
                exponent = to_monomial(expr, axis_base.get(axis, base)).exponent
                point.append(float(exponent))
            phase_lines.append({"label": label, "point": point})
        except RecallkitError as exc:
            notes.append(f"line {label!r} not drawn on the phase diagram: {exc}")
    return phase_lines, notes

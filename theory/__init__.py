"""theory stage of recallkit: theorem packs -> phase regions, required parameter counts, predicted slopes.

Pure sympy (no torch, no matplotlib, no scipy at import time). Typical use::

    from recallkit import theory
    pack = theory.load_pack("example")
    diagram = theory.compute_regions(pack, "m=d**k", axes=("k",))
    prediction = theory.predict(pack, "m=d")      # slope of log(m*d) against log(N)

The names below load their module on first use, so importing the package (or ``theory.errors``, which
every stage and the CLI import) does not import sympy: ``recallkit --help`` need not pay for it.
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from recallkit.theory.errors import InputError, RecallkitError

if TYPE_CHECKING:  # for type checkers and editors; at run time these load on first use (see __getattr__)
    from recallkit.theory.expr import compile_numeric, parse_expression, parse_linear_constraints
    from recallkit.theory.laws import law_exponents, law_regions, predict_laws
    from recallkit.theory.pack import (Corollary, Fact, Law, LawTerm, LowerBound, Pack, Term, list_packs, load_pack,
                                       pack_from_dict)
    from recallkit.theory.predict import Prediction, predict
    from recallkit.theory.regions import Region, RegionDiagram, compute_regions, parse_box
    from recallkit.theory.scaling import Monomial, Scaling, parse_scaling, power_text, reduce_term
    from recallkit.theory.summary import law_line_points, line_points

__all__ = [
    "Corollary", "Fact", "InputError", "Law", "LawTerm", "LowerBound", "Monomial", "Pack", "Prediction", "RecallkitError",
    "Region", "RegionDiagram", "Scaling", "Term", "compile_numeric", "compute_regions", "law_exponents", "law_line_points", "law_regions", "line_points",
    "list_packs", "load_pack",
    "pack_from_dict", "parse_box", "parse_expression", "parse_linear_constraints", "parse_scaling",
    "power_text", "predict", "predict_laws", "reduce_term",
]

_MODULE_OF = {
    **dict.fromkeys(("compile_numeric", "parse_expression", "parse_linear_constraints"), "expr"),
    **dict.fromkeys(("Corollary", "Fact", "Law", "LawTerm", "LowerBound", "Pack", "Term", "list_packs", "load_pack",
                     "pack_from_dict"), "pack"),
    **dict.fromkeys(("law_exponents", "law_regions", "predict_laws"), "laws"),
    **dict.fromkeys(("Prediction", "predict"), "predict"),
    **dict.fromkeys(("Region", "RegionDiagram", "compute_regions", "parse_box"), "regions"),
    **dict.fromkeys(("Monomial", "Scaling", "parse_scaling", "power_text", "reduce_term"), "scaling"),
    **dict.fromkeys(("law_line_points", "line_points"), "summary"),
}
# Submodules the names above load; an eager package had them as attributes, so they stay attributes.
_SUBMODULES = ("analysis", "errors", "expr", "laws", "pack", "regions", "scaling", "schema", "symbols")


def __getattr__(name: str) -> Any:
    # always recallkit.theory's modules, as the eager imports were, also when this file is imported as `theory`
    if name in _SUBMODULES:
        return importlib.import_module(f"recallkit.theory.{name}")
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"recallkit.theory.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *_SUBMODULES})


class _Package(types.ModuleType):
    """``theory.predict`` is the function, never the submodule of the same name: loading a submodule sets
    it as an attribute of its package, which would otherwise hide the function from ``__getattr__``."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _MODULE_OF and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

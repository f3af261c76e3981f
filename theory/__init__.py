"""theory stage of recallkit: theorem packs -> phase regions, required parameter counts, predicted slopes.

Pure sympy (no torch, no matplotlib, no scipy at import time). Typical use::

    from recallkit import theory
    pack = theory.load_pack("example")
    diagram = theory.compute_regions(pack, "m=d**k", axes=("k",))
    prediction = theory.predict(pack, "m=d")      # slope of log(m*d) against log(N)
"""
from recallkit.theory.errors import InputError, RecallkitError
from recallkit.theory.expr import parse_expression, parse_linear_constraints
from recallkit.theory.pack import Corollary, Fact, LowerBound, Pack, Term, list_packs, load_pack, pack_from_dict
from recallkit.theory.predict import Prediction, predict
from recallkit.theory.regions import Region, RegionDiagram, compute_regions, parse_box
from recallkit.theory.scaling import Monomial, Scaling, parse_scaling, reduce_term

__all__ = [
    "Corollary", "Fact", "InputError", "LowerBound", "Monomial", "Pack", "Prediction", "RecallkitError",
    "Region", "RegionDiagram", "Scaling", "Term", "compute_regions", "list_packs", "load_pack",
    "pack_from_dict", "parse_box", "parse_expression", "parse_linear_constraints", "parse_scaling",
    "predict", "reduce_term",
]

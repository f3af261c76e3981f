"""The smallest valid pack, as text: tests of the pack reader, of hostile packs and of the theory command each
break it in one place."""
from __future__ import annotations

import textwrap

__all__ = ["MINIMAL_PACK"]

MINIMAL_PACK = textwrap.dedent(
    """
    [pack]
    name = "mine"
    title = "a plain title"
    variables = ["V", "N", "L", "d"]
    base = "V"
    size = "d"
    param_count = "d**2"
    domain = ["a >= 1"]

    [[terms]]
    name = "signal"
    role = "signal"
    expr = "d**2"
    provenance = "derived-here"

    [[terms]]
    name = "crosstalk"
    role = "noise"
    expr = "V*L*log(V)"
    provenance = "derived-here"
    """
)

"""recallkit: check the theory of factual recall in transformers against real training runs.

Installed, everything lives in this one namespace. Data flows one way:
``recallkit.theory`` (sympy) -> ``recallkit.empirics`` (torch) -> ``recallkit.compare`` (statsmodels)
-> ``recallkit.reports`` (matplotlib). ``recallkit.systems`` holds one folder per paper's system,
found through :mod:`recallkit.registry`. This package's own modules are the orchestration on top:
the command-line interface, the main job (:mod:`recallkit.pipeline`) and the assertions that run a
sweep and then judge it (:func:`assert_scaling`, and :func:`assert_claim` for comparative claims).
"""
from __future__ import annotations

__version__ = "0.1.0"

# before anything imports torch: MKL fixes its code path at its first call (see empirics.numerics)
from recallkit.empirics.numerics import pin_math_library  # noqa: E402

pin_math_library()

from recallkit.empirics.provenance import code_version  # noqa: E402  (after __version__, which it reads)

__all__ = ["__version__", "assert_claim", "assert_scaling", "check_system", "code_version", "sweep_and_fit", "results",
           "fits"]


def __getattr__(name: str):
    # lazy, so that `import recallkit.theory` stays pure sympy
    # fit_experiment: deprecated; results and fits: DataFrames for notebooks (pandas: the export extra, imported
    # when they are called). frames imports a subset of what assertions does, so loading both costs the same.
    if name in ("assert_scaling", "assert_claim", "sweep_and_fit", "fit_experiment", "results", "fits"):
        from recallkit import assertions, frames  # the fits and the search: scipy.stats and sympy, about 1.5 s

        return getattr(frames if name in ("results", "fits") else assertions, name)
    if name == "check_system":  # a plug-in's check (recallkit.plugin_check): pluggy, light, but not needed at import
        import importlib

        return importlib.import_module("recallkit.plugin_check").check_system
    raise AttributeError(f"module 'recallkit' has no attribute {name!r}")

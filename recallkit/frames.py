"""Results and fits as pandas DataFrames, for notebooks: ``recallkit.results(...)`` and ``recallkit.fits(...)``.

Both read the results store only; nothing is trained (``recallkit.sweep_and_fit`` trains what is missing,
``recallkit sweep`` too). pandas is the ``export`` extra (``pip install 'recallkit[export]'``): the toolkit
itself needs no DataFrame, so pandas stays out of the core dependencies.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from recallkit.compare.assertions import default_store_path, fit_experiment
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.search import boundary_points
from recallkit.empirics.store import ResultStore, flatten_row
from recallkit.theory.errors import InputError

__all__ = ["results", "fits", "fit_rows"]


def _pandas(what: str):
    try:
        import pandas as pd  # the export extra, which may be missing; 0.25 s to import
    except ImportError:
        raise InputError(f"recallkit.{what}: needs pandas (pip install 'recallkit[export]')") from None
    return pd


def _store_path(store: str | Path | None) -> str:
    path = Path(store) if store is not None else Path(default_store_path())
    if not path.is_file():
        raise InputError(f"store {path}: no such results store (run 'recallkit sweep' or 'recallkit report' first)")
    return str(path)


def results(experiment: str | Path, store: str | Path | None = None, preset: str = "quick",
            points: bool = False) -> Any:
    """The stored runs of ``experiment`` (a shipped name such as ``"tr_fig2_attention_only"`` or a path) as a
    DataFrame: one row per run, with its provenance (``config_hash``, ``code_version``, ``device``,
    ``threads``, ...) and its config and metrics flattened into ``config.*`` / ``metrics.*`` columns.

    ``points=True``: the search's boundary points instead (one row per line, threshold, seed and grid
    value: the numbers the fits use), replayed from the store for ``preset``."""
    pd = _pandas("results")
    loaded = load_experiment(experiment, preset=preset)
    with ResultStore(_store_path(store), readonly=True) as opened:
        if points:
            return pd.DataFrame(boundary_points(loaded, opened))
        return pd.DataFrame([flatten_row(r) for r in opened.rows(loaded.name)])


FIT_COLUMNS = ["experiment", "line", "threshold", "threshold_relative", "x", "slope", "slope_ci_lo", "slope_ci_hi",
               "slope_ci_bootstrap_lo", "slope_ci_bootstrap_hi", "predicted_slope", "log_power",
               "predicted_slope_tested", "predicted_slope_asymptotic", "prediction_compared", "delta", "band_lo", "band_hi", "p_tost", "verdict", "verdict_reason",
               "n_points", "n_censored", "n_seeds", "r2", "C", "C_ci_lo", "C_ci_hi"]


def _pair(value, i: int):
    return value[i] if isinstance(value, (list, tuple)) and len(value) == 2 else None


def fit_rows(doc: dict) -> list[dict]:
    """Flat rows (:data:`FIT_COLUMNS`) of ``compare.fit_experiment(...).to_dict()``: intervals split into
    ``_lo`` / ``_hi``; ``predicted_slope_tested`` is the slope the verdict compared (a system's finite-size or
    realised-grid prediction where it gives one, named in ``prediction_compared``; else the finite-range slope
    over the fitted range when the prediction has a log factor), ``predicted_slope_asymptotic`` the asymptotic
    one. ``threshold_relative``: the threshold is a fraction of each instance's ceiling."""
    predictions = doc.get("predictions") or {}
    out = []
    for f in doc.get("fits", []):
        tested = f.get("predicted_slope_finite_range")
        out.append({
            "experiment": f.get("experiment") or doc.get("experiment"), "line": f.get("line"),
            "threshold": f.get("threshold"), "threshold_relative": bool(f.get("threshold_relative")),
            "x": f.get("x"), "slope": f.get("slope"),
            "slope_ci_lo": _pair(f.get("slope_ci"), 0), "slope_ci_hi": _pair(f.get("slope_ci"), 1),
            "slope_ci_bootstrap_lo": _pair(f.get("slope_ci_bootstrap"), 0),
            "slope_ci_bootstrap_hi": _pair(f.get("slope_ci_bootstrap"), 1),
            "predicted_slope": f.get("predicted_slope"),
            "log_power": (predictions.get(f.get("line")) or {}).get("log_power"),
            "predicted_slope_tested": f.get("predicted_slope") if tested is None else tested,
            "predicted_slope_asymptotic": (f.get("predicted_slope_asymptotic")
                                           if f.get("predicted_slope_asymptotic") is not None else f.get("predicted_slope")),
            "prediction_compared": f.get("prediction_compared"),
            "delta": f.get("delta"), "band_lo": _pair(f.get("band"), 0), "band_hi": _pair(f.get("band"), 1),
            "p_tost": f.get("p_tost"), "verdict": f.get("verdict"), "verdict_reason": f.get("verdict_reason"),
            "n_points": f.get("n_points"), "n_censored": len(f.get("censored") or []), "n_seeds": f.get("n_seeds"),
            "r2": f.get("r2"), "C": f.get("C"), "C_ci_lo": _pair(f.get("C_ci"), 0), "C_ci_hi": _pair(f.get("C_ci"), 1),
        })
    return out


def fits(experiment: str | Path, store: str | Path | None = None, preset: str = "quick",
         delta: float | None = None, alpha: float | None = None,
         thresholds: Iterable[float] | None = None) -> Any:
    """The fits and verdicts of ``experiment`` from what the store holds, as a DataFrame: one row per
    (line, threshold), columns :data:`FIT_COLUMNS` (the same numbers as ``recallkit fit --json``)."""
    pd = _pandas("fits")
    doc = fit_experiment(experiment, store=_store_path(store), preset=preset, delta=delta, alpha=alpha,
                         thresholds=thresholds).to_dict()
    return pd.DataFrame(fit_rows(doc), columns=FIT_COLUMNS)

"""Results and fits as pandas DataFrames, for notebooks: ``recallkit.results(...)`` and ``recallkit.fits(...)``.

Both read the results store only; nothing is trained (``recallkit.sweep_and_fit`` trains what is missing,
``recallkit sweep`` too). pandas is the ``export`` extra (``pip install 'recallkit[export]'``): the toolkit
itself needs no DataFrame, so pandas stays out of the core dependencies.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from recallkit.compare.assertions import default_store_path, fit_experiment
from recallkit.compare.schema import CheckRow, check_row, flat_columns, flat_row
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


# the DataFrame of recallkit.fits(): the check's flat row (compare.schema.CheckRow), intervals split into _lo / _hi
FIT_COLUMNS = flat_columns(CheckRow)


def fit_rows(doc: dict) -> list[dict]:
    """Flat rows (:data:`FIT_COLUMNS`, documented field by field in :class:`recallkit.compare.schema.CheckRow`:
    ``recallkit schema``) of ``compare.fit_experiment(...).to_dict()``: intervals split into ``_lo`` / ``_hi``;
    ``predicted_slope_tested`` is the slope the verdict compared (named in ``prediction_compared``),
    ``predicted_slope_asymptotic`` the theory's asymptotic one."""
    predictions = doc.get("predictions") or {}
    return [flat_row(check_row(f, doc.get("experiment"), (predictions.get(f.get("line")) or {}).get("log_power")))
            for f in doc.get("fits", [])]


def fits(experiment: str | Path, store: str | Path | None = None, preset: str = "quick",
         delta: float | None = None, alpha: float | None = None,
         thresholds: Iterable[float] | None = None) -> Any:
    """The fits and verdicts of ``experiment`` from what the store holds, as a DataFrame: one row per
    (line, threshold), columns :data:`FIT_COLUMNS` (the same numbers as ``recallkit fit --json``)."""
    pd = _pandas("fits")
    doc = fit_experiment(experiment, store=_store_path(store), preset=preset, delta=delta, alpha=alpha,
                         thresholds=thresholds).to_dict()
    return pd.DataFrame(fit_rows(doc), columns=FIT_COLUMNS)

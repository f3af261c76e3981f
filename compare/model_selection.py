"""Log against power: which functional form describes d_min(N)?

Paper-reported (Ravfogel et al. 2026): the minimal dimension of learned embeddings fits
a + b log2 N, that of frozen random subject embeddings a power law c N^p.  This module fits both
forms to the same points and says which fits better.

Estimators (stated, because the choice matters):
* log form ``d = a + b log2 N``: statsmodels OLS on the d scale, HC3 errors, Student-t intervals.
* power form ``d = c N^p``: least squares on the same d scale (scipy ``curve_fit``, started from
  the log-log OLS), so both forms minimise the same loss and their residual sums are comparable;
  the interval on p is the t interval from the least-squares covariance.  The log-log OLS slope
  (statsmodels, HC3, t) is reported too as ``p_loglog``, the usual exponent estimate.
* AIC with Gaussian errors, n ln(RSS/n) + 2(k+1); both forms have k = 2, so Delta AIC is the
  log-ratio of residual sums.
* Leave-one-N-out cross-validation: all points at one N are left out together (seeds at one N
  are not independent evidence about the form), the rest refitted, the left-out points
  predicted; reported as root mean squared error.  Leaving out the end points is extrapolation,
  which is where the two forms differ most.
* Optional bootstrap over seeds: the fraction of resamples in which the log form has the lower AIC.

Verdict rule: ``preferred`` is the form with lower AIC when Delta AIC >= ``min_delta_aic``
(default 2) and the lower cross-validated error agrees; otherwise ``inconclusive``.
With a ``predicted`` form, ``verdict`` is consistent / inconsistent / inconclusive.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from recallkit.compare.bootstrap import bootstrap_over_units
from recallkit.empirics.records import BoundaryPoint
from recallkit.theory.errors import InputError

__all__ = ["CAPACITY_FORMS", "DEFAULT_ALPHA", "DEFAULT_MIN_DELTA_AIC", "FORMS", "overall_verdict",
           "points_with_model", "select_by_group", "select_capacity_by_group", "select_capacity_form", "select_d_min",
           "select_log_or_power"]


FORMS = ("log", "power")
# Paper-reported (Ravfogel et al. 2026): learned d_min fits a + b log2 N, frozen random subject
# embeddings a power law.
DEFAULT_ALPHA = 0.05
DEFAULT_MIN_DELTA_AIC = 2.0


def _check_arrays(n_values: Sequence[float], d_values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(n_values, dtype=float)
    d = np.asarray(d_values, dtype=float)
    if n.shape != d.shape or n.ndim != 1:
        raise InputError(f"model selection: N and d must be 1-D of equal length, got {n.shape} and {d.shape}")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(d))) or np.any(n <= 1) or np.any(d <= 0):
        raise InputError("model selection: expected N > 1 and d > 0, all finite")
    if len(np.unique(n)) < 3:
        raise InputError(f"model selection: need at least 3 distinct N to tell log from power, got {len(np.unique(n))}")
    return n, d


def _ols(x: np.ndarray, y: np.ndarray):
    from statsmodels.regression.linear_model import OLS  # not statsmodels.api: it imports every model (0.4 s)
    from statsmodels.tools.tools import add_constant  # statsmodels, lazy for the same reason

    model = OLS(y, add_constant(x))
    return model.fit(cov_type="HC3", use_t=True)


def _fit_log(n: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    slope, intercept = np.polyfit(np.log2(n), d, 1)
    return float(intercept), float(slope)


def _fit_power(n: np.ndarray, d: np.ndarray) -> tuple[float, float, np.ndarray | None]:
    from scipy.optimize import curve_fit  # lazy: scipy.optimize takes about 0.5 s to import

    slope, intercept = np.polyfit(np.log(n), np.log(d), 1)
    start = (math.exp(intercept), slope)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            params, cov = curve_fit(lambda x, c, p: c * x**p, n, d, p0=start, maxfev=20000)
        return float(params[0]), float(params[1]), cov
    except RuntimeError:  # no convergence: keep the log-log start, say nothing about its covariance
        return float(start[0]), float(start[1]), None


def _predict(form: str, params: tuple[float, float], n: np.ndarray) -> np.ndarray:
    if form == "log":
        return params[0] + params[1] * np.log2(n)
    return params[0] * n ** params[1]


def _fit_form(form: str, n: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    if form == "log":
        return _fit_log(n, d)
    c, p, _ = _fit_power(n, d)
    return c, p


def _aic(rss: float, n_points: int, n_params: int = 2) -> float:
    rss = max(rss, 1e-12 * n_points)  # an exact fit would give -inf; floor it so the comparison stays finite
    return n_points * math.log(rss / n_points) + 2 * (n_params + 1)


def _leave_one_n_out_rmse(form: str, n: np.ndarray, d: np.ndarray) -> float:
    errors = []
    for held_out in np.unique(n):
        train = n != held_out
        if len(np.unique(n[train])) < 2:
            continue
        params = _fit_form(form, n[train], d[train])
        errors.extend((_predict(form, params, n[~train]) - d[~train]) ** 2)
    return float(math.sqrt(np.mean(errors)))


def _compare(n: np.ndarray, d: np.ndarray) -> tuple[float, float, float]:
    """(AIC log, AIC power, Delta AIC = power - log) for one sample of points."""
    rss = {form: float(np.sum((_predict(form, _fit_form(form, n, d), n) - d) ** 2)) for form in FORMS}
    aic_log, aic_power = _aic(rss["log"], len(n)), _aic(rss["power"], len(n))
    return aic_log, aic_power, aic_power - aic_log


def _bootstrap_fraction_log(seeds: Sequence[Any] | None, grid: np.ndarray, n_bootstrap: int, bootstrap_seed: int,
                            log_wins: Callable[[np.ndarray], Any]) -> float | None:
    """The fraction of seed resamples in which ``log_wins(rows)`` (the log form fits better) holds; None without
    >= 2 seeds or without a usable resample. A resample pools the points of the seeds it drew, in the order drawn;
    one with < 3 distinct ``grid`` values (N or d) cannot tell the forms apart and is skipped."""
    if seeds is None or len(set(seeds)) < 2 or n_bootstrap <= 0:
        return None
    seeds_arr = np.asarray(seeds)
    rows_of_seed = [np.flatnonzero(seeds_arr == seed) for seed in np.unique(seeds_arr)]

    def log_wins_in(units: np.ndarray) -> Any:
        rows = np.concatenate([rows_of_seed[unit] for unit in units])
        if len(np.unique(grid[rows])) < 3:
            return None
        return log_wins(rows)

    resampled = bootstrap_over_units(len(rows_of_seed), n_bootstrap, bootstrap_seed, log_wins_in)
    return sum(resampled.values) / len(resampled.values) if resampled.values else None


def _preferred_form(delta_aic: float, loo_log: float, loo_power: float, exact_fit: Mapping[str, bool],
                    min_delta_aic: float, *, held_out: str, digits: int, threshold: str, unit: str = "") -> tuple[str, str]:
    """("log" | "power" | "inconclusive", reason): a form is preferred when its AIC is lower by at least
    ``min_delta_aic`` and its leave-one-``held_out``-out error is lower too."""
    aic_winner = "log" if delta_aic > 0 else "power"
    cv_winner = "log" if loo_log < loo_power else "power"
    if abs(delta_aic) >= min_delta_aic and aic_winner == cv_winner:
        reason = (f"{aic_winner} has lower AIC by {abs(delta_aic):.{digits}f} (>= {threshold}) and lower "
                  f"leave-one-{held_out}-out RMSE ({min(loo_log, loo_power):.3g} vs {max(loo_log, loo_power):.3g}{unit})")
        if exact_fit[aic_winner]:
            reason += f"; the {aic_winner} form fits exactly, so the size of Delta AIC is not meaningful"
        return aic_winner, reason
    return "inconclusive", (f"Delta AIC (power - log) = {delta_aic:.{digits}f}, threshold {threshold}; AIC favours "
                            f"{aic_winner}, cross-validation favours {cv_winner} (RMSE log {loo_log:.3g}, power "
                            f"{loo_power:.3g})")


def _verdict_on(preferred: str, predicted: str | None, reason: str) -> tuple[str | None, str | None]:
    """The verdict on a predicted form given the preferred one (None without a prediction)."""
    if predicted is None:
        return None, None
    if preferred == "inconclusive":
        return "inconclusive", reason
    verdict = "consistent" if preferred == predicted else "inconsistent"
    return verdict, f"predicted {predicted}, data prefer {preferred}: {reason}"


def overall_verdict(group_verdicts: Sequence[str | None], predicted: str | None) -> str | None:
    """One model's verdict over its groups (e.g. R values): inconsistent if any group is, consistent if every
    group is, else inconclusive; None without a prediction."""
    if predicted is None:
        return None
    if "inconsistent" in group_verdicts:
        return "inconsistent"
    if group_verdicts and all(v == "consistent" for v in group_verdicts):
        return "consistent"
    return "inconclusive"


def _log_form(n: np.ndarray, d: np.ndarray, alpha: float) -> dict[str, Any]:
    """d = a + b log2 N by OLS (HC3, t intervals): its part of the report."""
    log_fit = _ols(np.log2(n), d)
    a, b = (float(v) for v in log_fit.params)
    a_ci, b_ci = (list(map(float, row)) for row in log_fit.conf_int(alpha))
    rss = float(np.sum(log_fit.resid**2))
    return {"a": a, "a_ci": a_ci, "b": b, "b_ci": b_ci, "rss": rss, "aic": _aic(rss, len(n)),
            "loo_rmse": _leave_one_n_out_rmse("log", n, d), "r2": float(log_fit.rsquared)}


def _power_form(n: np.ndarray, d: np.ndarray, alpha: float) -> dict[str, Any]:
    """d = c N^p by least squares on the d scale (t interval on p from its covariance) and the log-log OLS slope:
    its part of the report."""
    from scipy import stats  # lazy: scipy.stats takes about 0.5 s to import

    n_points = len(n)
    c, p, cov = _fit_power(n, d)
    t_crit = float(stats.t.ppf(1 - alpha / 2, max(n_points - 2, 1)))
    p_se = float(math.sqrt(cov[1, 1])) if cov is not None and np.isfinite(cov[1, 1]) else float("nan")
    p_ci = [p - t_crit * p_se, p + t_crit * p_se] if math.isfinite(p_se) else [None, None]
    loglog = _ols(np.log(n), np.log(d))
    rss = float(np.sum((c * n**p - d) ** 2))
    return {"c": c, "p": p, "p_ci": p_ci, "p_loglog": float(loglog.params[1]),
            "p_loglog_ci": list(map(float, loglog.conf_int(alpha)[1])), "rss": rss,
            "aic": _aic(rss, n_points), "loo_rmse": _leave_one_n_out_rmse("power", n, d)}


def select_log_or_power(
    n_values: Sequence[float],
    d_values: Sequence[float],
    seeds: Sequence[int] | None = None,
    predicted: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_delta_aic: float = DEFAULT_MIN_DELTA_AIC,
    n_bootstrap: int = 200,
    bootstrap_seed: int = 0,
) -> dict[str, Any]:
    """Fit a + b log2 N and c N^p to (N, d) points and say which form fits better.

    Returns a JSON-serialisable dict:
    ``{"n_points", "N_values", "log": {"a", "a_ci", "b", "b_ci", "rss", "aic", "loo_rmse", "r2"},
    "power": {"c", "p", "p_ci", "p_loglog", "p_loglog_ci", "rss", "aic", "loo_rmse"},
    "delta_aic" (power minus log: > 0 favours log), "exact_fit": {"log": bool, "power": bool}, "cv_ratio" (power / log LOO RMSE),
    "bootstrap_fraction_log" (None without >= 2 seeds), "preferred": "log"|"power"|"inconclusive",
    "preferred_reason", "predicted", "verdict", "verdict_reason", "alpha", "estimator"}``.
    """
    n, d = _check_arrays(n_values, d_values)
    if predicted is not None and predicted not in FORMS:
        raise InputError(f"model selection: predicted: expected one of {FORMS}, got {predicted!r}")
    if not 0 < alpha < 1:
        raise InputError(f"model selection: alpha: expected a number in (0, 1), got {alpha!r}")
    log_part = _log_form(n, d, alpha)
    power_part = _power_form(n, d, alpha)
    rss_log, rss_power = log_part["rss"], power_part["rss"]
    delta_aic = power_part["aic"] - log_part["aic"]
    loo_log, loo_power = log_part["loo_rmse"], power_part["loo_rmse"]
    cv_ratio = loo_power / loo_log if loo_log > 0 else (math.inf if loo_power > 0 else 1.0)
    bootstrap_fraction_log = _bootstrap_fraction_log(seeds, n, n_bootstrap, bootstrap_seed,
                                                     lambda rows: _compare(n[rows], d[rows])[2] > 0)

    # An exact fit (residuals at rounding level, e.g. integer d_min exactly on a + b log2 N) makes AIC
    # unbounded: its Delta AIC is then a floor artefact, only its sign means something.
    exact_fit = {form: rss < 1e-9 * max(float(np.sum(d**2)), 1.0) for form, rss in (("log", rss_log), ("power", rss_power))}
    preferred, reason = _preferred_form(delta_aic, loo_log, loo_power, exact_fit, min_delta_aic,
                                        held_out="N", digits=2, threshold=f"{min_delta_aic}")
    verdict, verdict_reason = _verdict_on(preferred, predicted, reason)

    return {
        "n_points": len(n),
        "N_values": sorted(float(v) for v in np.unique(n)),
        "log": log_part,
        "power": power_part,
        "delta_aic": delta_aic,
        "exact_fit": exact_fit,
        "cv_ratio": cv_ratio,
        "bootstrap_fraction_log": bootstrap_fraction_log,
        "preferred": preferred,
        "preferred_reason": reason,
        "predicted": predicted,
        "verdict": verdict,
        "verdict_reason": verdict_reason,
        "alpha": alpha,
        "estimator": "least squares on the d scale for both forms; OLS HC3 t-intervals (statsmodels) for a, b and "
                     "p_loglog; t-interval from the least-squares covariance for p; AIC and leave-one-N-out RMSE",
    }


def select_by_group(
    points: Iterable[Mapping[str, Any]],
    group_key: str = "R",
    size_key: str = "d",
    predicted: str | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """Run :func:`select_log_or_power` on boundary points grouped by ``group_key`` (e.g. R).

    ``points`` are boundary-point dicts (keys N, ``size_key``, seed, ``group_key``, censored).
    Censored points are not fitted; they are counted and listed per group so the report shows them.
    Returns ``{"group_key", "groups": [{group_key: value, **selection, "censored": [...]}],
    "b_per_group": [[value, b, b_lo, b_hi]...], "p_per_group": [...]}``; a group that cannot be
    fitted (too few distinct N) appears with ``"preferred": "inconclusive"`` and an ``"error"``.
    """
    by_group: dict[Any, list[Mapping[str, Any]]] = {}
    for i, point in enumerate(points):
        for key in ("N", size_key, group_key):
            if key not in point:
                raise InputError(f"model selection: point {i}: missing key {key!r} (keys: {sorted(point)})")
        by_group.setdefault(point[group_key], []).append(point)
    groups, b_rows, p_rows = [], [], []
    for value in sorted(by_group):
        rows = by_group[value]
        ok = [p for p in rows if not p.get("censored") and p.get(size_key) is not None]
        censored = [dict(p) for p in rows if p.get("censored") or p.get(size_key) is None]
        entry: dict[str, Any] = {group_key: value, "censored": censored}
        try:
            selection = select_log_or_power(
                [p["N"] for p in ok], [p[size_key] for p in ok],
                seeds=[p.get("seed", 0) for p in ok], predicted=predicted, **kwargs)
        except InputError as error:
            entry.update({"preferred": "inconclusive", "verdict": "inconclusive" if predicted else None,
                          "error": str(error), "n_points": len(ok)})
        else:
            entry.update(selection)
            b_rows.append([value, selection["log"]["b"], *selection["log"]["b_ci"]])
            p_rows.append([value, selection["power"]["p"], *selection["power"]["p_ci"]])
        groups.append(entry)
    return {"group_key": group_key, "size_key": size_key, "groups": groups,
            "b_per_group": b_rows, "p_per_group": p_rows}


def select_d_min(result: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Log-versus-power selection for a d_min(N) result, per model and per R.

    ``result`` is a d_min result dict (a system runner's, or any dict with
    ``"points"``: boundary points with keys model, N, R, d, seed, censored, and optionally
    ``"predicted"``: {model: "log"|"power"}).  Returns ``{model: select_by_group(...) output}`` with
    an overall ``"verdict"`` per model: consistent if every R group agrees with the prediction,
    inconsistent if any group contradicts it, else inconclusive.
    """
    points = list(result.get("points", []))
    predicted = dict(result.get("predicted", {}))
    out: dict[str, Any] = {}
    for model in sorted({p.get("model", "model") for p in points}):
        rows = [p for p in points if p.get("model", "model") == model]
        selection = select_by_group(rows, group_key="R", predicted=predicted.get(model), **kwargs)
        overall = overall_verdict([g.get("verdict") for g in selection["groups"]], predicted.get(model))
        selection["predicted"] = predicted.get(model)
        selection["verdict"] = overall
        selection["verdict_reason"] = "; ".join(
            f"R={g['R']}: {g.get('preferred')} ({g.get('verdict_reason') or g.get('preferred_reason') or g.get('error')})"
            for g in selection["groups"])
        out[model] = selection
    return out


def points_with_model(points: Iterable[BoundaryPoint | Mapping[str, Any]], experiment: Any) -> list[dict[str, Any]]:
    """Boundary points of an ``empirics.experiment`` min-size experiment (e.g.
    experiments/geo_dmin_learned_vs_frozen.toml) with the ``"model"`` key that :func:`select_d_min`
    groups by, taken from each point's line (its ``model`` override, else the experiment's model). The rows
    are the report's (its summary.json): a search's record is written as its dict here."""
    model_of = {line.label: line.overrides.get("model", experiment.model) for line in experiment.lines}
    out = []
    for i, point in enumerate(points):
        if isinstance(point, BoundaryPoint):
            line, row = point.line, point.to_dict()
        elif "model" in point:
            out.append(dict(point))
            continue
        else:
            line, row = point.get("line"), dict(point)
        if line not in model_of:
            raise InputError(f"boundary point {i}: line {line!r} is not a line of experiment "
                             f"{getattr(experiment, 'name', '?')!r} (lines: {', '.join(model_of)})")
        out.append({**row, "model": model_of[line]})
    return out


# ----------------------------------------------------------------------------- capacity N_max(d)
CAPACITY_FORMS = {
    "log": "log2 N_max = a + b d   (d = O(log N))",
    "power": "log2 N_max = a + b log2 d   (N_max = 2^a d^b, so d ~ N^(1/b))",
}


def _capacity_x(form: str, d: np.ndarray) -> np.ndarray:
    return d if form == "log" else np.log2(d)


def _capacity_rss(form: str, d: np.ndarray, y: np.ndarray) -> float:
    slope, intercept = np.polyfit(_capacity_x(form, d), y, 1)
    return float(np.sum((intercept + slope * _capacity_x(form, d) - y) ** 2))


def _capacity_loo_rmse(form: str, d: np.ndarray, y: np.ndarray) -> float:
    errors = []
    for held_out in np.unique(d):
        train = d != held_out
        if len(np.unique(d[train])) < 2:
            continue
        slope, intercept = np.polyfit(_capacity_x(form, d[train]), y[train], 1)
        errors.extend((intercept + slope * _capacity_x(form, d[~train]) - y[~train]) ** 2)
    return float(math.sqrt(np.mean(errors)))


def _check_capacity_arrays(d_values: Sequence[float], n_values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    d = np.asarray(d_values, dtype=float)
    n = np.asarray(n_values, dtype=float)
    if d.shape != n.shape or d.ndim != 1:
        raise InputError(f"capacity model selection: d and N must be 1-D of equal length, got {d.shape} and {n.shape}")
    if not (np.all(np.isfinite(d)) and np.all(np.isfinite(n))) or np.any(d <= 0) or np.any(n < 1):
        raise InputError("capacity model selection: expected d > 0 and N >= 1, all finite")
    if len(np.unique(d)) < 3:
        raise InputError(f"capacity model selection: need at least 3 distinct d to tell log from power, got {len(np.unique(d))}")
    return d, n


def _capacity_forms(d: np.ndarray, y: np.ndarray, alpha: float) -> dict[str, dict[str, Any]]:
    """Both forms fitted to y = log2 N_max by OLS (HC3, t intervals): their parts of the report."""
    fits: dict[str, dict[str, Any]] = {}
    for form in FORMS:
        fit = _ols(_capacity_x(form, d), y)
        a, b = (float(v) for v in fit.params)
        a_ci, b_ci = (list(map(float, row)) for row in fit.conf_int(alpha))
        rss = float(np.sum(fit.resid**2))
        fits[form] = {"form": CAPACITY_FORMS[form], "a": a, "a_ci": a_ci, "b": b, "b_ci": b_ci, "rss": rss,
                      "aic": _aic(rss, len(d)), "loo_rmse": _capacity_loo_rmse(form, d, y),
                      "r2": float(fit.rsquared)}
    power = fits["power"]
    power["p"] = 1.0 / power["b"] if power["b"] != 0 else None
    lo, hi = power["b_ci"]
    power["p_ci"] = sorted([1.0 / hi, 1.0 / lo]) if lo * hi > 0 else [None, None]  # 1/b when b's interval excludes 0
    return fits


def select_capacity_form(
    d_values: Sequence[float],
    n_values: Sequence[float],
    seeds: Sequence[int] | None = None,
    predicted: str | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_delta_aic: float = DEFAULT_MIN_DELTA_AIC,
    n_bootstrap: int = 200,
    bootstrap_seed: int = 0,
) -> dict[str, Any]:
    """Log against power for a capacity curve N_max(d): which form describes log2 N_max?

    Capacity is measured at fixed d (known exactly) with N_max found by search, so the response is
    y = log2 N_max and both forms are straight lines in y with two parameters: ``log`` is
    y = a + b d (N_max exponential in d: d = O(log N)), ``power`` is y = a + b log2 d (N_max a power
    of d: d ~ N^p with p = 1/b). Same response, same number of parameters: AIC (Gaussian errors) and
    leave-one-d-out RMSE compare them directly. Estimators, verdict rule and the bootstrap over seeds
    are those of :func:`select_log_or_power`. Returns ``{"n_points", "d_values", "response",
    "log": {"form", "a", "a_ci", "b", "b_ci", "rss", "aic", "loo_rmse", "r2"}, "power": {... and "p",
    "p_ci" (the exponent of d ~ N^p)}, "delta_aic" (power - log: > 0 favours log), "exact_fit",
    "cv_ratio", "bootstrap_fraction_log", "preferred", "preferred_reason", "predicted", "verdict",
    "verdict_reason", "alpha", "min_delta_aic", "estimator"}``.
    """
    d, n = _check_capacity_arrays(d_values, n_values)
    if predicted is not None and predicted not in FORMS:
        raise InputError(f"capacity model selection: predicted: expected one of {FORMS}, got {predicted!r}")
    if not 0 < alpha < 1:
        raise InputError(f"capacity model selection: alpha: expected a number in (0, 1), got {alpha!r}")
    y = np.log2(n)
    n_points = len(d)
    fits = _capacity_forms(d, y, alpha)
    power = fits["power"]
    delta_aic = power["aic"] - fits["log"]["aic"]
    loo_log, loo_power = fits["log"]["loo_rmse"], power["loo_rmse"]
    cv_ratio = loo_power / loo_log if loo_log > 0 else (math.inf if loo_power > 0 else 1.0)
    bootstrap_fraction_log = _bootstrap_fraction_log(
        seeds, d, n_bootstrap, bootstrap_seed,
        lambda rows: _capacity_rss("power", d[rows], y[rows]) > _capacity_rss("log", d[rows], y[rows]))

    exact_fit = {form: fits[form]["rss"] < 1e-9 * max(float(np.sum(y**2)), 1.0) for form in FORMS}
    preferred, reason = _preferred_form(delta_aic, loo_log, loo_power, exact_fit, min_delta_aic, held_out="d",
                                        digits=1, threshold=f"{min_delta_aic:g}", unit=" in log2 N")
    verdict, verdict_reason = _verdict_on(preferred, predicted, reason)
    return {
        "n_points": n_points, "d_values": sorted(float(v) for v in np.unique(d)), "response": "log2 N_max",
        "log": fits["log"], "power": power, "delta_aic": delta_aic, "exact_fit": exact_fit, "cv_ratio": cv_ratio,
        "bootstrap_fraction_log": bootstrap_fraction_log, "preferred": preferred, "preferred_reason": reason,
        "predicted": predicted, "verdict": verdict, "verdict_reason": verdict_reason, "alpha": alpha,
        "min_delta_aic": min_delta_aic,
        "estimator": "OLS of log2 N_max on d (log) and on log2 d (power), HC3 t-intervals (statsmodels); "
                     "AIC with Gaussian errors and leave-one-d-out RMSE on the same response",
    }


def select_capacity_by_group(points: Iterable[Mapping[str, Any]], group_key: str = "R", predicted: str | None = None,
                             **kwargs: Any) -> dict[str, Any]:
    """:func:`select_capacity_form` on capacity boundary points (keys d, N, seed, ``group_key``, censored)
    per value of ``group_key``. Censored points are not fitted; they are listed per group. A group that
    cannot be fitted appears with ``"preferred": "inconclusive"`` and an ``"error"``. Returns
    ``{"group_key", "groups": [{group_key: value, **selection, "censored": [...]}]}``."""
    by_group: dict[Any, list[Mapping[str, Any]]] = {}
    for i, point in enumerate(points):
        for key in ("d", "N", group_key):
            if key not in point:
                raise InputError(f"capacity model selection: point {i}: missing key {key!r} (keys: {sorted(point)})")
        by_group.setdefault(point[group_key], []).append(point)
    groups = []
    for value in sorted(by_group):
        rows = by_group[value]
        ok = [p for p in rows if not p.get("censored") and p.get("N") is not None]
        entry: dict[str, Any] = {group_key: value,
                                 "censored": [dict(p) for p in rows if p.get("censored") or p.get("N") is None]}
        try:
            entry.update(select_capacity_form([p["d"] for p in ok], [p["N"] for p in ok],
                                              seeds=[p.get("seed", 0) for p in ok], predicted=predicted, **kwargs))
        except InputError as error:
            entry.update({"preferred": "inconclusive", "verdict": "inconclusive" if predicted else None,
                          "error": str(error), "n_points": len(ok)})
        groups.append(entry)
    return {"group_key": group_key, "groups": groups}

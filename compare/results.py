"""A fitted line together with its verdict: :class:`FitResult` and :func:`fit_points`.

This module sits above :mod:`compare.fits` (pure fitting) and :mod:`compare.verdicts` (judging a fit),
so neither of those imports the other's consumer: data flows fits -> verdicts -> results.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats  # compare.verdicts loads it anyway

from recallkit.compare.bootstrap import Resampled, bootstrap_over_units
from recallkit.compare.fits import (DEFAULT_ALPHA, DEFAULT_BOOTSTRAP_SEED, DEFAULT_N_BOOTSTRAP, MIN_DISTINCT_X, X_TRANSFORMS,
                                    BootstrapInfo, ConstantFit, SlopeFit, log_positive, canonical_x, fit_constant,
                                    fit_slope)
from recallkit.compare.schema import with_aliases
from recallkit.compare.verdicts import DEFAULT_DELTA, Verdict, decide, undecidable
from recallkit.empirics.curves import crossing, isotonic_increasing
from recallkit.empirics.records import BoundaryPoint, CheckKey
from recallkit.theory.errors import InputError
from recallkit.theory.sizes import SIZE_SYMBOLS

__all__ = ["CURVE_METHOD", "FitOptions", "as_points", "fit_curve_points", "fit_points", "FitResult"]

PointLike = BoundaryPoint | Mapping[str, Any]  # the search's records, or points written by hand / read from JSON


def _json_float(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_pair(pair: tuple[float, float] | None) -> list[Any] | None:
    if pair is None:
        return None
    return [_json_float(float(pair[0])), _json_float(float(pair[1]))]


@dataclass
class FitResult:
    """One fitted line (experiment x line x threshold) and its verdict; JSON via :meth:`to_dict`."""

    experiment: str
    line: str | None
    threshold: float | None
    x: str
    fit: SlopeFit | None
    verdict: "Any"  # compare.verdicts.Verdict
    points: list[dict[str, Any]] = field(default_factory=list)
    censored: list[dict[str, Any]] = field(default_factory=list)
    constant: ConstantFit | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. threshold_relative, method, other predictions

    @property
    def slope(self) -> float:
        return self.fit.slope if self.fit else math.nan

    @property
    def key(self) -> CheckKey:
        """The check this fit judges (its label is ``str(fit.key)``)."""
        return CheckKey(self.experiment, str(self.line), threshold=self.threshold,
                        relative=bool(self.extra.get("threshold_relative")),
                        metric=self.extra.get("metric") or "accuracy", variable=self.extra.get("variable"))

    def to_dict(self) -> dict[str, Any]:
        fit = self.fit
        verdict = self.verdict
        out: dict[str, Any] = {
            "experiment": self.experiment,
            "line": self.line,
            "threshold": self.threshold,
            "x": self.x,
            "y": "log(param_count)",
            "slope": _json_float(fit.slope) if fit else None,
            "slope_se": _json_float(fit.slope_se) if fit else None,
            "slope_ci": _json_pair(fit.slope_ci) if fit else None,
            "slope_ci_tost": _json_pair(fit.slope_ci_tost) if fit else None,
            "slope_ci_bootstrap": _json_pair(fit.slope_ci_bootstrap) if fit else None,
            "bootstrap": fit.bootstrap.to_dict() if fit else None,
            "intercept": _json_float(fit.intercept) if fit else None,
            "intercept_ci": _json_pair(fit.intercept_ci) if fit else None,
            "confidence_band": fit.confidence_band() if fit else None,
            "r2": _json_float(fit.r2) if fit else None,
            "n_points": len(self.points),
            "n_seeds": fit.n_seeds if fit else len({p.get("seed") for p in self.points}),
            "df_resid": fit.df_resid if fit else None,
            "censored": list(self.censored),
            "points": list(self.points),
        }
        out.update(verdict.to_dict())
        out.update(self.extra)
        if out.get("predicted_slope_asymptotic") is None:  # no other reading was tested: the given slope is it
            out["predicted_slope_asymptotic"] = _json_float(verdict.predicted_slope)
        if self.constant is not None and fit is not None and fit.r2 > 0:
            # In a capacity search d is set and N is measured, so noise sits in x and OLS of y on x is
            # attenuated towards 0. The reverse regression (x on y, inverted: slope / R^2) errs the
            # other way; the two bracket the slope when both have noise. Reported, not used by the verdict.
            out["slope_reverse_regression"] = _json_float(fit.slope / fit.r2)
        if self.constant is not None:
            const = self.constant
            out.update({
                "C": _json_float(const.C),
                "C_ci": _json_pair(const.C_ci),
                "C_ci_bootstrap": _json_pair(const.C_ci_bootstrap),
                "C_fixed_slope": const.fixed_slope,
            })
        else:
            out.update({"C": None, "C_ci": None, "C_ci_bootstrap": None})
        return with_aliases(out)


def _verdict_on(fit: SlopeFit, predicted_slope: float | None, delta: float, alpha: float, log_power: float) -> Verdict:
    if predicted_slope is None:
        return undecidable(None, delta, alpha, "no predicted slope for this line")
    return decide(fit, predicted_slope, delta=delta, alpha=alpha, log_power=log_power)


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """What :func:`fit_points` and :func:`fit_curve_points` share: the check a group of points belongs to
    (``experiment``, ``line``, ``threshold``), the regressor ``x`` (see :data:`X_TRANSFORMS`), the prediction
    and the verdict's test (``predicted_slope`` on x, ``log_power`` of log(base) in it, ``delta``: None for the
    default margin, ``alpha``), the designed variable ``grid_key`` and the bootstrap's size and seed."""

    predicted_slope: float | None
    x: str = "log V"
    experiment: str = ""
    line: str | None = None
    threshold: float | None = None
    delta: float | None = None
    alpha: float = DEFAULT_ALPHA
    log_power: float = 0.0
    grid_key: str | None = None
    n_bootstrap: int = DEFAULT_N_BOOTSTRAP
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED

    @classmethod
    def of(cls, options: "FitOptions | None", settings: Mapping[str, Any]) -> "FitOptions":
        """``options`` with ``settings`` (the fit functions' keyword arguments) applied over it."""
        return cls(**settings) if options is None else dataclasses.replace(options, **settings)

    def empty(self, reason: str, used: list, censored: list) -> FitResult:
        """The inconclusive result of a group too small (or too censored) for a slope with an interval."""
        delta = DEFAULT_DELTA if self.delta is None else self.delta
        return FitResult(self.experiment, self.line, self.threshold, canonical_x(self.x), None,
                         undecidable(self.predicted_slope, delta, self.alpha, reason), used, censored)

    def verdict(self, fit: SlopeFit) -> Verdict:
        delta = DEFAULT_DELTA if self.delta is None else self.delta
        return _verdict_on(fit, self.predicted_slope, delta, self.alpha, self.log_power)


def as_points(points: Sequence[PointLike], base: str | None = None) -> list[BoundaryPoint]:
    """The search's records as they are; a point written by hand or read back from JSON (a dict) as the
    record a fit reads (:meth:`BoundaryPoint.from_dict`, ``base`` its designed variable)."""
    out = []
    for index, point in enumerate(points):
        if isinstance(point, BoundaryPoint):
            out.append(point)
        elif isinstance(point, Mapping):
            out.append(BoundaryPoint.from_dict(point, base))
        else:
            raise InputError(f"boundary point [{index}]: expected a boundary point or a dict, got "
                             f"{type(point).__name__}")
    return out


def _censored_entry(point: BoundaryPoint, symbols: Sequence[str], relative: bool = False) -> dict[str, Any]:
    """What a fit lists of a censored point: where it is and the bound that was hit, with the reason."""
    entry: dict[str, Any] = {"line": point.line, "threshold": point.threshold}
    if relative:
        entry["threshold_relative"] = point.relative
    entry["seed"] = point.seed_label
    entry.update((k, point.values[k]) for k in symbols if k in point.values)
    entry["param_count"] = point.param_count
    entry["censor_reason"] = point.censor_reason
    return entry


def _measured(original: PointLike, coordinates: Mapping[str, Any]) -> bool:
    """The point is the search's record (read from the results store, not written by hand) and a coordinate is
    null: the store holds a run's value that was NaN or an infinity as null (with its reason), so the point is no
    finite measurement and is left out. A point written by hand without the numbers a fit needs still raises."""
    return isinstance(original, BoundaryPoint) and any(value is None for value in coordinates.values())


def _unplaced_entry(point: BoundaryPoint, symbols: Sequence[str], why: InputError,
                    relative: bool = False) -> dict[str, Any]:
    """A point the search did not censor whose x or y cannot be computed because a value it needs is null (a run's
    parameter count stored as null because it was NaN or an infinity): listed with the censored points, with the
    reason, and left out of the fit."""
    entry = _censored_entry(point, symbols, relative)
    entry["censor_reason"] = f"left out of the fit: {str(why).removeprefix('boundary point: ')}"
    return entry


def fit_points(points: Sequence[PointLike], options: FitOptions | None = None, *, capacity: bool = False,
               y_key: str = "param_count", **settings: Any) -> FitResult:
    """Fit one group of boundary points (docs/ARCHITECTURE.md) and decide its verdict.

    ``options`` (or the same names as keyword arguments, e.g. ``predicted_slope=1.0, x="log V"``; see
    :class:`FitOptions`) say which check this is, the regressor and the test. Censored points are excluded
    from the fit and listed. y is log of ``y_key``. ``capacity=True`` also fits C in params = C * f with
    f = exp(x) and slope fixed at 1. A non-zero ``log_power`` makes the verdict compare against the
    finite-range slope. ``grid_key`` names the designed variable (V for min-size searches, d for capacity
    searches): at least 3 distinct values of it must survive censoring, because in a capacity search x varies
    across seeds even at one d, and a "slope" through one d would be noise.
    Too little data gives an ``inconclusive`` result with the reason instead of an exception.
    """
    options = FitOptions.of(options, settings)
    x_name, grid_key = canonical_x(options.x), options.grid_key
    transform = X_TRANSFORMS[x_name]
    used: list[dict[str, Any]] = []
    censored: list[dict[str, Any]] = []
    grid_values: list[Any] = []
    points = list(points)
    for original, point in zip(points, as_points(points, grid_key)):
        coordinates = point.coordinates
        if point.censored:
            entry = _censored_entry(point, SIZE_SYMBOLS)
            try:  # where the bound that was hit is known, place it in the fit's coordinates too
                entry["x"], entry["y"] = transform(coordinates), log_positive(coordinates, y_key)
            except InputError:
                pass
            censored.append(entry)
            continue
        try:
            x, y = transform(coordinates), log_positive(coordinates, y_key)
        except InputError as exc:
            if not _measured(original, coordinates):
                raise
            censored.append(_unplaced_entry(point, SIZE_SYMBOLS, exc))
            continue
        used.append({"x": x, "y": y, "seed": point.seed_label})
        grid_values.append(coordinates.get(grid_key) if grid_key else used[-1]["x"])

    def _empty(reason: str) -> FitResult:
        return options.empty(reason, used, censored)

    distinct = min(len({p["x"] for p in used}), len(set(grid_values)))
    if distinct < MIN_DISTINCT_X:
        what = f"{grid_key} value(s)" if grid_key else "x value(s)"
        why = (f"only {distinct} distinct {what} among {len(used)} uncensored points "
               f"({len(censored)} censored); a slope with an interval needs >= {MIN_DISTINCT_X}")
        reasons = sorted({str(c.get("censor_reason")) for c in censored if c.get("censor_reason")})
        if any("not in the results store" in r for r in reasons):
            advice = "; runs are missing from the store: run the sweep (recallkit sweep, or fit with --run)"
        elif censored:
            advice = "; widen the searched size range so fewer points are censored, or add grid values"
        else:
            advice = "; add grid values"
        if reasons:
            advice += f" (censor reasons: {'; '.join(reasons[:2])}{'; ...' if len(reasons) > 2 else ''})"
        return _empty(why + advice)
    seeds = [p["seed"] for p in used]
    alpha, n_bootstrap, bootstrap_seed = options.alpha, options.n_bootstrap, options.bootstrap_seed
    fit = fit_slope([p["x"] for p in used], [p["y"] for p in used], seeds,
                    alpha=alpha, n_bootstrap=n_bootstrap, bootstrap_seed=bootstrap_seed)
    constant = None
    if capacity:
        constant = fit_constant([p["x"] for p in used], [p["y"] for p in used], seeds, fixed_slope=1.0,
                                alpha=alpha, n_bootstrap=n_bootstrap, bootstrap_seed=bootstrap_seed)
    return FitResult(options.experiment, options.line, options.threshold, x_name, fit, options.verdict(fit), used,
                     censored, constant)


def _curve_log_counts(points: Sequence[BoundaryPoint], picks: Sequence[int] | None) -> list[float] | None:
    """log parameter count at the boundary of every point's curve, averaging the seeds at ``picks``
    (indices into the curve's seeds, repeats allowed; None: all seeds); None if any curve fails to cross."""
    out = []
    for point in points:
        curve = point.curve
        rows = curve["metric"] if picks is None else [curve["metric"][i] for i in picks]
        means = [sum(col) / len(rows) for col in zip(*rows)]
        target = point.threshold_value
        if point.relative:
            per_seed = point.ceiling["per_seed"]
            chosen = per_seed if picks is None else [per_seed[i] for i in picks]
            if any(v is None for v in chosen):
                return None
            target = float(point.threshold) * sum(chosen) / len(chosen)
        found = crossing(curve["sizes"], isotonic_increasing(means), target, curve["param_counts"])
        if found.status != "ok":
            return None
        out.append(math.log(found.param_count))
    return out


CURVE_METHOD = ("boundary from the seed-mean accuracy curve (isotonic in log size, crossing interpolated in log size "
                "and log parameter count); slope by OLS of log(parameter count) on log(base) over those boundaries; "
                "its standard error from a bootstrap that resamples whole seeds (every curve of a resample uses the "
                "same seeds, relative thresholds the same seeds' ceiling), t quantiles with n_seeds - 1 df")


def _split_curve_points(points: Sequence[PointLike], grid_key: str | None, transform: Any) -> tuple[list, list, list]:
    """(used: x and y of each boundary, censored: what the report lists, kept: the uncensored points, as records)."""
    used, censored, kept = [], [], []
    points = list(points)
    for original, point in zip(points, as_points(points, grid_key)):
        if point.censored:
            censored.append(_censored_entry(point, SIZE_SYMBOLS, relative=True))
            continue
        coordinates = point.coordinates
        try:
            x, y = transform(coordinates), log_positive(coordinates, "param_count")
        except InputError as exc:
            if not _measured(original, coordinates):
                raise
            censored.append(_unplaced_entry(point, SIZE_SYMBOLS, exc, relative=True))
            continue
        used.append({"x": x, "y": y, "seed": "mean"})
        kept.append(point)
    return used, censored, kept


def _too_little_for_a_curve_fit(used: list, censored: list, n_seeds: int) -> str | None:
    """Why these boundaries cannot give a slope with an interval (None: they can)."""
    if len({p["x"] for p in used}) < MIN_DISTINCT_X:
        reasons = sorted({str(c.get("censor_reason")) for c in censored if c.get("censor_reason")})
        return (f"only {len(used)} base values have a boundary ({len(censored)} censored); a slope with an "
                f"interval needs >= {MIN_DISTINCT_X}" + (f" (censor reasons: {'; '.join(reasons[:2])})" if reasons else ""))
    if n_seeds < 2:
        return "a curve fit takes its interval from resampling seeds; it needs >= 2 seeds"
    return None


def _seed_curve_bootstrap(kept: Sequence[BoundaryPoint], xs: np.ndarray, n_seeds: int, n_bootstrap: int,
                          bootstrap_seed: int) -> Resampled:
    """(slope, intercept) of the OLS line through the boundaries of every seed resample whose curves all cross."""
    centred = xs - xs.mean()
    sxx = float((centred ** 2).sum())

    def refit(picks: np.ndarray) -> tuple[float, float] | None:
        logs = _curve_log_counts(kept, picks)
        if logs is None:
            return None
        y = np.asarray(logs)
        slope = float((centred * (y - y.mean())).sum() / sxx)
        return slope, float(y.mean() - slope * xs.mean())

    # A resample's boundaries depend only on which seeds it holds, not on their order.
    return bootstrap_over_units(n_seeds, n_bootstrap, bootstrap_seed, refit, each_multiset_once=True)


def _seed_curve_fit(base_fit: SlopeFit, resampled: Resampled, n_seeds: int, alpha: float, n_bootstrap: int,
                    bootstrap_seed: int) -> SlopeFit:
    """The OLS line through the seed-mean boundaries with the seed bootstrap's standard error, t at n_seeds - 1 df."""
    slopes = [f[0] for f in resampled.values]
    intercepts = [f[1] for f in resampled.values]
    boot = np.asarray(slopes)
    se = float(boot.std(ddof=1))
    df = n_seeds - 1
    t_two, t_one = stats.t.ppf(1 - alpha / 2, df), stats.t.ppf(1 - alpha, df)
    cov = np.cov(np.vstack([intercepts, slopes]))
    lo_b, hi_b = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return SlopeFit(
        slope=base_fit.slope, slope_se=se,
        slope_ci=(base_fit.slope - t_two * se, base_fit.slope + t_two * se),
        slope_ci_tost=(base_fit.slope - t_one * se, base_fit.slope + t_one * se),
        slope_ci_bootstrap=(float(lo_b), float(hi_b)), intercept=base_fit.intercept,
        intercept_ci=tuple(float(v) for v in np.quantile(intercepts, [alpha / 2, 1 - alpha / 2])),
        r2=base_fit.r2, n_points=base_fit.n_points, n_seeds=n_seeds, df_resid=df,
        residual_ss=base_fit.residual_ss, total_ss=base_fit.total_ss, x_range=base_fit.x_range, alpha=alpha,
        bootstrap=BootstrapInfo("seed curve", n_bootstrap, resampled.n_degenerate, bootstrap_seed, n_seeds),
        covariance=tuple(tuple(float(v) for v in row) for row in cov),
    )


def fit_curve_points(points: Sequence[PointLike], options: FitOptions | None = None, **settings: Any) -> FitResult:
    """Fit the boundary points of a curve search (``empirics.search``, ``search.method = "curve"``): one point
    per base value, each carrying its per-seed curve. ``options`` (or the same names as keyword arguments) as
    for :func:`fit_points`. The verdict rests on the seed bootstrap's standard error (see
    :data:`CURVE_METHOD`); the slope itself is the OLS slope through the seed-mean boundaries."""
    options = FitOptions.of(options, settings)
    x_name = canonical_x(options.x)
    n_bootstrap, bootstrap_seed = options.n_bootstrap, options.bootstrap_seed
    used, censored, kept = _split_curve_points(points, options.grid_key, X_TRANSFORMS[x_name])
    n_seeds = len(kept[0].curve["seeds"]) if kept else 0

    def _empty(reason: str) -> FitResult:
        result = options.empty(reason, used, censored)
        if n_seeds:  # the seeds of the mean curves (the points' "seed" is "mean": counting those gave 1)
            result.extra["n_seeds"] = n_seeds
        return result

    problem = _too_little_for_a_curve_fit(used, censored, n_seeds)
    if problem is not None:
        return _empty(problem)
    xs = np.asarray([p["x"] for p in used])
    ys = np.asarray([p["y"] for p in used])
    # Only its line is used: the interval comes from resampling whole seed curves, below.
    base_fit = fit_slope(xs, ys, None, alpha=options.alpha, n_bootstrap=1, bootstrap_seed=bootstrap_seed)
    resampled = _seed_curve_bootstrap(kept, xs, n_seeds, n_bootstrap, bootstrap_seed)
    if len(resampled.values) < max(20, n_bootstrap // 4):
        return _empty(f"in {resampled.n_degenerate} of {n_bootstrap} seed resamples some curve did not cross the "
                      f"threshold; too few usable resamples for an interval (widen the searched sizes or add seeds)")
    fit = _seed_curve_fit(base_fit, resampled, n_seeds, options.alpha, n_bootstrap, bootstrap_seed)
    return FitResult(options.experiment, options.line, options.threshold, x_name, fit, options.verdict(fit), used,
                     censored)

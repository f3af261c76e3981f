"""Comparative claims: is one fitted line steeper (or higher) than another?

A claim names two fitted lines, side A and side B (of one experiment, or of two), and a relation:

* ``slope <`` / ``slope >``: slope(A) < slope(B) / slope(A) > slope(B), the slopes of log(parameter count)
  on the fits' x (log of the base);
* ``level <`` / ``level >``: the same for the *level*, the fitted log parameter count at matched base values:
  each line evaluated at x0, the middle of the common range of x of both fits (intercept + slope * x0), with its
  standard error from that fit's covariance of intercept and slope.

The test is one-sided on the difference D = stat(A) - stat(B) with standard error se = sqrt(se_A^2 + se_B^2)
(the two fits are treated as independent; lines trained with the same seeds may be correlated: a positive
correlation makes this se too large and the test conservative, a negative one would make it too liberal). Each side's standard error is
the one its fit's verdict uses: HC3 for an OLS fit; for a curve fit (``method = "curve"``), which has only
its seed-curve bootstrap, the slope's se is derived from that interval (half-width / t quantile at
n_seeds - 1 df) and the level's from the bootstrap covariance of intercept and slope; for a fit whose only
interval is a percentile bootstrap, its half-width / t. The statistic D / se is referred to Student's t with
Welch-Satterthwaite degrees of freedom df = se^4 / (se_A^4 / df_A + se_B^4 / df_B) (``scipy.stats.t``).

Verdicts at level alpha (mutually exclusive, since alpha < 0.5):

* ``consistent``: the claimed ordering is significant: the one-sided (1 - alpha) interval of D in the claim's
  direction excludes 0 (for "<": D + t_{1-alpha} se < 0), i.e. p < alpha;
* ``inconsistent``: the opposite ordering is significant at alpha;
* ``inconclusive``: neither; the reason says about how many times as many points (seeds, base values) would
  bring the interval's margin below |D| (se ~ 1/sqrt(n), t quantile recomputed at the larger df).

A claim whose line (or threshold, or other experiment) is not run in the preset gets the verdict ``not run``
and a reason that says so: it is listed, not counted as a check. A side that was run but has no fit (too few
uncensored points) makes the claim ``inconclusive`` with that side's reason.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
from scipy import stats

from recallkit.compare.evidence import weakest
from recallkit.compare.assertions import fit_experiment
from recallkit.compare.fits import DEFAULT_ALPHA
from recallkit.compare.results import FitResult
from recallkit.empirics.experiment import claim_from_dict
from recallkit.empirics.records import threshold_text
from recallkit.theory.errors import InputError, RecallkitError

RELATIONS = ("slope <", "slope >", "level <", "level >")
CLAIM_VERDICTS = ("consistent", "inconsistent", "inconclusive", "not run")
NOT_RUN = "not run"

__all__ = ["ClaimResult", "ClaimSideResult", "RELATIONS", "compare_fits", "judge_claims", "describe_claim",
           "check_claims", "other_experiment_fits"]


def _num(value: Any) -> Any:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def _threshold_text(threshold: float | None, relative: bool) -> str:
    return threshold_text(threshold, relative) if threshold is not None else "every threshold"


@dataclass
class ClaimSideResult:
    """One side as judged: which fitted line, its value (slope or level), standard error and df."""

    experiment: str
    line: str
    threshold: float | None
    relative: bool = False
    value: float | None = None
    se: float | None = None
    df: float | None = None
    se_source: str | None = None  # how the se was made (HC3, seed-curve bootstrap interval, ...)
    x_range: tuple[float, float] | None = None
    n_points: int | None = None
    n_seeds: int | None = None
    fitted_from: str | None = None  # "this report" / "stored runs" for a side in another experiment
    note: str | None = None  # why there is no value

    def label(self) -> str:
        return f"{self.line!r} ({self.experiment}, threshold {_threshold_text(self.threshold, self.relative)})"

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "line": self.line, "threshold": self.threshold,
                "threshold_relative": self.relative, "value": _num(self.value), "se": _num(self.se),
                "df": _num(self.df), "se_source": self.se_source,
                "x_range": [_num(v) for v in self.x_range] if self.x_range else None,
                "n_points": self.n_points, "n_seeds": self.n_seeds, "fitted_from": self.fitted_from,
                "note": self.note}


@dataclass
class ClaimResult:
    """A judged comparative claim; JSON via :meth:`to_dict`."""

    id: str
    text: str
    relation: str
    a: ClaimSideResult
    b: ClaimSideResult
    alpha: float
    verdict: str
    reason: str
    provenance: str = ""
    experiment: str = ""  # the experiment that declares the claim
    difference: float | None = None  # stat(A) - stat(B)
    se: float | None = None
    df: float | None = None
    interval: tuple[float, float] | None = None  # one-sided (1 - alpha), in the claim's direction (+-inf open)
    p: float | None = None  # one-sided p of the claim (H0: the claimed ordering does not hold)
    p_opposite: float | None = None
    matched_x: float | None = None  # level claims: x0 (log base) where both lines are evaluated
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def statistic(self) -> str:
        return self.relation.split()[0]

    @property
    def threshold(self) -> float | None:
        return self.a.threshold

    def to_dict(self) -> dict[str, Any]:
        interval = None
        if self.interval is not None:  # JSON has no infinity: the open end is null
            interval = [_num(self.interval[0]), _num(self.interval[1])]
        out = {
            "id": self.id, "text": self.text, "experiment": self.experiment, "relation": self.relation,
            "statistic": self.statistic, "claim": f"{self.statistic}(A) {self.relation.split()[1]} {self.statistic}(B)",
            "a": self.a.to_dict(), "b": self.b.to_dict(), "threshold": self.a.threshold,
            "threshold_relative": self.a.relative, "alpha": self.alpha,
            "difference": _num(self.difference), "se": _num(self.se), "df": _num(self.df),
            "interval": interval, "interval_level": 1 - self.alpha, "p": _num(self.p), "p_opposite": _num(self.p_opposite),
            "matched_x": _num(self.matched_x),
            "matched_base": _num(math.exp(self.matched_x)) if self.matched_x is not None else None,
            "verdict": self.verdict, "reason": self.reason, "provenance": self.provenance,
        }
        out.update(self.extra)
        return out


# ----------------------------------------------------------------------------- one side
def _side_numbers(result: FitResult, statistic: str, x0: float | None) -> tuple[float, float, float, str]:
    """(value, se, df, how the se was made) of one fitted line's slope, or of its level at ``x0``."""
    fit = result.fit
    curve = result.extra.get("method") == "curve" or fit.bootstrap.unit == "seed curve"
    df = float(fit.df_resid)
    cov = np.asarray(fit.covariance, dtype=float)
    if statistic == "slope":
        if curve:
            lo, hi = fit.slope_ci
            se = (hi - lo) / (2 * stats.t.ppf(1 - fit.alpha / 2, df))
            return fit.slope, se, df, (f"seed-curve bootstrap: se from its {100 * (1 - fit.alpha):g}% interval "
                                       f"(half-width / t at {df:g} df)")
        if math.isfinite(fit.slope_se):
            return fit.slope, fit.slope_se, df, "HC3"
        lo, hi = fit.slope_ci_bootstrap
        se = (hi - lo) / (2 * stats.t.ppf(1 - fit.alpha / 2, df))
        return fit.slope, se, df, "bootstrap: se from its percentile interval (half-width / t)"
    value = fit.intercept + fit.slope * x0
    design = np.array([1.0, x0])
    var = float(design @ cov @ design) if np.all(np.isfinite(cov)) else math.nan
    how = ("seed-curve bootstrap: se from the covariance of the resampled intercepts and slopes" if curve
           else "HC3 covariance of intercept and slope")
    return value, math.sqrt(var) if var >= 0 else math.nan, df, how


def _exact(result: FitResult) -> bool:
    fit = result.fit
    return fit.residual_ss <= 1e-20 * max(fit.total_ss, 1e-300) and fit.bootstrap.unit != "seed curve"


def _margin_factor(difference: float, se: float, df: float, alpha: float) -> str:
    """About how many times as many points bring t_{1-alpha}(df k) * se / sqrt(k) below |difference|."""
    for factor in [1 + k / 10 for k in range(1, 100)] + list(range(11, 1001)):
        if stats.t.ppf(1 - alpha, df * factor) * se / math.sqrt(factor) < abs(difference):
            return f"about {factor:g}x"
    return "more than 1000x"


def _checked_relation(relation: str, alpha: Any) -> tuple[str, str, str]:
    """(relation as in RELATIONS, statistic, operator); InputError on an unknown relation or a bad level."""
    normal = " ".join(str(relation).replace("<", " < ").replace(">", " > ").split())
    if normal not in RELATIONS:
        raise InputError(f"relation: expected one of {', '.join(map(repr, RELATIONS))}, got {relation!r}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 0.5):
        raise InputError(f"alpha: expected a number in (0, 0.5) for a one-sided test, got {alpha!r}")
    statistic, op = normal.split()
    return normal, statistic, op


def _side(result: FitResult | None, given: ClaimSideResult | None) -> ClaimSideResult:
    """The side as described (``given``) or as its fit names it, with the fit's size and range."""
    if given is not None:
        out = given
    elif result is not None:
        out = ClaimSideResult(result.experiment, str(result.line), result.threshold,
                              bool(result.extra.get("threshold_relative")))
    else:
        raise InputError("compare_fits: a side has neither a fit nor a description")
    if result is not None:
        out.n_points = len(result.points)
        if result.fit is not None:
            out.n_seeds, out.x_range = result.fit.n_seeds, result.fit.x_range
    return out


def _not_comparable(a: FitResult | None, b: FitResult | None, sa: ClaimSideResult, sb: ClaimSideResult,
                    statistic: str) -> str | None:
    """Why the two sides cannot be compared at all (None: they can)."""
    for name, res, s in (("a", a, sa), ("b", b, sb)):
        if res is None or res.fit is None:
            why = s.note or (res.verdict.reason if res is not None else "no fit")
            return f"side {name.upper()} {s.label()} has no fit: {why}"
    if a.x != b.x:
        return f"the sides are fitted on different x ({a.x} and {b.x}); a {statistic} comparison needs the same regressor"
    if statistic == "level" and _matched_x(a, b) is None:
        return (f"the fitted ranges of x do not overlap ({_fmt(a.fit.x_range[0])}..{_fmt(a.fit.x_range[1])} and "
                f"{_fmt(b.fit.x_range[0])}..{_fmt(b.fit.x_range[1])}); levels at matched base values need a common range")
    return None


def _matched_x(a: FitResult, b: FitResult) -> float | None:
    """The middle of the common fitted range of x, where levels are compared (None: the ranges do not overlap)."""
    lo = max(a.fit.x_range[0], b.fit.x_range[0])
    hi = min(a.fit.x_range[1], b.fit.x_range[1])
    return None if lo > hi else (lo + hi) / 2


def _welch_test(sa: ClaimSideResult, sb: ClaimSideResult, op: str, alpha: float) -> dict[str, Any]:
    """The one-sided Welch t test of D = A - B in the claim's direction and the opposite one (se > 0)."""
    difference = sa.value - sb.value
    var = sa.se ** 2 + sb.se ** 2
    se = math.sqrt(var)
    df = var ** 2 / (sa.se ** 4 / sa.df + sb.se ** 4 / sb.df)
    t_stat = difference / se
    q = stats.t.ppf(1 - alpha, df)
    if op == "<":
        p, p_opposite = float(stats.t.cdf(t_stat, df)), float(stats.t.sf(t_stat, df))
        interval = (-math.inf, difference + q * se)
        opposite = (difference - q * se, math.inf)
    else:
        p, p_opposite = float(stats.t.sf(t_stat, df)), float(stats.t.cdf(t_stat, df))
        interval = (difference - q * se, math.inf)
        opposite = (-math.inf, difference + q * se)
    return dict(difference=difference, se=se, df=df, q=q, interval=interval, opposite=opposite, p=p,
                p_opposite=p_opposite)


def _shown(pair: tuple[float, float]) -> str:
    left = "(-inf" if math.isinf(pair[0]) else f"[{_fmt(pair[0])}"
    right = "inf)" if math.isinf(pair[1]) else f"{_fmt(pair[1])}]"
    return f"{left}, {right}"


def _verdict_of_test(test: Mapping[str, Any], sa: ClaimSideResult, sb: ClaimSideResult, statistic: str, op: str,
                     alpha: float, x_name: str, x0: float | None) -> tuple[str, str]:
    """(verdict, reason) from the Welch test: the claimed ordering significant, the opposite one, or neither."""
    difference, se, df, p, p_opposite = (test[k] for k in ("difference", "se", "df", "p", "p_opposite"))
    claim_text = f"{statistic}(A) {op} {statistic}(B)"
    level = f"{100 * (1 - alpha):g}%"
    where = (f" at matched {x_name.removeprefix('log ')} = {math.exp(x0):.4g} (x = {_fmt(x0)}, the middle of the "
             f"common fitted range)") if x0 is not None else ""
    sources = sa.se_source if sa.se_source == sb.se_source else f"A: {sa.se_source}; B: {sb.se_source}"
    errors = f"se {_fmt(se)} = sqrt({_fmt(sa.se)}^2 + {_fmt(sb.se)}^2) ({sources}), Welch df {df:.3g}"
    estimate = f"{statistic}(A) - {statistic}(B) = {_fmt(difference)}{where}"
    if p < alpha:
        return "consistent", (f"{claim_text} is significant: {estimate}, its one-sided {level} interval "
                              f"{_shown(test['interval'])} excludes 0, p = {p:.3g} < alpha = {alpha:g}; {errors}")
    if p_opposite < alpha:
        flipped = f"{statistic}(A) {({'<': '>', '>': '<'}[op])} {statistic}(B)"
        return "inconsistent", (f"the opposite ordering {flipped} is significant: {estimate}, its one-sided "
                                f"{level} interval {_shown(test['opposite'])} excludes 0, p = {p_opposite:.3g} < alpha "
                                f"= {alpha:g} (p of the claim {p:.3g}); {errors}")
    body = (f"neither ordering is significant: {estimate}, the one-sided {level} interval {_shown(test['interval'])} "
            f"of {claim_text} includes 0 (p = {p:.3g}, alpha = {alpha:g}); {errors}")
    return "inconclusive", body + _more_data_advice(difference, se, df, test["q"] * se, op, alpha)


def _more_data_advice(difference: float, se: float, df: float, margin: float, op: str, alpha: float) -> str:
    """What more data would do for an inconclusive claim at this estimate."""
    claimed_way = difference < 0 if op == "<" else difference > 0
    if difference == 0:
        return "; the estimate is exactly 0, so no amount of data at this estimate would settle it"
    if claimed_way:
        return (f"; the estimate points the claimed way: to exclude 0 the interval's margin must shrink from "
                f"{_fmt(margin)} to below {_fmt(abs(difference))}: {_margin_factor(difference, se, df, alpha)} as many "
                f"points on both lines (more seeds or base values; se ~ 1/sqrt(n))")
    return (f"; the estimate points the opposite way, so more data would more likely end 'inconsistent' "
            f"({_margin_factor(difference, se, df, alpha)} as many points on both lines would settle it at this "
            f"estimate; se ~ 1/sqrt(n))")


def _claim_evidence(a: FitResult | None, b: FitResult | None) -> dict[str, Any]:
    """A claim is as strong as the weaker check it compares (``compare.evidence``): its label, and each side's."""
    labels = [None if f is None else f.extra.get("evidence") for f in (a, b)]
    shown = ", ".join(f"{side} {label or 'none'}" for side, label in zip("AB", labels))
    return {"evidence": weakest(labels), "evidence_reason": f"the weaker of the checks it compares ({shown})"}


def compare_fits(
    a: FitResult | None,
    b: FitResult | None,
    relation: str,
    *,
    alpha: float = DEFAULT_ALPHA,
    claim_id: str = "",
    text: str = "",
    provenance: str = "",
    experiment: str = "",
    side_a: ClaimSideResult | None = None,
    side_b: ClaimSideResult | None = None,
) -> ClaimResult:
    """Judge ``stat(a) <relation> stat(b)`` from two fitted lines (see the module docstring).

    ``side_a`` / ``side_b`` describe the sides when a fit is missing (their ``note`` says why); a missing fit or
    one without an error estimate gives ``inconclusive`` with the reason, never an exception."""
    normal, statistic, op = _checked_relation(relation, alpha)
    sa, sb = _side(a, side_a), _side(b, side_b)

    def result(verdict: str, reason: str, **numbers: Any) -> ClaimResult:
        return ClaimResult(claim_id, text, normal, sa, sb, float(alpha), verdict, reason, provenance, experiment,
                           **numbers, extra=_claim_evidence(a, b))

    why_not = _not_comparable(a, b, sa, sb, statistic)
    if why_not is not None:
        return result("inconclusive", why_not)
    x0 = _matched_x(a, b) if statistic == "level" else None
    for s, res in ((sa, a), (sb, b)):
        s.value, s.se, s.df, s.se_source = _side_numbers(res, statistic, x0)
    exact = [name for name, res in (("A", a), ("B", b)) if _exact(res)]
    if exact or not all(math.isfinite(s.se) and s.se >= 0 for s in (sa, sb)):
        what = (f"side {' and '.join(exact)} lies on one exact line (zero residuals)" if exact
                else "a side has no finite standard error")
        return result("inconclusive", f"{what}, so there is no error estimate; add seeds or grid points",
                      difference=sa.value - sb.value, matched_x=x0)
    if math.sqrt(sa.se ** 2 + sb.se ** 2) == 0:
        return result("inconclusive", "both standard errors are zero; no error estimate",
                      difference=sa.value - sb.value, matched_x=x0)
    test = _welch_test(sa, sb, op, alpha)
    verdict, reason = _verdict_of_test(test, sa, sb, statistic, op, alpha, a.x, x0)
    return result(verdict, reason, difference=test["difference"], se=test["se"], df=test["df"],
                  interval=test["interval"], p=test["p"], p_opposite=test["p_opposite"], matched_x=x0)


# ----------------------------------------------------------------------------- claims of an experiment
def _fields(claim: Any) -> Any:
    """An ``empirics.experiment.Claim``, or a mapping in the ``[[claims]]`` shape validated into one."""
    if hasattr(claim, "relation") and hasattr(claim, "a"):
        return claim
    if isinstance(claim, Mapping):
        return claim_from_dict(dict(claim), f"claim {claim.get('id', '?')!r}")
    raise InputError(f"claims: expected Claim objects or [[claims]] tables, got {type(claim).__name__}")


def _fits_of(source: Any) -> tuple[list[FitResult] | None, str | None, str | None, dict]:
    """(fits, preset, reason when unavailable, sweep summary) of an ExperimentFits, a list of fits or a reason."""
    if isinstance(source, str):
        return None, None, source, {}
    if hasattr(source, "fits"):
        return list(source.fits), getattr(source, "preset", None), None, dict(getattr(source, "sweep", {}) or {})
    return list(source), None, None, {}


def _same_threshold(fit: FitResult, threshold: float | None, relative: bool) -> bool:
    return (fit.threshold is not None and threshold is not None and abs(float(fit.threshold) - threshold) < 1e-9
            and bool(fit.extra.get("threshold_relative")) == relative)


class _SideSource(NamedTuple):
    """Where one side of a claim takes its fits from."""

    experiment: str
    fits: list[FitResult] | None  # None: that experiment has no fits here (``why`` says why)
    why: str | None
    fitted_from: str | None  # for a side in another experiment: "this report" / "stored runs"
    sweep: dict


def _side_source(side: Any, name: str, own_fits: list[FitResult] | None, others: Mapping[str, Any]) -> _SideSource:
    if side.experiment in (None, name):
        return _SideSource(name, own_fits, None, None, {})
    if side.experiment not in others:
        return _SideSource(side.experiment, None, (f"experiment {side.experiment} is not fitted here (pass its fits "
                                                   f"in other_fits)"), None, {})
    found, _, why, sweep = _fits_of(others[side.experiment])
    return _SideSource(side.experiment, found, why, getattr(others[side.experiment], "fitted_from", None), sweep)


def _not_run(side: Any, source: _SideSource, threshold: float | None, relative: bool, name: str,
             preset: str | None) -> str | None:
    """Why this side is not run in the preset (None: it is)."""
    where = f" ({preset})" if preset else ""
    exp = source.experiment
    if source.fits is None:
        return f"{source.why}"
    if exp != name and source.sweep.get("stored_runs") == 0:
        return (f"experiment {exp} has no stored runs for this preset{where}; run it (recallkit sweep {exp}) "
                f"or add it to the report")
    mine = [f for f in source.fits if f.line == side.line]
    if not mine:
        return f"line {side.line!r} of {exp} is not among the lines of this preset{where}"
    if threshold is not None and not any(_same_threshold(f, threshold, relative) for f in mine):
        return (f"threshold {_threshold_text(threshold, relative)} of line {side.line!r} ({exp}) is not "
                f"among the thresholds of this preset{where}")
    return None


def _threshold_pairs(claim: Any, fits_a: list[FitResult] | None,
                     fits_b: list[FitResult] | None) -> list[tuple[tuple[Any, bool], tuple[Any, bool]]]:
    """The (threshold, relative) of each side to judge at: as stated, the other side's, or every one both share."""
    ta, tb = (claim.a.threshold, claim.a.relative), (claim.b.threshold, claim.b.relative)
    if ta[0] is None and tb[0] is not None:
        ta = tb
    if tb[0] is None and ta[0] is not None:
        tb = ta
    if ta[0] is None and fits_a is not None and fits_b is not None:
        keys_a = [(float(f.threshold), bool(f.extra.get("threshold_relative"))) for f in fits_a
                  if f.line == claim.a.line and f.threshold is not None]
        keys_b = {(float(f.threshold), bool(f.extra.get("threshold_relative"))) for f in fits_b
                  if f.line == claim.b.line and f.threshold is not None}
        common_keys = [k for k in dict.fromkeys(keys_a) if k in keys_b]
        if common_keys:
            return [(k, k) for k in common_keys]
    return [(ta, tb)]


def _judge_at(claim: Any, level: float, thresholds: tuple[tuple[Any, bool], tuple[Any, bool]],
              sources: tuple[_SideSource, _SideSource], name: str, preset: str | None) -> ClaimResult:
    """One claim judged at one threshold of each side ("not run" where a side is not in the preset)."""
    sides = [ClaimSideResult(source.experiment, side.line, thr, rel, fitted_from=source.fitted_from,
                             note=_not_run(side, source, thr, rel, name, preset))
             for side, source, (thr, rel) in zip((claim.a, claim.b), sources, thresholds)]
    side_a, side_b = sides
    reasons = [f"side {label}: {s.note}" for label, s in (("A", side_a), ("B", side_b)) if s.note]
    if reasons:
        return ClaimResult(claim.id, claim.text, claim.relation, side_a, side_b, float(level), NOT_RUN,
                           "not run in this preset: " + "; ".join(reasons), claim.provenance, name)
    (thr_a, rel_a), (thr_b, rel_b) = thresholds
    if thr_a is None:  # no threshold: the lines' checks without one (a law's metric against its base), if both have
        fit_a, fit_b = (next((f for f in source.fits if f.line == side.line and f.threshold is None), None)
                        for side, source in zip((claim.a, claim.b), sources))
        if fit_a is None or fit_b is None:  # both sides run, but no threshold in common
            return ClaimResult(claim.id, claim.text, claim.relation, side_a, side_b, float(level), NOT_RUN,
                               "not run in this preset: the two lines share no threshold "
                               f"in this preset{f' ({preset})' if preset else ''}", claim.provenance, name)
    else:
        fit_a = next(f for f in sources[0].fits if f.line == claim.a.line and _same_threshold(f, thr_a, rel_a))
        fit_b = next(f for f in sources[1].fits if f.line == claim.b.line and _same_threshold(f, thr_b, rel_b))
    side_a.note = None if fit_a.fit is not None else fit_a.verdict.reason
    side_b.note = None if fit_b.fit is not None else fit_b.verdict.reason
    return compare_fits(fit_a, fit_b, claim.relation, alpha=level, side_a=side_a, side_b=side_b, claim_id=claim.id,
                        text=claim.text, provenance=claim.provenance, experiment=name)


def judge_claims(
    fits: Any,
    claims: Iterable[Any],
    *,
    experiment: str | None = None,
    preset: str | None = None,
    other_fits: Mapping[str, Any] | None = None,
    alpha: float | None = None,
) -> list[ClaimResult]:
    """Judge the claims of one experiment from its fits.

    ``fits``: its :class:`compare.assertions.ExperimentFits` (or a list of :class:`FitResult`). ``claims``:
    ``empirics.experiment.Claim`` objects (``Experiment.claims``) or ``[[claims]]``-shaped dicts.
    ``other_fits``: experiment name -> ExperimentFits, list of fits, or a string saying why that experiment
    has no fits here (for sides in another experiment). ``alpha``: level for claims that state none
    (default :data:`compare.fits.DEFAULT_ALPHA`). A claim that states no threshold on either side is judged
    at every threshold both sides share (one result each)."""
    own_fits, own_preset, _, _ = _fits_of(fits)
    name = experiment or getattr(fits, "experiment", None) or (own_fits[0].experiment if own_fits else "")
    preset = preset or own_preset
    others = dict(other_fits or {})
    results: list[ClaimResult] = []
    for raw in claims:
        claim = _fields(raw)
        level = claim.alpha if claim.alpha is not None else (alpha if alpha is not None else DEFAULT_ALPHA)
        sources = (_side_source(claim.a, name, own_fits, others), _side_source(claim.b, name, own_fits, others))
        for thresholds in _threshold_pairs(claim, sources[0].fits, sources[1].fits):
            results.append(_judge_at(claim, level, thresholds, sources, name, preset))
    return results


def other_experiment_fits(claims: Iterable[Any], experiment: str, *, store: Any, preset: str,
                          available: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """For each other experiment the claims name: its fits from ``available`` (e.g. fitted earlier in the same
    report), else fitted from what the results store holds (``compare.fit_experiment``: nothing is trained), else
    a string saying why it cannot be. The value carries ``fitted_from`` ("this report" / "stored runs")."""
    out: dict[str, Any] = {}
    for raw in claims:
        claim = _fields(raw)
        for side in (claim.a, claim.b):
            if side.experiment in (None, experiment) or side.experiment in out:
                continue
            if available and side.experiment in available:
                found = available[side.experiment]
                if hasattr(found, "fits") and not hasattr(found, "fitted_from"):
                    try:
                        found.fitted_from = "this report"
                    except AttributeError:  # pragma: no cover - a frozen object
                        pass
                out[side.experiment] = found
                continue
            try:
                fitted = fit_experiment(side.experiment_path or side.experiment, store=store, preset=preset)
                fitted.fitted_from = "stored runs"
                out[side.experiment] = fitted
            except RecallkitError as exc:
                out[side.experiment] = f"experiment {side.experiment} cannot be fitted in preset {preset}: {exc}"
    return out


# ----------------------------------------------------------------------------- asserting
def describe_claim(result: ClaimResult) -> str:
    """A few lines a person reads in a failing test: the claim, both sides and the verdict's reason."""
    lines = [f"claim {result.id!r} of {result.experiment or 'fits'}: {result.text} [{result.provenance}]: "
             f"verdict {result.verdict!r}"]
    for label, side in (("A", result.a), ("B", result.b)):
        value = f"{result.statistic} {side.value:.3f} (se {side.se:.3f}, {side.se_source})" if side.value is not None \
            and side.se is not None else "no value"
        lines.append(f"  {label}: {side.label()}: {value}")
    lines.append(f"  reason: {result.reason}")
    return "\n".join(lines)


def check_claims(results: Sequence[ClaimResult], wanted: Sequence[str], what: str) -> None:
    """AssertionError naming every claim whose verdict is not in ``wanted``, with its reason."""
    if not results:
        raise AssertionError(f"{what}: no claims to check")
    failing = [r for r in results if r.verdict not in wanted]
    if failing:
        head = (f"{what}: expected verdict {' or '.join(map(repr, wanted))}, "
                f"{len(failing)} of {len(results)} claims disagree")
        raise AssertionError(head + "\n" + "\n".join(describe_claim(r) for r in failing))

"""Verdicts: is a fitted exponent consistent with the predicted one?

Three outcomes, mutually exclusive by construction, each carrying the numbers that decided it.
Let b = fitted slope, se its HC3 standard error, t_q the Student-t quantile with the residual
df, p = predicted slope and the equivalence band [p - delta, p + delta].

* ``consistent``: TOST (two one-sided t tests, each at level alpha) rejects both
  "b <= p - delta" and "b >= p + delta". Equivalently, the (1 - 2 alpha) interval
  b +- t_{1-alpha} se lies inside the band; ``p_tost`` is the larger one-sided p-value.
* ``inconsistent``: the two-sided (1 - alpha) interval b +- t_{1-alpha/2} se lies entirely
  outside the band (does not intersect it). This is the interval reported as ``slope_ci``.
  Using the wider (1 - alpha) interval here keeps the false-alarm rate for a slope that
  truly sits on the band's edge at most alpha/2.
* ``inconclusive``: neither. The reason says what would narrow it.

Exclusivity: the (1 - alpha) interval contains the (1 - 2 alpha) interval, so if the latter is
inside the band the former meets the band and cannot be outside it.

Defaults (stated in the README): ``alpha = 0.05`` (the usual level; TOST at 0.05 means a 90%
interval inside the band). ``delta = 0.25`` in units of the exponent of parameter count per unit
log(base). Why 0.25: the predictions we check are asymptotic and hold up to constants and log
factors, so a straight-line fit over one or two decades of V carries a systematic bias of order
(log power) / ln V, about 0.1-0.2 at V = 2^8..2^12; and the predictions that compete (neighbouring
phase regions, L = V^0.5 versus L = V, m = d^2 versus m = d^3) differ by 0.5 or more, so a band of
+-0.25 still separates them. Set delta per experiment when the competing predictions are closer.
When the prediction carries a power of log(base), pass ``log_power`` and the verdict is taken
against the finite-range (secant) slope of the prediction over the fitted x range, which is what
a straight-line fit over that range estimates; both slopes are reported.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import stats

from recallkit.compare.fits import DEFAULT_ALPHA, SlopeFit, finite_range_slope
from recallkit.theory.errors import InputError

__all__ = ["decide", "decide_numbers", "DEFAULT_DELTA", "undecidable", "Verdict", "VERDICTS"]


DEFAULT_DELTA = 0.25
VERDICTS = ("consistent", "inconsistent", "inconclusive")


def _num(value: float | None) -> float | None:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return float(value)


@dataclass(frozen=True)
class Verdict:
    """The outcome and every number it rests on."""

    verdict: str
    reason: str
    predicted_slope: float | None
    compared_slope: float | None  # the prediction actually compared (finite-range when log_power != 0)
    delta: float
    alpha: float
    slope: float | None = None
    ci: tuple[float, float] | None = None  # (1 - alpha)
    ci_tost: tuple[float, float] | None = None  # (1 - 2 alpha)
    p_tost: float | None = None

    @property
    def band(self) -> tuple[float, float] | None:
        if self.compared_slope is None:
            return None
        return (self.compared_slope - self.delta, self.compared_slope + self.delta)

    def to_dict(self) -> dict[str, Any]:
        band = self.band
        return {
            "predicted_slope_tested": _num(self.compared_slope),
            "delta": self.delta,
            "alpha": self.alpha,
            "band": [_num(band[0]), _num(band[1])] if band else None,
            "p_tost": _num(self.p_tost),
            "verdict": self.verdict,
            "verdict_reason": self.reason,
        }


def _check_levels(delta: float, alpha: float) -> None:
    if not (isinstance(delta, (int, float)) and delta > 0 and math.isfinite(delta)):
        raise InputError(f"delta: expected a positive number, got {delta!r}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 0.5):
        raise InputError(f"alpha: expected a number in (0, 0.5), got {alpha!r}")


def undecidable(predicted_slope: float | None, delta: float, alpha: float, reason: str) -> Verdict:
    """An ``inconclusive`` verdict when there is no fit to judge (too few points, no prediction)."""
    _check_levels(delta, alpha)
    return Verdict("inconclusive", reason, predicted_slope, predicted_slope, delta, alpha)


def _fmt(value: float) -> str:
    return f"{value:.3f}"


def _points_factor(se: float, df_resid: float, quantile: float, target_half_width: float) -> str:
    """How many times as many points would bring t_q(df') * se * sqrt(n / n') below the target.

    Assumes the standard error shrinks as 1/sqrt(n) at the same spread of x and noise; the t quantile
    is recomputed at the new df, which matters when df is small (t_0.975 is 12.7 at df = 1).
    """
    n = df_resid + 2
    for factor in [1 + k / 10 for k in range(1, 100)] + list(range(11, 1001)):
        n_new = n * factor
        if stats.t.ppf(quantile, n_new - 2) * se * math.sqrt(n / n_new) < target_half_width:
            return f"about {factor:g}x"
    return "more than 1000x"


def decide_numbers(
    slope: float,
    se: float,
    df_resid: float,
    predicted_slope: float,
    *,
    delta: float = DEFAULT_DELTA,
    alpha: float = DEFAULT_ALPHA,
    exact_fit: bool = False,
) -> Verdict:
    """The verdict from a slope, its standard error and residual degrees of freedom."""
    _check_levels(delta, alpha)
    if not (math.isfinite(slope) and math.isfinite(se) and se >= 0 and df_resid >= 1):
        raise InputError(f"verdict: expected finite slope, se >= 0 and df >= 1, got {slope}, {se}, {df_resid}")
    band_lo, band_hi = predicted_slope - delta, predicted_slope + delta
    band_text = f"[{_fmt(band_lo)}, {_fmt(band_hi)}] (prediction {_fmt(predicted_slope)} +- {delta:g})"
    if se == 0 or exact_fit:
        return Verdict("inconclusive", "residuals are exactly zero (points on one exact line), so there is no error estimate; "
                       "add seeds or grid points that are not on one exact line",
                       predicted_slope, predicted_slope, delta, alpha, slope)
    t_two = stats.t.ppf(1 - alpha / 2, df_resid)
    t_one = stats.t.ppf(1 - alpha, df_resid)
    ci = (slope - t_two * se, slope + t_two * se)
    ci_tost = (slope - t_one * se, slope + t_one * se)
    p_lower = stats.t.sf((slope - band_lo) / se, df_resid)  # H0: slope <= band_lo
    p_upper = stats.t.cdf((slope - band_hi) / se, df_resid)  # H0: slope >= band_hi
    p_tost = float(max(p_lower, p_upper))
    level = f"{100 * (1 - alpha):g}%"
    level_tost = f"{100 * (1 - 2 * alpha):g}%"

    def verdict(name: str, reason: str) -> Verdict:
        return Verdict(name, reason, predicted_slope, predicted_slope, delta, alpha, slope, ci, ci_tost, p_tost)

    if band_lo < ci_tost[0] and ci_tost[1] < band_hi:
        return verdict("consistent", (
            f"TOST p = {p_tost:.3g} < alpha = {alpha:g}: the {level_tost} interval "
            f"[{_fmt(ci_tost[0])}, {_fmt(ci_tost[1])}] of slope {_fmt(slope)} lies inside the band {band_text}"))
    if ci[0] > band_hi or ci[1] < band_lo:
        side = "above" if ci[0] > band_hi else "below"
        return verdict("inconsistent", (
            f"the {level} interval [{_fmt(ci[0])}, {_fmt(ci[1])}] of slope {_fmt(slope)} lies entirely "
            f"{side} the band {band_text}"))

    half_width = t_one * se
    offset = abs(slope - predicted_slope)
    room = delta - offset
    head = (f"the {level_tost} interval [{_fmt(ci_tost[0])}, {_fmt(ci_tost[1])}] (width {_fmt(2 * half_width)}) "
            f"is not inside the band {band_text} (TOST p = {p_tost:.3g}), and the {level} interval "
            f"[{_fmt(ci[0])}, {_fmt(ci[1])}] overlaps it")
    if room > 0:
        factor = _points_factor(se, df_resid, 1 - alpha, room)
        advice = (f"; to fit the interval inside the band at this estimate its half-width must shrink from "
                  f"{_fmt(half_width)} to below {_fmt(room)}: {factor} as many points (more seeds; se ~ 1/sqrt(n), "
                  f"and the t quantile falls with the df) or a log-x range about "
                  f"{math.ceil(half_width / room * 10) / 10:g}x wider (a wider grid of the base variable; se ~ 1/range)")
    else:
        half_two = t_two * se
        excess = offset - delta
        if excess > 0:
            factor = _points_factor(se, df_resid, 1 - alpha / 2, excess)
            advice = (f"; the estimate itself lies {_fmt(excess)} outside the band, so more data would more likely "
                      f"end 'inconsistent' ({factor} as many points, or a "
                      f"{math.ceil(half_two / excess * 10) / 10:g}x wider log-x range, would settle it)")
        else:
            advice = "; the estimate sits on the band's edge, so no realistic amount of data will settle it"
    return verdict("inconclusive", head + advice)


def _is_exact_fit(fit: SlopeFit) -> bool:
    # Points on one exact line leave only rounding error in the residuals (ssr / tss ~ 1e-30);
    # a standard error built from rounding error would make any verdict look certain.
    return fit.residual_ss <= 1e-20 * max(fit.total_ss, 1e-300)


def decide(
    fit: SlopeFit,
    predicted_slope: float,
    *,
    delta: float = DEFAULT_DELTA,
    alpha: float = DEFAULT_ALPHA,
    log_power: float = 0.0,
) -> Verdict:
    """Verdict for a :class:`SlopeFit` against a predicted slope (see the module docstring)."""
    compared = finite_range_slope(predicted_slope, log_power, fit.x_range)
    base = decide_numbers(fit.slope, fit.slope_se, fit.df_resid, compared, delta=delta, alpha=alpha,
                          exact_fit=_is_exact_fit(fit))
    if compared == predicted_slope:
        return base
    reason = (f"{base.reason}; compared with the finite-range slope {_fmt(compared)} of the prediction "
              f"(asymptotic {_fmt(predicted_slope)}, log power {log_power:g}) over the fitted x range")
    return Verdict(base.verdict, reason, predicted_slope, compared, delta, alpha, base.slope, base.ci,
                   base.ci_tost, base.p_tost)

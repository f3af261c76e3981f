"""Verdict logic on crafted cases: all three outcomes, exclusivity, and the numbers carried."""
import re

import numpy as np
import pytest
from scipy import stats

from recallkit.compare.fits import fit_slope
from recallkit.compare.verdicts import DEFAULT_DELTA, decide, decide_numbers
from recallkit.theory.errors import InputError


def test_consistent_when_tost_interval_inside_band():
    v = decide_numbers(1.05, 0.05, 20, 1.0, delta=0.25, alpha=0.05)
    assert v.verdict == "consistent"
    assert v.p_tost < 0.05
    assert v.ci_tost[0] > 0.75 and v.ci_tost[1] < 1.25
    assert "TOST p =" in v.reason and "inside the band" in v.reason


def test_inconsistent_when_interval_outside_band():
    v = decide_numbers(1.6, 0.05, 20, 1.0, delta=0.25, alpha=0.05)
    assert v.verdict == "inconsistent"
    assert v.ci[0] > 1.25
    assert "above the band" in v.reason
    below = decide_numbers(0.3, 0.05, 20, 1.0)
    assert below.verdict == "inconsistent" and "below the band" in below.reason


def test_inconclusive_when_interval_too_wide_says_what_would_narrow_it():
    v = decide_numbers(1.0, 0.3, 10, 1.0, delta=0.25, alpha=0.05)
    assert v.verdict == "inconclusive"
    assert "as many points" in v.reason and "wider" in v.reason
    # half-width t_{0.95,df} * 0.3 * sqrt(12/n') must fall below 0.25: n' = 12 * factor, df = n' - 2
    factor = float(re.search(r"about ([0-9.]+)x as many points", v.reason).group(1))
    shrunk = lambda f: stats.t.ppf(0.95, 12 * f - 2) * 0.3 / np.sqrt(f)  # noqa: E731
    assert shrunk(factor) < 0.25 <= shrunk(factor - 0.1)
    # with df = 1 the t quantile dominates: far fewer extra points are needed than (width ratio)^2 says
    tiny = decide_numbers(1.0, 0.2, 1, 1.0, delta=0.25)
    naive = (stats.t.ppf(0.95, 1) * 0.2 / 0.25) ** 2
    needed = float(re.search(r"about ([0-9.]+)x as many points", tiny.reason).group(1))
    assert needed < naive / 5


def test_inconclusive_estimate_outside_band_points_towards_inconsistent():
    v = decide_numbers(1.4, 0.2, 10, 1.0, delta=0.25)
    assert v.verdict == "inconclusive"
    assert "outside the band" in v.reason and "inconsistent" in v.reason


def test_tost_boundary_matches_interval_rule():
    # TOST p < alpha  <=>  (1 - 2 alpha) interval inside the band. Check on both sides of the edge.
    se, df, alpha = 0.1, 12, 0.05
    edge = 0.25 - stats.t.ppf(1 - alpha, df) * se  # largest offset that is still consistent
    inside = decide_numbers(1.0 + edge - 1e-6, se, df, 1.0, alpha=alpha)
    outside = decide_numbers(1.0 + edge + 1e-6, se, df, 1.0, alpha=alpha)
    assert inside.verdict == "consistent" and inside.p_tost < alpha
    assert outside.verdict == "inconclusive" and outside.p_tost > alpha


def test_outcomes_are_exclusive_over_a_grid():
    # Sweep slopes and standard errors: each case gets exactly one verdict, and the rules agree
    # with the definitions (consistent only if the 90% CI is inside, inconsistent only if the 95% CI is outside).
    for slope in np.linspace(0.0, 2.0, 41):
        for se in (0.01, 0.05, 0.1, 0.2, 0.5):
            v = decide_numbers(float(slope), se, 8, 1.0, delta=0.25, alpha=0.05)
            inside = 0.75 < v.ci_tost[0] and v.ci_tost[1] < 1.25
            outside = v.ci[0] > 1.25 or v.ci[1] < 0.75
            assert not (inside and outside)
            expected = "consistent" if inside else "inconsistent" if outside else "inconclusive"
            assert v.verdict == expected, (slope, se, v)


def test_zero_residuals_are_inconclusive():
    x = np.log([64.0, 128.0, 256.0, 512.0])
    fit = fit_slope(x, 2 * x + 1)
    v = decide(fit, 2.0)
    assert v.verdict == "inconclusive" and "exactly zero" in v.reason


def test_log_power_compares_finite_range_slope():
    rng = np.random.default_rng(0)
    x = np.tile(np.log(2.0 ** np.arange(6, 13)), 3)
    y = x + np.log(x) + rng.normal(0, 0.01, x.size)  # params = V log V
    fit = fit_slope(x, y)
    plain = decide(fit, 1.0, delta=0.1)
    corrected = decide(fit, 1.0, delta=0.1, log_power=1.0)
    assert plain.verdict == "inconsistent"  # the log factor adds ~0.2 to the local slope
    assert corrected.verdict == "consistent"
    assert corrected.predicted_slope == 1.0  # the slope given; the record names the one compared
    assert corrected.to_dict()["predicted_slope_tested"] > 1.15
    assert "finite-range" in corrected.reason


def test_defaults_and_bad_levels():
    assert DEFAULT_DELTA == 0.25
    with pytest.raises(InputError, match="delta"):
        decide_numbers(1.0, 0.1, 5, 1.0, delta=0)
    with pytest.raises(InputError, match="alpha"):
        decide_numbers(1.0, 0.1, 5, 1.0, alpha=0.7)


def test_error_rates_at_the_band_edge():
    # True slope exactly on the band's edge (pred + delta): 'consistent' is then a false claim of
    # equivalence and must happen at most ~alpha = 5%; 'inconsistent' at most ~alpha/2 = 2.5%.
    # 400 replicates: binomial sd of a 5% rate is 1.1%. HC3 is slightly conservative, so rates sit below.
    rng = np.random.default_rng(21)
    x_grid = np.log(2.0 ** np.arange(6, 12))
    counts = {"consistent": 0, "inconsistent": 0, "inconclusive": 0}
    for replicate in range(400):
        x = np.tile(x_grid, 3)
        y = 1.25 * x + rng.normal(0, 0.15, x.size)
        counts[decide(fit_slope(x, y, n_bootstrap=10, bootstrap_seed=replicate), 1.0, delta=0.25).verdict] += 1
    assert counts["consistent"] / 400 <= 0.05 + 0.025, counts
    assert counts["inconsistent"] / 400 <= 0.025 + 0.02, counts
    assert counts["inconclusive"] > 300, counts

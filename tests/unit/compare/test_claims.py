"""compare.claims: comparative verdicts between two fitted lines, on synthetic data with a known difference,
at the edge (no true difference), through the [[claims]] TOML path, and in the report's rows and pages."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from recallkit.compare.assertions import fit_arrays, fit_boundary_points
from recallkit.compare.claims import check_claims, compare_fits, judge_claims
from recallkit.empirics.curves import crossing, isotonic_increasing
from recallkit.empirics.experiment import experiment_from_dict
from recallkit.theory.errors import InputError

LOG_V = np.log([64, 128, 256, 512, 1024, 2048])


def _line(slope: float, intercept: float, noise: float, rng, seeds: int = 4, line: str = "a",
          n_bootstrap: int = 1):
    """An OLS FitResult of y = intercept + slope * log V + noise, ``seeds`` points per V."""
    x = np.repeat(LOG_V, seeds)
    y = intercept + slope * x + noise * rng.standard_normal(x.size)
    result = fit_arrays(x, y, np.tile(np.arange(seeds), LOG_V.size), slope, x_name="log V", label="exp",
                        n_bootstrap=n_bootstrap)
    result.line = line
    return result


def test_a_known_slope_difference_is_consistent_and_the_reversed_claim_inconsistent():
    rng = np.random.default_rng(7)
    a, b = _line(1.0, 0.0, 0.1, rng, line="a"), _line(1.5, -2.0, 0.1, rng, line="b")
    right = compare_fits(a, b, "slope <", claim_id="c1", text="A is flatter", provenance="paper-reported: Fig 9")
    assert right.verdict == "consistent", right.reason
    assert right.difference == pytest.approx(a.slope - b.slope)
    assert right.difference == pytest.approx(-0.5, abs=0.06)
    # the interval is one-sided in the claim's direction: (-inf, D + t_{0.95, df} se]
    assert math.isinf(right.interval[0]) and right.interval[1] < 0
    assert right.interval[1] == pytest.approx(right.difference + stats.t.ppf(0.95, right.df) * right.se)
    # se combines the two HC3 standard errors; df is Welch-Satterthwaite
    se_a, se_b = a.fit.slope_se, b.fit.slope_se
    assert right.se == pytest.approx(math.hypot(se_a, se_b))
    assert right.df == pytest.approx((se_a ** 2 + se_b ** 2) ** 2 / (se_a ** 4 / 22 + se_b ** 4 / 22))
    assert right.p < 0.05 and "excludes 0" in right.reason and "HC3" in right.reason
    wrong = compare_fits(a, b, "slope >")
    assert wrong.verdict == "inconsistent", wrong.reason
    assert "opposite ordering" in wrong.reason and wrong.p > 0.95
    doc = json.loads(json.dumps(right.to_dict(), allow_nan=False))  # JSON-safe: the open end is null
    assert doc["interval"][0] is None and doc["verdict"] == "consistent" and doc["provenance"] == "paper-reported: Fig 9"
    assert doc["a"]["se_source"] == "HC3" and doc["relation"] == "slope <" and doc["claim"] == "slope(A) < slope(B)"


def test_levels_are_compared_at_the_middle_of_the_common_range():
    rng = np.random.default_rng(8)
    a = _line(1.0, 0.5, 0.05, rng, line="a")  # parallel lines, A higher by 0.5
    b = _line(1.0, 0.0, 0.05, rng, line="b")
    result = compare_fits(a, b, "level >")
    assert result.verdict == "consistent", result.reason
    assert result.matched_x == pytest.approx((LOG_V[0] + LOG_V[-1]) / 2)
    assert result.difference == pytest.approx(0.5, abs=0.05)
    assert "matched V = 362" in result.reason  # sqrt(64 * 2048)
    x0 = result.matched_x
    cov = np.asarray(a.fit.covariance)
    assert result.a.se == pytest.approx(math.sqrt(cov[0, 0] + 2 * x0 * cov[0, 1] + x0 ** 2 * cov[1, 1]))
    assert compare_fits(a, b, "level <").verdict == "inconsistent"
    # crossing lines of equal level at the centre: no significant level difference either way
    c = _line(1.3, -(0.3 * x0), 0.05, rng, line="c")
    assert compare_fits(c, b, "level >").verdict == "inconclusive"


def test_inconclusive_says_how_much_more_data_would_settle_it():
    rng = np.random.default_rng(9)
    a, b = _line(1.0, 0.0, 0.6, rng, seeds=2), _line(1.2, 0.0, 0.6, rng, seeds=2)
    result = compare_fits(a, b, "slope <")
    assert result.verdict == "inconclusive", result.reason
    assert "includes 0" in result.reason
    factor = float(result.reason.split("about ")[1].split("x as many")[0])
    margin = lambda k: stats.t.ppf(0.95, result.df * k) * result.se / math.sqrt(k)  # noqa: E731
    if result.difference < 0:  # the claimed way: that factor brings the margin below |D|
        assert "points the claimed way" in result.reason
    else:
        assert "more likely end 'inconsistent'" in result.reason
    assert margin(factor) < abs(result.difference) <= margin(factor - 0.1 if factor <= 10 else factor - 1)


def test_no_true_difference_is_consistent_at_most_at_the_test_level():
    """400 repetitions of two lines with the same slope and level: the share of 'consistent' verdicts (a false
    claim accepted) must not exceed alpha beyond a binomial margin; the same for 'inconsistent'."""
    rng = np.random.default_rng(20261130)
    reps, alpha = 400, 0.05
    counts = {"slope <": 0, "level >": 0}
    opposite = 0
    for _ in range(reps):
        a = _line(1.2, 0.0, 0.15, rng, seeds=2)
        b = _line(1.2, 0.0, 0.3, rng, seeds=2)  # unequal noise: the Welch df matters
        for relation in counts:
            verdict = compare_fits(a, b, relation, alpha=alpha).verdict
            counts[relation] += verdict == "consistent"
            opposite += relation == "slope <" and verdict == "inconsistent"
    margin = 3 * math.sqrt(alpha * (1 - alpha) / reps)
    for relation, n in counts.items():
        assert n / reps <= alpha + margin, (relation, n)
    assert opposite / reps <= alpha + margin
    assert counts["slope <"] > 0  # the test is not vacuous: at the edge it does sometimes fire


def test_a_side_without_a_fit_or_an_exact_line_is_inconclusive_with_the_reason():
    rng = np.random.default_rng(3)
    a = _line(1.0, 0.0, 0.1, rng)
    empty = fit_boundary_points([{"line": "b", "threshold": 0.1, "seed": 0, "V": 64, "d": 8, "param_count": 64,
                                  "censored": True, "censor_reason": "no d <= 512 reached 0.1"}], 1.0)[0]
    result = compare_fits(a, empty, "slope <")
    assert result.verdict == "inconclusive" and "side B" in result.reason and "has no fit" in result.reason
    exact = fit_arrays(LOG_V, 2 * LOG_V, None, 2.0, x_name="log V")
    assert "no error estimate" in compare_fits(a, exact, "slope <").reason
    other_x = fit_arrays(LOG_V, 2 * LOG_V + 0.01 * np.sin(7 * LOG_V), None, 2.0, x_name="log d")
    assert "different x (log V and log d)" in compare_fits(a, other_x, "level <").reason
    with pytest.raises(InputError, match="relation"):
        compare_fits(a, a, "slope <=")


# ----------------------------------------------------------------------------- curve fits (seed bootstrap)
def _curve_points(slope_of_count: float, line: str, seeds: int = 6, noise: float = 0.01, rng_seed: int = 0):
    """Curve-search boundary points whose boundary count grows as V^slope (m = d^2, count d^3)."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for V in (64, 128, 256, 512):
        centre = math.log(16.0) + slope_of_count / 3 * math.log(V / 64)
        sizes = sorted({int(round(math.exp(centre) * 1.3 ** j)) for j in range(-6, 7)})
        counts = [float(s ** 3) for s in sizes]
        metric = [[0.8 / (1 + math.exp(-(math.log(s) - centre) / 0.3)) + noise * rng.standard_normal() for s in sizes]
                  for _ in range(seeds)]
        means = [sum(c) / seeds for c in zip(*metric)]
        found = crossing(sizes, isotonic_increasing(means), 0.4, counts)
        out.append({"line": line, "threshold": 0.4, "threshold_relative": False, "threshold_value": 0.4,
                    "seed": "mean", "V": V, "d": found.size, "param_count": found.param_count, "censored": False,
                    "method": "curve", "curve": {"sizes": sizes, "param_counts": counts, "seeds": list(range(seeds)),
                                                 "metric": metric},
                    "ceiling": {"d": 10 ** 6, "mean": 0.8, "per_seed": [0.8] * seeds}})
    return out


def test_curve_fits_use_the_seed_bootstrap_interval_and_say_so():
    points = _curve_points(2.0, "steep", rng_seed=1) + _curve_points(1.5, "flat", rng_seed=2)
    steep, flat = fit_boundary_points(points, 1.0, n_bootstrap=300)
    result = compare_fits(steep, flat, "slope >")
    assert result.verdict == "consistent", result.reason
    assert "seed-curve bootstrap" in result.reason
    lo, hi = steep.fit.slope_ci
    assert result.a.se == pytest.approx((hi - lo) / (2 * stats.t.ppf(0.975, steep.fit.n_seeds - 1)))
    assert result.a.df == steep.fit.n_seeds - 1 == 5
    assert compare_fits(steep, flat, "slope <").verdict == "inconsistent"


# ----------------------------------------------------------------------------- the [[claims]] TOML path
def _raw(claims: list[dict], **extra) -> dict:
    raw = {
        "name": "toy", "task": "token_retrieval", "model": "attention-only", "trainer": "three_step",
        "thresholds": [0.1, 0.2],
        "lines": [{"scaling": "N=V*log(V), L=V**0.5", "label": "flat"}, {"scaling": "N=V**1.5, L=V**0.5", "label": "steep"},
                  {"scaling": "N=V**1.5, L=V", "label": "long"}],
        "fixed": {"eta": 1.0, "gamma": 1e7}, "search": {"min": 4, "max": 64},
        "presets": {"quick": {"V": [32, 64, 128], "seeds": [0, 1], "lines": ["flat", "steep"]},
                    "paper": {"V": [256], "seeds": [0]}},
        "claims": claims,
    }
    raw.update(extra)
    return raw


CLAIMS = [
    {"id": "flatter", "text": "flat is flatter than steep", "relation": "slope <", "a": {"line": "flat"},
     "b": {"line": "steep"}, "provenance": "paper-reported: Fig 1(z)"},
    {"id": "wrong-way", "text": "flat is steeper (false)", "relation": "slope >", "a": {"line": "flat", "threshold": 0.1},
     "b": {"line": "steep"}, "provenance": "paper-reported: Fig 1(z)"},
    {"id": "long", "text": "long is steeper", "relation": "slope >", "a": {"line": "long"}, "b": {"line": "steep"},
     "alpha": 0.1, "provenance": "derived-here"},
]


def _fits_for(experiment: str, slopes: dict[str, float], thresholds=(0.1, 0.2), rng_seed: int = 0) -> list:
    rng = np.random.default_rng(rng_seed)
    out = []
    for label, slope in slopes.items():
        for t in thresholds:
            fit = _line(slope, 0.0, 0.05, rng, line=label)
            fit.experiment, fit.threshold = experiment, t
            fit.extra["threshold_relative"] = False
            out.append(fit)
    return out


def test_claims_from_toml_are_judged_end_to_end():
    exp = experiment_from_dict(_raw(CLAIMS), "toy.toml", "quick")
    assert [c.id for c in exp.claims] == ["flatter", "wrong-way", "long"]
    assert exp.claims[0].relation == "slope <" and exp.claims[0].alpha is None
    assert exp.claims[2].alpha == 0.1 and exp.file_lines == ["flat", "steep", "long"]
    assert exp.to_dict()["claims"][1]["a"] == {"line": "flat", "threshold": 0.1, "relative": False}
    fits = _fits_for("toy", {"flat": 1.0, "steep": 1.5})
    results = judge_claims(fits, exp.claims, experiment="toy", preset="quick")
    # no threshold named: judged at each threshold both lines have; a named one: there only
    assert [(r.id, r.threshold, r.verdict) for r in results] == [
        ("flatter", 0.1, "consistent"), ("flatter", 0.2, "consistent"), ("wrong-way", 0.1, "inconsistent"),
        ("long", None, "not run")]
    assert results[-1].reason.startswith("not run in this preset: side A: line 'long' of toy is not among the lines "
                                         "of this preset (quick)")
    assert results[-1].alpha == 0.1
    with pytest.raises(AssertionError, match="wrong-way"):
        check_claims(results[:3], ("consistent",), "claims of toy")
    check_claims(results[:2], ("consistent",), "claims of toy")


def test_claim_alpha_defaults_to_the_experiments_verdict_alpha():
    exp = experiment_from_dict(_raw(CLAIMS[:1], verdict={"alpha": 0.01}), "toy.toml", "quick")
    assert exp.claims[0].alpha == 0.01
    with pytest.raises(InputError, match=r"claims\[0\]\.alpha \(the experiment's verdict.alpha\)"):
        experiment_from_dict(_raw(CLAIMS[:1], verdict={"alpha": 0.6}), "toy.toml", "quick")


@pytest.mark.parametrize("change,message", [
    ({"colour": "red"}, r"toy.toml: claims\[0\]: unknown key 'colour'"),
    ({"a": {"line": "nope"}}, r"toy.toml: claims\[0\]\.a\.line: no line labelled 'nope' in this experiment"),
    ({"b": {"line": "steep", "weight": 2}}, r"claims\[0\]\.b: unknown key 'weight'"),
    ({"relation": "slope <="}, r"claims\[0\]\.relation: expected one of"),
    ({"provenance": ""}, r"claims\[0\]\.provenance: expected a non-empty string"),
    ({"a": {"line": "flat", "threshold": 0.3}}, r"claims\[0\]\.a\.threshold: 0.3 is not one of the thresholds"),
    ({"a": {"line": "flat", "relative": True}}, r"claims\[0\]\.a\.relative: a relative threshold needs 'threshold'"),
    ({"a": {"line": "flat", "experiment": "no_such_experiment"}}, r"claims\[0\]\.a\.experiment: no_such_experiment"),
    ({"b": {"line": "flat"}}, r"claims\[0\]\.b: the same line and threshold as side a"),
    ({"alpha": 0.5}, r"claims\[0\]\.alpha: expected a number in \(0, 0.5\)"),
])
def test_a_bad_claim_is_one_line_naming_the_field(change, message):
    bad = dict(CLAIMS[0], **change)
    with pytest.raises(InputError, match=message) as info:
        experiment_from_dict(_raw([bad]), "toy.toml", "quick")
    assert "\n" not in str(info.value)


def test_duplicate_ids_and_missing_keys_are_refused():
    with pytest.raises(InputError, match=r"claims\[1\]\.id: 'flatter' is used by another claim"):
        experiment_from_dict(_raw([CLAIMS[0], CLAIMS[0]]), "toy.toml", "quick")
    missing = {k: v for k, v in CLAIMS[0].items() if k != "provenance"}
    with pytest.raises(InputError, match=r"claims\[0\]\.provenance: missing"):
        experiment_from_dict(_raw([missing]), "toy.toml", "quick")


OTHER = """
name = "other"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
thresholds = [0.1, 0.2]
[[lines]]
scaling = "N=V**1.5, L=V**0.5"
label = "steep"
[fixed]
eta = 1.0
gamma = 1e7
[search]
min = 4
max = 64
[presets.quick]
V = [32, 64, 128]
seeds = [0, 1]
"""


def test_a_side_in_another_experiment_file(tmp_path):
    (tmp_path / "other.toml").write_text(OTHER)
    cross = {"id": "cross", "text": "flat here is flatter than steep there", "relation": "slope <",
             "a": {"line": "flat"}, "b": {"line": "steep", "experiment": "other.toml"}, "provenance": "paper-reported: Fig 6"}
    exp = experiment_from_dict(_raw([cross]), str(tmp_path / "toy.toml"), "quick")
    side = exp.claims[0].b
    assert side.experiment == "other" and side.experiment_path == str(tmp_path / "other.toml")
    mine = _fits_for("toy", {"flat": 1.0})
    theirs = _fits_for("other", {"steep": 1.6}, rng_seed=1)
    results = judge_claims(mine, exp.claims, experiment="toy", other_fits={"other": theirs})
    assert [(r.verdict, r.b.experiment) for r in results] == [("consistent", "other")] * 2
    missing = judge_claims(mine, exp.claims, experiment="toy", other_fits={"other": "no preset 'gpu'"})
    assert missing[0].verdict == "not run" and "no preset 'gpu'" in missing[0].reason
    bad = dict(cross, b={"line": "nope", "experiment": "other.toml"})
    with pytest.raises(InputError, match=r"claims\[0\]\.b\.line: no line labelled 'nope' in other"):
        experiment_from_dict(_raw([bad]), str(tmp_path / "toy.toml"), "quick")


# ----------------------------------------------------------------------------- shipped claims
SHIPPED_CLAIMS = {
    "tr_fig1a_capacity": {"fig1a-rise-L05", "fig1a-rise-L025"},
    "tr_fig5_adam": {"fig5-epochs", "fig5-epochs-8v4", "fig5-epochs-4v2"},
    "tr_fig2_attention_only": {"fig2c-n-regime-L05", "fig2c-n-regime-L1"},
    "tr_fig3_attention_mlp": {"fig3c-n-regime-L025", "fig3c-n-regime-L05"},
    "tr_fig3_attention_mlp_rank2": {"fig3c-n-regime-L025", "fig3c-n-regime-L05"},
    "tr_fig4_mlp_width": {"fig4c-width-L025", "fig4c-width-L05"},
    "tr_fig4_mlp_width_rank2": {"fig4c-width-L025", "fig4c-width-L05"},
    "tr_fig6_adam": {"fig6-slower-than-fig5-vlogv", "fig6-slower-than-fig5-v15"},
}


@pytest.mark.parametrize("name", sorted(SHIPPED_CLAIMS))
def test_shipped_claims_name_existing_lines_and_the_paper(name):
    from recallkit.empirics.experiment import load_experiment

    exp = load_experiment(name, "quick")
    assert {c.id for c in exp.claims} == SHIPPED_CLAIMS[name]
    for claim in exp.claims:
        assert claim.provenance.startswith("paper-reported: Fig ")
        for side in (claim.a, claim.b):
            assert side.line in (exp.file_lines if side.experiment is None else load_experiment(side.experiment).file_lines)


def test_quick_preset_claims_whose_lines_are_not_run_say_so():
    """tr_fig4_mlp_width_rank2's quick preset runs the L ~ V^0.25 lines only: that claim is judged at each of its
    thresholds, the L ~ V^0.5 one is 'not run in this preset' (no crash, no verdict)."""
    from recallkit.empirics.experiment import load_experiment

    exp = load_experiment("tr_fig4_mlp_width_rank2", "quick")
    slopes = {label: 2.3 if label.endswith("d**3") else 1.6 for label in [ln.label for ln in exp.lines]}
    fits = []
    for fit in _fits_for(exp.name, slopes, thresholds=(0.1,)):
        fits.append(fit)
    rng = np.random.default_rng(5)
    for label, slope in slopes.items():
        for t in (0.25, 0.5):
            fit = _line(slope, 0.0, 0.05, rng, line=label)
            fit.experiment, fit.threshold = exp.name, t
            fit.extra["threshold_relative"] = True
            fits.append(fit)
    results = judge_claims(fits, exp.claims, experiment=exp.name, preset="quick")
    judged = [(r.id, r.threshold, r.a.relative, r.verdict) for r in results]
    assert judged == [("fig4c-width-L025", 0.1, False, "consistent"), ("fig4c-width-L025", 0.25, True, "consistent"),
                      ("fig4c-width-L025", 0.5, True, "consistent"), ("fig4c-width-L05", None, False, "not run")]
    assert "not run in this preset" in results[-1].reason and "N=V**1.5, L=V**0.5, m=d**3" in results[-1].reason

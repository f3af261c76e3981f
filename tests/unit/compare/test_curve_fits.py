"""compare.results.fit_curve_points on synthetic curves with a known boundary law: the seed-curve bootstrap
gives a verdict that is consistent with the true slope and inconsistent with a wrong one."""
import math

import numpy as np
import pytest

from recallkit.compare.assertions import fit_boundary_points
from recallkit.empirics.curves import crossing, isotonic_increasing


def _points(slope_of_count: float, seeds: int = 8, noise: float = 0.01, relative: bool = False, rng_seed: int = 0):
    """Accuracy(d) = 0.8 * logistic((log d - log d*(V)) / 0.3) + noise, d*(V) = V^(slope/3) (m = d^2, count d^3)."""
    rng = np.random.default_rng(rng_seed)
    out = []
    for V in (64, 128, 256, 512):
        centre = math.log(16.0) + slope_of_count / 3 * math.log(V / 64)
        sizes = sorted({int(round(math.exp(centre) * 1.3 ** j)) for j in range(-6, 7)})
        counts = [float(s ** 3) for s in sizes]
        metric = [[0.8 / (1 + math.exp(-(math.log(s) - centre) / 0.3)) + noise * rng.standard_normal() for s in sizes]
                  for _ in range(seeds)]
        ceiling = [0.8 + noise * rng.standard_normal() for _ in range(seeds)]
        means = [sum(c) / seeds for c in zip(*metric)]
        target = 0.5 * sum(ceiling) / seeds if relative else 0.4
        found = crossing(sizes, isotonic_increasing(means), target, counts)
        out.append({"line": "x", "threshold": 0.5 if relative else 0.4, "threshold_relative": relative,
                    "threshold_value": target, "seed": "mean", "V": V, "d": found.size,
                    "param_count": found.param_count, "censored": False, "method": "curve",
                    "curve": {"sizes": sizes, "param_counts": counts, "seeds": list(range(seeds)), "metric": metric},
                    "ceiling": {"d": 10 ** 6, "mean": sum(ceiling) / seeds, "per_seed": ceiling}})
    return out


@pytest.mark.parametrize("relative", [False, True])
def test_true_slope_is_consistent_and_a_wrong_one_inconsistent(relative):
    points = _points(1.5, relative=relative)
    (right,) = fit_boundary_points(points, 1.5, n_bootstrap=400)
    assert right.slope == pytest.approx(1.5, abs=0.05)
    assert right.verdict.verdict == "consistent", right.verdict.reason
    (wrong,) = fit_boundary_points(points, 2.5, n_bootstrap=400)
    assert wrong.verdict.verdict == "inconsistent", wrong.verdict.reason
    doc = right.to_dict()
    assert doc["threshold_relative"] is relative and doc["method"] == "curve"
    assert doc["bootstrap"]["unit"] == "seed curve" and doc["n_seeds"] == 8 and doc["df_resid"] == 7


def test_noisier_seeds_widen_the_interval():
    quiet = fit_boundary_points(_points(1.5, noise=0.005), 1.5, n_bootstrap=300)[0]
    loud = fit_boundary_points(_points(1.5, noise=0.08), 1.5, n_bootstrap=300)[0]
    assert loud.fit.slope_se > 2 * quiet.fit.slope_se


def test_too_few_base_values_or_one_seed_is_inconclusive_with_the_reason():
    points = _points(1.5)
    points[0]["censored"] = points[1]["censored"] = True
    (few,) = fit_boundary_points(points, 1.5, n_bootstrap=50)
    assert few.verdict.verdict == "inconclusive" and "base values have a boundary" in few.verdict.reason
    assert few.to_dict()["n_seeds"] == 8  # the curves' seeds, not the one "mean" seed of their points
    one = _points(1.5, seeds=1)
    (single,) = fit_boundary_points(one, 1.5, n_bootstrap=50)
    assert single.verdict.verdict == "inconclusive" and ">= 2 seeds" in single.verdict.reason


def test_a_relative_threshold_is_named_as_a_fraction_of_the_ceiling_in_the_assertion_text():
    from recallkit.compare.assertions import describe_fit

    (relative,) = fit_boundary_points(_points(1.5, relative=True), 1.5, experiment="e", n_bootstrap=50)
    (absolute,) = fit_boundary_points(_points(1.5), 1.5, experiment="e", n_bootstrap=50)
    assert str(relative.key) == "e [x, threshold 0.5 x ceiling]" and str(absolute.key) == "e [x, threshold 0.4]"
    assert "threshold 0.5 x ceiling:" in describe_fit(relative).splitlines()[0]
    assert "threshold 0.4:" in describe_fit(absolute).splitlines()[0]


def test_a_relative_threshold_is_selected_by_its_label():
    from types import SimpleNamespace

    from recallkit.compare.assertions import _checked_thresholds
    from recallkit.theory.errors import InputError

    exp = SimpleNamespace(name="e", thresholds=[0.1, 0.5], relative_thresholds=[0.5])
    assert _checked_thresholds(exp, ["0.5 x ceiling"]) == [(0.5, True)]
    assert _checked_thresholds(exp, [0.5, "0.1"]) == [(0.5, False), (0.1, False)]
    for bad in ("0.1 x ceiling", 0.25, "half", float("nan"), True):
        with pytest.raises(InputError) as raised:
            _checked_thresholds(exp, [bad])
        assert str(raised.value).endswith("(its thresholds: 0.1, 0.5, 0.5 x ceiling)"), str(raised.value)
    points = _points(1.5) + _points(1.5, relative=True)
    for p in points:
        p["threshold"] = 0.5  # one value, absolute and relative: two checks
    both = fit_boundary_points(points, 1.5, experiment="e", n_bootstrap=20)
    assert sorted(str(f.key) for f in both) == ["e [x, threshold 0.5 x ceiling]", "e [x, threshold 0.5]"]
    (relative,) = fit_boundary_points(points, 1.5, experiment="e", n_bootstrap=20, thresholds=[(0.5, True)])
    assert str(relative.key) == "e [x, threshold 0.5 x ceiling]"

"""Comparative claims on a law's checks (a metric against its base, no threshold): they were judged 'not run: the
two lines share no threshold' whatever the data, since a claim's sides were matched by threshold only."""
import numpy as np

from recallkit.compare.assertions import fit_law_points
from recallkit.compare.claims import judge_claims
from recallkit.empirics.records import BoundaryPoint


def _points(line: str, slope: float, seeds=(0, 1, 2, 3)) -> list[BoundaryPoint]:
    """A law line's points as the law sweep writes them: one per run, the metric's value in metric_value."""
    rng = np.random.default_rng(len(line))
    return [BoundaryPoint(experiment="toy_law", line=line, scaling=None, threshold=None, seed=s, base="p",
                          base_value=p, size="p", values={"p": p}, param_count=None, metric="test_error",
                          metric_value=float(3.0 * p ** slope * np.exp(0.02 * rng.standard_normal())), variable="p")
            for p in (8, 16, 32, 64, 128) for s in seeds]


def _claim(relation: str) -> dict:
    return {"id": "steeper", "text": "the wide line falls faster", "relation": relation, "a": {"line": "wide"},
            "b": {"line": "narrow"}, "provenance": "derived-here"}


def test_a_claim_on_two_law_lines_is_judged_on_their_slopes():
    fits = fit_law_points(_points("wide", -1.5) + _points("narrow", -0.5), {"wide": -1.5, "narrow": -0.5},
                          experiment="toy_law", base="p", law="test_error", direction="lower")
    assert [f.threshold for f in fits] == [None, None]
    (holds,) = judge_claims(fits, [_claim("slope <")], experiment="toy_law")
    (fails,) = judge_claims(fits, [_claim("slope >")], experiment="toy_law")
    assert (holds.verdict, fails.verdict) == ("consistent", "inconsistent"), holds.reason
    assert holds.difference < -0.9

"""The lower-bound gap page: what the theory requires against each lower bound, region by region."""
from __future__ import annotations

from recallkit import theory
from recallkit.reports.pdf import lower_bound_gap_page, lower_bound_gap_rows


def test_gap_rows_give_each_region_its_strongest_lower_bound_and_no_gap_to_a_failure_condition():
    diagram = theory.compute_regions(theory.load_pack("token_retrieval_attn")).to_dict()
    rows = lower_bound_gap_rows(diagram)
    # one row per piece of a region where one lower bound is the strongest (the CLI's `theory bounds` table)
    assert len(rows) == sum(len(region["strongest_bound_gaps"]) for region in diagram["regions"]) >= len(diagram["regions"])
    assert {r[2] for r in rows} == {"counting", "first_gradient_access"}  # the estimator failures take no gap
    by_key = {(r[0], r[2]): r for r in rows}
    # mean-bias region where counting is the stronger bound: required d^2 ~ V^(4-2a) log^2 V against V log V
    region, required, bound, bound_power, gap, where = by_key[("mean_bias", "counting")]
    assert required == "V^(4 - 2*a) * log(V)^(2)"
    assert bound_power == "V^(1) * log(V)^(1)"
    assert gap == "V^(3 - 2*a) * log(V)^(1)"
    assert where.startswith("1 >= -a + c + 2")
    assert by_key[("noise_self", "first_gradient_access")][4] == "V^(-a + 3*c) * log(V)^(1)"


def test_gap_rows_drop_a_zero_log_power_and_the_page_builds():
    diagram = theory.compute_regions(theory.load_pack("assoc_memory")).to_dict()
    rows = lower_bound_gap_rows(diagram)
    assert rows and rows[0][0] == "facts"
    assert rows[0][4] == "N^(0)"  # the anchor's count meets the counting bound: no gap, no log factor
    fig = lower_bound_gap_page(diagram, "anchor: required count against the lower bounds")
    texts = [t.get_text() for t in fig.texts]
    assert any("required count against the lower bounds" in t for t in texts)

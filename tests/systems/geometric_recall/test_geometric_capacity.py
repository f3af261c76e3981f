"""Capacity N_max(d): the experiment file, the judge's log-against-power verdicts and the capacity page."""
import json
from types import SimpleNamespace

import pytest

from recallkit.empirics.experiment import load_experiment
from recallkit.systems.geometric_recall.judge import judge_search, select_capacity_experiment
from recallkit.systems.geometric_recall.pages import capacity_figure, capacity_pages, capacity_rows

# log2 N_max per d, two seeds: learned from the single-seed sweep (1000 steps), seed 1 a
# quarter-grid step away at two d; frozen E_s and U from the quick preset (seeds 0, 1).
LEARNED = {3: (4.5, 4.5), 4: (5.5, 5.25), 5: (6.5, 6.5), 6: (7.5, 7.75), 7: (8.5, 8.5)}
FROZEN = {6: (4.5, 4.75), 8: (5.25, 5.25), 11: (6.0, 6.0), 16: (7.0, 7.0), 23: (7.75, 7.75)}


def points(line, table, flagged_at=None, R=4):
    out = []
    top = max(table)
    for d, values in table.items():
        for seed, log2n in enumerate(values):
            p = {"line": line, "d": d, "N": round(2 ** log2n), "R": R, "seed": seed, "threshold": 1.0,
                 "censored": False, "censor_reason": None}
            if d == top:
                reached = flagged_at is not None and seed in flagged_at
                p["budget_check"] = {"line": line, "d": d, "seed": seed, "threshold": 1.0, "key": "steps", "factor": 3.0,
                                     "N": round(2 ** (log2n + 0.25)), "answer": p["N"], "value": 3000,
                                     "accuracy": 1.0 if reached else 0.97, "reached": reached, "config_hash": "x"}
                p["budget_flagged"] = reached
            out.append(p)
    return out


@pytest.fixture
def experiment():
    return load_experiment("geo_capacity", "quick")


@pytest.fixture
def capacity(experiment):
    pts = points("learned, R=4", LEARNED) + points("frozen, R=4", FROZEN, flagged_at={0})
    return select_capacity_experiment(pts, experiment)


def test_presets_load_with_their_own_d_per_model():
    quick = load_experiment("geo_capacity", "quick")
    assert [ln.overrides.get("model", quick.model) for ln in quick.lines] == ["learned", "frozen", "learned"]
    assert quick.values_of(0) == [3, 4, 5, 6, 7] and quick.values_of(1) == [6, 8, 11, 16, 23]
    assert quick.values_of(2) == [6, 8, 11, 16] and quick.build_config(quick.lines[2], 8, 27, 0)["R"] == 16
    assert quick.seeds == [0, 1] and quick.thresholds == [1.0] and quick.search.budget_factor == 3
    assert quick.search.grid == pytest.approx(2 ** 0.25)
    config = quick.build_config(quick.lines[1], 8, 38, 0)
    assert config["model"] == "frozen" and config["R"] == 4 and config["steps"] == 1000
    assert config["early_stop"] == pytest.approx(1 - 0.5 / (38 * 4))  # stop only when every fact is right
    for preset in ("gpu", "paper"):
        big = load_experiment("geo_capacity", preset)
        assert {ln.label for ln in big.lines} >= {"learned, R=16", "frozen, R=16"} and len(big.seeds) >= 3
        assert max(big.values_of(0)) <= 64 and max(v for i in range(len(big.lines)) for v in big.values_of(i)) <= 512
        assert big.search.max == 16384


def test_judge_pins_learned_log_and_frozen_power(capacity):
    learned, frozen = capacity["models"]["learned"], capacity["models"]["frozen"]
    assert learned["predicted"] == "log" and frozen["predicted"] == "power"
    assert learned["verdict"] == "consistent" and frozen["verdict"] == "consistent"
    g_learned, g_frozen = learned["selection"]["groups"][0], frozen["selection"]["groups"][0]
    assert g_learned["delta_aic"] >= 6 and g_frozen["delta_aic"] <= -6
    assert frozen["budget"] == {"checked": 2, "flagged": 1, "checks": frozen["budget"]["checks"]}
    assert "1 of 2 largest-d points" in frozen["verdict_reason"] and "flagged" in frozen["verdict_reason"]
    assert "0 of 2" in learned["verdict_reason"]
    json.dumps(capacity)


def test_swapped_data_are_inconsistent(experiment):
    swapped = points("learned, R=4", FROZEN)  # the frozen model's curve, judged as the learned model
    result = select_capacity_experiment(swapped, experiment)["models"]["learned"]
    assert result["verdict"] == "inconsistent"


def test_a_power_preference_from_budget_limited_points_is_no_decision(experiment):
    """The cold quick run's learned curve (1000 steps): concave, power preferred by delta AIC 9.5, and both
    largest-d points store one grid step more with 3x the steps. Budget-limited N_max bends the curve the
    way a power law does, so the verdict is inconclusive, not inconsistent; without the flags it stands."""
    concave = {3: (4.0, 3.46), 4: (5.25, 5.49), 5: (6.5, 6.5), 6: (7.5, 7.75), 7: (8.5, 8.5)}
    flagged = select_capacity_experiment(points("learned, R=4", concave, flagged_at={0, 1}), experiment)
    group = flagged["models"]["learned"]["selection"]["groups"][0]
    assert group["preferred"] == "power" and group["verdict_budget_free"] == "inconsistent"
    assert flagged["models"]["learned"]["verdict"] == "inconclusive"
    assert "budget-limited" in group["verdict_reason"] and "no decision" in group["verdict_reason"]
    # the shortfall grows with d (README, "Budget and capacity"): the reason asks for a budget that no longer
    # moves N_max at any d, and does not send the reader to a wider d range at the same budget
    assert "no longer moves N_max at any d" in group["verdict_reason"]
    assert "a wider d range at the same budget does not" in group["verdict_reason"]
    from matplotlib.text import Text

    texts = [t.get_text() for t in capacity_figure(flagged).findobj(Text)]
    assert any("inconclusive\n(budget-limited largest d; else inconsistent)" in t for t in texts), texts
    clean = select_capacity_experiment(points("learned, R=4", concave), experiment)
    assert clean["models"]["learned"]["verdict"] == "inconsistent"
    # the bias cannot produce a log preference, so frozen data preferring log stay inconsistent when flagged
    swapped = select_capacity_experiment(points("frozen, R=4", LEARNED, flagged_at={0, 1}), experiment)
    assert swapped["models"]["frozen"]["verdict"] == "inconsistent"


def test_judge_hook_adds_the_capacity_page_kind(experiment):
    entry = {"name": "geo_capacity", "kind": "max_capacity"}
    judge_search(entry, experiment, SimpleNamespace(points=points("learned, R=4", LEARNED)))
    assert entry["page_kinds"] == ["geo_capacity"] and list(entry["capacity"]["models"]) == ["learned"]
    rows = capacity_rows(entry)
    assert [r["verdict"] for r in rows] == ["consistent"] and rows[0]["line"] == "learned, R = 4: log2 N_max vs d"


def test_capacity_page_draws_both_models_and_the_table(capacity):
    fig = capacity_figure(capacity)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["learned embeddings, R = 4", "frozen E_s and U (the paper's control), R = 4"]
    texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
    assert "predicted log: consistent" in texts and "predicted power: consistent" in texts
    cells = [c.get_text().get_text() for ax in fig.axes for table in ax.tables for c in table.get_celld().values()]
    assert "1 of 2 flagged" in cells and "0 of 2 flagged" in cells
    assert capacity_pages({"capacity": capacity}, "1. x")[0][0] == "capacity-forms"
    assert capacity_pages({"capacity": {}}, "1. x") == []


def test_a_search_entry_gets_the_capacity_page_and_rows_through_page_kinds(capacity, tmp_path):
    from recallkit.reports.pdf import build_report, summary_entries, validate_summary
    from recallkit.theory.errors import InputError

    entry = {"name": "geo_capacity", "kind": "max_capacity", "fits": [], "capacity": capacity,
             "page_kinds": ["geo_capacity"]}
    summary = {"schema": "recallkit.summary/1", "title": "t", "provenance": {}, "experiments": [entry]}
    rows = summary_entries(summary)
    assert [(r["line"], r["verdict"]) for r in rows] == [("learned, R = 4: log2 N_max vs d", "consistent"),
                                                         ("frozen, R = 4: log2 N_max vs log2 d", "consistent")]
    build_report(summary, tmp_path / "out")
    assert (tmp_path / "out" / "figures" / "01-geo-capacity-capacity-forms.pdf").exists()
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [e["verdict"] for e in written["entries"]] == ["consistent", "consistent"]
    with pytest.raises(InputError, match=r"summary.experiments\[0\].page_kinds: expected a list of registered"):
        validate_summary({**summary, "experiments": [{**entry, "page_kinds": ["nope"]}]})


# log2 N50 per d (50% success over seeds 0-3 on a dense N grid), the README's "Budget and capacity" table.
N50 = {
    ("learned", 1000): {4: 5.50, 5: 6.64, 6: 7.62, 7: 8.57, 8: 9.23},
    ("learned", 3000): {4: 5.73, 5: 7.00, 6: 8.00, 7: 8.99, 8: 9.75},
    ("frozen", 1000): {6: 4.74, 11: 6.13, 16: 7.12, 23: 7.88},
    ("frozen", 3000): {6: 4.99, 11: 6.38, 16: 7.12, 23: 8.12},
}


@pytest.mark.parametrize("steps", [1000, 3000])
def test_the_measured_budget_table_reads_as_the_readme_says(experiment, steps):
    """The learned N50 over d = 4..8 prefer power at 1000 and at 3000 steps (Delta AIC about -11 and -13):
    inconclusive while the largest d is flagged (as at 1000 steps, where 3x the steps moved d = 8 by 0.52),
    inconsistent without the flag. The frozen N50 prefer power at both budgets, flagged or not: consistent."""
    learned = {d: (v,) for d, v in N50[("learned", steps)].items()}
    frozen = {d: (v,) for d, v in N50[("frozen", steps)].items()}
    result = select_capacity_experiment(points("learned, R=4", learned, flagged_at={0})
                                        + points("frozen, R=4", frozen, flagged_at={0}), experiment)
    group = result["models"]["learned"]["selection"]["groups"][0]
    assert group["preferred"] == "power" and group["delta_aic"] <= -6
    assert group["verdict_budget_free"] == "inconsistent" and result["models"]["learned"]["verdict"] == "inconclusive"
    frozen_group = result["models"]["frozen"]["selection"]["groups"][0]
    assert frozen_group["preferred"] == "power" and result["models"]["frozen"]["verdict"] == "consistent"
    # unflagged, the same learned curve is a power preference against the prediction: inconsistent
    clean = select_capacity_experiment(points("learned, R=4", learned), experiment)
    assert clean["models"]["learned"]["verdict"] == "inconsistent"


# The quick preset's cold run (1000 steps, seeds 0 and 1): at R = 4 the learned curve is concave and both
# largest-d points are flagged; at R = 16 it is straight in d over d = 6..23, also flagged at d = 23.
QUICK_R4 = {3: (4.0, 3.46), 4: (5.25, 5.49), 5: (6.51, 6.51), 6: (7.5, 7.75), 7: (8.5, 8.5)}
QUICK_R16 = {6: (4.0, 4.0), 8: (4.75, 4.75), 11: (5.49, 5.49), 16: (6.75, 6.75), 23: (8.25, 8.25)}


def test_each_R_gets_its_own_verdict_panel_and_budget_count(experiment):
    """Learned at R = 4 (power preferred, budget-limited: inconclusive) and at R = 16 (log preferred: consistent,
    and the flag at its largest d cannot have produced a log preference) are judged apart; the model's overall
    verdict is inconclusive until every R agrees, and each R has its own summary row, panel and budget count."""
    pts = points("learned, R=4", QUICK_R4, flagged_at={0, 1}) + points("learned, R=16", QUICK_R16, flagged_at={0, 1}, R=16)
    capacity = select_capacity_experiment(pts + points("frozen, R=4", FROZEN), experiment)
    learned = capacity["models"]["learned"]
    by_R = {g["R"]: g for g in learned["selection"]["groups"]}
    assert by_R[4]["verdict"] == "inconclusive" and by_R[4]["verdict_budget_free"] == "inconsistent"
    assert by_R[16]["preferred"] == "log" and by_R[16]["verdict"] == "consistent" and by_R[16]["delta_aic"] >= 6
    assert 0.2 < by_R[16]["log"]["b"] < 0.3 and "verdict_budget_free" not in by_R[16]
    assert learned["verdict"] == "inconclusive"
    assert "R=16: log" in learned["verdict_reason"] and "so a log preference stands" in learned["verdict_reason"]
    rows = capacity_rows({"name": "geo_capacity", "capacity": capacity})
    assert [(r["line"], r["verdict"]) for r in rows] == [
        ("learned, R = 4: log2 N_max vs log2 d", "inconclusive"), ("learned, R = 16: log2 N_max vs d", "consistent"),
        ("frozen, R = 4: log2 N_max vs log2 d", "consistent")]
    fig = capacity_figure(capacity)
    assert [ax.get_title() for ax in fig.axes if ax.get_title()] == [
        "learned embeddings, R = 4", "learned embeddings, R = 16", "frozen E_s and U (the paper's control), R = 4"]
    cells = [[c.get_text().get_text() for (row, col), c in sorted(table.get_celld().items()) if row == r]
             for ax in fig.axes for table in ax.tables for r in range(1, 4)]
    assert [(row[1], row[-1]) for row in cells] == [("4", "2 of 2 flagged"), ("16", "2 of 2 flagged"), ("4", "0 of 2 flagged")]
    # the same R = 16 curve made concave at its top (budget-limited d = 23 two grid steps low) no longer decides
    bent = {**QUICK_R16, 23: (7.75, 7.75)}
    worse = select_capacity_experiment(points("learned, R=16", bent, flagged_at={0, 1}, R=16), experiment)
    assert worse["models"]["learned"]["verdict"] != "consistent"

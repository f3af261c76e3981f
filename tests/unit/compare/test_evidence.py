"""Evidence labels (compare.evidence): the one rule, and the perturbation test that makes it honest: scale the judged
runs' ceilings and attention masses, and every tested prediction that moves is labelled conditional, every one
labelled confirmatory-able (no conditional input) stays where it was."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from recallkit.compare.assertions import predictions_for, realised_predictions
from recallkit.compare.assertions import tested_prediction as make_tested
from recallkit.compare.evidence import (A_PRIORI, CALIBRATION, CONDITIONAL, Calibration, FrozenPrediction,
                                        PredictionInput, judge_evidence, weakest)
from recallkit.compare.evidence import TestedPrediction as Tested
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan_of
from recallkit.empirics.records import CheckKey, threshold_text

CHECK = "e [l, threshold 0.1]"
FROZEN_AT = "2026-12-07T10:00:00+00:00"


def _prediction(slope=2.0, inputs=(PredictionInput("pack terms", A_PRIORI, "pack p"),), selected_on=()):
    return Tested(CHECK, slope, "all terms", tuple(inputs), tuple(selected_on))


def _freeze(slope=2.0):
    return FrozenPrediction("ab" * 32, FROZEN_AT, {CHECK: _prediction(slope)})


def _judge(prediction, freeze, first_run_at="2026-12-07T11:00:00+00:00", preset="confirm", runs=()):
    return judge_evidence(prediction, experiment="e", preset=preset, freeze=freeze, first_run_at=first_run_at,
                          judged_runs=runs)


def test_the_rule_gives_each_label_with_its_reason():
    assert _judge(_prediction(), _freeze()).label == "confirmatory"
    assert _judge(_prediction(), None).reason.startswith("prediction not frozen before its runs")
    changed = _judge(_prediction(2.1), _freeze())
    assert changed.label == "exploratory" and changed.reason.startswith("prediction changed since the freeze")
    assert _judge(_prediction(2.0 * (1 + 1e-9)), _freeze()).label == "confirmatory"  # the same number, refactored
    early = _judge(_prediction(), _freeze(), first_run_at="2026-12-07T09:59:59+00:00")
    assert early.label == "exploratory" and early.reason.startswith("runs predate the freeze")
    chosen = _judge(_prediction(selected_on=("quick", "medium")), _freeze(), preset="medium")
    assert chosen.label == "exploratory" and "selected on the medium preset's runs" in chosen.reason
    measured = _prediction(inputs=(PredictionInput("level", CONDITIONAL, "0.25 x the judged runs' ceiling"),))
    found = _judge(measured, _freeze())
    assert found.label == "conditional" and found.conditional_on == ("level",)
    assert _judge(None, _freeze()).label == "exploratory"


def test_a_calibration_that_shares_seeds_and_configs_with_the_judged_runs_refuses_the_confirmatory_label():
    calibration = Calibration("e", "quick", (0, 1), (64, 128), ("l",), "probed constants")
    calibrated = _prediction(inputs=(PredictionInput("probed constants", CALIBRATION, "probes", calibration),))
    assert _judge(calibrated, _freeze(), runs=[("l", 90, 100), ("l", 181, 101)]).label == "confirmatory"
    shared = _judge(calibrated, _freeze(), runs=[("l", 64, 1)])
    assert shared.label == "conditional" and "shares seeds and configurations" in shared.reason


def test_a_claim_is_as_strong_as_its_weaker_check():
    assert weakest(["confirmatory", "conditional"]) == "conditional"
    assert weakest(["confirmatory", None]) == "exploratory"
    assert weakest(["confirmatory", "confirmatory"]) == "confirmatory"


def _sweep(plan, scale_attention: float, scale_ceiling: float):
    """Runs and curve points as a sweep gives them: each run's attention mass, each relative check's level a fraction
    of a seed-mean ceiling; both scaled."""
    experiment = plan.experiment
    runs, points = [], []
    for index, line in enumerate(experiment.lines):
        for V in experiment.values_of(index):
            runs.append(SimpleNamespace(line=line.label, base_value=V, measured={"attention_mass": 0.2 * scale_attention}))
            ceiling = 0.3 * scale_ceiling
            for threshold, relative in experiment.threshold_targets():
                points.append(SimpleNamespace(line=line.label, threshold=threshold, relative=relative, seed=None,
                                              base_value=V, threshold_value=threshold * ceiling if relative else threshold,
                                              ceiling={"mean": ceiling}))
    return SimpleNamespace(runs=runs, points=points)


def _tested(plan, sweep):
    experiment = plan.experiment
    predictions = predictions_for(plan)
    realised = realised_predictions(plan, sweep)
    out = {}
    for line in experiment.lines:
        for threshold, relative in experiment.threshold_targets():
            key = str(CheckKey(experiment.name, line.label, threshold=float(threshold), relative=relative))
            tested, _, beside = make_tested(key, predictions[line.label], realised[line.label],
                                                  threshold_text(threshold, relative), False, {})
            out[key] = (tested, beside)
    return out


@pytest.mark.parametrize("name, line", [("tr_fig2_attention_only", "N=V**1.5, L=V**0.5"),
                                        ("tr_fig3_attention_mlp", None)])
def test_scaling_the_runs_measured_quantities_moves_only_predictions_labelled_conditional(name, line):
    experiment = load_experiment(name, preset="quick")
    if line is not None:  # one line is enough: the others take the same path
        experiment.lines = [ln for ln in experiment.lines if ln.label == line]
    plan = plan_of(experiment)
    before, after = _tested(plan, _sweep(plan, 1.0, 1.0)), _tested(plan, _sweep(plan, 1.3, 0.8))
    moved = held = 0
    for key, (tested, beside) in before.items():
        other, other_beside = after[key]
        if tested.slope is None:
            continue
        if math.isclose(tested.slope, other.slope, rel_tol=1e-9):
            held += 1
        else:
            moved += 1
            assert tested.conditional_on, f"{key}: moved from {tested.slope} to {other.slope} but is not conditional"
        if not tested.conditional_on:
            assert other.slope == pytest.approx(tested.slope, rel=1e-9), key
        if beside is not None:  # the reading kept beside reads the runs: it is labelled so, and it moves
            assert beside.conditional_on and other_beside is not None
            assert not math.isclose(beside.slope, other_beside.slope, rel_tol=1e-6), key
    if name == "tr_fig2_attention_only":
        assert held == 5 and moved == 0  # every check has an a priori level and attention: none reads a run
    else:
        assert moved == 4 and held == 0  # only fractions of the ceiling, with no a priori ceiling: the runs' own


def test_a_lines_primary_check_must_be_one_of_its_thresholds(tmp_path):
    from tests.experiment_texts import TINY_LINEAR_MEMORY, experiment_load_error

    good = tmp_path / "good.toml"
    good.write_text(TINY_LINEAR_MEMORY.replace('label = "linear"', 'label = "linear"\nprimary = "0.99"'))
    assert [line.primary for line in load_experiment(str(good)).lines] == ["0.99"]
    bad = tmp_path / "bad.toml"
    bad.write_text(TINY_LINEAR_MEMORY.replace('label = "linear"', 'label = "linear"\nprimary = "0.5"'))
    message = experiment_load_error(str(bad))
    assert "lines[0].primary: expected one of the thresholds 0.99, got '0.5'" in message


def test_the_title_page_counts_evidence_labels_primary_checks_and_freezes_apart():
    from matplotlib.text import Text

    from recallkit.reports.text_pages import title_page

    rows = [{"experiment": "e", "line": "a", "threshold": 0.1, "verdict": "consistent", "evidence": "confirmatory",
             "primary": True, "freeze": "4c88628ae2b2" + "0" * 52},
            {"experiment": "e", "line": "a", "threshold": 0.2, "verdict": "inconclusive", "evidence": "conditional",
             "freeze": "4c88628ae2b2" + "0" * 52},
            {"experiment": "e", "line": "b", "threshold": 0.1, "verdict": "inconclusive", "evidence": "exploratory",
             "primary": True},
            {"experiment": "probes", "line": "signal", "verdict": "consistent", "diagnostic": True}]  # no label
    fig = title_page({"experiments": [{"name": "e"}, {"name": "probes"}], "title": "t"}, rows)
    text = " ".join(" ".join(t.get_text() for t in fig.findobj(Text)).split())
    assert ("1 experiment, 3 checks: 1 consistent, 0 inconsistent, 2 inconclusive; evidence 1 confirmatory, "
            "1 conditional, 1 exploratory") in text
    assert "diagnostics, counted apart: 1 checks (1 consistent, 0 inconsistent, 0 inconclusive) in probes" in text
    assert "primary checks (one per line, named before freezing): 2: 1 consistent, 0 inconsistent, 1 inconclusive" in text
    assert "freezes: e 4c88628ae2b2" in text


def test_require_counts_a_check_without_a_label_as_exploratory():
    from recallkit.fail_on import evidence_short

    confirmed = {"experiment": "e", "line": "a", "threshold": 0.1, "verdict": "consistent", "evidence": "confirmatory"}
    probe = {"experiment": "probes", "line": "signal", "verdict": "consistent"}
    assert evidence_short([confirmed], "confirmatory") is None
    assert evidence_short([confirmed, {"verdict": "no check"}], "confirmatory") is None  # a grid's row is no check
    short = evidence_short([confirmed, probe], "confirmatory")
    assert short.startswith("require confirmatory: 1 of 2 checks are not: probes [signal]: exploratory (no evidence")
    assert evidence_short([dict(confirmed, evidence="conditional")], "conditional") is None
    assert evidence_short([dict(confirmed, evidence="conditional")], "confirmatory") is not None

"""empirics.plan: an experiment read, checked and predicted once, into a frozen Plan."""
from __future__ import annotations

import dataclasses

import pytest

from recallkit.empirics.plan import plan, plan_of
from recallkit.empirics.experiment import load_experiment
from recallkit.theory.errors import InputError


def test_a_search_experiment_is_planned_with_its_pack_and_a_prediction_per_line():
    planned = plan("tr_fig2_attention_only", preset="quick")
    assert planned.is_search and planned.runner is None
    assert planned.pack is not None and planned.pack.name == "token_retrieval_attn"
    labels = [line.label for line in planned.experiment.lines]
    assert labels and set(planned.predictions) == set(labels) == set(planned.realised) == set(planned.search_exponents)
    for label in labels:
        assert "error" not in planned.predictions[label] and "error" not in planned.realised[label]
        assert planned.realised[label]["slope"] is not None
        assert planned.search_exponents[label] is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        planned.preset = "gpu"
    with pytest.raises(TypeError):  # the per-line tables are read-only views
        planned.predictions["x"] = {}


def test_a_systems_own_kind_is_planned_as_its_runner():
    planned = plan("geometric_construction")
    assert not planned.is_search and planned.experiment is None
    assert planned.runner and ":" in planned.runner and planned.system is not None


def test_plan_of_a_loaded_experiment_predicts_the_same():
    loaded = load_experiment("assoc_memory_linear")
    a, b = plan_of(loaded), plan("assoc_memory_linear")
    assert a.experiment is loaded and plan_of(a) is a
    assert dict(a.predictions) == dict(b.predictions)
    assert dict(a.search_exponents) == dict(b.search_exponents)


def test_a_pack_term_without_a_number_at_a_row_leaves_the_line_its_asymptotic_prediction():
    # the geometric pack's terms stay symbolic at the grid rows of this file: planning it used to end in
    # a TypeError traceback ("Cannot convert expression to float") from the realised-grid prediction
    planned = plan("geo_dmin_learned_vs_frozen")
    assert planned.predictions and all("error" not in p for p in planned.predictions.values())


def test_a_bad_file_is_one_line_naming_it(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\nkind = "sideways"\n')
    with pytest.raises(InputError) as raised:
        plan(bad)
    message = str(raised.value)
    assert "\n" not in message and str(bad) in message


def test_max_runs_is_an_argument_not_an_environment_variable(monkeypatch):
    monkeypatch.delenv("RECALLKIT_MAX_RUNS", raising=False)
    with pytest.raises(InputError, match="more than the limit 10; .*--max-runs"):
        plan("tr_fig2_attention_only", max_runs=10)
    assert "RECALLKIT_MAX_RUNS" not in __import__("os").environ
    assert plan("tr_fig2_attention_only").is_search  # the default limit again: nothing was left behind


def test_the_cli_flag_leaves_the_environment_as_it_was(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from recallkit.cli import app

    monkeypatch.delenv("RECALLKIT_MAX_RUNS", raising=False)
    result = CliRunner().invoke(app, ["sweep", "tr_fig2_attention_only", "--store", str(tmp_path / "s.db"),
                                      "--max-runs", "10"])
    # in-process the app raises (the installed command turns it into one line and exit 2: test_bounded_work)
    assert isinstance(result.exception, InputError) and "more than the limit 10" in str(result.exception)
    assert "RECALLKIT_MAX_RUNS" not in __import__("os").environ


def test_a_command_for_search_experiments_refuses_a_systems_own_kind_in_one_line():
    runner = plan("geometric_construction")
    with pytest.raises(InputError, match=r"^--exp x: not a search experiment, so it has nothing to fit$"):
        runner.search_experiment(", so it has nothing to fit", where="--exp x")
    with pytest.raises(InputError, match=r"geometric_construction\.toml: not a search experiment \(why\)$"):
        runner.search_experiment(" (why)")
    searched = plan("assoc_memory_linear")
    assert searched.search_experiment(" (why)") is searched.experiment

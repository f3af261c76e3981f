"""A constant of a pack (a variable it declares, such as a law's exponent alpha) is given once per line and reaches
both the runs and the prediction; given two different values, reading the experiment file is one error naming the
file, the line and both values. A metric a law names that the task's runs do not store is refused with the fix
(``Task(run_metrics=...)``), and a law experiment's prediction carries the exponent under law_exponents' names too.

The runs come from the law tests' toy system (tests/unit/empirics/test_law_experiment.py, written to a temporary
folder and registered): a task whose stored ``test_error`` is ``3 / p**alpha * (1 + 2% seeded noise)``, its config
taking ``alpha`` (default 1), so the fitted slope against p is -alpha of the runs: a run that did not get the line's
alpha shows it.
"""
from __future__ import annotations


import pytest

from recallkit.assertions import sweep_and_fit
from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan
from recallkit.theory.errors import InputError
from tests.experiment_texts import experiment_load_error
from tests.unit.empirics.test_law_experiment import LAW_EXPERIMENT, LAW_PACK, registered_toy

__all__: list[str] = []

# the law tests' pack with the width term's exponent a declared variable alpha
PACK = (LAW_PACK.replace('name = "law_toy_pack"', 'name = "alpha_pack"')
        .replace('expr = "p**-1"', 'expr = "p**(-alpha)"')
        .replace("\n[[laws]]", '\n[[variables]]\nname = "alpha"\nmeaning = "exponent of the width term"\n\n[[laws]]'))

# the law tests' experiment on that pack, with room for a line's own keys, [fixed] and the preset's keys
EXPERIMENT = (LAW_EXPERIMENT.replace('name = "law_toy_width"', 'name = "alpha_width"')
              .replace("{pack}", "alpha_pack.toml").replace("{extra}\n", "")
              .replace("{lines}\n", "{line}\n[fixed]\n{fixed}\n") + "{preset}\n")


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The law tests' toy system (its config takes alpha) registered for one test, the alpha pack beside the
    experiments."""
    (tmp_path / "alpha_pack.toml").write_text(PACK, encoding="utf-8")
    yield from registered_toy(tmp_path, monkeypatch)


def write(root, line: str = "", fixed: str = "", preset: str = "", name: str = "law.toml") -> str:
    path = root / name
    path.write_text(EXPERIMENT.format(line=line, fixed=fixed, preset=preset), encoding="utf-8")
    return str(path)


def test_a_constant_given_in_theory_scaling_alone_reaches_the_runs(toy):
    path = write(toy, line='theory_scaling = "n=p**2, alpha=1/2"')
    experiment = load_experiment(path)
    assert experiment.build_config(experiment.lines[0], 8, 0, 0)["alpha"] == 0.5
    fitted = sweep_and_fit(path, store=toy / "store.db", executor=LocalExecutor(), log=None)
    (fit,) = fitted.fits
    doc = fit.to_dict()
    # the runs had alpha = 1/2 (their default is 1): the measured slope is the predicted one
    assert doc["predicted_slope"] == -0.5 and doc["slope"] == pytest.approx(-0.5, abs=0.03), doc
    assert doc["verdict"] == "consistent", doc["verdict_reason"]


def test_a_constant_given_in_fixed_alone_reaches_the_prediction(toy):
    planned = plan(write(toy, fixed="alpha = 0.5"))
    prediction = planned.predictions["n = p^2"]
    assert "error" not in prediction, prediction
    assert (prediction["slope"], prediction["slope_exact"]) == (-0.5, "-1/2")
    assert planned.experiment.build_config(planned.experiment.lines[0], 8, 0, 0)["alpha"] == 0.5
    assert planned.experiment.lines[0].label == "n = p^2"  # the label the file gives is kept


def test_a_constant_given_in_the_scaling_reaches_an_explicit_theory_scaling(toy):
    planned = plan(_rewrite(toy, 'scaling = "n=p**2"', 'scaling = "n=p**2, alpha=0.25"',
                            line='theory_scaling = "n=p**2"'))
    assert planned.predictions["n = p^2"]["slope_exact"] == "-1/4", planned.predictions["n = p^2"]


def _rewrite(root, old: str, new: str, **parts) -> str:
    path = write(root, **parts)
    text = open(path, encoding="utf-8").read()
    assert old in text
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize("place, parts", [
    ("[fixed]", {"fixed": "alpha = 0.25"}),
    ("lines[0].fixed", {"line": 'fixed = { alpha = 0.25 }\ntheory_scaling = "n=p**2, alpha=1/2"'}),
    ("presets.quick.fixed", {"preset": "fixed = { alpha = 0.25 }"}),
])
def test_fixed_and_theory_scaling_giving_two_values_is_one_error(toy, place, parts):
    parts.setdefault("line", 'theory_scaling = "n=p**2, alpha=1/2"')
    path = write(toy, **parts)
    message = experiment_load_error(path)
    assert message.startswith(f"{path}: lines[0] ('n = p^2'): alpha = 0.25 in {place} but alpha = 1/2 in its "
                              f"theory_scaling 'n=p**2, alpha=1/2'"), message
    assert "\n" not in message


def test_the_same_value_given_twice_is_accepted(toy):
    experiment = load_experiment(write(toy, line='theory_scaling = "n=p**2, alpha=1/2"', fixed="alpha = 0.5"))
    assert experiment.build_config(experiment.lines[0], 8, 0, 0)["alpha"] == 0.5


def test_a_count_the_theory_fixes_that_the_runs_scale_is_one_error(toy):
    path = write(toy, line='theory_scaling = "n=4096, alpha=1"')
    message = experiment_load_error(path)
    assert message.startswith(f"{path}: lines[0] ('n = p^2'): n = 16 in its scaling but n = 4096 in its "
                              f"theory_scaling"), message


def test_an_unstored_metric_is_refused_with_the_fix(toy):
    path = write(toy, fixed="alpha = 0.5")
    text = open(path, encoding="utf-8").read().replace('base = "p"', 'base = "p"\nmetric = "train_error"')
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    with pytest.raises(InputError) as caught:
        load_experiment(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: metric: 'train_error' is not a metric the runs of task law_toy_task store")
    assert "Task('law_toy_task', ..., run_metrics=('train_error',))" in message, message


def test_a_law_prediction_names_its_exponent_as_law_exponents_does(toy):
    planned = plan(write(toy, line='theory_scaling = "n=p**2, alpha=1/2"'))
    prediction = planned.predictions["n = p^2"]
    assert (prediction["exponent"], prediction["exponent_float"]) == (prediction["slope_exact"], prediction["slope"])
    assert prediction["exponent_float"] == -0.5

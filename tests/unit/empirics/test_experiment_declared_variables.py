"""An experiment may set a variable its pack declares ([[variables]] of the pack, e.g. a sample count n): in a
line's scaling (``n=V**2``) or in [fixed], and the run config gets the value when the task's config takes that
key; a task that does not take it, or a name the pack does not declare, is one line naming the file and field."""
from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from recallkit import registry
from recallkit.empirics.config import check_model
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan
from recallkit.registry import System, Task
from tests.experiment_texts import experiment_load_error
from tests.unit.theory.test_declared_variables import SAMPLES_PACK

__all__: list[str] = []

TASK_NAME = "declared_samples_task"


@dataclasses.dataclass(frozen=True)
class SamplesConfig:
    """A task whose config takes the pack's sample count n and exponent alpha (only validated, never trained)."""

    model: str
    V: int
    d: int
    n: int = 1
    alpha: float = 1.0
    MODELS: ClassVar[tuple[str, ...]] = ("linear",)

    def __post_init__(self) -> None:
        check_model(self)

    param_count = property(lambda self: self.d * self.d)
    trainable_params = property(lambda self: self.d * self.d)
    n_train = property(lambda self: self.n)

    def sizes(self) -> dict[str, int]:
        return {"V": self.V, "d": self.d, "n": self.n}

    def bytes_per_model(self, trainer_config) -> int:
        return 4 * self.d * self.d


@pytest.fixture
def samples_task(tmp_path):
    """Registers a system with the task above for one test."""
    task = Task(TASK_NAME, config=f"{__name__}:SamplesConfig", problem=f"{__name__}:SamplesConfig",
                trainers=("adam",))
    registry.register(System(name="declared_samples_system", title="declared variables test", root=tmp_path,
                             tasks=(task,)))
    yield TASK_NAME
    registry.unregister("declared_samples_system")


def experiment(tmp_path, scaling: str = "n=V**2", fixed: str = "alpha = 0.25", task: str = TASK_NAME,
               theory_scaling: str = "n=V**2, alpha=1/4") -> str:
    (tmp_path / "samples.toml").write_text(SAMPLES_PACK, encoding="utf-8")
    path = tmp_path / "exp.toml"
    path.write_text(f"""
name = "declared"
pack = "{tmp_path / 'samples.toml'}"
task = "{task}"
model = "linear"
trainer = "adam"
thresholds = [0.5]
search = {{ min = 4, max = 64 }}

[[lines]]
scaling = "{scaling}"
theory_scaling = "{theory_scaling}"
label = "line"

[fixed]
lr = 0.1
steps = 8
{fixed}

[presets.quick]
V = [4, 8]
seeds = [0]
""", encoding="utf-8")
    return str(path)


def test_a_line_and_fixed_set_declared_variables_of_the_pack(tmp_path, samples_task):
    exp = load_experiment(experiment(tmp_path))
    line = exp.lines[0]
    config = exp.build_config(line, 8, 16, 0)
    assert (config["n"], config["alpha"]) == (64, 0.25)
    assert isinstance(config["n"], int)  # n is declared integer: floored like the built-in sizes
    assert exp.build_config(line, 4, 16, 0)["n"] == 16


def test_a_real_declared_variable_set_by_a_line_is_not_floored(tmp_path, samples_task):
    # the theory_scaling says the same (its alpha=1/4 beside runs with alpha = 1/V is refused: test_pack_constants.py)
    exp = load_experiment(experiment(tmp_path, scaling="n=V**2, alpha=1/V", fixed="", theory_scaling="n=V**2, alpha=1/V"))
    assert exp.build_config(exp.lines[0], 8, 16, 0)["alpha"] == 0.125


def test_the_plan_predicts_the_line_and_its_realised_grid(tmp_path, samples_task):
    planned = plan(experiment(tmp_path))
    prediction = planned.predictions["line"]
    assert (prediction["dominant"], prediction["slope_exact"]) == ("finite_sample", "3/2"), prediction
    realised = planned.realised["line"]
    assert "error" not in realised, realised
    assert [point["n"] for point in realised["points"]] == [16, 64]
    assert realised["slope"] == pytest.approx(1.5)


def test_a_task_without_the_key_is_one_line_naming_file_field_and_task_keys(tmp_path):
    message = experiment_load_error(experiment(tmp_path, task="assoc_memory", fixed=""))
    assert "lines[0].scaling: n is a variable of pack samples, but task assoc_memory's config has no key 'n'" \
        in message, message
    assert "(its keys: N, d, m)" in message, message


def test_a_fixed_declared_variable_the_task_lacks_is_one_line(tmp_path):
    message = experiment_load_error(experiment(tmp_path, scaling="", task="assoc_memory", theory_scaling="n=V**2"))
    assert "fixed.alpha: alpha is a variable of pack samples, but task assoc_memory's config has no key 'alpha'" \
        in message, message


def test_a_name_the_pack_does_not_declare_is_one_line_naming_the_allowed_names(tmp_path, samples_task):
    message = experiment_load_error(experiment(tmp_path, scaling="q=V**2"))
    assert "lines[0].scaling: 'q' is not a size symbol or a variable of the pack" in message, message
    assert "V, N, d, L, m, R, n, alpha" in message, message


def test_a_declared_variable_must_be_positive(tmp_path, samples_task):
    message = experiment_load_error(experiment(tmp_path, scaling="n=V-8", fixed=""))
    assert "n at V=4" in message and "expected a positive integer, got -4" in message, \
        message


def test_the_plan_reads_a_theory_scaling_in_declared_variables(tmp_path, samples_task):
    planned = plan(experiment(tmp_path, theory_scaling="alpha=1/4, n=V**(8*alpha)"))
    assert planned.predictions["line"].get("slope_exact") == "3/2", planned.predictions["line"]


def test_the_finite_size_form_reads_a_theory_scaling_in_declared_variables(tmp_path, samples_task):
    from recallkit.compare.assertions import _finite_size

    planned = plan(experiment(tmp_path, theory_scaling="alpha=1/4, n=V**(8*alpha)"))
    line = planned.experiment.lines[0]
    finite = _finite_size(planned, line, [], lambda pack, term, row, measured: None if term is None else 1.0)
    assert finite is not None and finite["slope"] == pytest.approx(planned.realised["line"]["slope"])

"""A law experiment (``kind = "law"``): the metric of a pack's ``[[laws]]`` measured along lines, one run per
(line, base value, seed), stored and reused, and log(metric) fitted against log(base) per line, judged against
the law's exponent along the line.

The runs come from a tiny test system (written as a package into a temporary folder and registered): a task
whose stored ``test_error`` is ``3 / p * (1 + 2% seeded noise)``, trained by a closed-form trainer of the
system's own, so the fitted slope is known to be -1. The integration test writes the same package and
registers it through an entry point for the installed ``recallkit`` command.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from recallkit import registry
from recallkit.assertions import sweep_and_fit
from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.experiment import load_experiment
from recallkit.theory.errors import InputError
from tests.experiment_texts import experiment_load_error

__all__ = ["LAW_EXPERIMENT", "LAW_PACK", "TOY_SOURCE", "registered_toy", "write_registered_toy", "write_toy"]

TOY_SOURCE = '''
"""A task whose stored test_error is scale / p**alpha * (1 + noise * u), u uniform in [-1, 1) from the seed."""
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from recallkit.empirics.config import check_model
from recallkit.empirics.tasks import stream_seed
from recallkit.registry import System, Task, Trainer

CALLS = []


@dataclass(frozen=True)
class PowerConfig:
    model: str
    p: int
    n: int = 1
    scale: float = 3.0
    noise: float = 0.02
    alpha: float = 1.0  # the exponent of p, a constant of the pack (tests/unit/empirics/test_pack_constants.py)
    MODELS: ClassVar[tuple[str, ...]] = ("closed",)

    def __post_init__(self):
        check_model(self)

    param_count = property(lambda self: self.p)
    trainable_params = property(lambda self: self.p)
    n_train = property(lambda self: self.n)

    def sizes(self):
        return {"p": self.p, "n": self.n}

    def bytes_per_model(self, trainer_config):
        return 64


class PowerProblem:
    def __init__(self, configs, device):
        self.configs = configs
        self.params = {}
        self.n_train = configs[0].task_config.n

    def evaluate(self, params):
        values = []
        for c in self.configs:
            t = c.task_config
            u = (stream_seed(c.seed, f"noise/{t.p}/{t.n}") % 1000003) / 1000003 * 2 - 1
            values.append(t.scale / t.p ** t.alpha * (1 + t.noise * u))
        error = torch.tensor(values, dtype=torch.float64)
        return {"test_error": error, "accuracy": 1 - error, "train_accuracy": 1 - error, "loss": error}


@dataclass(frozen=True)
class SolveConfig:
    pass


def solve(problem, cfgs, sizes):
    CALLS.append(len(cfgs))
    return {}, {"steps_run": torch.zeros(len(cfgs))}


SOLVE = Trainer("law_toy_solve", SolveConfig, "law_toy_system:solve")
SYSTEM = System(name="law_toy", title="a task with a known power law", root=Path(__file__).parent,
                tasks=(Task("law_toy_task", config="law_toy_system:PowerConfig", problem="law_toy_system:PowerProblem",
                            trainers=("law_toy_solve",), run_metrics=("test_error",)),),
                trainers=("law_toy_system:SOLVE",))
'''

# test_error ~ p^-1 + n^-2: along n = p**2 the p term dominates (slope -1, three apart from the other's -4);
# along n = p**(1/2) both terms are p^-1 (on the boundary between the regions)
LAW_PACK = """
[pack]
name = "law_toy_pack"
title = "a toy law in a width p and a sample count n"
variables = []

[[variables]]
name = "p"
meaning = "width"
domain = "integer"

[[variables]]
name = "n"
meaning = "number of samples"
domain = "integer"

[[laws]]
name = "test_error"
metric = "test_error"
reference = "toy"

[[laws.terms]]
name = "width"
expr = "p**-1"
provenance = "derived-here"

[[laws.terms]]
name = "samples"
expr = "n**-2"
provenance = "derived-here"
"""

LAW_EXPERIMENT = """
name = "law_toy_width"
description = "test_error against p"
pack = "{pack}"
task = "law_toy_task"
model = "closed"
trainer = "law_toy_solve"
kind = "law"
law = "test_error"
base = "p"
{extra}
[[lines]]
scaling = "n=p**2"
label = "n = p^2"
{lines}
[verdict]
delta = 0.15
alpha = 0.05

[presets.quick]
p = [4, 8, 16, 32, 64]
seeds = [0, 1, 2, 3]
"""


def write_toy(root: Path) -> Path:
    """The toy system as the package ``law_toy_system`` under ``root``, with the law pack beside it."""
    package = root / "law_toy_system"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(TOY_SOURCE, encoding="utf-8")
    (root / "law_toy_pack.toml").write_text(LAW_PACK, encoding="utf-8")
    return root


def write_registered_toy(root: Path) -> Path:
    """:func:`write_toy` with its entry point (a dist-info folder, found when ``root`` is on PYTHONPATH) and the law
    experiment as ``law.toml``: the toy system as the installed ``recallkit`` command finds it."""
    write_toy(root)
    info = root / "law_toy_system-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: law-toy-system\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[recallkit.systems]\nlaw_toy = law_toy_system:SYSTEM\n")
    (root / "law.toml").write_text(LAW_EXPERIMENT.format(pack="law_toy_pack.toml", extra="", lines=""),
                                   encoding="utf-8")
    return root


def write_experiment(root: Path, extra: str = "", lines: str = "", pack: str | None = None,
                     name: str = "law.toml") -> str:
    path = root / name
    path.write_text(LAW_EXPERIMENT.format(pack=pack or root / "law_toy_pack.toml", extra=extra, lines=lines),
                    encoding="utf-8")
    return str(path)


def registered_toy(root: Path, monkeypatch):
    """The toy system written under ``root`` and registered until the test ends (a fixture yields from it)."""
    write_toy(root)
    monkeypatch.syspath_prepend(str(root))
    sys.modules.pop("law_toy_system", None)
    import law_toy_system
    registry.register(law_toy_system.SYSTEM)
    yield root
    registry.unregister("law_toy")
    sys.modules.pop("law_toy_system", None)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy system registered for one test."""
    yield from registered_toy(tmp_path, monkeypatch)


def test_a_law_experiment_loads_with_its_law_metric_and_direction(toy):
    exp = load_experiment(write_experiment(toy))
    assert (exp.kind, exp.law, exp.base, exp.metric, exp.direction) == ("law", "test_error", "p", "test_error", "lower")
    assert exp.planned_runs() == 5 * 4
    config = exp.build_config(exp.lines[0], 8, 0, 1)
    assert {k: config[k] for k in ("task", "p", "n", "seed")} == {"task": "law_toy_task", "p": 8, "n": 64, "seed": 1}
    assert "" not in config and "d" not in config


@pytest.mark.parametrize("old, new, field, expected", [
    ('law = "test_error"', 'law = "nope"', "law", "'nope' is not a law of pack law_toy_pack (its laws: test_error)"),
    ('base = "p"', 'base = "q"', "base",
     "expected a size symbol (V, N, d, L, m, R) or a variable of pack law_toy_pack (p, n), got 'q'"),
    ('base = "p"', 'base = "p"\nmetric = "no_such"', "metric",
     "'no_such' is not a metric the runs of task law_toy_task store (they store: "),
    ('base = "p"', 'base = "p"\ndirection = "up"', "direction", "expected one of lower, higher"),
    ('base = "p"', 'base = "p"\nthresholds = [0.5]', "thresholds", "not used with kind = 'law'"),
    ('base = "p"', 'base = "p"\nsearch = { min = 1, max = 8 }', "search", "not used with kind = 'law'"),
])
def test_a_bad_law_field_is_one_line_naming_file_and_field(toy, old, new, field, expected):
    text = LAW_EXPERIMENT.format(pack=toy / "law_toy_pack.toml", extra="", lines="")
    path = toy / "bad.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    message = experiment_load_error(str(path))
    assert f"{path}: {field}: " in message and expected in message, message


def test_law_and_direction_are_refused_in_other_kinds(toy):
    text = LAW_EXPERIMENT.format(pack=toy / "law_toy_pack.toml", extra="", lines="")
    path = toy / "other.toml"
    text = text.replace('kind = "law"', 'kind = "min_size"').replace('base = "p"', 'base = "V"')
    path.write_text(text.replace("n=p**2", "n=V**2"), encoding="utf-8")
    assert f"{path}: law: only used with kind = 'law' (this experiment is min_size)" in experiment_load_error(str(path))
    # min_size and max_capacity take a direction too (which way a threshold is reached); a grid does not
    path.write_text(text.replace("n=p**2", "n=V**2").replace('law = "test_error"', 'direction = "lower"')
                    .replace('kind = "min_size"', 'kind = "grid"'), encoding="utf-8")
    assert (f"{path}: direction: only used with kind = 'min_size', 'max_capacity' or 'law' (this experiment is grid)"
            in experiment_load_error(str(path)))


def test_law_is_required_for_a_law_experiment_and_refused_elsewhere(toy):
    text = LAW_EXPERIMENT.format(pack=toy / "law_toy_pack.toml", extra="", lines="")
    path = toy / "nolaw.toml"
    path.write_text(text.replace('law = "test_error"\n', ""), encoding="utf-8")
    assert "law: missing; expected a [[laws]] name of pack law_toy_pack (its laws: test_error)" in experiment_load_error(str(path))


def test_the_sweep_stores_every_run_and_a_second_sweep_trains_nothing(toy):
    path = write_experiment(toy)
    store = toy / "store.db"
    first = sweep_and_fit(path, store=store, executor=LocalExecutor(), log=None)
    assert (first.sweep["computed"], first.sweep["reused"]) == (20, 0)
    points = first.sweep_result.points
    assert len(points) == 20 and {p.variable for p in points} == {"p"} and not any(p.censored for p in points)
    written = first.sweep_result.to_dict()
    assert written["kind"] == "law" and len(written["runs"]) == 20
    assert "" not in written["runs"][0] and written["runs"][0]["p"] == 4 and "test_error" in written["runs"][0]
    assert written["boundary_points"][0]["variable"] == "p" and written["boundary_points"][0]["threshold"] is None
    second = sweep_and_fit(path, store=store, executor=LocalExecutor(), log=None)
    assert (second.sweep["computed"], second.sweep["reused"]) == (0, 20)
    assert second.fits[0].slope == first.fits[0].slope


def test_the_fit_finds_the_slope_and_judges_it_against_the_law(toy):
    fitted = sweep_and_fit(write_experiment(toy), store=toy / "store.db", executor=LocalExecutor(), log=None)
    (fit,) = fitted.fits
    doc = fit.to_dict()
    assert doc["slope"] == pytest.approx(-1.0, abs=0.03)
    assert doc["predicted_slope"] == -1.0 and doc["verdict"] == "consistent", doc["verdict_reason"]
    assert (doc["kind"], doc["law"], doc["metric"], doc["direction"], doc["variable"]) == (
        "law", "test_error", "test_error", "lower", "p")
    assert (doc["x"], doc["y"], doc["dominant"]) == ("log p", "log(test_error)", "width")
    assert "boundary" not in doc["verdict_reason"]
    assert str(fit.key) == "law_toy_width [n = p^2, test_error against p]"


def test_the_same_runs_are_inconsistent_with_a_law_that_says_minus_two(toy):
    steeper = toy / "steeper.toml"
    steeper.write_text(LAW_PACK.replace('expr = "p**-1"', 'expr = "p**-2"').replace('"law_toy_pack"', '"steeper"'),
                       encoding="utf-8")
    path = write_experiment(toy, pack=str(steeper))
    fit = sweep_and_fit(path, store=toy / "store.db", executor=LocalExecutor(), log=None).fits[0].to_dict()
    assert fit["predicted_slope"] == -2.0 and fit["slope"] == pytest.approx(-1.0, abs=0.03)
    assert fit["verdict"] == "inconsistent", fit["verdict_reason"]


def test_a_line_on_a_region_boundary_is_warned_in_the_reason(toy):
    lines = '[[lines]]\nscaling = "n=floor(p**0.5)+1"\ntheory_scaling = "n=p**(1/2)"\nlabel = "n = p^1/2"\n'
    fitted = sweep_and_fit(write_experiment(toy, lines=lines), store=toy / "store.db", executor=LocalExecutor(),
                           log=None)
    by_line = {f.line: f.to_dict() for f in fitted.fits}
    on_edge = by_line["n = p^1/2"]
    assert "within 0.05 of the boundary between terms width and samples" in on_edge["verdict_reason"], on_edge
    assert on_edge["boundary_gap"] == 0.0 and by_line["n = p^2"]["boundary_gap"] == 3.0


def test_the_json_document_says_law_and_the_variable(toy):
    doc = sweep_and_fit(write_experiment(toy), store=toy / "store.db", executor=LocalExecutor(), log=None).to_dict()
    assert doc["kind"] == "law"
    assert doc["law"] == {"name": "test_error", "metric": "test_error", "direction": "lower", "variable": "p"}
    assert doc["predictions"]["n = p^2"]["slope"] == -1.0
    assert doc["fits"][0]["variable"] == "p"
    assert "log(test_error)" in doc["method"]["fit"]


class GridRunner:
    """A stand-in for the engine: accuracy d / N, capped at 1 (a grid's heatmap needs numbers, not training)."""

    def __call__(self, configs, device=None, progress=False):
        return [{"accuracy": min(1.0, c["d"] / c["N"]), "train_accuracy": 1.0, "param_count": c["d"] ** 2,
                 "wall_time_s": 0.0, "device": "cpu", "threads": 1} for c in configs]


GRID_EXPERIMENT = """
name = "grid_cells"
task = "assoc_memory"
model = "linear"
trainer = "adamw"
kind = "grid"
base = "N"
size = "d"

[[lines]]
scaling = ""
theory_scaling = "m=d"
label = "linear"

[fixed]
lr = 1.0
steps = 10

[presets.quick]
N = [8, 16]
sizes = [4, 8]
seeds = [0, 1]
"""


def test_a_grid_experiment_sweeps_and_returns_its_cells_with_no_checks(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(GRID_EXPERIMENT, encoding="utf-8")
    fitted = sweep_and_fit(str(path), store=tmp_path / "store.db", executor=LocalExecutor(runner=GridRunner()),
                           log=None)
    assert fitted.fits == [] and fitted.kind == "grid"
    assert fitted.sweep["computed"] == 8
    cells = [run.to_dict() for run in fitted.sweep_result.runs]
    assert len(cells) == 8 and {(c["N"], c["d"]) for c in cells} == {(8, 4), (8, 8), (16, 4), (16, 8)}
    assert fitted.to_dict()["fits"] == []


def test_a_line_that_leaves_another_variable_free_has_no_prediction_and_says_why(toy):
    lines = '[[lines]]\nscaling = "n=p**2"\ntheory_scaling = "p=n**(1/2)"\nlabel = "stated in n"\n'
    fitted = sweep_and_fit(write_experiment(toy, lines=lines), store=toy / "store.db", executor=LocalExecutor(),
                           log=None)
    fit = {f.line: f.to_dict() for f in fitted.fits}["stated in n"]
    assert fit["verdict"] == "inconclusive" and fit["predicted_slope"] is None
    assert "the scaling 'p=n**(1/2)' leaves n free in law test_error, not the experiment's base p" \
        in fit["verdict_reason"], fit["verdict_reason"]


def test_a_law_experiment_has_no_threshold_to_choose(toy):
    from recallkit.compare.assertions import fit_experiment
    with pytest.raises(InputError, match=r"^--threshold: law_toy_width is a law experiment; it has no thresholds"):
        fit_experiment(write_experiment(toy), store=toy / "store.db", thresholds=[0.5])


"""Systems plug in through the hooks of recallkit.hookspecs (pluggy): the shipped systems and the example package
pass ``recallkit.check_system``, a plug-in with a wrong hook fails it in one line, the registry loads each installed
system once through its entry point, a report's steps are the ones that apply to it, report options are the
systems' own (``--option``), and a plug-in written against the earlier ``registry.System`` still runs, warning once."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from recallkit import registry
from recallkit.empirics.plan import plan
from recallkit.plugin_check import SystemCheckError, check_system
from recallkit.registry import RegistryError, SystemInfo, Task, hookimpl
from recallkit.report_settings import ReportSettings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RECALLKIT = shutil.which("recallkit")
SHIPPED = ["assoc_memory", "token_retrieval", "geometric_recall"]
LEGACY = ROOT / "tests" / "fixtures" / "legacy_rf_ridge"
PROBE_STEPS = ["recallkit.systems.token_retrieval.steps:term_probe_entry",
               "recallkit.systems.token_retrieval.steps:gradient_access_entry"]


@pytest.mark.parametrize("module", [f"recallkit.systems.{name}" for name in SHIPPED])
def test_every_shipped_system_passes_the_check(module):
    assert "recallkit_system" in check_system(module)


def test_the_example_package_passes_the_check(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "rf_ridge"))
    assert check_system("recallkit_rf_ridge") == ["recallkit_system", "recallkit_tasks", "recallkit_trainers"]


class _Plugin:
    """A small plug-in whose hooks a test replaces."""

    def __init__(self, root: Path, **hooks) -> None:
        self.recallkit_system = hookimpl(specname="recallkit_system")(
            lambda: SystemInfo(name="hook_toy", title="hook toy", root=root))
        for name, function in hooks.items():
            setattr(self, name, hookimpl(specname=name)(function))


def _one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message, message
    return message


def test_a_hook_with_an_argument_the_hookspec_lacks_fails_in_one_line(tmp_path):
    with pytest.raises(SystemCheckError) as failed:
        check_system(_Plugin(tmp_path, recallkit_search_judge=lambda entry, experiment, sweep, extra: None))
    message = _one_line(failed)
    assert "hook recallkit_search_judge" in message and "extra" in message, message


def test_a_hook_that_returns_the_wrong_type_fails_in_one_line(tmp_path):
    with pytest.raises(SystemCheckError) as failed:
        check_system(_Plugin(tmp_path, recallkit_tasks=lambda: ["assoc_memory"]))
    assert _one_line(failed).endswith("system hook_toy: hook recallkit_tasks: expected a list of Task, got str")


def test_a_misspelt_hook_and_a_main_job_experiment_that_is_not_there_fail_in_one_line(tmp_path):
    with pytest.raises(SystemCheckError) as failed:
        check_system(_Plugin(tmp_path, recallkit_task=lambda: ()))
    assert "hook recallkit_task: no such hook" in _one_line(failed)
    plugin = _Plugin(tmp_path)
    plugin.recallkit_system = hookimpl(specname="recallkit_system")(
        lambda: SystemInfo(name="hook_toy", title="hook toy", root=tmp_path, report=("missing",)))
    with pytest.raises(SystemCheckError, match=r"hook recallkit_system: report: 'missing' is not an experiment"):
        check_system(plugin)


def test_a_plugin_for_a_newer_hook_version_is_one_line(tmp_path):
    plugin = _Plugin(tmp_path)
    plugin.recallkit_system = hookimpl(specname="recallkit_system")(
        lambda: SystemInfo(name="hook_toy", title="hook toy", root=tmp_path, hookspec_version=99))
    with pytest.raises(RegistryError) as failed:
        registry.register(plugin)
    assert "written for recallkit's hooks version 99, this recallkit has version 1" in _one_line(failed)
    assert "hook_toy" not in [s.name for s in registry.systems()]


def test_the_registry_loads_each_installed_system_once_through_its_entry_point():
    assert not hasattr(registry, "SHIPPED")
    names = [s.name for s in registry.systems()]
    assert names[:3] == SHIPPED and len(names) == len(set(names))
    ours = {ep.name: ep.value for ep in entry_points(group=registry.ENTRY_POINT_GROUP)
            if ep.value.startswith("recallkit.systems.")}
    assert ours == {name: f"recallkit.systems.{name}" for name in SHIPPED}
    assert all(registry.get(name).origin.startswith(f"entry point {name} = ") for name in SHIPPED)


def test_a_system_registered_both_ways_is_one_line():
    import recallkit.systems.assoc_memory as installed

    with pytest.raises(RegistryError) as failed:
        registry.register(installed)
    assert "already registered (entry point assoc_memory" in _one_line(failed)
    assert [s.name for s in registry.systems()].count("assoc_memory") == 1


def test_a_notebook_registers_a_plugin_and_removes_it(tmp_path):
    plugin = _Plugin(tmp_path, recallkit_tasks=lambda: (Task("hook_toy_task", config="x:Y", problem="x:Z"),))
    registry.register(plugin)
    try:
        assert registry.systems()[-1].name == "hook_toy" and "hook_toy_task" in registry.tasks()
        assert registry.get("hook_toy").finite_size is None  # a hook it does not implement: none
    finally:
        registry.unregister("hook_toy")
    assert "hook_toy" not in [s.name for s in registry.systems()]


def test_a_report_of_fig2_alone_asks_for_no_probe_step_unless_its_option_asks():
    plans = [plan("tr_fig2_attention_only")]
    named = [Path("tr_fig2_attention_only")]
    assert registry.report_steps(plans, ReportSettings(experiments=named)) == []
    asked = ReportSettings(experiments=named, system_options={"token_retrieval": {"probes": True}})
    assert registry.report_steps(plans, asked) == PROBE_STEPS
    # the main job runs them unless told not to; a report of another system's experiment never does
    assert registry.report_steps([], ReportSettings(experiments=[])) == PROBE_STEPS
    off = ReportSettings(experiments=[], system_options={"token_retrieval": {"probes": False}})
    assert registry.report_steps([], off) == []
    other = ReportSettings(experiments=[Path("assoc_memory_linear")], system_options=asked.system_options)
    assert registry.report_steps([plan("assoc_memory_linear")], other) == []


@pytest.mark.parametrize("option, expected", [
    ("token_retrieval.prob=true", "--option token_retrieval.prob: expected one of token_retrieval's report options "
                                  "(probes), got 'prob'"),
    ("token_retrieval.probes=maybe", "--option token_retrieval.probes: expected true or false, got 'maybe'"),
    ("tokens.probes=true", "--option tokens.probes: expected a system with report options (token_retrieval), got "
                           "'tokens'"),
    ("probes", "--option: expected SYSTEM.NAME=VALUE (e.g. token_retrieval.probes=false), got 'probes'"),
])
def test_a_bad_option_is_one_line_naming_the_flag(tmp_path, option, expected):
    assert RECALLKIT, "the recallkit console script is not installed"
    result = subprocess.run([RECALLKIT, "report", "tr_fig2_attention_only", "--option", option, "--store",
                             str(tmp_path / "s.db"), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and lines[0].endswith(expected), result.stderr


def test_probes_and_its_option_with_other_values_are_one_line(tmp_path):
    result = subprocess.run([RECALLKIT, "report", "tr_fig2_attention_only", "--probes", "--option",
                             "token_retrieval.probes=false", "--out", str(tmp_path / "out")], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--probes: it sets --option token_retrieval.probes=true" in result.stderr


@pytest.fixture(scope="module")
def legacy_source(tmp_path_factory) -> Path:
    """The legacy package, assembled: its own registration (``registry.System``), packs and experiments from the
    fixture folder, and the example's config, task and trainer modules as they are (its trainer renamed, so that
    both can be installed at once): the same model, kept in one place."""
    build = tmp_path_factory.mktemp("legacy_build") / "legacy_rf_ridge"
    shutil.copytree(LEGACY, build)
    example = ROOT / "examples" / "rf_ridge" / "recallkit_rf_ridge"
    for name in ("config.py", "task.py"):
        shutil.copy(example / name, build / "legacy_rf_ridge" / name)
    trainer = (example / "trainer.py").read_text()
    assert trainer.count('Trainer("ridge",') == 1
    (build / "legacy_rf_ridge" / "trainer.py").write_text(trainer.replace('Trainer("ridge",', 'Trainer("legacy_ridge",'))
    return build


@pytest.fixture(scope="module")
def legacy_installed(tmp_path_factory, legacy_source) -> dict[str, str]:
    """The legacy fixture package pip-installed into a folder of its own (its entry point as pip leaves it), and the
    environment that finds it."""
    target = tmp_path_factory.mktemp("legacy") / "site"
    build = tmp_path_factory.mktemp("legacy_pip") / "legacy_rf_ridge"
    shutil.copytree(legacy_source, build)  # pip leaves its metadata (an entry point) in the folder it builds
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--no-index", "--target", str(target), str(build)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    env.update(PYTHONPATH=str(target), OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONWARNINGS="always")
    return env


def _deprecations(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "DeprecationWarning" in line]


def test_a_legacy_system_plugin_runs_its_experiment_with_one_deprecation_warning(legacy_installed, tmp_path):
    result = subprocess.run([RECALLKIT, "fit", "legacy_rf_ridge_width", "--store", str(tmp_path / "s.db"), "--json"],
                            capture_output=True, text=True, timeout=600, cwd=tmp_path, env=legacy_installed)
    assert result.returncode == 0, result.stderr[-3000:]
    (warning,) = _deprecations(result.stderr)
    assert "system legacy_rf_ridge: recallkit.registry.System is deprecated" in warning
    assert "recallkit_system, recallkit_tasks, recallkit_trainers of recallkit.hookspecs" in warning
    assert '"verdict": "consistent"' in result.stdout.replace("\n", " ").replace('"verdict":"', '"verdict": "')


def test_a_legacy_system_registered_in_a_notebook_works_and_warns_once(tmp_path, legacy_source):
    script = f"""
import sys, warnings
sys.path.insert(0, {str(legacy_source)!r})
warnings.simplefilter("always")
from recallkit import registry
from legacy_rf_ridge import SYSTEM
registry.register(SYSTEM)
registry.unregister(SYSTEM.name)
registry.register(SYSTEM)
print(registry.task("legacy_rf_ridge").run_metrics, sorted(registry.system_trainers())[-1])
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["('test_error',", "'train_error')", "legacy_ridge"]
    assert len(_deprecations(result.stderr)) == 1, result.stderr

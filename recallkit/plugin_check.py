"""``recallkit.check_system``: check a system plug-in against recallkit's hooks, as scikit-learn's ``check_estimator``
checks an estimator.

It registers the plug-in with a fresh pluggy manager (pluggy's own validation: each implementation's argument names
against its hook; a hook name recallkit does not have), checks what each declaration hook returns, and smoke-runs
what is cheap: the identity and its main-job experiments, each task's config and problem classes and a config's
``sizes()`` (built from the first of the system's experiments on that task), the trainers' config classes and train
functions, the page kinds' functions, the runners, each report step's ``applies`` on an empty list of plans, the
prediction source's methods and the report options. The first fault raises :class:`SystemCheckError`, whose message
is one line naming the system, the hook and what is wrong. Nothing is trained.

In a plug-in's own tests (``recallkit.testing.check_system``, or the pytest fixture ``recallkit_check_system``)::

    def test_my_system_plugs_in():
        check_system("my_package")
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import tomllib
from pathlib import Path
from typing import Any, Callable, Iterator

import pluggy

from recallkit import hookspecs, registry
from recallkit.report_settings import ReportSettings

__all__ = ["SystemCheckError", "check_system"]

OPTION_TYPES = (bool, int, float, str)


class SystemCheckError(AssertionError):
    """A plug-in that does not meet recallkit's hooks; the message is one line: system, hook, fault."""


def _fail(where: str, hook: str | None, fault: str) -> SystemCheckError:
    return SystemCheckError(" ".join(f"{where}: {'hook ' + hook + ': ' if hook else ''}{fault}".split()))


def _plugin(package_or_plugin: Any) -> tuple[Any, str]:
    """The plug-in to check (a module name is imported; a legacy System is adapted) and how to name it."""
    if isinstance(package_or_plugin, str):
        try:
            module = importlib.import_module(package_or_plugin)
        except ImportError as exc:
            raise _fail(package_or_plugin, None, f"cannot be imported: {type(exc).__name__}: {exc}") from None
        return module, package_or_plugin
    plugin = registry._as_plugin(package_or_plugin)
    return plugin, getattr(package_or_plugin, "__name__", None) or repr(plugin)


def _registered(plugin: Any, label: str) -> tuple[pluggy.PluginManager, str, dict[str, Any]]:
    """A fresh manager with only ``plugin``, validated by pluggy, and the plug-in's hook implementations."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    try:
        name = pm.register(plugin)
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        message = str(exc)
        if "unknown hook" in message:
            hook = message.split("unknown hook ")[-1].split(" ")[0].strip("'")
            raise _fail(label, hook, f"no such hook (recallkit.hookspecs has {', '.join(registry.HOOKS)})") from None
        raise _fail(label, None, registry._validation_message(exc)) from None
    return pm, name, registry._impls(pm).get(name, {})


def _loaded(reference: Any, where: str, hook: str, what: str) -> Any:
    try:
        return registry.load_object(reference)
    except (ImportError, AttributeError) as exc:
        raise _fail(where, hook, f"{what} {reference!r} failed to load: {type(exc).__name__}: {exc}") from None


def _callable(reference: Any, where: str, hook: str, what: str) -> Callable[..., Any]:
    found = _loaded(reference, where, hook, what)
    if not callable(found):
        raise _fail(where, hook, f"{what} {reference!r}: expected a callable, got {type(found).__name__}")
    return found


def _check_identity(record: registry.SystemRecord, where: str) -> None:
    if not isinstance(record.title, str) or not record.title.strip():
        raise _fail(where, "recallkit_system", f"title: expected a non-empty string, got {record.title!r}")
    if not Path(record.root).is_dir():
        raise _fail(where, "recallkit_system", f"root: expected a folder, got {str(record.root)!r}")
    for stem in record.report:
        if not (record.experiments_dir / f"{stem}.toml").is_file():
            raise _fail(where, "recallkit_system", f"report: {stem!r} is not an experiment of the system "
                                                   f"(expected {record.experiments_dir / (stem + '.toml')})")


def _experiment_on(record: registry.SystemRecord, task: str) -> Path | None:
    for path in record.experiment_paths():
        try:
            if tomllib.loads(path.read_text(encoding="utf-8")).get("task") == task:
                return path
        except (OSError, tomllib.TOMLDecodeError):
            continue
    return None


def _check_sizes(record: registry.SystemRecord, task: registry.Task, where: str) -> None:
    """A config of the task, as the first of the system's experiments on it builds one, and its ``sizes()``."""
    path = _experiment_on(record, task.name)
    if path is None:
        return
    plan = registry.load_object("recallkit.empirics.plan:plan")  # sympy and the packs, loaded when a check runs
    try:
        checked = plan(path).experiment.checked_configs
    except Exception as exc:  # the plug-in's experiment or config refused: named in one line
        raise _fail(where, "recallkit_tasks", f"task {task.name}: planning {path.name} failed: "
                                              f"{type(exc).__name__}: {exc}") from None
    if not checked:
        return
    sizes = next(iter(checked.values())).parsed.task_config.sizes()
    if not isinstance(sizes, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                              for k, v in sizes.items()):
        raise _fail(where, "recallkit_tasks", f"task {task.name}: sizes() of its config (built from {path.name}): "
                                              f"expected a dict of name to int, got {sizes!r}")


def _check_tasks(record: registry.SystemRecord, where: str) -> None:
    hook = "recallkit_tasks"
    for task in record.tasks:
        config = _loaded(task.config, where, hook, f"task {task.name}: config")
        if not (isinstance(config, type) and dataclasses.is_dataclass(config)):
            raise _fail(where, hook, f"task {task.name}: config: expected a dataclass, got {config!r}")
        missing = [m for m in ("MODELS", "sizes", "n_train", "param_count", "trainable_params", "bytes_per_model")
                   if not hasattr(config, m)]
        if "model" not in {f.name for f in dataclasses.fields(config)} or missing:
            raise _fail(where, hook, f"task {task.name}: config {config.__name__}: expected a 'model' field and "
                                     f"{', '.join(missing) or 'every member'} (docs/adding-a-system.md)")
        if not isinstance(_loaded(task.problem, where, hook, f"task {task.name}: problem"), type):
            raise _fail(where, hook, f"task {task.name}: problem: expected a class")
        for name, value in (("trainers", task.trainers), ("run_metrics", task.run_metrics)):
            if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
                raise _fail(where, hook, f"task {task.name}: {name}: expected a tuple of names, got {value!r}")
    for task in record.tasks:
        _check_sizes(record, task, where)


def _check_trainers(record: registry.SystemRecord, where: str) -> None:
    hook = "recallkit_trainers"
    for reference in record.trainers:
        trainer = _loaded(reference, where, hook, "trainer")
        if not isinstance(trainer, registry.Trainer):
            raise _fail(where, hook, f"{reference!r}: expected a recallkit.registry.Trainer, got "
                                     f"{type(trainer).__name__}")
        config = _loaded(trainer.config, where, hook, f"trainer {trainer.name}: config")
        if not (isinstance(config, type) and dataclasses.is_dataclass(config)):
            raise _fail(where, hook, f"trainer {trainer.name}: config: expected a dataclass, got {config!r}")
        _callable(trainer.train, where, hook, f"trainer {trainer.name}: train")
        if trainer.cost is not None:
            _callable(trainer.cost, where, hook, f"trainer {trainer.name}: cost")


def _check_steps(record: registry.SystemRecord, where: str) -> None:
    hook = "recallkit_report_steps"
    for step in record.steps:
        if not isinstance(registry._reference(step.function), str):
            raise _fail(where, hook, f"step {step.name}: function: expected 'module:function' or a function "
                                     f"importable under its name, got {step.function!r}")
        _callable(step.function, where, hook, f"step {step.name}: function")
        applies = _callable(step.applies, where, hook, f"step {step.name}: applies")
        for settings in (ReportSettings(experiments=[]), ReportSettings(experiments=[Path("named.toml")])):
            answer = applies([], settings)
            if not isinstance(answer, bool):
                raise _fail(where, hook, f"step {step.name}: applies([], settings): expected a bool, got "
                                         f"{type(answer).__name__}")


def _check_options(record: registry.SystemRecord, where: str) -> None:
    hook = "recallkit_report_options"
    for option in record.options.values():
        if not isinstance(option.name, str) or not option.name.isidentifier():
            raise _fail(where, hook, f"option {option.name!r}: expected a name (letters, digits, _)")
        if option.type not in OPTION_TYPES:
            raise _fail(where, hook, f"option {option.name}: type: expected one of bool, int, float, str, got "
                                     f"{option.type!r}")
        bad_default = isinstance(option.default, bool) and option.type is not bool
        if option.default is not None and (bad_default or not isinstance(option.default, option.type)):
            raise _fail(where, hook, f"option {option.name}: default: expected None or a {option.type.__name__}, "
                                     f"got {option.default!r}")


def _check_behaviour(record: registry.SystemRecord, where: str) -> None:
    if record.prediction_source is not None:
        source = _loaded(record.prediction_source, where, "recallkit_prediction_source", "prediction source")
        missing = [m for m in ("form", "calibrations", "ceiling") if not callable(getattr(source, m, None))]
        if missing:
            raise _fail(where, "recallkit_prediction_source", f"expected an object with form, calibrations and "
                                                             f"ceiling; {', '.join(missing)} missing")
    if record.all_terms is not None and record.finite_size is None:
        raise _fail(where, "recallkit_all_terms", "implemented without recallkit_finite_size: never called")
    if (record.probe is None) != (record.probe_table is None):
        raise _fail(where, "recallkit_probe", "recallkit_probe and recallkit_probe_table go together: implement both")


@contextlib.contextmanager
def _in_registry(plugin: Any, record: registry.SystemRecord, where: str) -> Iterator[None]:
    """The plug-in registered for the checks that go through the registry, when it is not installed."""
    try:
        added = record.name not in {s.name for s in registry.systems()}
        if added:
            registry.register(plugin)
    except registry.RegistryError as exc:
        raise _fail(where, None, str(exc)) from None
    try:
        yield
    finally:
        if added:
            registry.unregister(record.name)


def check_system(package_or_plugin: Any) -> list[str]:
    """Check a system plug-in: a module, its name (``"my_package"``), any object with hook implementations, or a
    legacy ``registry.System``. Returns the names of the hooks it implements; raises :class:`SystemCheckError` (one
    line) at the first fault."""
    plugin, label = _plugin(package_or_plugin)
    pm, name, impls = _registered(plugin, label)
    try:
        record = registry._record(pm, name, impls, label)
    except registry.RegistryError as exc:
        raise _fail(label, None, str(exc)) from None
    where = f"system {record.name}"
    for hook, value in (("recallkit_page_kinds", record.page_kinds),):
        for kind in value:
            _callable(kind.pages, where, hook, f"page kind {kind.name}: pages")
            _callable(kind.rows, where, hook, f"page kind {kind.name}: rows")
    for table, runner in record.runners.items():
        _callable(runner, where, "recallkit_runners", f"runner of [{table}]")
    _check_identity(record, where)
    with _in_registry(plugin, record, where):  # a config is built through the registry's task
        _check_tasks(record, where)
    _check_trainers(record, where)
    _check_steps(record, where)
    _check_options(record, where)
    _check_behaviour(record, where)
    return sorted(impls)

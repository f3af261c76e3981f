"""The registry of systems: what the stages and the pipeline look up instead of naming a system.

A *system* is one paper's model and everything that belongs to it alone: its theorem packs, its task (config
dataclass and batched problem), its experiment files, its runners for experiments that are not a plain search, its
judge (system-specific verdict logic), its report steps and pages. Each lives in one folder and plugs in through the
hooks of :mod:`recallkit.hookspecs` (pluggy). The stages never import a system; they ask this module (by task name,
pack name, experiment name or report kind) and get back a :class:`SystemRecord`: what the system's hooks declared,
with each behaviour hook as a ``"module:function"`` reference (or, for a plug-in object of a notebook, the callable):
:func:`load_object` passes callables through. This module imports no stage and nothing heavy, so any stage may use it.

Where systems come from:

1. every entry point of the group ``recallkit.systems`` (recallkit's own systems too, declared in its
   pyproject.toml; a third-party package declares ``[project.entry-points."recallkit.systems"] mine =
   "my_package"``), loaded through pluggy's ``load_setuptools_entrypoints``;
2. :func:`register`, at run time (tests, notebooks).

A system registered both ways is an error. The main job runs the shipped systems in :data:`RUN_ORDER`, the others
after them by name. A plug-in written against the earlier :class:`System` record keeps working through recallkit
0.2 (an adapter; one DeprecationWarning per system, naming the hooks to move to).
"""
from __future__ import annotations

import functools
import importlib
import warnings
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

import pluggy

from recallkit import hookspecs
from recallkit.hookspecs import HOOKSPEC_VERSION, ReportOption, ReportStep, SystemInfo, hookimpl

__all__ = ["default_report", "ENTRY_POINT_GROUP", "experiment_paths", "get", "HOOKSPEC_VERSION", "hookimpl",
           "LEGACY_HOOKS", "load_object", "pack_paths", "page_kinds", "PageKind", "plan_systems", "register",
           "RegistryError", "report_options", "report_steps", "ReportOption", "ReportStep", "RUN_ORDER", "runners",
           "System", "system_of_pack", "system_trainers", "SystemInfo", "SystemRecord", "systems", "Task", "task",
           "tasks", "Trainer", "unregister"]


ENTRY_POINT_GROUP = "recallkit.systems"
# The systems that ship with recallkit, in the order the main job runs them (entry points come in no set order)
RUN_ORDER = ("assoc_memory", "token_retrieval", "geometric_recall")
HOOKS = tuple(name for name in vars(hookspecs) if name.startswith("recallkit_"))


class RegistryError(Exception):
    """A system that cannot be loaded or that clashes with another (raised as InputError by callers)."""


def load_object(reference: str | Callable | Any) -> Any:
    """``"package.module:attribute"`` -> the attribute (objects pass through)."""
    if not isinstance(reference, str):
        return reference
    module_name, _, attribute = reference.partition(":")
    obj = importlib.import_module(module_name)
    for part in attribute.split(".") if attribute else ():
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Task:
    """One trainable task: its flat-config name, the config dataclass and the batched problem.

    ``config``: ``"module:Class"`` of a frozen dataclass with a ``model`` field, ``MODELS``, ``sizes()`` (the
    task's sizes by name, built-in ones and its own variables alike), ``n_train``, ``param_count``,
    ``trainable_params`` and ``bytes_per_model(trainer_config)`` (the memory estimate the engine chunks by; it
    gets the config of whichever trainer runs, so it asks a closed form's for no batch size). ``problem``:
    ``"module:Class"`` built as ``Class(configs, device)`` (see ``recallkit.empirics.tasks``); its
    ``evaluate(params)`` returns per-model tensors, every key stored with the run, and must hold the metrics the
    task's experiments judge (``accuracy`` for a search, the law's metric for a law experiment); ``loss`` and
    ``train_accuracy`` are needed by the gradient trainers only. ``trainers``: the trainers that apply to it.
    ``run_metrics``: the task's own metrics, beyond those every run stores
    (``recallkit.empirics.experiment.RUN_METRICS``): an experiment may judge a metric (its ``metric``, a line's, a
    law's) only when it is one of those or listed here (otherwise loading it is one error that names this fix);
    a search's run rows keep them beside the line's metric, the training accuracy, the parameter count and the
    wall time (the summary, its pages and the system's finite-size form read them there), e.g. token
    retrieval's measured attention mass, rf_ridge's ``test_error``. docs/adding-a-system.md walks through all of it.
    """

    name: str
    config: str
    problem: str
    trainers: tuple[str, ...] = ("adam", "adamw")
    run_metrics: tuple[str, ...] = ()

    def config_class(self) -> type:
        return load_object(self.config)

    def problem_class(self) -> type:
        return load_object(self.problem)


@dataclass(frozen=True)
class Trainer:
    """A trainer that a run config names in its ``trainer`` key.

    ``config``: its config dataclass (or ``"module:Class"``), frozen, built from the run config's keys
    that are its fields and validating them in ``__post_init__`` with one-line InputErrors. ``train``:
    the function (or ``"module:function"``) ``(problem, cfgs, sizes) -> (params, extra_metrics)`` the
    engine calls for one chunk of run configs of this trainer that share a shape: ``problem`` is their
    batched problem (leading model axis M = len(cfgs)), ``sizes`` the first config's
    ``task_config.sizes()`` (for expression values), ``params`` what ``problem.evaluate`` then measures
    and ``extra_metrics`` per-model tensors [M] stored beside the metrics; it must hold ``steps_run``.
    ``per_model``: the config keys that may differ between the models of one chunk (the train function
    reads them from each config); configs that differ in any other key train in different chunks.
    A closed-form trainer takes no steps: its config needs no ``steps`` key and ``extra_metrics`` may leave
    ``steps_run`` out (stored as 0).
    ``cost``: None, or the function (or ``"module:function"``) ``(task_config, trainer_config) -> FLOPs`` of one
    model's training and evaluation, which prices its runs (``--max-cost``) and balances workers in place of the
    task's ``train_flops``. Without either, the cost check says the trainer has no cost model and prices its
    runs at the per-run overhead only; it does not refuse them for that.
    A task takes the trainer once its ``Task.trainers`` lists its name.
    """

    name: str
    config: type | str
    train: Callable | str
    per_model: tuple[str, ...] = ()
    cost: Callable | str | None = None

    def config_class(self) -> type:
        return load_object(self.config)

    def train_function(self) -> Callable:
        return load_object(self.train)

    def cost_function(self) -> Callable | None:
        return None if self.cost is None else load_object(self.cost)


@dataclass(frozen=True)
class PageKind:
    """A kind of summary entry whose pages a system draws.

    ``pages``: ``"module:function"`` with signature ``(entry, head, experiments) -> [(stem, builder, label)]``
    (``label``, the page's line in the PDF outline and contents, may be left out: the stem stands in),
    where ``experiments`` are all entries of the report (a page may draw what another produced; such a
    page is redrawn whenever any entry changes, the others only when their own entry does);
    ``rows``: ``(entry) -> [verdict rows]`` for the summary table; ``compared``: what is compared, for
    the title page; ``intro_reasons``: put each verdict's reason on the section's first page;
    ``own_intro``: the system's first page replaces the generic section page.
    """

    name: str
    pages: str
    rows: str
    compared: str = ""
    intro_reasons: bool = False
    own_intro: bool = False


class _SystemFolder:
    """What a system's folder (``root``) holds: ``packs/*.toml`` and ``experiments/*.toml``."""

    root: Path

    @property
    def packs_dir(self) -> Path:
        return Path(self.root) / "packs"

    @property
    def experiments_dir(self) -> Path:
        return Path(self.root) / "experiments"

    def pack_paths(self) -> list[Path]:
        return sorted(self.packs_dir.glob("*.toml")) if self.packs_dir.is_dir() else []

    def experiment_paths(self) -> list[Path]:
        return sorted(self.experiments_dir.glob("*.toml")) if self.experiments_dir.is_dir() else []


@dataclass(frozen=True)
class System(_SystemFolder):
    """Deprecated (kept working through recallkit 0.2): a system described as one record of ``"module:function"``
    strings. A plug-in now implements the hooks of :mod:`recallkit.hookspecs`; registering a ``System`` (through an
    entry point or :func:`register`) still works, through an adapter, with one DeprecationWarning per system that
    names the hooks to move to (:data:`LEGACY_HOOKS`).

    Everything one paper's system registers. ``root`` is its folder (``README.md``, ``packs/``,
    ``experiments/``).

    - ``report``: stems of the experiments the main job runs, in order;
    - ``runners``: experiment-file table name -> ``"module:function"`` ``(path, context) -> entry``
      for experiments that are not a plain search (``context``: :class:`recallkit.pipeline.StepContext`);
    - ``search_judge``: ``"module:function"`` ``(entry, experiment, sweep) -> None`` that adds the
      system's own verdicts to a search experiment's entry whose pack is one of this system's;
    - ``report_steps``: ``"module:function"`` ``(context) -> entry | None`` run after the experiments;
    - ``probe``: ``"module:function"`` behind ``recallkit probe NAME`` (same keywords as the CLI);
    - ``finite_size``: ``"module:function"`` ``(pack, term, row, measured) -> float | None``: the factor that
      turns a pack term's asymptotic value at a realised grid row into its finite-size value (e.g. exact
      finite-L softmax weights in place of their asymptotic powers; ``measured`` holds the runs' mean
      metrics at that row, such as ``attention_mass``, and, when compare asks for one check, ``target``: the
      metric's value that check's boundary reaches at that row, with ``target_metric`` its name, so a form that
      depends on the level asked for is taken at it); None where the system has no finite-size form;
      with ``term=None`` it returns the constants it used (shown with the prediction);
    - ``all_terms``: ``"module:function"`` ``(pack, finite_size, targets) -> {"slope", "d", ...} | None``: one
      check's boundary from every term of the pack at once, given the line's finite-size prediction and the level
      the check's boundary reaches per base value; where it gives a slope the check is tested against it;
    - ``prediction_source``: ``"module:attribute"`` of an object that says where the system's tested predictions come
      from (``compare.evidence``): ``form(pack)`` (the finite-size form and the presets it was selected on),
      ``calibrations(pack)`` (the runs its constants were measured on) and ``ceiling(pack, finite_size, sizes)`` (the
      form's own ceiling, so that a fraction of the ceiling has an a priori level);
    - ``trainers``: ``"module:attribute"`` of each :class:`Trainer` the system adds to the shipped ones
      (imported the first time a trainer is looked up, see :func:`system_trainers`);
    - ``page_kinds``: the summary kinds whose pages this system draws.
    """

    name: str
    title: str
    root: Path
    tasks: tuple[Task, ...] = ()
    report: tuple[str, ...] = ()
    runners: Mapping[str, str] = field(default_factory=dict)
    search_judge: str | None = None
    report_steps: tuple[str, ...] = ()
    probe: str | None = None
    finite_size: str | None = None
    all_terms: str | None = None
    prediction_source: str | None = None
    trainers: tuple[str, ...] = ()
    page_kinds: tuple[PageKind, ...] = ()


@dataclass(frozen=True)
class SystemRecord(_SystemFolder):
    """One registered system as the stages see it: what its declaration hooks returned, and its behaviour hooks
    (``search_judge``, ``finite_size``, ``all_terms``, ``probe``, ``probe_table``) as ``"module:function"``
    references of its hook implementations, or None where it implements none (a callable in place of the
    reference for a plug-in object that is no module's attribute). ``origin`` says where it came from, for
    messages; ``plugin`` is the registered plug-in."""

    name: str
    title: str
    root: Path
    origin: str
    plugin: Any = field(repr=False, compare=False)
    report: tuple[str, ...] = ()
    tasks: tuple[Task, ...] = ()
    trainers: tuple[Trainer | str, ...] = ()
    page_kinds: tuple[PageKind, ...] = ()
    runners: Mapping[str, Any] = field(default_factory=dict)
    steps: tuple[ReportStep, ...] = ()
    options: Mapping[str, ReportOption] = field(default_factory=dict)
    prediction_source: Any = None
    search_judge: Any = None
    finite_size: Any = None
    all_terms: Any = None
    probe: Any = None
    probe_table: Any = None

    @property
    def report_steps(self) -> tuple[Any, ...]:
        """Every report step's function reference, whether or not it applies to a report (see :func:`report_steps`)."""
        return tuple(_reference(step.function) for step in self.steps)


# ----------------------------------------------------------------------------------------------- legacy System
# each field of the earlier System record -> the hooks that replace it
LEGACY_HOOKS = {"name": "recallkit_system", "title": "recallkit_system", "root": "recallkit_system",
                "report": "recallkit_system", "tasks": "recallkit_tasks", "trainers": "recallkit_trainers",
                "page_kinds": "recallkit_page_kinds", "runners": "recallkit_runners",
                "search_judge": "recallkit_search_judge", "report_steps": "recallkit_report_steps",
                "probe": "recallkit_probe, recallkit_probe_table", "finite_size": "recallkit_finite_size",
                "all_terms": "recallkit_all_terms", "prediction_source": "recallkit_prediction_source"}
# the attribute on a hook implementation that holds the "module:function" it stands for (the legacy adapter's)
_REFERENCE = "recallkit_reference"
_warned: set[str] = set()


def _legacy_step_applies(system: str, plans: list, settings: Any) -> bool:
    """A legacy system's report steps ran in the main job, and in a report of experiments of that system."""
    return not getattr(settings, "experiments", None) or system in plan_systems(plans)


def _calls(reference: str) -> Callable[..., Any]:
    """A hook implementation that calls ``reference`` with the hook's arguments, and remembers it."""
    def call(*args: Any, **kwargs: Any) -> Any:
        return load_object(reference)(*args, **kwargs)
    setattr(call, _REFERENCE, reference)
    return call


class LegacySystem:
    """The adapter that plugs a :class:`System` in as a plug-in: one hook implementation per field it sets."""

    def __init__(self, system: System) -> None:
        self.system = system
        s = system
        info = SystemInfo(name=s.name, title=s.title, root=Path(s.root), report=tuple(s.report))
        impls: dict[str, Callable[..., Any]] = {"recallkit_system": lambda: info}
        if s.tasks:
            impls["recallkit_tasks"] = lambda: tuple(s.tasks)
        if s.trainers:
            impls["recallkit_trainers"] = lambda: tuple(s.trainers)
        if s.page_kinds:
            impls["recallkit_page_kinds"] = lambda: tuple(s.page_kinds)
        if s.runners:
            impls["recallkit_runners"] = lambda: dict(s.runners)
        if s.report_steps:
            applies = functools.partial(_legacy_step_applies, s.name)
            steps = tuple(ReportStep(name=ref.rpartition(":")[2], function=ref, applies=applies)
                          for ref in s.report_steps)
            impls["recallkit_report_steps"] = lambda: steps
        if s.prediction_source:
            impls["recallkit_prediction_source"] = lambda: s.prediction_source
        for name, reference in (("recallkit_search_judge", s.search_judge), ("recallkit_finite_size", s.finite_size),
                                ("recallkit_all_terms", s.all_terms), ("recallkit_probe", s.probe)):
            if reference:
                impls[name] = _calls(reference)
        if s.probe:  # the probe's module gave the table too
            impls["recallkit_probe_table"] = _calls(s.probe.partition(":")[0] + ":format_table")
        for name, function in impls.items():
            setattr(self, name, hookimpl(specname=name)(function))

    def __repr__(self) -> str:
        return f"LegacySystem({self.system.name!r})"


def _legacy(system: System) -> LegacySystem:
    """``system`` adapted, with its one DeprecationWarning (the first time this process sees the system)."""
    if system.name not in _warned:
        _warned.add(system.name)
        used = [f for f in LEGACY_HOOKS if f in ("name", "title", "root") or getattr(system, f)]
        hooks = ", ".join(dict.fromkeys(h for f in used for h in LEGACY_HOOKS[f].split(", ")))
        warnings.warn(f"system {system.name}: recallkit.registry.System is deprecated (it works through recallkit "
                      f"0.2); implement the hooks {hooks} of recallkit.hookspecs instead (docs/adding-a-system.md, "
                      f"'Moving from registry.System')", DeprecationWarning, stacklevel=4)
    return LegacySystem(system)


def _as_plugin(obj: Any) -> Any:
    """A plug-in as pluggy registers it: a legacy :class:`System` (or a function returning one) adapted."""
    if isinstance(obj, System):
        return _legacy(obj)
    if callable(obj) and getattr(obj, "__name__", None) and type(obj).__name__ == "function" \
            and not hasattr(obj, hookspecs.PROJECT + "_impl"):
        made = obj()
        if isinstance(made, System):
            return _legacy(made)
        return made
    return obj


# ----------------------------------------------------------------------------------------------- the manager
def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _Manager(pluggy.PluginManager):
    """pluggy's manager, which adapts a legacy System as it registers and says a plug-in's fault in one line."""

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        plugin = _as_plugin(plugin)
        try:
            return super().register(plugin, name)
        except pluggy.PluginValidationError as exc:
            raise RegistryError(f"{_where(name, plugin)}: {_validation_message(exc)}") from None


def _validation_message(exc: pluggy.PluginValidationError) -> str:
    """pluggy's message (several lines: plug-in, definition, fault) as one line: the hook and what is wrong."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    hook = next((line.split("for hook ")[-1].strip("'") for line in lines if "for hook " in line), None)
    fault = lines[-1] if lines else str(exc)
    definition = next((line.split(": ", 1)[1] for line in lines if line.startswith("hookimpl definition")), None)
    out = f"hook {hook}: {fault}" if hook else fault
    return _one_line(out + (f" (implemented as {definition})" if definition else ""))


def _where(name: str | None, plugin: Any) -> str:
    if name is not None:
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if found:
            return f"entry point {name} = {found[0].value} (group {ENTRY_POINT_GROUP})"
    return f"plug-in {getattr(plugin, '__name__', None) or plugin!r}"


_pm: _Manager | None = None
_entry_names: dict[str, str] = {}  # plug-in name -> "entry point NAME = VALUE"
_runtime: dict[str, str] = {}  # system name -> plug-in name, for the systems register() added
_records: dict[str, SystemRecord] | None = None
# system_trainers(), kept until the registered systems change
_loaded_trainers: dict[str, tuple[SystemRecord, Trainer]] | None = None


def _new_manager() -> _Manager:
    pm = _Manager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    try:
        pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
    except RegistryError:
        raise
    except Exception as exc:  # a broken plug-in is named, not a traceback: find which entry point it was
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if pm.has_plugin(ep.name):
                continue
            try:
                ep.load()
            except Exception as failed:
                raise RegistryError(f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) failed to "
                                    f"load: {type(failed).__name__}: {_one_line(failed)}") from None
        raise RegistryError(f"group {ENTRY_POINT_GROUP}: {type(exc).__name__}: {_one_line(exc)}") from None
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if pm.has_plugin(ep.name):
            _entry_names.setdefault(ep.name, f"entry point {ep.name} = {ep.value}")
    _check_pending(pm)
    return pm


def _check_pending(pm: pluggy.PluginManager) -> None:
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        name = pm.get_name(exc.plugin) or ""
        hook = str(exc).split("unknown hook ")[-1].split(" ")[0].strip("'")
        raise RegistryError(f"{_entry_names.get(name) or _where(None, exc.plugin)}: hook {hook}: no such hook "
                            f"(recallkit.hookspecs has {', '.join(HOOKS)})") from None


def _manager() -> _Manager:
    global _pm
    if _pm is None:
        _pm = _new_manager()
    return _pm


def _impls(pm: pluggy.PluginManager) -> dict[str, dict[str, Any]]:
    """Plug-in name -> {hook name: its HookImpl}."""
    found: dict[str, dict[str, Any]] = {pm.get_name(p): {} for p in pm.get_plugins()}
    for hook in HOOKS:
        for impl in getattr(pm.hook, hook).get_hookimpls():
            found.setdefault(impl.plugin_name, {})[hook] = impl
    return found


# ----------------------------------------------------------------------------------------------- records
class _HookCall:
    """A behaviour hook's implementation that takes fewer arguments than the hook (pluggy allows it), called the way
    the stages call a reference: positionally in the hook's order, or by the hook's keywords."""

    def __init__(self, function: Callable[..., Any], argnames: tuple[str, ...], hook_argnames: tuple[str, ...]):
        self.function, self.argnames, self.hook_argnames = function, tuple(argnames), tuple(hook_argnames)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        given = {**dict(zip(self.hook_argnames, args)), **kwargs}
        return self.function(*[given[name] for name in self.argnames])

    def __repr__(self) -> str:
        return f"_HookCall({self.function!r})"


def _reference(function: Any) -> Any:
    """``"module:qualified.name"`` of a function importable under that name (how own steps and the caches key it),
    else the function itself."""
    found = getattr(function, _REFERENCE, None)
    if isinstance(function, str) or found:
        return found or function
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    if module and name and "<" not in name:
        try:
            if load_object(f"{module}:{name}") is function:
                return f"{module}:{name}"
        except (ImportError, AttributeError):
            pass
    return function


def _declared(impls: Mapping[str, Any], hook: str, where: str) -> Any:
    """What a declaration hook returns (None where the system does not implement it)."""
    impl = impls.get(hook)
    if impl is None:
        return None
    try:
        return impl.function()
    except Exception as exc:  # a plug-in's fault, named in one line
        raise RegistryError(f"{where}: hook {hook} failed: {type(exc).__name__}: {_one_line(exc)}") from None


def _declared_items(impls: Mapping[str, Any], hook: str, kind: type | tuple[type, ...], where: str) -> tuple:
    value = _declared(impls, hook, where)
    if value is None:
        return ()
    items = tuple(value) if isinstance(value, (list, tuple)) else None
    names = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
    if items is None or not all(isinstance(item, kind) for item in items):
        bad = type(value).__name__ if items is None else next(type(i).__name__ for i in items if not isinstance(i, kind))
        raise RegistryError(f"{where}: hook {hook}: expected a list of {names}, got {bad}")
    return items


def _behaviour(pm: pluggy.PluginManager, impls: Mapping[str, Any], hook: str) -> Any:
    impl = impls.get(hook)
    if impl is None:
        return None
    hook_argnames = tuple(getattr(pm.hook, hook).spec.argnames)
    if getattr(impl.function, _REFERENCE, None) or tuple(impl.argnames) == hook_argnames:
        return _reference(impl.function)
    return _HookCall(impl.function, impl.argnames, hook_argnames)


def _identity(impls: Mapping[str, Any], origin: str) -> SystemInfo:
    if "recallkit_system" not in impls:
        raise RegistryError(f"{origin}: implements no recallkit_system hook (the system's name, title and root): "
                            f"not a recallkit system")
    info = _declared(impls, "recallkit_system", origin)
    if not isinstance(info, SystemInfo) or not isinstance(info.name, str) or not info.name:
        got = type(info).__name__ if not isinstance(info, SystemInfo) else f"name {info.name!r}"
        raise RegistryError(f"{origin}: hook recallkit_system: expected a recallkit.hookspecs.SystemInfo with a "
                            f"non-empty name, got {got}")
    if isinstance(info.hookspec_version, bool) or not isinstance(info.hookspec_version, int) \
            or info.hookspec_version > HOOKSPEC_VERSION:
        raise RegistryError(f"system {info.name} ({origin}): written for recallkit's hooks version "
                            f"{info.hookspec_version!r}, this recallkit has version {HOOKSPEC_VERSION}: upgrade "
                            f"recallkit")
    return info


def _record(pm: pluggy.PluginManager, plugin_name: str, impls: Mapping[str, Any], origin: str) -> SystemRecord:
    """The system one plug-in declares, with its declarations checked for type."""
    info = _identity(impls, origin)
    where = f"system {info.name}"
    runners = _declared(impls, "recallkit_runners", where) or {}
    if not isinstance(runners, Mapping) or not all(isinstance(k, str) for k in runners):
        raise RegistryError(f"{where}: hook recallkit_runners: expected a mapping of table name to runner, got "
                            f"{type(runners).__name__}")
    options = _declared_items(impls, "recallkit_report_options", ReportOption, where)
    return SystemRecord(
        name=info.name, title=info.title, root=Path(info.root), origin=origin, plugin=pm.get_plugin(plugin_name),
        report=tuple(info.report), tasks=_declared_items(impls, "recallkit_tasks", Task, where),
        trainers=_declared_items(impls, "recallkit_trainers", (Trainer, str), where),
        page_kinds=_declared_items(impls, "recallkit_page_kinds", PageKind, where),
        runners=MappingProxyType({table: _reference(runner) for table, runner in runners.items()}),
        steps=_declared_items(impls, "recallkit_report_steps", ReportStep, where),
        options=MappingProxyType({option.name: option for option in options}),
        prediction_source=_declared(impls, "recallkit_prediction_source", where),
        search_judge=_behaviour(pm, impls, "recallkit_search_judge"),
        finite_size=_behaviour(pm, impls, "recallkit_finite_size"),
        all_terms=_behaviour(pm, impls, "recallkit_all_terms"),
        probe=_behaviour(pm, impls, "recallkit_probe"), probe_table=_behaviour(pm, impls, "recallkit_probe_table"))


def _origin(plugin_name: str) -> str:
    return _entry_names.get(plugin_name) or f"registry.register({plugin_name})"


def _load() -> dict[str, SystemRecord]:
    global _records
    if _records is not None:
        return _records
    pm = _manager()
    found: dict[str, SystemRecord] = {}
    for plugin_name, impls in _impls(pm).items():
        record = _record(pm, plugin_name, impls, _origin(plugin_name))
        if record.name in found:
            raise RegistryError(f"system {record.name}: registered twice ({found[record.name].origin}; "
                                f"{record.origin}): a system registers once")
        found[record.name] = record
    ordered = {name: found[name] for name in RUN_ORDER if name in found}
    ordered.update((name, found[name]) for name in sorted(found) if name not in ordered)
    _check_unique(ordered.values())
    _records = ordered
    return ordered


def _check_unique(systems: Iterable[SystemRecord]) -> None:
    seen: dict[tuple[str, str], str] = {}
    for system in systems:
        names = [("task", t.name) for t in system.tasks] + [("pack", p.stem) for p in system.pack_paths()]
        names += [("experiment", p.stem) for p in system.experiment_paths()]
        names += [("report kind", k.name) for k in system.page_kinds]
        for key in names:
            if key in seen and seen[key] != system.name:
                raise RegistryError(f"system {system.name}: {key[0]} {key[1]!r} is already registered by "
                                    f"system {seen[key]}")
            seen[key] = system.name


def _forget() -> None:
    global _records, _loaded_trainers
    _records, _loaded_trainers = None, None


def register(plugin: Any) -> Any:
    """Add a system at run time (a notebook, a test): a plug-in (a module or any object whose functions carry the
    :data:`hookimpl` marker) or a legacy :class:`System`; returns it. A system that :func:`register` added earlier
    under the same name is replaced; one installed through an entry point is not: registering it both ways is an
    error."""
    pm = _manager()
    _load()  # the installed systems first: their faults are theirs, not this plug-in's
    adapted = _as_plugin(plugin)
    try:
        plugin_name = pm.register(adapted)
    except ValueError:  # pluggy: this very plug-in is registered already
        known = next((name for name, p in pm.list_name_plugin() if p is adapted), None)
        raise RegistryError(f"{_where(None, adapted)}: already registered ({_origin(known or '?')}): a system "
                            f"registers once, through its entry point or with registry.register()") from None
    _forget()
    try:
        _check_pending(pm)
        record = _record(pm, plugin_name, _impls(pm).get(plugin_name, {}), _origin(plugin_name))
        installed = _load_without(plugin_name, record.name)
        if record.name in installed and record.name not in _runtime:
            raise RegistryError(f"system {record.name}: already registered ({installed[record.name].origin}): a "
                                f"system registers once, through its entry point or with registry.register(), "
                                f"not both")
    except RegistryError:
        pm.unregister(name=plugin_name)
        _forget()
        raise
    previous = _runtime.get(record.name)
    if previous is not None:
        pm.unregister(name=previous)
    _runtime[record.name] = plugin_name
    _forget()
    try:
        _load()
    except RegistryError:
        unregister(record.name)
        raise
    return plugin


def _load_without(plugin_name: str, system: str) -> dict[str, SystemRecord]:
    """The other plug-ins' systems (the one being registered left out), by name."""
    pm = _manager()
    return {record.name: record for name, impls in _impls(pm).items() if name != plugin_name
            for record in [_record(pm, name, impls, _origin(name))]}


def unregister(name: str) -> None:
    """Remove a system added with :func:`register` (the installed ones stay)."""
    plugin_name = _runtime.pop(name, None)
    if plugin_name is not None and _pm is not None and _pm.has_plugin(plugin_name):
        _pm.unregister(name=plugin_name)
    _forget()


# ----------------------------------------------------------------------------------------------- queries
def systems() -> list[SystemRecord]:
    """Every registered system, in run order: :data:`RUN_ORDER`, then the others by name."""
    return list(_load().values())


def get(name: str) -> SystemRecord:
    found = _load()
    if name not in found:
        raise RegistryError(f"{name!r}: no such system (registered: {', '.join(found)})")
    return found[name]


def tasks() -> dict[str, Task]:
    return {t.name: t for s in systems() for t in s.tasks}


def task(name: str) -> Task:
    known = tasks()
    if name not in known:
        raise RegistryError(f"task: expected one of {', '.join(known)}, got {name!r}")
    return known[name]


def system_trainers() -> dict[str, tuple[SystemRecord, Trainer]]:
    """Trainer name -> (system, :class:`Trainer`), over every system's ``trainers``. Their modules are imported
    here, not when the registry loads (a trainer's module may import torch). A name that two systems
    register, or that one registers twice, is a RegistryError naming both."""
    global _loaded_trainers
    if _loaded_trainers is not None:
        return _loaded_trainers
    found: dict[str, tuple[SystemRecord, Trainer]] = {}
    for system in systems():
        for reference in system.trainers:
            where = f"system {system.name}: trainers: {reference}"
            try:
                trainer = load_object(reference)
            except (ImportError, AttributeError) as exc:
                raise RegistryError(f"{where} failed to load: {type(exc).__name__}: {exc}") from None
            if not isinstance(trainer, Trainer):
                raise RegistryError(f"{where}: expected a recallkit.registry.Trainer, got {type(trainer).__name__}")
            if trainer.name in found:
                raise RegistryError(f"system {system.name}: trainer {trainer.name!r} is already registered by "
                                    f"system {found[trainer.name][0].name}")
            found[trainer.name] = (system, trainer)
    _loaded_trainers = found
    return found


def pack_paths() -> dict[str, Path]:
    """Pack name -> file, over every system."""
    return {p.stem: p for s in systems() for p in s.pack_paths()}


def experiment_paths() -> dict[str, Path]:
    """Shipped experiment name (file stem) -> file, over every system."""
    return {p.stem: p for s in systems() for p in s.experiment_paths()}


def system_of_pack(pack: str | None) -> SystemRecord | None:
    for system in systems():
        if pack and any(p.stem == pack for p in system.pack_paths()):
            return system
    return None


def page_kinds() -> dict[str, PageKind]:
    return {k.name: k for s in systems() for k in s.page_kinds}


def runners() -> dict[str, tuple[SystemRecord, Any]]:
    """Experiment-file table name -> (system, runner reference)."""
    return {table: (s, ref) for s in systems() for table, ref in s.runners.items()}


def default_report() -> list[Path]:
    """The main job's experiment files: each system's ``report`` list, systems in run order."""
    out = []
    for system in systems():
        for stem in system.report:
            out.append(system.experiments_dir / f"{stem}.toml")
    return out


def report_options() -> dict[str, Mapping[str, ReportOption]]:
    """System name -> its report options by name (``recallkit report --option SYSTEM.NAME=VALUE``), for the systems
    that add any."""
    return {s.name: s.options for s in systems() if s.options}


def plan_systems(plans: Iterable[Any]) -> set[str]:
    """The names of the systems the planned experiments belong to: by their task, by the folder their file lies in,
    or by the runner that runs them."""
    records = systems()
    found: set[str] = set()
    for planned in plans:
        task_name = getattr(getattr(planned, "experiment", None), "task", None)
        folder = Path(planned.path).resolve().parent
        owner = getattr(getattr(planned, "system", None), "name", None)
        found.update(s.name for s in records if s.name == owner or s.experiments_dir.resolve() == folder
                     or task_name in {t.name for t in s.tasks})
    return found


def report_steps(plans: list[Any], settings: Any) -> list[str]:
    """The ``"module:function"`` of every system's report step (systems in run order) whose ``applies(plans,
    settings)`` is true for this report."""
    out = []
    for system in systems():
        for step in system.steps:
            where = f"system {system.name}: report step {step.name}"
            try:
                wanted = load_object(step.applies)(plans, settings)
            except Exception as exc:  # a plug-in's fault, named in one line
                raise RegistryError(f"{where}: applies failed: {type(exc).__name__}: {_one_line(exc)}") from None
            if not wanted:
                continue
            reference = _reference(step.function)
            if not isinstance(reference, str):
                raise RegistryError(f"{where}: expected its function as 'module:function' or a function importable "
                                    f"under its name (the report keys its cache by it and may run it in a worker "
                                    f"process), got {reference!r}")
            out.append(reference)
    return out

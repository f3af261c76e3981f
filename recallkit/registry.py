"""The registry of systems: what the stages and the pipeline look up instead of naming a system.

A *system* is one paper's model and everything that belongs to it alone: its theorem packs, its
task (config dataclass and batched problem), its experiment files, its runners for experiments that
are not a plain search, its judge (system-specific verdict logic) and its report pages. Each lives in
one folder and describes itself with a :class:`System`. The stages never import a system; they ask
this module (by task name, pack name, experiment name or report kind) and get back what the
system registered. This module imports no stage and nothing heavy, so any stage may use it.

Where systems come from, in this order:

1. the shipped ones (:data:`SHIPPED`, the modules under ``recallkit.systems``);
2. every entry point of the group ``recallkit.systems`` (a third-party package declares
   ``[project.entry-points."recallkit.systems"] mine = "my_package:SYSTEM"``; the value is a
   :class:`System` or a function returning one);
3. :func:`register`, at run time (tests, notebooks).

Callables are named as ``"module:attribute"`` strings and imported only when used, so loading the
registry never imports torch or matplotlib.
"""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

__all__ = ["default_report", "ENTRY_POINT_GROUP", "experiment_paths", "get", "load_object", "pack_paths",
           "page_kinds", "PageKind", "register", "RegistryError", "runners", "SHIPPED", "System", "system_of_pack",
           "system_trainers", "systems", "Task", "task", "tasks", "Trainer", "unregister"]


ENTRY_POINT_GROUP = "recallkit.systems"
# The systems that ship with recallkit, in the order the main job runs them.
SHIPPED = (
    "recallkit.systems.assoc_memory:SYSTEM",
    "recallkit.systems.token_retrieval:SYSTEM",
    "recallkit.systems.geometric_recall:SYSTEM",
)


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


@dataclass(frozen=True)
class System:
    """Everything one paper's system registers. ``root`` is its folder (``README.md``, ``packs/``,
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


_loaded: dict[str, System] | None = None
_added: list[System] = []
# system_trainers(), kept until the registered systems change
_loaded_trainers: dict[str, tuple[System, Trainer]] | None = None


def _as_system(obj: Any, where: str) -> System:
    if callable(obj) and not isinstance(obj, System):
        obj = obj()
    if not isinstance(obj, System):
        raise RegistryError(f"{where}: expected a recallkit.registry.System, got {type(obj).__name__}")
    return obj


def _entry_points() -> Iterable[Any]:
    return entry_points(group=ENTRY_POINT_GROUP)


def _load() -> dict[str, System]:
    global _loaded
    if _loaded is not None:
        return _loaded
    found: dict[str, System] = {}
    for reference in SHIPPED:
        system = _as_system(load_object(reference), reference)
        found[system.name] = system
    for ep in sorted(_entry_points(), key=lambda ep: ep.name):
        if ep.value in SHIPPED:  # our own entry points, already loaded
            continue
        try:
            system = _as_system(ep.load(), f"entry point {ep.name} = {ep.value}")
        except RegistryError:
            raise
        except Exception as exc:  # a broken third-party plug-in is named, not a traceback
            raise RegistryError(f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
        if system.name in found:
            raise RegistryError(f"entry point {ep.name}: a system named {system.name!r} is already registered")
        found[system.name] = system
    for system in _added:
        found[system.name] = system
    _check_unique(found.values())
    _loaded = found
    return found


def _check_unique(systems: Iterable[System]) -> None:
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


def register(system: System) -> System:
    """Add (or replace, by name) a system at run time; returns it."""
    global _loaded, _loaded_trainers
    _as_system(system, "register")
    _added[:] = [s for s in _added if s.name != system.name] + [system]
    _loaded, _loaded_trainers = None, None
    _load()
    return system


def unregister(name: str) -> None:
    """Remove a system added with :func:`register` (shipped and entry-point systems stay)."""
    global _loaded, _loaded_trainers
    _added[:] = [s for s in _added if s.name != name]
    _loaded, _loaded_trainers = None, None


def systems() -> list[System]:
    """Every registered system, shipped first, in run order."""
    return list(_load().values())


def get(name: str) -> System:
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


def system_trainers() -> dict[str, tuple[System, Trainer]]:
    """Trainer name -> (system, :class:`Trainer`), over every system's ``trainers``. Their modules are imported
    here, not when the registry loads (a trainer's module may import torch). A name that two systems
    register, or that one registers twice, is a RegistryError naming both."""
    global _loaded_trainers
    if _loaded_trainers is not None:
        return _loaded_trainers
    found: dict[str, tuple[System, Trainer]] = {}
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


def system_of_pack(pack: str | None) -> System | None:
    for system in systems():
        if pack and any(p.stem == pack for p in system.pack_paths()):
            return system
    return None


def page_kinds() -> dict[str, PageKind]:
    return {k.name: k for s in systems() for k in s.page_kinds}


def runners() -> dict[str, tuple[System, str]]:
    """Experiment-file table name -> (system, runner reference)."""
    return {table: (s, ref) for s in systems() for table, ref in s.runners.items()}


def default_report() -> list[Path]:
    """The main job's experiment files: each system's ``report`` list, systems in run order."""
    out = []
    for system in systems():
        for stem in system.report:
            out.append(system.experiments_dir / f"{stem}.toml")
    return out

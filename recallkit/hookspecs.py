"""The hooks a system implements: recallkit's plug-in interface, declared with pluggy (the plugin system of pytest).

A *system* is one plug-in: a module (or any object) whose functions carry the :data:`hookimpl` marker and whose
names are the hooks below. It is installed through the entry-point group ``recallkit.systems``
(``[project.entry-points."recallkit.systems"] my_system = "my_package"``) or registered at run time with
``recallkit.registry.register(plugin)``. Every hook is optional but :func:`recallkit_system`; a hook that a system
does not implement is never called for it (a system without :func:`recallkit_finite_size` has no finite-size form).

Two kinds of hook:

- *declarations* (identity, tasks, trainers, page kinds, runners, report steps, prediction source, report options)
  are called once, when the registry loads. They must be cheap and must not import torch, matplotlib or the
  system's heavy modules: return ``"module:attribute"`` references where the object lives in such a module
  (:func:`recallkit.registry.load_object` imports it when it is first used);
- *behaviour* (search judge, finite-size factor, all-terms prediction, probe) are called when the stages need them,
  with the arguments their signature names.

pluggy checks each implementation's argument names against its hook when the system registers (an implementation
may take fewer arguments than the hook, never others); ``recallkit.check_system`` also checks what the declarations
return. A plug-in may say which version of this interface it was written for (:attr:`SystemInfo.hookspec_version`):
a version newer than :data:`HOOKSPEC_VERSION` is refused in one line.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pluggy

if TYPE_CHECKING:  # the records of recallkit.registry, which imports this module
    from recallkit.registry import PageKind, Task, Trainer

__all__ = ["HOOKSPEC_VERSION", "PROJECT", "ReportOption", "ReportStep", "SystemInfo", "hookimpl", "hookspec"]

#: the version of this interface; a plug-in written for a newer one is refused (bumped when a hook changes)
HOOKSPEC_VERSION = 1
PROJECT = "recallkit"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@dataclass(frozen=True)
class SystemInfo:
    """A system's identity (:func:`recallkit_system`).

    ``name``: unique over all registered systems (report options are named ``NAME.option``); ``title``: one line, for
    the report; ``root``: the folder holding ``packs/*.toml`` and ``experiments/*.toml`` (and the system's
    README.md); ``report``: stems of the experiments the main job (``recallkit report`` with no experiment named)
    runs, in order; ``hookspec_version``: the :data:`HOOKSPEC_VERSION` the plug-in was written for."""

    name: str
    title: str
    root: Path
    report: tuple[str, ...] = ()
    hookspec_version: int = HOOKSPEC_VERSION


@dataclass(frozen=True)
class ReportStep:
    """One of a system's own report steps (:func:`recallkit_report_steps`).

    ``name``: short, for messages; ``function``: ``"module:function"`` (or the function) ``(context) -> entry | None``
    run after the experiments, ``context`` a ``recallkit.report_settings.StepContext``; its entry (a dict with a
    non-empty ``name`` and a ``kind`` one of the system's page kinds draws) follows the experiments'. It may run in a
    worker process: the entry it returns must pickle. ``applies``: ``(plans, settings) -> bool`` (or its
    ``"module:function"``), asked before the report runs with the report's plans (``recallkit.empirics.plan.Plan``)
    and its ``ReportSettings``: the step runs only where it returns True (``settings.experiments`` is empty for the
    main job; ``settings.system_options[NAME]`` holds the system's report options given for this report)."""

    name: str
    function: str | Callable[..., Any]
    applies: str | Callable[..., bool]


@dataclass(frozen=True)
class ReportOption:
    """A report option a system adds under its own name (:func:`recallkit_report_options`): given on the command line
    as ``recallkit report --option NAME.option=VALUE``, read by the system's steps from
    ``settings.system_options[NAME][option]`` (absent when not given: the step applies ``default``).

    ``type``: bool, int, float or str (a bool is written true/false, yes/no, on/off or 1/0); ``default``: a value of
    that type, or None where the default depends on the report (``help`` says how)."""

    name: str
    type: type
    default: Any = None
    help: str = ""


@hookspec(firstresult=True)
def recallkit_system() -> SystemInfo:
    """The system's identity: its name, title, root folder and the experiments the main job runs, in order.

    Required: a plug-in without it is not a system. Called when the registry loads."""


@hookspec
def recallkit_tasks() -> Sequence[Task]:
    """The tasks the system trains, one ``recallkit.registry.Task`` per value of a run config's ``task`` key (its
    config dataclass and batched problem as ``"module:Class"`` references, the trainers that apply, the metrics of
    its own). Task names are unique over all systems."""


@hookspec
def recallkit_trainers() -> Sequence[Trainer | str]:
    """The trainers the system adds beside the shipped ones: each a ``recallkit.registry.Trainer`` or the
    ``"module:attribute"`` of one (imported the first time a trainer is looked up: a trainer's module may import
    torch). A task takes a trainer once its ``Task.trainers`` lists the name."""


@hookspec
def recallkit_page_kinds() -> Sequence[PageKind]:
    """The kinds of summary entry whose pages the system draws (``recallkit.registry.PageKind``: their page and
    summary-row functions as ``"module:function"`` references)."""


@hookspec
def recallkit_runners() -> Mapping[str, str | Callable[..., Any]]:
    """Experiment-file table name -> runner: an experiment file with that top-level table is not a search; the main
    job calls the runner ``(path, context) -> summary entry`` (``context``: ``recallkit.report_settings.StepContext``).
    Give the runner as ``"module:function"``: it may run in a worker process, and the report keys its cache by it."""


@hookspec
def recallkit_search_judge(entry: dict, experiment: Any, sweep: Any) -> None:
    """Add the system's own verdicts to ``entry``, the summary entry of a search experiment (``experiment``: its
    ``recallkit.empirics.experiment.Experiment``; ``sweep``: its sweep result) whose pack is one of this system's."""


@hookspec
def recallkit_report_steps() -> Sequence[ReportStep]:
    """The system's own report steps (:class:`ReportStep`), each of which decides through its ``applies`` whether it
    runs in a given report."""


@hookspec
def recallkit_prediction_source() -> Any:
    """Where the system's tested predictions come from (``recallkit.compare.evidence``): an object, or the
    ``"module:attribute"`` of one, with ``form(pack) -> {"name", "covers", "selected_on", "derivation"} | None``,
    ``calibrations(pack) -> [calibration records]`` and ``ceiling(pack, finite_size, sizes) -> {base value: metric} |
    None``."""


@hookspec
def recallkit_finite_size(pack: str, term: str | None, row: Mapping[str, Any], measured: Mapping[str, Any]
                          ) -> float | list | None:
    """The factor that turns term ``term`` of pack ``pack`` at a realised grid row ``row`` from its asymptotic value
    into its finite-size value (e.g. exact finite-L softmax weights in place of their asymptotic powers), or None
    where the system has no finite-size form for it. ``measured`` holds the runs' mean metrics at that row (e.g.
    ``attention_mass``) and, when one check is asked about, ``target`` (the metric's value that check's boundary
    reaches at that row) with ``target_metric`` its name. With ``term=None``: the constants the form used (a list of
    records, shown with the prediction)."""


@hookspec
def recallkit_all_terms(pack: str, finite_size: Mapping[str, Any], targets: Mapping[int, float]
                        ) -> dict[str, Any] | None:
    """One check's boundary from every term of ``pack`` at once, ``{"slope", "d", ...}`` (None: no such
    prediction): ``finite_size`` is the line's finite-size prediction, ``targets`` the level the check's boundary
    reaches per base value. Where it gives a slope the check is tested against it. Called only for a system that
    also implements :func:`recallkit_finite_size`."""


@hookspec
def recallkit_probe(source: str, pack: str | None, preset: str, store: Any, code_version: str, statistic: str,
                    method: str, delta: float | None, alpha: float | None, log: Callable[[str], None] | None
                    ) -> dict[str, Any]:
    """``recallkit probe NAME``: the system's term probes (every keyword is the command's option of that name;
    ``source``: the system's name or a probe TOML file) as one JSON-ready document, which must hold ``rows``:
    ``{"reused": int, "computed": int}``. A system that implements it implements :func:`recallkit_probe_table`."""


@hookspec
def recallkit_probe_table(doc: dict[str, Any]) -> str:
    """The probe document :func:`recallkit_probe` returned, as the text table ``recallkit probe`` prints."""


@hookspec
def recallkit_report_options() -> Sequence[ReportOption]:
    """The report options the system adds under its own name (:class:`ReportOption`): ``recallkit report --option
    NAME.option=VALUE`` sets one for a report, and the system's steps read it from ``settings.system_options``."""

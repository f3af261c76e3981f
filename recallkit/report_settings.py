"""What the main job is asked to do (:class:`ReportSettings`, the flags of ``recallkit report``) and what a
system's runner or report step gets from it (:class:`StepContext`)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, TextIO

__all__ = ["DEFAULT_OUT", "ReportSettings", "StepContext"]

DEFAULT_OUT = Path("reports/out")


@dataclass
class ReportSettings:
    experiments: list[Path]
    out_dir: Path = DEFAULT_OUT
    preset: str = "quick"
    store: Path | None = None
    executor: str = "local"
    scheduler: str | None = None
    dask_local: int | None = None
    device: str | None = None
    threads: int | None = 1
    png: bool = False  # also each page as PNG under figures/
    jobs: int | None = None  # processes drawing pages (None: one per free core)
    workers: int | None = None  # local executor: processes training (None: one per usable core)
    # draw every page even when the previous report in out_dir has it unchanged, and read no cache (fits, packs'
    # phase diagrams, systems' steps and the math path are computed again, and not kept)
    redraw: bool = False
    log: TextIO = field(default=sys.stderr)
    # the packs the named experiments' searches test, in their order, set once they are planned (empty for the main
    # job): a system's step may follow them (token retrieval's term probes take the probe grid of that pack)
    packs: tuple[str, ...] = ()
    # fields of the named search experiments changed for this report (--set, recallkit.empirics.overrides)
    settings: tuple[tuple[str, Any], ...] = ()
    # the systems' own report options given for this report (--option SYSTEM.NAME=VALUE, recallkit.registry's
    # report_options): system name -> option name -> value; an option not given is absent (its system's default)
    system_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def option(self, system: str, name: str, default: Any = None) -> Any:
        """The report option ``system.name`` as given for this report, else ``default``."""
        return (self.system_options.get(system) or {}).get(name, default)


@dataclass
class StepContext:
    """What a system's runner or report step gets from the main job."""

    settings: ReportSettings
    store_path: Path
    executor: Any = None

    @property
    def log(self) -> TextIO:
        return self.settings.log

    @property
    def preset(self) -> str:
        return self.settings.preset

"""An unchanged report answered from the one it already wrote: ``recallkit report`` with the same settings, the same
results store (its bytes), the same code and the same environment as a previous report into the same folder, whose
files are still there as written, prints where they are and stops, without importing the pipeline.

What decides "unchanged" is one cache key (``empirics.cache.cache_key``, which holds the source of the whole
recallkit namespace and the numerical libraries' versions) over: every report setting (the output folder and the
store resolved), the store's bytes, each named experiment file's bytes (a shipped one is in the source), the
``RECALLKIT_*`` and math-library variables, ``SOURCE_DATE_EPOCH`` (without it the title page carries today's date,
so nothing is replayed) and the CPU (its code path decides the last digits). A report is recorded only when the
store was the same before and after it (it trained nothing) and nothing failed, so a replay shows what running it
again would show. The record, an authenticated cache entry of the section ``reports``, lists the SHA-256 of every
file the report wrote (summary.json, the PDF, each page); a replay checks each of them, so an edited or missing file
makes the report run. A system that is not recallkit's own (its code is not in the key) turns replaying off.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

from recallkit import registry
from recallkit.empirics import cache as derived_cache
from recallkit.empirics.cache import Uncacheable, cache_key
from recallkit.empirics.store import default_store_path
from recallkit.report_settings import ReportSettings

__all__ = ["SECTION", "record", "replay_key", "replayed_files"]

SECTION = "reports"
# variables that change what a report computes or how its numbers come out, beside recallkit's own
_ENVIRONMENT = ("SOURCE_DATE_EPOCH", "MKL_CBWR", "ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "OPENBLAS_NUM_THREADS", "MPLBACKEND")


def _digest(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _store_path(settings: ReportSettings) -> Path:
    return Path(settings.store or default_store_path()).resolve()


def _cpu() -> list[str]:
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line for line in lines if line.split(":")[0].strip() in ("vendor_id", "model name", "flags")][:3]


def _experiments(settings: ReportSettings) -> list[Any] | None:
    """Each named experiment as its file's bytes, or its shipped name (the source holds it); None where one is
    neither (the report then runs and says what is wrong)."""
    shipped = registry.experiment_paths()
    found: list[Any] = []
    for name in settings.experiments:
        path = Path(name)
        if path.is_file():
            found.append([str(path.resolve()), _digest(path)])
        elif str(name) in shipped:
            found.append(str(name))
        else:
            return None
    return found


def replay_key(settings: ReportSettings) -> str | None:
    """The key of this report's inputs, or None where it must run (see the module's docstring)."""
    if settings.redraw or not os.environ.get("SOURCE_DATE_EPOCH"):
        return None
    try:
        if {system.name for system in registry.systems()} - set(registry.RUN_ORDER):
            return None
    except registry.RegistryError:
        return None  # the report says what is wrong with the plug-in
    store = _store_path(settings)
    experiments = _experiments(settings)
    if experiments is None or not store.is_file():
        return None
    given = {f.name: str(getattr(settings, f.name)) for f in dataclasses.fields(settings) if f.name != "log"}
    given.update(out_dir=str(Path(settings.out_dir).resolve()), store=str(store))
    environment = {name: value for name, value in sorted(os.environ.items())
                   if name.startswith("RECALLKIT_") or name in _ENVIRONMENT}
    stored = [_digest(store), _digest(Path(f"{store}-wal"))]
    try:
        return cache_key("unchanged report", [given, experiments, stored, environment, _cpu()])
    except Uncacheable:
        return None


def _written(out: Path) -> dict[str, str | None]:
    files = [out / "summary.json", out / "recallkit-report.pdf"]
    figures = out / "figures"
    if figures.is_dir():
        files += sorted(path for path in figures.iterdir() if path.is_file())
    return {str(path.relative_to(out)): _digest(path) for path in files}


def record(settings: ReportSettings, key: str | None) -> None:
    """Keep what the report just wrote under ``key`` (the key taken before it ran, equal to the one after)."""
    cache = derived_cache.from_env()
    if cache is None or key is None:
        return
    cache.put(SECTION, key, {"files": _written(Path(settings.out_dir))}, what="the report's files")


def replayed_files(settings: ReportSettings) -> Path | None:
    """The report's PDF when this report is unchanged and its files are as recorded; else None (run it)."""
    key = replay_key(settings)
    cache = derived_cache.from_env() if key is not None else None
    found = cache.get(SECTION, key) if cache is not None else None
    if not isinstance(found, dict) or not isinstance(found.get("files"), dict) or not found["files"]:
        return None
    out = Path(settings.out_dir)
    if _written(out) != found["files"]:
        return None
    return out / "recallkit-report.pdf"

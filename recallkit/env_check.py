"""Every ``RECALLKIT_*`` environment variable the code reads, checked once when the command line starts.

One table, :data:`VARIABLES`: name -> (validator, what is expected). A validator takes the variable's text (it is
only called when the variable is set) and says whether the code that reads it will accept it; the code that reads
each variable still checks it where it is read (a library user has no command line), and this table accepts
exactly what that code accepts. :func:`check_environment` is called by the command line's main callback before
any command runs, for every command, whether it reads the variable or not: a bad value is one line naming the
variable, what was expected and what was given (exit 2), at start, never after an hour of training.

Nothing heavy is imported here (the CLI's start must stay light): the checks are plain parsing and ``os.stat``.
"""
from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Callable, Mapping

from recallkit.empirics.cost import parse_duration
from recallkit.empirics.executors import usable_cores
from recallkit.theory.errors import InputError

__all__ = ["VARIABLES", "check_environment", "problems"]

_OFF = "off"
_MAX_CACHE_MB = 2**40  # what empirics.cache.max_bytes accepts


def _blank(raw: str) -> bool:
    return not raw.strip()


def _number(raw: str) -> float:
    try:
        return float(raw.strip())
    except ValueError:
        return math.nan


def _cache_mb(raw: str) -> bool:
    """empirics.cache.max_bytes: blank is the default; else a finite number of megabytes from 0 to 2**40 (``inf``
    gave an OverflowError once converted to bytes)."""
    value = _number(raw)
    return _blank(raw) or (math.isfinite(value) and 0 <= value <= _MAX_CACHE_MB)


def _positive_seconds(raw: str) -> bool:
    """theory.expr.symbolic_seconds: blank is the default; else a finite number > 0."""
    value = _number(raw)
    return _blank(raw) or (math.isfinite(value) and value > 0)


def _max_runs(raw: str) -> bool:
    """empirics.experiment.max_runs_allowed: empty is the default; else ASCII digits for an integer >= 1 (any other
    Unicode digit passed str.isdigit and then failed int())."""
    return raw == "" or (raw.isascii() and raw.isdigit() and int(raw) >= 1)


def _max_cost(raw: str) -> bool:
    """empirics.cost.max_cost_allowed: empty is the default; else a duration parse_duration reads."""
    if raw == "":
        return True
    try:
        parse_duration(raw)
    except InputError:
        return False
    return True


def _report_jobs(raw: str) -> bool:
    """reports.render.env_jobs: blank is the default; else an integer from 1 to 4 per usable core."""
    if _blank(raw):
        return True
    try:
        return 1 <= int(raw.strip()) <= 4 * usable_cores()
    except ValueError:
        return False


def _keep_heap(raw: str) -> bool:
    """empirics.numerics.keep_freed_heap: on with exactly "1"; "0" or empty is off (anything else was silently off)."""
    return raw in ("", "0", "1")


def _existing_ancestor(path: Path) -> Path:
    """The nearest of ``path`` and its parents that exists (the working folder for a relative path)."""
    path = path if path.is_absolute() else Path.cwd() / path
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path("/")


def _can_be_made(path: Path) -> bool:
    """Whether ``path`` (missing) could be made: its nearest existing parent is a folder."""
    return _existing_ancestor(path.parent).is_dir()


def _folder(raw: str) -> bool:
    """A folder there, or a path where one can be made."""
    path = Path(raw.strip()).expanduser()
    return path.is_dir() if os.path.lexists(path) else _can_be_made(path)


def _regular_file(raw: str) -> bool:
    """A regular file there (a link to one is followed), or a path where one can be made."""
    path = Path(raw.strip()).expanduser()
    if os.path.lexists(path):
        try:
            return stat.S_ISREG(os.stat(path).st_mode)
        except OSError:  # a dangling link, or a folder that cannot be searched
            return False
    return _can_be_made(path)


def _cache(raw: str) -> bool:
    """empirics.cache.cache_root: blank is the default folder, ``off`` turns it off, else the cache's folder."""
    return _blank(raw) or raw.strip().lower() == _OFF or _folder(raw)


def _store(raw: str) -> bool:
    """empirics.store.default_store_path: empty is results/recallkit.db; else the store's file (the store refuses a
    folder, a FIFO or a device in its place)."""
    return raw == "" or _regular_file(raw)


def _key_file(raw: str) -> bool:
    """empirics.cache.key_path: blank is the default place; else the file of the cache's secret, made there on
    first use when it is missing (its mode and owner are checked when it is read)."""
    return _blank(raw) or _regular_file(raw)


def _cache_strict(raw: str) -> bool:
    """empirics.cache.strict: "1" makes a value the cache cannot keep an error; "0" or empty counts it only."""
    return raw.strip() in ("", "0", "1")


def _trace(raw: str) -> bool:
    """empirics.workers: blank is no trace; else a file each worker job appends its CPU time to."""
    return _blank(raw) or _regular_file(raw)


#: variable -> (validator of its text, what it must be): the one list of the environment recallkit reads
VARIABLES: dict[str, tuple[Callable[[str], bool], str]] = {
    "RECALLKIT_CACHE": (_cache, "'off' or a folder for the cache (one that exists or can be made)"),
    "RECALLKIT_CACHE_MB": (_cache_mb, "a size in megabytes (a finite number >= 0, at most 2**40)"),
    "RECALLKIT_CACHE_KEY_FILE": (_key_file, "a file for the cache's secret (a regular file, or a path where one "
                                            "can be made)"),
    "RECALLKIT_CACHE_STRICT": (_cache_strict, "1 (a value the cache cannot keep is an error) or 0"),
    "RECALLKIT_CPU_TRACE": (_trace, "a file the worker processes append one line per job to (their CPU seconds)"),
    "RECALLKIT_KEEP_HEAP": (_keep_heap, "1 (keep freed heap memory while training) or 0"),
    "RECALLKIT_MAX_COST": (_max_cost, "a positive duration such as 2h, 30m, 90s or inf"),
    "RECALLKIT_MAX_RUNS": (_max_runs, "a positive integer (the most trained models one experiment may plan)"),
    "RECALLKIT_REPORT_JOBS": (_report_jobs, f"an integer from 1 to {4 * usable_cores()} (processes drawing the "
                                            f"pages)"),
    "RECALLKIT_STORE": (_store, "a results store file (SQLite; not a folder, FIFO or device)"),
    "RECALLKIT_SYMBOLIC_SECONDS": (_positive_seconds, "a positive number of CPU seconds"),
}


def problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per variable of :data:`VARIABLES` that is set to a value its reader refuses, in the table's order."""
    environ = os.environ if environ is None else environ
    found = []
    for name, (valid, expected) in VARIABLES.items():
        raw = environ.get(name)
        if raw is not None and not valid(raw):
            found.append(f"{name}: expected {expected}, got {raw!r}")
    return found


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """InputError (one line: exit 2 from the command line) naming the first bad variable; nothing when all are
    fine. When several are bad, the line says how many more there are."""
    found = problems(environ)
    if found:
        more = f" (and {len(found) - 1} more bad RECALLKIT_* variables)" if len(found) > 1 else ""
        raise InputError(found[0] + more)

"""The main job's runner experiments and systems' report steps, trained in the report's worker processes beside the
searches (:class:`OwnSteps`) or in the main process.

A step's entry is a function of the store's content, the code and its settings: with a :class:`StepCache` an entry
computed while the store did not change (nothing trained or added, by this report or another) is kept under a hash
of the store's bytes, the step, its file, the settings and the code, so the next report on the same store takes
it (and its log lines) without starting the worker process or importing torch there. Only steps of the recallkit
namespace are kept: their code and data files are what ``empirics.cache.source_fingerprint`` hashes.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import io
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from recallkit import registry
from recallkit.empirics.cache import Cache, cache_key
from recallkit.empirics.executors import fixed_threads
from recallkit.empirics.workers import InlineExecutor, WorkerPool, completed
from recallkit.empirics.provenance import namespace_roots
from recallkit.report_settings import ReportSettings, StepContext
from recallkit.theory.errors import InputError, RecallkitError

__all__ = ["OwnSteps", "StepCache", "call_own_step", "checked_entry", "shipped_step", "store_digest"]


_ENTRY_EXPECTED = ("a runner or report step returns a summary entry: a dict with a non-empty string 'name' and a "
                   "string 'kind'")


def call_own_step(ref: str, path: Path | None, context: StepContext) -> dict | None:
    """A system's runner, ``(path, context) -> entry``, or report step, ``(context) -> entry | None``."""
    function = registry.load_object(ref)
    return function(path, context) if path is not None else function(context)


def checked_entry(entry: Any, ref: str) -> dict:
    """``entry``, which the step ``ref`` returned, when it has what the report keys it by (docs/ARCHITECTURE.md, "A
    runner's summary entry"), else an InputError naming ``ref``: a missing name ended the report in a traceback only
    after every experiment had run, and a missing kind drew the entry as a search's, without its system's pages."""
    if not isinstance(entry, dict):
        raise InputError(f"{ref} returned {'None' if entry is None else 'a ' + type(entry).__name__}; {_ENTRY_EXPECTED}")
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"{ref}: its entry has {'no' if name is None else 'a non-string or empty'} 'name'; "
                         f"{_ENTRY_EXPECTED}")
    if not isinstance(entry.get("kind"), str):
        raise InputError(f"{ref}: its entry ({name}) has {'no' if entry.get('kind') is None else 'a non-string'} "
                         f"'kind'; {_ENTRY_EXPECTED}")
    return entry


@dataclasses.dataclass
class StepOutcome:
    """What a step gave: its entry (or None), or the message of the RecallkitError it raised (``error``), and the
    lines it wrote to its log (``shown``: already written to the report's log, as it ran)."""

    entry: Any = None
    error: str | None = None
    log: str = ""
    shown: bool = False
    seconds: float | None = None  # from its start to its end where it ran (a worker's job may wait for a free worker)


def _own_step_in_worker(ref: str, path: Path | None, settings: ReportSettings, store_path: Path) -> StepOutcome:
    """A runner experiment (``path``) or a report step (``path`` None) in a worker process of the main job. Its
    numbers are those of the same call in the main process: one model trains on one thread from its own seeded
    streams either way."""
    import torch  # in the worker only: the parent may never have needed it

    if settings.threads:
        torch.set_num_threads(settings.threads)
    log = io.StringIO()
    context = StepContext(replace(settings, log=log), store_path, None)
    began = time.perf_counter()
    try:
        entry = call_own_step(ref, path, context)
    except RecallkitError as exc:
        return StepOutcome(error=str(exc), log=log.getvalue(), seconds=time.perf_counter() - began)
    return StepOutcome(entry=entry, log=log.getvalue(), seconds=time.perf_counter() - began)


def _own_step_here(ref: str, path: Path | None, settings: ReportSettings, context: StepContext) -> StepOutcome:
    """The same step in this process, its log lines written to the report's log as they come (and kept)."""
    tee = _Tee(settings.log)
    with fixed_threads(settings.threads or None):  # as the worker processes and the executors do
        try:
            entry = call_own_step(ref, path, replace(context, settings=replace(settings, log=tee)))
        except RecallkitError as exc:
            return StepOutcome(error=str(exc), log=tee.copy.getvalue(), shown=True)
    return StepOutcome(entry=entry, log=tee.copy.getvalue(), shown=True)


def store_digest(store_path: Path) -> str | None:
    """SHA-256 of the store's bytes (with its write-ahead log): equal digests, equal content. None if unreadable."""
    digest = hashlib.sha256()
    try:
        for path in (Path(store_path), Path(f"{store_path}-wal")):
            if path.exists() or path == Path(store_path):
                digest.update(path.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()


def shipped_step(ref: str, path: Path | None) -> bool:
    """Whether a step's code and file are the recallkit namespace's (what the cache key's source hash covers)."""
    if not ref.startswith("recallkit."):
        return False
    if path is None:
        return True
    resolved = Path(path).resolve()
    return any(resolved.is_relative_to(root.resolve()) for root in namespace_roots())


@dataclasses.dataclass
class StepCache:
    """Where entries are kept (``cache``) and the store's digest when the report began (``store``); ``cacheable``
    says which steps may be kept (by default those of the recallkit namespace)."""

    cache: Cache
    store: str
    cacheable: Callable[[str, Path | None], bool] = shipped_step

    def key(self, ref: str, path: Path | None, settings: ReportSettings) -> str | None:
        if not self.cacheable(ref, path):
            return None
        own = {f.name: str(getattr(settings, f.name)) for f in dataclasses.fields(settings)
               if f.name not in _NOT_READ_BY_STEPS}
        try:
            text = Path(path).read_bytes().hex() if path is not None else None
        except OSError:
            return None
        return cache_key("own step", [ref, str(path), text, own, self.store])


# settings a step's entry does not depend on: where the report goes, how pages are drawn, where its log goes,
# how many search workers run, and the store's path (its content is in the key)
_NOT_READ_BY_STEPS = frozenset({"out_dir", "png", "jobs", "workers", "redraw", "log", "store", "experiments"})


class _Tee(io.TextIOBase):
    """The report's log, and a copy of what was written to it."""

    def __init__(self, log):
        self.log, self.copy = log, io.StringIO()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.log.write(text)

    def flush(self) -> None:
        self.log.flush()


class OwnSteps:
    """The main job's runner experiments and system report steps: trained in the report's worker processes beside
    the searches (``pool``, a ``workers.WorkerPool``; with ``background`` and none given, one process of its own)
    when the local executor has more than one worker on the CPU (they train one model at a time, and the searches
    leave cores idle between rounds), else in this process, each when its result is asked for. Every step is a
    future from :meth:`start` on (one the cache holds is one already done). Results come back in the order asked
    for, whatever the order they finish in; :attr:`seconds` says how long each took."""

    def __init__(self, settings: ReportSettings, store_path: Path, context: StepContext, background: bool,
                 cache: StepCache | None = None, pool: WorkerPool | None = None):
        self.settings, self.store_path, self.context = settings, store_path, context
        self._cache = cache
        self._own = background and pool is None
        self.pool: concurrent.futures.Executor = (pool or WorkerPool(1)) if background else InlineExecutor()
        self._pending: dict[Any, concurrent.futures.Future] = {}
        self._keys: dict[Any, str | None] = {}  # step -> its cache key
        self._fresh: dict[str, dict] = {}  # cache key -> {"entry", "log"} computed by this report
        self._since: dict[Any, float] = {}  # step -> when it was handed over
        self.seconds: dict[Any, float] = {}  # step -> seconds from its start to its result (a cached one: the fetch)

    def start(self, key: Any, ref: str, path: Path | None) -> None:
        """Hand one step over (nothing runs yet in this process, and a worker process starts with the first step
        handed to the pool); a step the cache holds is not run."""
        started = time.perf_counter()
        self._keys[key] = found_key = self._cache.key(ref, path, self.settings) if self._cache else None
        found = self._cache.cache.get("steps", found_key) if found_key else None
        if isinstance(found, dict) and "entry" in found and isinstance(found.get("log"), str):
            self._pending[key] = completed(StepOutcome(entry=found["entry"], log=found["log"]))
            self._keys[key] = None  # kept already
            self.seconds[key] = time.perf_counter() - started
            return
        self._since[key] = started
        if isinstance(self.pool, InlineExecutor):
            self._pending[key] = self.pool.submit(_own_step_here, ref, path, self.settings, self.context)
        else:
            self._pending[key] = self.pool.submit(_own_step_in_worker, ref, path, replace(self.settings, log=None),
                                                  self.store_path)

    def result(self, key: Any) -> dict | None:
        """The step's entry; its log lines go to the report's log. A RecallkitError is raised here."""
        job, found_key = self._pending.pop(key), self._keys.pop(key)
        outcome: StepOutcome = job.result()
        if key in self._since:
            # one run in this process is timed from when it ran: it waits, unstarted, for its turn in the report
            began = getattr(job, "started_at", None)
            self.seconds[key] = (outcome.seconds if outcome.seconds is not None
                                 else time.perf_counter() - (began if began is not None else self._since.pop(key)))
            self._since.pop(key, None)
        if outcome.log and not outcome.shown:
            self.settings.log.write(outcome.log)
        if outcome.error is not None:
            raise RecallkitError(outcome.error)
        if found_key:
            self._fresh[found_key] = {"entry": outcome.entry, "log": outcome.log}
        return outcome.entry

    def close(self, failed: bool = False) -> None:
        """Stop the steps: at once after an error or Ctrl-C (what they had stored stays stored), else when done (a
        shared pool is its owner's to close); keep the entries computed while the store stayed as it was."""
        for job in self._pending.values():
            job.cancel()
        self._pending.clear()
        if self._own:
            self.pool.close(failed=failed)
        if not failed and self._fresh and store_digest(self.store_path) == self._cache.store:
            # nothing was written to the store since the report began, so each entry is the store's as it is
            for found_key, doc in self._fresh.items():
                self._cache.cache.keep("steps", found_key, doc, what="step entry")
        self._fresh.clear()

"""The main job's runner experiments and systems' report steps, trained in one worker process beside the
searches (:class:`OwnSteps`) or in the main process."""
from __future__ import annotations

import io
import multiprocessing
from dataclasses import replace
from pathlib import Path
from typing import Any

from recallkit import registry
from recallkit.empirics.executors import worker_init, worker_init_args
from recallkit.report_settings import ReportSettings, StepContext
from recallkit.theory.errors import RecallkitError

__all__ = ["OwnSteps", "call_own_step"]


def call_own_step(ref: str, path: Path | None, context: StepContext) -> dict | None:
    """A system's runner, ``(path, context) -> entry``, or report step, ``(context) -> entry | None``."""
    function = registry.load_object(ref)
    return function(path, context) if path is not None else function(context)


def _own_step_in_worker(ref: str, path: Path | None, settings: ReportSettings, store_path: Path) -> tuple:
    """A runner experiment (``path``) or a report step (``path`` None) in a worker process of the main job:
    ``("entry", entry or None, log text)`` or ``("error", message, log text)``. Its numbers are those of the
    same call in the main process: one model trains on one thread from its own seeded streams either way."""
    import torch  # in the worker only: the parent may never have needed it

    if settings.threads:
        torch.set_num_threads(settings.threads)
    log = io.StringIO()
    context = StepContext(replace(settings, log=log), store_path, None)
    try:
        entry = call_own_step(ref, path, context)
    except RecallkitError as exc:
        return "error", str(exc), log.getvalue()
    return "entry", entry, log.getvalue()


class OwnSteps:
    """The main job's runner experiments and system report steps: trained in one worker process beside the
    searches when the local executor has more than one worker on the CPU (they train one model at a time, and
    the searches leave cores idle between rounds), else in this process when asked for. Results come back in
    the order asked for, whatever the order they finish in."""

    def __init__(self, settings: ReportSettings, store_path: Path, context: StepContext, background: bool):
        self.settings, self.store_path, self.context = settings, store_path, context
        self._pool = None
        self._pending: dict[Any, Any] = {}
        if background:
            self._pool = multiprocessing.get_context("spawn").Pool(1, initializer=worker_init,
                                                                   initargs=worker_init_args())

    def start(self, key: Any, ref: str, path: Path | None) -> None:
        """Queue one step (nothing happens yet without a worker process)."""
        if self._pool is None:
            self._pending[key] = (ref, path)
            return
        child_settings = replace(self.settings, log=None)
        self._pending[key] = self._pool.apply_async(_own_step_in_worker, (ref, path, child_settings, self.store_path))

    def result(self, key: Any) -> dict | None:
        """The step's entry; its log lines go to the report's log. A RecallkitError is raised here."""
        job = self._pending.pop(key)
        if self._pool is None:
            return call_own_step(*job, self.context)
        kind, value, text = job.get()
        if text:
            self.settings.log.write(text)
        if kind == "error":
            raise RecallkitError(value)
        return value

    def close(self, failed: bool = False) -> None:
        """Stop the worker: at once after an error or Ctrl-C (what it had stored stays stored), else when done."""
        if self._pool is None:
            return
        if failed:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()
        self._pool = None

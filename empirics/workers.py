"""The worker processes of one job: one :class:`WorkerPool` that the report hands to everything that works beside
it (the training rounds of its searches, the systems' steps, the drawing of its pages), so that the machine's cores
are shared by one set of processes instead of three pools that each assumed the cores were theirs.

- :class:`WorkerPool`: a ``concurrent.futures.Executor`` over worker processes, started on the first
  :meth:`~WorkerPool.submit` (a job that trains nothing and draws nothing starts no process), closed once, and
  :meth:`~WorkerPool.terminate`-d at once on an error or Ctrl-C (a worker's running job is not waited for).
- :class:`Capped`: at most N jobs of one user in the pool at a time (``--jobs`` for the pages), the rest waiting in
  order, so drawing does not take every worker from training.
- :class:`InlineExecutor`: the same interface in this process, each job run when its result is first asked for.
- :func:`completed`: a future that already has its result (an entry from the cache).

Why the fork server: a worker must not be a fork of this process (a copy of a process that has run torch's thread
pools can hang, and this process may have), and a spawned worker pays for its imports (matplotlib and the stages,
about a second each on a small machine) before its first job. Multiprocessing's fork server is a fresh interpreter
that imports :data:`PRELOAD` once and forks every worker from that clean state. Every worker is initialised by
``executors.worker_init`` (Ctrl-C is the parent's, the worker dies with the parent) with this process's
environment as it is when the pool starts (``MKL_CBWR``, ``$RECALLKIT_MAX_COST``, ``MPLBACKEND``): the fork
server's own is the one it was started with, perhaps by an earlier pool. Each job fixes its own torch thread count
(``executors.run_with_threads``), so the numbers are those of the same job in this process.
"""
from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import json
import multiprocessing
import os
import select
import signal
import sys
import threading
import time
from typing import Any, Callable, Sequence

from recallkit.empirics.numerics import keep_freed_heap, set_blas_threads
from recallkit.theory.errors import InputError

__all__ = ["Capped", "InlineExecutor", "PRELOAD", "START_METHOD", "TRACE_ENV", "WorkerPool", "completed", "trace_label"]

# what every worker needs before its first job: the toolkit (which pins MKL before torch loads) and the pages'
# code (matplotlib, the layouts). Torch is left out, so a report that only draws never loads it (a training worker
# imports it on its first round, as a spawned one did). Measured on 2 cores, 6 workers, first result of each:
# spawn 12.3-13.4 s, this 8.3-8.9 s, this and the engine (torch) 2.2-2.4 s.
PRELOAD = ("recallkit", "recallkit.empirics.executors", "recallkit.reports.pdf")

START_METHOD = ("forkserver" if sys.platform.startswith("linux") and "forkserver" in multiprocessing.get_all_start_methods()
                else "spawn")


TRACE_ENV = "RECALLKIT_CPU_TRACE"  # a file: each worker job appends one JSON line (what, CPU s, wall s)
_trace_phase = "start"  # what the submitting process is doing (an experiment's name), written with each job


def trace_label(phase: str) -> None:
    """Name what the jobs submitted from now on are for (the report sets each experiment's name), in the CPU
    trace of ``$RECALLKIT_CPU_TRACE``; nothing else reads it."""
    global _trace_phase
    _trace_phase = phase


def _job_name(fn: Callable, args: tuple) -> str:
    first = f" {args[0]}" if args and isinstance(args[0], str) else ""  # a step's reference, a page's name
    return f"{getattr(fn, '__name__', type(fn).__name__)}{first}"


def _traced(trace: str, phase: str, fn: Callable, /, *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)`` in a worker, its CPU and wall seconds appended to ``trace`` (one line, one write,
    so that the workers' lines never interleave)."""
    cpu, wall, began = time.process_time(), time.perf_counter(), time.time()
    try:
        return fn(*args, **kwargs)
    finally:
        line = json.dumps({"job": _job_name(fn, args), "phase": phase, "pid": os.getpid(), "began": round(began, 3),
                           "cpu_s": round(time.process_time() - cpu, 4),
                           "wall_s": round(time.perf_counter() - wall, 4)})
        descriptor = os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(descriptor, (line + "\n").encode())
        finally:
            os.close(descriptor)


def ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (and keeps every stored result)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
PARENT_POLL_S = 0.5


def die_with_parent(parent: int, kernel_signal: bool = True) -> None:
    """End this worker process as soon as ``parent``, the process that started it, is gone, even when it was
    killed with SIGKILL and could stop nothing: an orphaned worker would train on for minutes, holding a core,
    its memory and multiprocessing's resource tracker (which waits for every worker to close its pipe).

    On Linux the kernel sends SIGKILL at the parent's death (``PR_SET_PDEATHSIG``). It is armed only when
    ``kernel_signal``: the kernel fires it when the parent *thread* that started the worker ends, so a pool
    started from a short-lived thread would lose its workers early. Everywhere, a daemon thread also watches
    ``os.getppid()``, which changes when the parent dies (the orphan is handed to init or a subreaper).

    A worker forked by multiprocessing's fork server (``empirics.workers``) is the server's child, and the server
    ends only once every worker has (each holds its "alive" pipe): such a worker watches ``parent`` itself."""
    if os.getppid() != parent:
        _watch_from_afar(parent)
        return
    if kernel_signal and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no prctl in this libc: the thread below still watches
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), name="recallkit-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)  # from this thread: no cleanup to run, the parent that wanted the result is gone


def _watch_from_afar(parent: int) -> None:
    """Exit when ``parent``, not this process's parent, ends: a Linux pidfd turns readable at its exit (even
    before it is reaped); elsewhere, or without pidfds, its pid is polled. Gone already: exit now."""
    try:
        handle = os.pidfd_open(parent)
    except (ProcessLookupError, PermissionError):
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd here: poll
        handle = None
    if handle is None and not _alive(parent):
        os._exit(1)
    threading.Thread(target=_wait_for_exit, args=(parent, handle), name="recallkit-parent-watch",
                     daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # there, and someone else's: not ours any more
        return False
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return True  # no /proc: the signal's answer is all there is
    return stat[stat.rindex(")") + 2] not in "ZX"  # a zombie has ended, it only waits to be reaped


def _wait_for_exit(parent: int, handle: int | None) -> None:
    if handle is not None:
        select.select([handle], [], [])
    else:
        while _alive(parent):
            time.sleep(PARENT_POLL_S)
    os._exit(1)


def worker_init_args() -> tuple[int, bool]:
    """``initargs`` for :func:`worker_init`, taken in the process (and thread) that starts the pool."""
    return os.getpid(), threading.current_thread() is threading.main_thread()


def worker_init(parent: int, kernel_signal: bool) -> None:
    """Initializer of every worker process the toolkit starts: Ctrl-C is the parent's (:func:`ignore_sigint`),
    and the worker dies with its parent (:func:`die_with_parent`)."""
    ignore_sigint()
    die_with_parent(parent, kernel_signal)



def completed(result: Any) -> concurrent.futures.Future:
    """A future whose result is ``result`` already."""
    future: concurrent.futures.Future = concurrent.futures.Future()
    future.set_result(result)
    return future


def _init_worker(parent: int, kernel_signal: bool, environment: dict[str, str]) -> None:
    if dict(os.environ) != environment:
        os.environ.clear()
        os.environ.update(environment)
        matplotlib = sys.modules.get("matplotlib")
        if matplotlib is not None and environment.get("MPLBACKEND"):  # the fork server's differed: pages use ours
            try:
                matplotlib.use(environment["MPLBACKEND"], force=True)
            except Exception:  # noqa: BLE001 - an unusable backend fails the first page, with matplotlib's message
                pass
    # numpy came with the fork server's preload: its OpenBLAS would start one thread per core in every worker
    set_blas_threads(1)
    # these processes are the toolkit's own, not a user's: they keep freed heap memory (numerics.keep_freed_heap;
    # same numbers, 18% less CPU on the main job's largest trained cell), unless the user said RECALLKIT_KEEP_HEAP=0.
    # From the start, not from the first training: a system's own step that trains outside the engine often runs
    # first in a fresh worker, and page-faulted every buffer (the main job's largest such step, on one thread:
    # 21.8 against 15.9 CPU s, the same numbers)
    os.environ.setdefault("RECALLKIT_KEEP_HEAP", "1")
    keep_freed_heap()
    worker_init(parent, kernel_signal)


class WorkerPool(concurrent.futures.Executor):
    """``workers`` worker processes, started on the first :meth:`submit` (``starts`` counts how often: once, unless
    :meth:`terminate` stopped them and a later job started them again)."""

    def __init__(self, workers: int, preload: Sequence[str] = PRELOAD, start_method: str = START_METHOD) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError(f"--workers: expected a positive integer, got {workers!r}")
        self.workers = workers
        self.preload, self.start_method = tuple(preload), start_method
        self.starts = 0
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def started(self) -> bool:
        return self._pool is not None

    def submit(self, fn: Callable, /, *args, **kwargs) -> concurrent.futures.Future:
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            if self._pool is None:
                self._pool = self._start()
            trace = os.environ.get(TRACE_ENV, "").strip()
            if trace:  # the main job's benchmark: where the workers' CPU time goes
                return self._pool.submit(_traced, trace, _trace_phase, fn, *args, **kwargs)
            return self._pool.submit(fn, *args, **kwargs)

    def _start(self) -> concurrent.futures.ProcessPoolExecutor:
        context = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":
            # read when the fork server starts (once per process); a server already running keeps its modules
            context.set_forkserver_preload(list(self.preload))
        self.starts += 1
        return concurrent.futures.ProcessPoolExecutor(self.workers, mp_context=context, initializer=_init_worker,
                                                      initargs=(*worker_init_args(), dict(os.environ)))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Close the pool: no job is taken after this; with ``wait``, the workers finish what they run."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def close(self, failed: bool = False) -> None:
        """:meth:`terminate` after an error or Ctrl-C, else wait for the jobs and close."""
        if failed:
            self.terminate()
        self.shutdown(wait=True)

    def terminate(self) -> None:
        """Stop every worker now, whatever it runs (what a job had stored stays stored): its future, and every job
        still waiting, fails with ``BrokenProcessPool``. A later :meth:`submit` starts new workers."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return
        # ProcessPoolExecutor has no public way to stop a running job before Python 3.14 (terminate_workers)
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for process in processes:
            if process.is_alive():
                process.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        for process in processes:
            process.join(timeout=5)


class _Waiting(concurrent.futures.Future):
    """A job of :class:`Capped`: cancelled here while it waits, else through the pool's own future (it runs from
    the moment it is handed to the pool, as far as this future's state says)."""

    def __init__(self) -> None:
        super().__init__()
        self.inner: concurrent.futures.Future | None = None

    def cancel(self) -> bool:
        inner = self.inner
        return inner.cancel() if inner is not None else super().cancel()


class Capped:
    """Jobs for ``executor``, at most ``cap`` of them in it at once (the others wait here, in the order given)."""

    def __init__(self, executor: concurrent.futures.Executor, cap: int) -> None:
        self.executor, self.cap = executor, max(1, cap)
        self._lock = threading.Lock()
        self._waiting: collections.deque = collections.deque()
        self._inside = 0
        self._given: list[_Waiting] = []

    def submit(self, fn: Callable, /, *args) -> concurrent.futures.Future:
        future = _Waiting()
        with self._lock:
            self._waiting.append((future, fn, args))
            self._given.append(future)
        self._next()
        return future

    def _next(self) -> None:
        while True:
            with self._lock:
                if self._inside >= self.cap or not self._waiting:
                    return
                future, fn, args = self._waiting.popleft()
                if not future.set_running_or_notify_cancel():  # cancelled while it waited (its waiters told)
                    continue
                self._inside += 1
            try:
                inner = self.executor.submit(fn, *args)
            except BaseException as exc:  # a closed or broken pool: this job fails, the caller decides
                with self._lock:
                    self._inside -= 1
                future.set_exception(exc)
                continue
            future.inner = inner
            inner.add_done_callback(lambda done, future=future: self._done(future, done))

    def _done(self, future: _Waiting, inner: concurrent.futures.Future) -> None:
        with self._lock:
            self._inside -= 1
        if inner.cancelled():  # (before it ran)
            future.set_exception(concurrent.futures.CancelledError())
        elif inner.exception() is not None:
            future.set_exception(inner.exception())
        else:
            future.set_result(inner.result())
        self._next()

    def close(self) -> None:
        """Cancel the jobs not started, and wait for those that are running."""
        with self._lock:
            given, self._given = self._given, []
        for future in given:
            future.cancel()
        concurrent.futures.wait([future for future in given if not future.cancelled()])


class _Deferred(concurrent.futures.Future):
    """A job of :class:`InlineExecutor`: run in the thread that first asks for its result."""

    def __init__(self, fn: Callable, args: tuple, kwargs: dict) -> None:
        super().__init__()
        self._job = (fn, args, kwargs)
        self.started_at: float | None = None

    def _run(self) -> None:
        job, self._job = self._job, None
        if job is None or not self.set_running_or_notify_cancel():
            return
        self.started_at = time.perf_counter()
        fn, args, kwargs = job
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever asks, as a pool's future would
            self.set_exception(exc)
            if not isinstance(exc, Exception):  # Ctrl-C stops the report here, not at the next result
                raise
        else:
            self.set_result(result)

    def result(self, timeout=None):
        self._run()
        return super().result(timeout)

    def exception(self, timeout=None):
        self._run()
        return super().exception(timeout)


class InlineExecutor(concurrent.futures.Executor):
    """Jobs run in this process, each when its result is first asked for (so in the order they are used)."""

    workers = 1

    def submit(self, fn: Callable, /, *args, **kwargs) -> concurrent.futures.Future:
        return _Deferred(fn, args, kwargs)

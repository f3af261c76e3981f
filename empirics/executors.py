"""Executors: where the probes of one search round are trained.

An executor has ``run(configs) -> list[metrics dict]`` (same order) and ``close()``. The sweep
driver calls it once per round and alone writes the results store, so a remote worker never
touches the database.

- :class:`LocalExecutor` (default): the batched engine, in this process, or with ``workers > 1`` in worker
  processes on this machine (``empirics.workers.WorkerPool``, the report's one pool): a round's configs are split
  into shape groups (each still one batched engine call), the costliest first, and handed to the first free worker.
- :class:`DaskExecutor`: the round is split into groups of configs that share a shape (so each
  group is still one batched engine call) and the groups are sent to a Dask cluster, given by a
  scheduler address or started here as a LocalCluster of N single-threaded worker processes. Dask is an extra
  (``pip install 'recallkit[dask]'``), imported by this executor only: :func:`check_dask` says in one line that it
  is missing, before any work.

A ``runner`` is any callable ``runner(configs, device=None, progress=False) -> list[dict]``; the
default is :func:`empirics.engine.run_configs`. ``threads`` (if given) is applied with
``torch.set_num_threads`` before each call, locally and on workers, so that the float results do
not depend on where a config ran.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from typing import Callable, Iterator, Sequence

from recallkit.empirics.config import model_flops, parse_config, shape_key
from recallkit.empirics.cost import PricedExecutor
from recallkit.empirics.device import resolve_device
from recallkit.empirics.workers import (WorkerPool, die_with_parent, ignore_sigint, worker_init,  # noqa: F401
                                        worker_init_args)  # (the worker processes' set-up lives with the pool)
from recallkit.theory.errors import InputError

__all__ = ["check_dask", "DASK_MISSING", "ignore_sigint", "DaskExecutor", "default_runner", "die_with_parent", "fixed_threads", "LocalExecutor",
           "make_executor", "run_with_threads", "Runner", "shape_group_key", "split_work", "usable_cores", "worker_init",
           "worker_init_args"]


Runner = Callable[..., list]


def default_runner(configs: list[dict], device=None, progress: bool = False) -> list[dict]:
    from recallkit.empirics.engine import run_configs  # the engine imports torch (about 1 s): only to train

    return run_configs(configs, device=device, progress=progress)


def run_with_threads(runner: Runner, configs: list[dict], device, threads: int | None) -> list[dict]:
    """Run ``configs`` with ``runner`` with the torch thread count fixed to ``threads`` (and restored after, when it
    runs in this process); module level: Dask pickles it."""
    with fixed_threads(threads):
        return list(runner(configs, device=device, progress=False))


@contextlib.contextmanager
def fixed_threads(threads: int | None) -> Iterator[None]:
    """torch's thread count fixed to ``threads`` (None: left as it is) for the block, then restored: the main
    job's own training (runner experiments, report steps) gives the same numbers as its executors'."""
    if threads is None:
        yield
        return
    import torch  # only where training happens (about 1 s to import): the CLI's other commands never load it

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def shape_group_key(config: dict) -> str:
    """Configs that differ only in per-model numbers (seed, step sizes) go to the same worker call."""
    try:
        return shape_key(parse_config(config))
    except Exception:  # an unparsable config fails in the runner, with the runner's message
        rest = {k: v for k, v in config.items() if k not in ("seed", "lr", "eta", "gamma")}
        return json.dumps(rest, sort_keys=True, default=str)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _config_costs(configs: Sequence[dict]) -> list[float]:
    """Each config's FLOPs (its trainer's or its task's FLOP model), for balancing and ordering the work; 1 each if any is
    unparsable (it fails in the runner, with the runner's message)."""
    try:
        parsed = [parse_config(cfg) for cfg in configs]
        flops = [model_flops(p.trainer, p.task_config, p.trainer_config) for p in parsed]
    except Exception:
        return [1.0] * len(configs)
    # one config that no cost model counts makes the others' FLOPs incomparable with it: all count alike
    return [1.0] * len(configs) if None in flops else [float(f) for f in flops]


def split_work(configs: Sequence[dict], workers: int) -> list[list[int]]:
    """Indices of ``configs`` in parts for ``workers`` processes, costliest first: one part per shape
    group (so each part is one batched engine call), the costliest part halved while there are fewer parts
    than workers or it costs more than a worker's fair share of the round (a round waits for its slowest
    process: two seeds of a large model in one call next to a small group left the other worker idle). A
    config's numbers do not depend on its part (each model's data, weights and minibatches come from its
    own seeded streams, and the engine gives the same bits alone or batched on one thread), so the split
    changes nothing stored."""
    groups: dict[str, list[int]] = {}
    for index, cfg in enumerate(configs):
        groups.setdefault(shape_group_key(cfg), []).append(index)
    costs = _config_costs(configs)

    def cost(part: list[int]) -> float:
        return sum(costs[i] for i in part)

    fair_share = sum(costs) / max(1, workers)
    parts = list(groups.values())
    while True:
        parts.sort(key=cost)
        largest = parts[-1]
        if len(largest) < 2 or (len(parts) >= workers and cost(largest) <= fair_share):
            break
        half = len(largest) // 2
        parts[-1:] = [largest[:half], largest[half:]]
    return sorted(parts, key=lambda part: (-cost(part), part[0]))


class LocalExecutor:
    """The batched engine, in this process, or with ``workers > 1`` in worker processes: ``pool``, a
    ``workers.WorkerPool`` shared with the rest of a report (its workers count), else one of its own made when a
    round first needs it."""

    name = "local"

    def __init__(self, runner: Runner | None = None, device=None, threads: int | None = None, workers: int = 1,
                 pool=None):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError(f"--workers: expected a positive integer, got {workers!r}")
        self.runner = runner or default_runner
        self.device = device
        self.threads = threads
        self.pool = pool
        self._own_pool = pool is None
        self._asked = pool.workers if pool is not None else workers
        self._workers: int | None = None if self._asked > 1 else 1

    @property
    def workers(self) -> int:
        """Processes a round is split over; one on a GPU (one process feeds it). Asked of torch only for another
        device than the CPU, and only when several were asked for: a report that trains nothing never imports it."""
        if self._workers is None:
            on_gpu = str(self.device) != "cpu" and resolve_device(self.device).type == "cuda"
            self._workers = 1 if on_gpu else self._asked
        return self._workers

    def run(self, configs: Sequence[dict]) -> list[dict]:
        configs = list(configs)
        parts = split_work(configs, self.workers) if self.workers > 1 and len(configs) > 1 else []
        if len(parts) < 2:
            return run_with_threads(self.runner, configs, self.device, self.threads)
        if self.pool is None:
            self.pool = WorkerPool(self.workers)
        pending = [self.pool.submit(run_with_threads, self.runner, [configs[i] for i in part], self.device,
                                    self.threads) for part in parts]
        results: list[dict | None] = [None] * len(configs)
        try:
            for part, job in zip(parts, pending):
                for i, metrics in zip(part, job.result(), strict=True):
                    results[i] = metrics
        except BaseException as exc:
            for job in pending:
                job.cancel()
            if self._own_pool or not isinstance(exc, Exception):
                # Ctrl-C, or a worker's error in a pool of our own: stop the others now, not after their work (a
                # shared pool's owner stops it when the error ends the job; its other users' work goes on)
                self.pool.terminate()
            raise
        return results  # type: ignore[return-value]

    def describe(self) -> str:
        return "local" if self.workers == 1 else f"local ({self.workers} processes)"

    def close(self) -> None:
        if self.pool is not None and self._own_pool:
            self.pool.close()
            self.pool = None


class DaskExecutor:
    name = "dask"

    def __init__(self, scheduler: str | None = None, local_workers: int | None = None,
                 runner: Runner | None = None, device=None, threads: int | None = 1):
        Client, LocalCluster = _dask_client()
        if (scheduler is None) == (local_workers is None):
            raise InputError("--executor dask: give exactly one of --scheduler tcp://HOST:PORT or --dask-local N")
        self.runner = runner or default_runner
        self.device = device
        self.threads = threads
        self._cluster = None
        if local_workers is not None:
            if local_workers < 1:
                raise InputError(f"--dask-local: expected a positive number of workers, got {local_workers}")
            self._cluster = LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True,
                                         dashboard_address=None)
            self.client = Client(self._cluster)
            self.address = f"LocalCluster({local_workers} workers)"
        else:
            try:
                self.client = Client(scheduler, timeout=30)
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError(f"--scheduler: cannot connect to {scheduler}: {exc}") from None
            except MemoryError:  # something answered, not in Dask's protocol: its bytes read as a huge frame length
                raise InputError(f"--scheduler: cannot connect to {scheduler}: it answered, but not as a Dask "
                                 f"scheduler (expected the address of `dask scheduler`, tcp://HOST:PORT)") from None
            self.address = scheduler

    def run(self, configs: Sequence[dict]) -> list[dict]:
        configs = list(configs)
        groups: dict[str, list[int]] = {}
        for index, cfg in enumerate(configs):
            groups.setdefault(shape_group_key(cfg), []).append(index)
        futures = [
            self.client.submit(run_with_threads, self.runner, [configs[i] for i in indices], self.device,
                               self.threads, pure=False)
            for indices in groups.values()
        ]
        results: list[dict | None] = [None] * len(configs)
        for indices, group_result in zip(groups.values(), self.client.gather(futures), strict=True):
            for i, metrics in zip(indices, group_result, strict=True):
                results[i] = metrics
        return results  # type: ignore[return-value]

    def describe(self) -> str:
        return f"dask {self.address}"

    def close(self) -> None:
        self.client.close()
        if self._cluster is not None:
            self._cluster.close()


DASK_MISSING = "--executor dask: needs the dask extra (pip install 'recallkit[dask]')"


def _dask_client():
    """``dask.distributed``'s Client and LocalCluster: imported here only (about 0.4 s), and an extra's."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise InputError(DASK_MISSING) from None
    return Client, LocalCluster


def check_dask() -> None:
    """A one-line InputError when the dask extra is not installed, before any work."""
    if any(importlib.util.find_spec(name) is None for name in ("dask", "distributed")):
        raise InputError(DASK_MISSING)


def make_executor(name: str, runner: Runner | None = None, device=None, threads: int | None = None,
                  scheduler: str | None = None, local_workers: int | None = None, workers: int = 1, pool=None):
    """The executor called ``name``; ``pool``: the worker processes the local one shares (``workers.WorkerPool``)."""
    if name == "local":
        if scheduler is not None or local_workers is not None:
            raise InputError("--scheduler/--dask-local: only with --executor dask")
        executor = LocalExecutor(runner=runner, device=device, threads=threads, workers=workers, pool=pool)
    elif name == "dask":
        executor = DaskExecutor(scheduler=scheduler, local_workers=local_workers, runner=runner, device=device,
                                threads=1 if threads is None else threads)
    else:
        raise InputError(f"--executor: expected local or dask, got {name!r}")
    # the engine's rounds are priced before they train (empirics.cost); a caller's own runner prices its own work
    return PricedExecutor(executor, device) if runner is None else executor

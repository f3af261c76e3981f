"""Executors: where the probes of one search round are trained.

An executor has ``run(configs) -> list[metrics dict]`` (same order) and ``close()``. The sweep
driver calls it once per round and alone writes the results store, so a remote worker never
touches the database.

- :class:`LocalExecutor` (default): the batched engine, in this process, or with ``workers > 1`` in that
  many single-purpose worker processes on this machine: a round's configs are split into shape groups
  (each still one batched engine call), the costliest first, and handed to the first free worker.
- :class:`DaskExecutor`: the round is split into groups of configs that share a shape (so each
  group is still one batched engine call) and the groups are sent to a Dask cluster, given by a
  scheduler address or started here as a LocalCluster of N single-threaded worker processes.

A ``runner`` is any callable ``runner(configs, device=None, progress=False) -> list[dict]``; the
default is :func:`empirics.engine.run_configs`. ``threads`` (if given) is applied with
``torch.set_num_threads`` before each call, locally and on workers, so that the float results do
not depend on where a config ran.
"""
from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import signal
from typing import Callable, Iterator, Sequence

from recallkit.empirics.config import parse_config, shape_key
from recallkit.empirics.cost import PricedExecutor
from recallkit.empirics.device import resolve_device
from recallkit.theory.errors import InputError

__all__ = ["ignore_sigint", "DaskExecutor", "default_runner", "fixed_threads", "LocalExecutor", "make_executor", "run_with_threads",
           "Runner", "shape_group_key", "split_work", "usable_cores"]


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


def ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them (and keeps every stored result)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _config_costs(configs: Sequence[dict]) -> list[float]:
    """Each config's FLOPs (its task's FLOP model), for balancing and ordering the work; 1 each if any is
    unparsable (it fails in the runner, with the runner's message)."""
    try:
        parsed = [parse_config(cfg) for cfg in configs]
        return [float(p.task_config.train_flops(p.trainer_config)) for p in parsed]
    except Exception:
        return [1.0] * len(configs)


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
    name = "local"

    def __init__(self, runner: Runner | None = None, device=None, threads: int | None = None, workers: int = 1):
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise InputError(f"--workers: expected a positive integer, got {workers!r}")
        self.runner = runner or default_runner
        self.device = device
        self.threads = threads
        if workers > 1:
            if resolve_device(device).type == "cuda":
                workers = 1  # one GPU: one process feeds it
        self.workers = workers
        self._pool = None

    def run(self, configs: Sequence[dict]) -> list[dict]:
        configs = list(configs)
        parts = split_work(configs, self.workers) if self.workers > 1 and len(configs) > 1 else []
        if len(parts) < 2:
            return run_with_threads(self.runner, configs, self.device, self.threads)
        if self._pool is None:
            # spawn, not fork: a forked copy of a process that has run torch's thread pools can hang
            self._pool = multiprocessing.get_context("spawn").Pool(self.workers, initializer=ignore_sigint)
        pending = [self._pool.apply_async(run_with_threads, (self.runner, [configs[i] for i in part], self.device,
                                                             self.threads)) for part in parts]
        results: list[dict | None] = [None] * len(configs)
        try:
            for part, job in zip(parts, pending):
                for i, metrics in zip(part, job.get(), strict=True):
                    results[i] = metrics
        except BaseException:  # Ctrl-C or a worker's error: stop the others now, not after their work
            self._pool.terminate()
            self._pool = None
            raise
        return results  # type: ignore[return-value]

    def describe(self) -> str:
        return "local" if self.workers == 1 else f"local ({self.workers} processes)"

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None


class DaskExecutor:
    name = "dask"

    def __init__(self, scheduler: str | None = None, local_workers: int | None = None,
                 runner: Runner | None = None, device=None, threads: int | None = 1):
        try:
            from dask.distributed import Client, LocalCluster  # only for this executor: about 0.4 s to import
        except ImportError:  # pragma: no cover - dask[distributed] is a dependency
            raise InputError("--executor dask: needs dask[distributed] (pip install 'dask[distributed]')") from None
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


def make_executor(name: str, runner: Runner | None = None, device=None, threads: int | None = None,
                  scheduler: str | None = None, local_workers: int | None = None, workers: int = 1):
    if name == "local":
        if scheduler is not None or local_workers is not None:
            raise InputError("--scheduler/--dask-local: only with --executor dask")
        executor = LocalExecutor(runner=runner, device=device, threads=threads, workers=workers)
    elif name == "dask":
        executor = DaskExecutor(scheduler=scheduler, local_workers=local_workers, runner=runner, device=device,
                                threads=1 if threads is None else threads)
    else:
        raise InputError(f"--executor: expected local or dask, got {name!r}")
    # the engine's rounds are priced before they train (empirics.cost); a caller's own runner prices its own work
    return PricedExecutor(executor, device) if runner is None else executor

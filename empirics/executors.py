"""Executors: where the probes of one search round are trained.

An executor has ``run(configs) -> list[metrics dict]`` (same order) and ``close()``. The sweep
driver calls it once per round and alone writes the results store, so a remote worker never
touches the database.

- :class:`LocalExecutor` (default): the in-process batched engine.
- :class:`DaskExecutor`: the round is split into groups of configs that share a shape (so each
  group is still one batched engine call) and the groups are sent to a Dask cluster, given by a
  scheduler address or started here as a LocalCluster of N single-threaded worker processes.

A ``runner`` is any callable ``runner(configs, device=None, progress=False) -> list[dict]``; the
default is :func:`empirics.engine.run_configs`. ``threads`` (if given) is applied with
``torch.set_num_threads`` before each call, locally and on workers, so that the float results do
not depend on where a config ran.
"""
from __future__ import annotations

import json
from typing import Callable, Sequence

from recallkit.theory.errors import InputError

Runner = Callable[..., list]


def default_runner(configs: list[dict], device=None, progress: bool = False) -> list[dict]:
    from recallkit.empirics.engine import run_configs

    return run_configs(configs, device=device, progress=progress)


def run_with_threads(runner: Runner, configs: list[dict], device, threads: int | None) -> list[dict]:
    """Run ``configs`` with ``runner`` after fixing the torch thread count (module level: Dask pickles it)."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    return list(runner(configs, device=device, progress=False))


def shape_group_key(config: dict) -> str:
    """Configs that differ only in per-model numbers (seed, step sizes) go to the same worker call."""
    try:
        from recallkit.empirics.config import parse_config, shape_key

        return shape_key(parse_config(config))
    except Exception:  # an unparsable config fails in the runner, with the runner's message
        rest = {k: v for k, v in config.items() if k not in ("seed", "lr", "eta", "gamma")}
        return json.dumps(rest, sort_keys=True, default=str)


class LocalExecutor:
    name = "local"

    def __init__(self, runner: Runner | None = None, device=None, threads: int | None = None):
        self.runner = runner or default_runner
        self.device = device
        self.threads = threads

    def run(self, configs: Sequence[dict]) -> list[dict]:
        return run_with_threads(self.runner, list(configs), self.device, self.threads)

    def describe(self) -> str:
        return "local"

    def close(self) -> None:
        pass


class DaskExecutor:
    name = "dask"

    def __init__(self, scheduler: str | None = None, local_workers: int | None = None,
                 runner: Runner | None = None, device=None, threads: int | None = 1):
        try:
            from dask.distributed import Client, LocalCluster
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
                  scheduler: str | None = None, local_workers: int | None = None):
    if name == "local":
        if scheduler is not None or local_workers is not None:
            raise InputError("--scheduler/--dask-local: only with --executor dask")
        return LocalExecutor(runner=runner, device=device, threads=threads)
    if name == "dask":
        return DaskExecutor(scheduler=scheduler, local_workers=local_workers, runner=runner, device=device,
                            threads=1 if threads is None else threads)
    raise InputError(f"--executor: expected local or dask, got {name!r}")

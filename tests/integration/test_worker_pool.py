"""``empirics.workers``: the pool starts on its first job, stops a running job at once when terminated, and
``Capped`` keeps at most its cap of jobs in the pool and closes without waiting for jobs it cancelled."""
from __future__ import annotations

import concurrent.futures
import os
import time

import pytest

from recallkit.empirics.workers import Capped, InlineExecutor, WorkerPool, completed

pytestmark = pytest.mark.integration


def _pid_after(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def test_a_pool_starts_on_its_first_job_and_terminate_stops_a_running_one():
    pool = WorkerPool(2)
    assert not pool.started
    assert pool.submit(_pid_after, 0).result(timeout=120) != os.getpid() and pool.starts == 1
    long = pool.submit(_pid_after, 600)
    time.sleep(0.5)
    began = time.perf_counter()
    pool.terminate()
    with pytest.raises(concurrent.futures.process.BrokenProcessPool):
        long.result(timeout=30)
    assert time.perf_counter() - began < 10
    pool.close()
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(_pid_after, 0)


def test_capped_jobs_wait_their_turn_and_cancelled_ones_are_not_waited_for():
    pool = WorkerPool(2)
    try:
        capped = Capped(pool, 1)
        jobs = [capped.submit(_pid_after, 2)] + [capped.submit(_pid_after, 600) for _ in range(3)]
        time.sleep(1)
        assert not any(job.done() for job in jobs)
        began = time.perf_counter()
        capped.close()  # the running one finishes (2 s); the three waiting ones never start
        assert jobs[0].result(timeout=0) and all(job.cancelled() for job in jobs[1:])
        assert time.perf_counter() - began < 10
    finally:
        pool.close(failed=True)


def test_a_job_here_runs_when_its_result_is_asked_for():
    ran = []
    future = InlineExecutor().submit(ran.append, 1)
    assert ran == [] and future.result() is None and ran == [1]
    assert completed({"name": "x"}).result() == {"name": "x"}


def _spin(label: str, seconds: float) -> str:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return label


def test_the_cpu_trace_has_one_line_per_job_with_its_phase_and_cpu_time(tmp_path, monkeypatch):
    """``$RECALLKIT_CPU_TRACE``: what the main job's benchmark splits the workers' CPU time by."""
    import json

    from recallkit.empirics import workers

    trace = tmp_path / "trace.jsonl"
    monkeypatch.setenv(workers.TRACE_ENV, str(trace))
    pool = WorkerPool(2)
    try:
        workers.trace_label("first experiment")
        jobs = [pool.submit(_spin, "a", 0.3), pool.submit(_spin, "b", 0.05)]
        workers.trace_label("second experiment")
        jobs.append(pool.submit(_pid_after, 0.2))
        assert [job.result(timeout=120) for job in jobs][:2] == ["a", "b"]
    finally:
        pool.close()
        workers.trace_label("start")
    lines = sorted((json.loads(line) for line in trace.read_text().splitlines()), key=lambda line: line["job"])
    assert [(line["job"], line["phase"]) for line in lines] == [
        ("_pid_after", "second experiment"), ("_spin a", "first experiment"), ("_spin b", "first experiment")]
    assert lines[1]["cpu_s"] >= 0.29 and lines[2]["cpu_s"] < 0.2  # the job's own CPU time, in the worker
    assert lines[0]["cpu_s"] < 0.1 <= lines[0]["wall_s"]  # asleep: wall time, next to no CPU


def _heap_kept() -> bool:
    from recallkit.empirics import numerics

    return numerics._heap_kept


@pytest.mark.parametrize("setting, kept", [(None, True), ("0", False)])
def test_a_worker_keeps_freed_heap_from_its_first_job_unless_told_not_to(monkeypatch, setting, kept):
    """The steps that train outside the engine (geometric runners, term probes) often run first in a fresh worker:
    the allocator tuning must be on before them, not only after the worker's first training."""
    if setting is None:
        monkeypatch.delenv("RECALLKIT_KEEP_HEAP", raising=False)
    else:
        monkeypatch.setenv("RECALLKIT_KEEP_HEAP", setting)
    pool = WorkerPool(1)
    try:
        assert pool.submit(_heap_kept).result(timeout=120) is kept
    finally:
        pool.close()

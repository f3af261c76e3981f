"""A killed ``recallkit report`` or ``recallkit sweep --workers 2`` takes its worker processes with it, and the
next report into the same ``--out`` removes the staging folder the killed one left (and only that: a running
report's staging folder stays).

Through the installed command, each run in a session of its own so that every process it started can be found
(and, whatever happens, killed at the end) by its session id; only the parent is killed by the test itself. The
experiment trains one tiny linear memory per config for a million steps, so a worker is still training long
after the kill unless something ends it."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.experiment_texts import TINY_LINEAR_MEMORY

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg", "RECALLKIT_CACHE": "off"}


def _slow_experiment(folder: Path) -> Path:
    text = TINY_LINEAR_MEMORY
    text = re.sub(r"(?m)^steps = \d+$", "steps = 1000000", text)
    text = re.sub(r"(?m)^early_stop = .*\n", "", text)
    assert "steps = 1000000" in text and "early_stop" not in text
    path = folder / "slow.toml"
    path.write_text(text)
    return path


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every live process (zombies are dead: they only wait to be reaped)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
        if fields[0] not in ("Z", "X"):
            table[int(entry)] = (int(fields[1]), int(fields[3]))
    return table


def _descendants(pid: int) -> set[int]:
    table = _processes()
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        children = {child for child, (ppid, _) in table.items() if ppid == parent}
        todo.extend(children - found)
        found |= children
    return found


def _alive(pids: set[int], session: int) -> set[int]:
    """Of ``pids``, and of the processes in ``session``, those still running."""
    table = _processes()
    return {pid for pid, (_, sid) in table.items() if sid == session or pid in pids}


def _start(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen([RECALLKIT, *args], stdout=out, stderr=subprocess.STDOUT, env=ENV,
                                start_new_session=True)


def _wait_for(what: str, proc: subprocess.Popen, log: Path, condition, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the command ended (exit {proc.returncode}) before {what}: {log.read_text()[-2000:]}")
        time.sleep(0.1)
    pytest.fail(f"no {what} within {timeout} s: {log.read_text()[-2000:]}")


def _kill_session(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _kill_parent_and_watch(proc: subprocess.Popen, sig: int, log: Path) -> set[int]:
    """Wait until the command's workers exist and are at work, kill the parent alone, and return what of its
    process tree is still running 10 s later."""
    def three_or_more() -> set[int] | None:
        found = _descendants(proc.pid)
        return found if len(found) >= 3 else None

    workers = _wait_for("three worker processes", proc, log, three_or_more)
    time.sleep(4)  # the workers have their first configs and train them (for minutes, unless stopped)
    workers |= _descendants(proc.pid)
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    assert proc.returncode == -sig, f"the command ended before it was killed: {log.read_text()[-2000:]}"
    deadline = time.monotonic() + 10
    while _alive(workers, proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _alive(workers, proc.pid)


def _staging(out: Path) -> set[Path]:
    return set(out.glob(".recallkit-staging-*"))


def test_a_killed_report_takes_its_workers_along_and_the_next_report_removes_its_staging_folder(tmp_path):
    slow = _slow_experiment(tmp_path)
    out, store = tmp_path / "out", tmp_path / "store.db"
    command = ["report", str(slow), "--out", str(out), "--store", str(store), "--workers", "2", "--no-probes"]
    runs = []
    try:
        runs.append(_start(command, tmp_path / "first.log"))
        survivors = _kill_parent_and_watch(runs[0], signal.SIGKILL, tmp_path / "first.log")
        assert not survivors, f"still running 10 s after the report was killed: {survivors}"
        left = _staging(out)
        assert len(left) == 1, left  # what the killed report was drawing into

        runs.append(_start(command, tmp_path / "second.log"))
        second = _wait_for("staging folder of the second report", runs[1], tmp_path / "second.log",
                           lambda: _staging(out) - left)
        assert not (left & _staging(out)), "the killed report's staging folder is still there"

        # a report running beside another keeps the other's staging folder: its owner is alive
        runs.append(_start(command, tmp_path / "third.log"))
        _wait_for("staging folder of the third report", runs[2], tmp_path / "third.log",
                  lambda: _staging(out) - left - second)
        assert second <= _staging(out), "a running report's staging folder was removed"
    finally:
        for run in runs:
            _kill_session(run)


def test_a_killed_sweep_takes_its_workers_along(tmp_path):
    slow = _slow_experiment(tmp_path)
    command = ["sweep", str(slow), "--store", str(tmp_path / "store.db"), "--workers", "2", "--no-progress"]
    proc = _start(command, tmp_path / "sweep.log")
    try:
        survivors = _kill_parent_and_watch(proc, signal.SIGTERM, tmp_path / "sweep.log")
        assert not survivors, f"still running 10 s after the sweep was stopped: {survivors}"
    finally:
        _kill_session(proc)


THREAD_STARTED_POOL = """
import os, threading, time
from recallkit.empirics.executors import LocalExecutor


def running(pid):
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"  # a zombie is dead, waiting to be reaped


def echo(configs, device=None, progress=False):
    return [{"name": cfg["name"], "pid": os.getpid()} for cfg in configs]


if __name__ == "__main__":
    executor = LocalExecutor(runner=echo, workers=2)
    configs = [{"name": "a"}, {"name": "b"}]  # two shape groups: one for each worker
    first = []
    starter = threading.Thread(target=lambda: first.extend(executor.run(configs)))
    starter.start()
    starter.join()
    time.sleep(1)  # (the signal comes at once)
    dead = [r["pid"] for r in first if not running(r["pid"])]
    print("names", [r["name"] for r in first], "dead", dead, flush=True)
    if dead:
        os._exit(3)  # a pool that lost its workers may never finish a round nor close
    print("again", [r["name"] for r in executor.run(configs)], flush=True)
    executor.close()
"""


def test_workers_started_from_a_thread_that_ended_keep_working(tmp_path):
    """The kernel's parent-death signal fires when the *thread* that started a worker ends: a pool started
    from a short-lived thread must not lose its workers then (the parent is still there to use them)."""
    script = tmp_path / "thread_started_pool.py"
    script.write_text(THREAD_STARTED_POOL)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert done.stdout.split("\n")[:2] == ["names ['a', 'b'] dead []", "again ['a', 'b']"], done.stdout

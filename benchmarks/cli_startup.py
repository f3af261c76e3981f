"""Start-up cost of the ``recallkit`` command, next to a bare Python and a bare typer measured in the same run.

Every CLI test runs the installed command in a fresh process, so what a command costs before it does anything
is paid hundreds of times per test run. This times, in fresh processes, ``recallkit --version``,
``recallkit theory --help`` and a usage error (``recallkit sweep --no-such-flag``), and as baselines
``python -c pass`` and ``python -c "import typer"``; the commands are interleaved round by round so that a busy
machine slows them alike. It prints per command the median wall time and the median CPU time (user + system of
the child: on a shared machine wall time mostly measures waiting), and the ratio of each to the typer baseline.

Run: python benchmarks/cli_startup.py [--repeats 9]
(an older tree: PYTHONPATH=/path/to/a/tree/laid/out/as/the/recallkit/package python benchmarks/cli_startup.py)
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

__all__ = ["COMMANDS", "main", "time_once"]


def _commands() -> dict[str, list[str]]:
    recallkit = shutil.which("recallkit")
    if recallkit is None:
        sys.exit("error: no 'recallkit' command on PATH (pip install -e . first)")
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import typer'": [sys.executable, "-c", "import typer"],
        "recallkit --version": [recallkit, "--version"],
        "recallkit theory --help": [recallkit, "theory", "--help"],
        "recallkit sweep --no-such-flag": [recallkit, "sweep", "--no-such-flag"],
    }


COMMANDS = ("python -c pass", "python -c 'import typer'", "recallkit --version", "recallkit theory --help",
            "recallkit sweep --no-such-flag")
BASELINE = "python -c 'import typer'"


def time_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one fresh run of ``argv``; its exit code is not checked (the
    usage error exits 2 on purpose)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="fresh processes per command (default 9)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats: expected a positive integer, got {args.repeats}")
    commands = _commands()
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpus: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name in COMMANDS:
            wall, cpu = time_once(commands[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    base_wall, base_cpu = statistics.median(walls[BASELINE]), statistics.median(cpus[BASELINE])
    print(f"median of {args.repeats} fresh processes each; ratios against {BASELINE}")
    width = max(map(len, COMMANDS))
    for name in COMMANDS:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"{name:<{width}}  wall {wall:6.3f} s ({wall / base_wall:4.2f}x)  "
              f"CPU {cpu:6.3f} s ({cpu / base_cpu:4.2f}x)")


if __name__ == "__main__":
    main()

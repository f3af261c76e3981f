"""Benchmark of the main job, `recallkit report` (quick preset), three times in one run on this machine:

1. cold: an empty store (everything is trained) into a fresh folder, and where its time went: the report's own
   ``step time: NAME W s wall`` lines, largest first, each with its share of the cold wall time;
2. warm: the store full (nothing trained) into another fresh folder: every page the cold run drew is copied from
   the page cache (those whose data changed, e.g. notes with the cold run's counts, are drawn again);
3. unchanged warm: the same again into the warm run's folder, so every page is reused (and the fits, realised
   predictions, packs' phase diagrams, systems' steps and math path come from the cache beside the pages), printed
   beside the bare import time of the same command (``python -c "import recallkit.cli"``, median of 3): what is
   left of an unchanged report once nothing is computed again;
4. the baseline of this run: the unchanged warm report again with RECALLKIT_CACHE=off (the folder's own pages
   reused, all else computed), and the ratio of the two.

Targets, on 2 quiet cores: cold <= 300 s; warm <= 10 s; unchanged warm within 1.5x of the bare import time. The
pages go through a page cache of the run's own (``RECALLKIT_CACHE`` under the output folder unless set), so a warm
run into a new folder copies the pages the cold run drew, as a user's second report would. Each line gives the
wall time and the CPU time of the command (user + system, all its processes): on a machine shared with other work
the wall time varies with the load and the CPU time much less, so both are printed, with the load average.
SOURCE_DATE_EPOCH is set, so the PDFs must be byte-identical.

    python benchmarks/report_main_job.py [--out DIR] [--store STORE] [--cold-only] [--profile]
                                         [extra recallkit report args...]

``--store`` starts from an existing store instead of an empty one (the cold line then says so); with named
experiments among the extra arguments (``--store tests/fixtures/small_store/store.sqlite tr_fig2_attention_only``)
it checks the benchmark itself in a minute. ``--cold-only`` stops after the cold run and its split.
``--profile`` also runs the unchanged warm report once more under cProfile, right after it (the cache-off baseline
rewrites the folder's summary, so no later run is answered from its files), and prints its 15 largest cumulative
entries.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import statistics
import tempfile
import threading
import time
from pathlib import Path

STEP_LINE = re.compile(r"^step time: (\S+) ([\d.]+) s wall", re.MULTILINE)
IMPORT_TARGET = 1.5  # an unchanged report within this many times the bare import of the command
# the frames that wrap the whole command (interpreter, click/typer, recallkit.cli): each is 100% cumulative
PROFILE_SKIP = r"^(?!.*(typer|click|runpy|recallkit/cli\.py|<string>|builtins\.exec|<frozen importlib))"


def _env(out: Path, cache: str | None) -> dict[str, str]:
    return {**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "1764493200"),
            # a page cache of this run's own (the reports' shared cache): the cold line draws every page, the warm
            # lines find what it drew; another run's pages never make a cold line look warm
            "RECALLKIT_CACHE": cache or os.environ.get("RECALLKIT_CACHE") or str(out.parent / "page-cache")}


def timed_report(out: Path, store: Path, extra: list[str], cache: str | None = None,
                 profile: Path | None = None, trace: Path | None = None) -> tuple[float, float, str, str]:
    """(wall s, CPU s, the report's page-count line, its stderr) of one `recallkit report` (``cache``: its
    RECALLKIT_CACHE; ``profile``: run it under cProfile, the statistics written there)."""
    run = ["-m", "cProfile", "-o", str(profile)] if profile else []
    cmd = [sys.executable, *run, "-m", "recallkit.cli", "report", "--out", str(out), "--store", str(store), *extra]
    started = time.perf_counter()
    # its own session, so that every process it starts is found, the pool's workers included: they are the fork
    # server's children, not the report's, and their CPU never reaches this process's RUSAGE_CHILDREN
    env = _env(out, cache)
    if trace is not None:  # each worker job appends its CPU seconds there (empirics.workers)
        env["RECALLKIT_CPU_TRACE"] = str(trace)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    sampler = SessionCPU(proc.pid)
    sampler.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - started
    cpu = sampler.stop()
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd, stderr=stderr)
    pages = next((line for line in stderr.splitlines() if line.startswith("report pages:")), "")
    return wall, cpu, re.sub(r"^report pages: ", "", pages), stderr


class SessionCPU(threading.Thread):
    """The CPU seconds (user + system) of every process of one session, read from /proc every ``period`` seconds:
    each process counts with the last reading taken while it lived, so up to ``period`` of each is missed (the
    pool's few workers live for the whole report). Where /proc has no such process, 0."""

    def __init__(self, session: int, period: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.session, self.period = session, period
        self.seen: dict[int, float] = {}
        self._done = threading.Event()

    def _read(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone between the listing and the read
            if int(fields[3]) == self.session:  # field 6 of stat(5), counted after the command's ")"
                self.seen[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick

    def run(self) -> None:
        while not self._done.wait(self.period):
            self._read()

    def stop(self) -> float:
        self._done.set()
        self.join()
        return sum(self.seen.values())


def import_time(repeats: int = 3) -> float:
    """The median wall time of ``python -c "import recallkit.cli"``: the floor an unchanged report is held to."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import recallkit.cli"], check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def step_split(stderr: str, wall: float) -> list[str]:
    """The cold run's ``step time:`` lines, largest first, each with its share of the run's wall time."""
    steps = sorted(((name, float(seconds)) for name, seconds in STEP_LINE.findall(stderr)),
                   key=lambda step: -step[1])
    if not steps:
        return ["  no per-step lines"]
    width = max(len(name) for name, _ in steps)
    # steps that run beside each other (a system's step while the experiments fit) overlap: shares may add past 100%
    return [f"  {name:{width}s} {seconds:7.1f} s wall  {100 * seconds / wall:5.1f}% of the cold run"
            for name, seconds in steps]


def cpu_split(trace: Path, total: float) -> list[str]:
    """Where the cold run's CPU seconds went, from the workers' trace: training per experiment, each system step,
    the pages, and the rest (the main process: planning, fits, judging, joining, imports, and any round it trained
    itself; the workers' start-up)."""
    try:
        jobs = [json.loads(line) for line in trace.read_text().splitlines() if line.strip()]
    except OSError:
        return ["  no CPU trace"]
    groups: dict[str, float] = collections.defaultdict(float)
    counts: dict[str, int] = collections.defaultdict(int)
    for job in jobs:
        name = job["job"]
        if name.startswith("run_with_threads"):
            group = f"training: {job['phase']}"
        elif name.startswith("draw_one"):
            group = "pages"
        else:
            group = f"step: {name.split(':')[-1] if ':' in name else name}"
        groups[group] += job["cpu_s"]
        counts[group] += 1
    rest = total - sum(groups.values())
    width = max([len(group) for group in groups] + [12])
    lines = [f"  {group:{width}s} {cpu:7.1f} s CPU  {100 * cpu / total:5.1f}%  ({counts[group]} jobs)"
             for group, cpu in sorted(groups.items(), key=lambda item: -item[1])]
    lines.append(f"  {'main process and start-up':{width}s} {rest:7.1f} s CPU  {100 * rest / total:5.1f}%")
    return lines


def print_profile(out: Path, store: Path, extra: list[str], root: Path) -> None:
    """The unchanged warm report once more under cProfile: its 15 largest cumulative entries."""
    stats_file = root / "unchanged.prof"
    wall, _, _, _ = timed_report(out, store, extra, profile=stats_file)
    print(f"unchanged warm under cProfile: {wall:.1f} s wall; top 15 cumulative (the command line's own frames left "
          f"out: they hold everything):")
    pstats.Stats(str(stats_file), stream=sys.stdout).sort_stats("cumulative").print_stats(PROFILE_SKIP, 15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the reports (default: a temp dir)")
    parser.add_argument("--store", type=Path, default=None, help="start from a copy of this store (no cold training)")
    parser.add_argument("--cold-only", action="store_true", help="stop after the cold run and its per-step split")
    parser.add_argument("--profile", action="store_true", help="also profile the unchanged warm report (cProfile)")
    args, extra = parser.parse_known_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="recallkit-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    store = root / "store.db"
    if args.store:
        shutil.copyfile(args.store, store)
    print(f"cores: {len(os.sched_getaffinity(0))}; load average before: {os.getloadavg()[0]:.1f}")
    # the last line is this run's baseline for the cache shared by every folder (its fits, packs' phase diagrams,
    # systems' steps and math path, beside the pages): the same unchanged report with that cache off, so only the
    # folder's own pages are reused and everything else is computed, as before there was such a cache
    runs = [("cold (empty store)" if not args.store else "cold (copied store)", root / "cold", "<= 300 s", None),
            ("warm (store full, new folder)", root / "warm", "<= 10 s", None),
            ("unchanged warm (same folder)", root / "warm", f"<= {IMPORT_TARGET:g}x import", None),
            ("unchanged warm, cache off", root / "warm", "baseline", "off")]
    times, cpus = [], []
    trace = root / "cold-cpu-trace.jsonl"
    trace.unlink(missing_ok=True)
    for label, out, target, cache in runs[:1] if args.cold_only else runs:
        wall, cpu, pages, stderr = timed_report(out, store, extra, cache, trace=trace if not times else None)
        times.append(wall)
        cpus.append(cpu)
        shutil.copyfile(out / "recallkit-report.pdf", root / f"{label.split(' (')[0].replace(' ', '-')}.pdf")
        print(f"{label:31s} {wall:7.1f} s wall {cpu:7.1f} s CPU   target {target:12s} load "
              f"{os.getloadavg()[0]:4.1f}   pages: {pages}")
        if len(times) == 3 and args.profile:  # before the cache-off run rewrites the folder (no replay after it)
            print_profile(root / "warm", store, extra, root)
        if len(times) == 1:
            print("\n".join(["where the cold run's time went:", *step_split(stderr, wall)]))
            print("\n".join(["where the cold run's CPU went (the workers' jobs, traced):", *cpu_split(trace, cpu)]))
    if args.cold_only:
        return
    bare = import_time()
    print(f"bare import (python -c 'import recallkit.cli', median of 3): {bare:.2f} s; unchanged warm "
          f"{times[2]:.2f} s = {times[2] / bare:.2f}x it (target within {IMPORT_TARGET:g}x)")
    pdfs = [(root / f"{name}.pdf").read_bytes() for name in ("cold", "warm", "unchanged-warm", "unchanged-warm,-cache-off")]
    print(f"same PDF bytes (cold, warm, unchanged warm, cache off): {pdfs[0] == pdfs[1] == pdfs[2] == pdfs[3]}")
    print(f"ratio cold/warm: {times[0] / times[1]:.1f}x; warm/unchanged warm: {times[1] / times[2]:.1f}x; "
          f"unchanged warm, cache off/on: {times[3] / times[2]:.1f}x wall, {cpus[3] / cpus[2]:.1f}x CPU")


if __name__ == "__main__":
    main()

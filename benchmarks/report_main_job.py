"""Benchmark of the main job, `recallkit report` (quick preset), three times in one run on this machine:

1. cold: an empty store (everything is trained) into a fresh folder;
2. warm: the store full (nothing trained) into another fresh folder: every page the cold run drew is copied from
   the page cache (those whose data changed, e.g. notes with the cold run's counts, are drawn again);
3. unchanged warm: the same again into the warm run's folder, so every page is reused (and the fits, packs' phase
   diagrams, systems' steps and math path come from the cache beside the pages);
4. the baseline of this run: the unchanged warm report again with RECALLKIT_CACHE=off (the folder's own pages
   reused, all else computed), and the ratio of the two.

Targets: cold < 10 min; warm <= 10 s; unchanged warm <= 5 s, on a 2-core CPU. The pages go through a page cache
of the run's own (``RECALLKIT_CACHE`` under the output folder unless set), so a warm run into a new folder copies
the pages the cold run drew, as a user's second report would. Each line gives
the wall time and the CPU time of the command (user + system, all its processes): on a machine shared
with other work the wall time varies with the load and the CPU time much less, so both are printed,
with the load average. SOURCE_DATE_EPOCH is set, so the three PDFs must be byte-identical.

    python benchmarks/report_main_job.py [--out DIR] [--store STORE] [extra recallkit report args...]

``--store`` starts from an existing store instead of an empty one (the cold line then says so).
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed_report(out: Path, store: Path, extra: list[str], cache: str | None = None) -> tuple[float, float, str]:
    """(wall s, CPU s, the report's page-count line) of one `recallkit report` (``cache``: its RECALLKIT_CACHE)."""
    cmd = [sys.executable, "-m", "recallkit.cli", "report", "--out", str(out), "--store", str(store), *extra]
    env = {**os.environ, "SOURCE_DATE_EPOCH": os.environ.get("SOURCE_DATE_EPOCH", "1764493200"),
           # a page cache of this run's own (the reports' shared cache): the cold line draws every page, the warm
           # lines find what it drew; another run's pages never make a cold line look warm
           "RECALLKIT_CACHE": cache or os.environ.get("RECALLKIT_CACHE") or str(out.parent / "page-cache")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    pages = next((line for line in done.stderr.splitlines() if line.startswith("report pages:")), "")
    return wall, cpu, re.sub(r"^report pages: ", "", pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the reports (default: a temp dir)")
    parser.add_argument("--store", type=Path, default=None, help="start from a copy of this store (no cold training)")
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
    runs = [("cold (empty store)" if not args.store else "cold (copied store)", root / "cold", "< 600 s", None),
            ("warm (store full, new folder)", root / "warm", "<= 10 s", None),
            ("unchanged warm (same folder)", root / "warm", "<= 5 s", None),
            ("unchanged warm, cache off", root / "warm", "baseline", "off")]
    times, cpus = [], []
    for label, out, target, cache in runs:
        wall, cpu, pages = timed_report(out, store, extra, cache)
        times.append(wall)
        cpus.append(cpu)
        shutil.copyfile(out / "recallkit-report.pdf", root / f"{label.split(' (')[0].replace(' ', '-')}.pdf")
        print(f"{label:31s} {wall:7.1f} s wall {cpu:7.1f} s CPU   target {target:8s} load {os.getloadavg()[0]:4.1f}"
              f"   pages: {pages}")
    pdfs = [(root / f"{name}.pdf").read_bytes() for name in ("cold", "warm", "unchanged-warm", "unchanged-warm,-cache-off")]
    print(f"same PDF bytes (cold, warm, unchanged warm, cache off): {pdfs[0] == pdfs[1] == pdfs[2] == pdfs[3]}")
    print(f"ratio cold/warm: {times[0] / times[1]:.1f}x; warm/unchanged warm: {times[1] / times[2]:.1f}x; "
          f"unchanged warm, cache off/on: {times[3] / times[2]:.1f}x wall, {cpus[3] / cpus[2]:.1f}x CPU")


if __name__ == "__main__":
    main()

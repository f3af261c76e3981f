"""Benchmark of the main job: `recallkit report` (quick preset) from an empty store, then again with
the store full, in one run on this machine. Targets (issue 4): cold < 10 min, warm < 1 min on a
2-core CPU. Prints both wall times and the ratio cold / warm as its last line.

    python benchmarks/report_main_job.py [--out DIR] [extra recallkit report args...]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed_report(out: Path, store: Path, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "recallkit.cli", "report", "--out", str(out), "--store", str(store), *extra]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the two reports (default: a temp dir)")
    args, extra = parser.parse_known_args()
    root = args.out or Path(tempfile.mkdtemp(prefix="recallkit-bench-"))
    store = root / "store.db"
    cold = timed_report(root / "cold", store, extra)
    print(f"cold (empty store): {cold:8.1f} s   target < 600 s")
    warm = timed_report(root / "warm", store, extra)
    print(f"warm (store full):  {warm:8.1f} s   target < 60 s")
    same = (root / "cold" / "recallkit-report.pdf").read_bytes() == (root / "warm" / "recallkit-report.pdf").read_bytes()
    print(f"same PDF bytes: {same} (differ only by the date unless SOURCE_DATE_EPOCH is set)")
    print(f"ratio cold/warm: {cold / warm:.1f}x")


if __name__ == "__main__":
    main()

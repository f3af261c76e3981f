"""Cost of `import theory` next to the sympy import it cannot avoid, measured side by side.

Prints CPU seconds (not wall time, which on a shared machine mostly measures waiting) for a fresh
interpreter importing sympy alone and sympy + theory, best of 5, and their ratio.
Run: python benchmarks/theory_import.py
"""
from __future__ import annotations

import json
import subprocess
import sys

PROBE = ("import json, time; t0 = time.process_time(); import sympy; t1 = time.process_time(); import theory; "
         "t2 = time.process_time(); print(json.dumps([t1 - t0, t2 - t0]))")


def main(repeats: int = 5) -> None:
    runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                                      check=True).stdout) for _ in range(repeats)]
    sympy_only = min(run[0] for run in runs)
    with_theory = min(run[1] for run in runs)
    print(f"import sympy: {sympy_only:.3f} s CPU; import sympy + theory: {with_theory:.3f} s CPU; "
          f"ratio {with_theory / sympy_only:.2f} (best of {repeats})")


if __name__ == "__main__":
    main()

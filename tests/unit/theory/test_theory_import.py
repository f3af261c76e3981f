"""`import theory` stays light: no torch, matplotlib or scipy, and well under a second."""
from __future__ import annotations

import json
import subprocess
import sys

# CPU time, not wall time: up to seven builders share two cores, and waiting for a core is not
# import cost. theory's own share (beyond sympy, which it cannot avoid) is checked separately.
PROBE = (
    "import json, sys, time; t0 = time.process_time(); import sympy; t1 = time.process_time(); import theory; "
    "t2 = time.process_time(); print(json.dumps({'total': t2 - t0, 'own': t2 - t1, 'heavy': sorted(m for m in "
    "('torch', 'matplotlib', 'scipy') if m in sys.modules)}))"
)


def test_import_theory_is_light_and_fast():
    runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                                      timeout=60).stdout) for _ in range(3)]
    assert all(run["heavy"] == [] for run in runs), runs
    assert min(run["total"] for run in runs) < 1.0, runs
    assert min(run["own"] for run in runs) < 0.3, runs

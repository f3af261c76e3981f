"""A report that trains nothing does not import torch (about 1 s, and as much again at exit), and says the same: its
provenance (device, threads, math path, torch version) equals what torch itself answers; the math path is kept
under all it reads, so another MKL branch is asked again; the executor is made only when something trains, and a
bad executor flag is still refused before anything runs."""
import json
import os
import subprocess
import sys

import pytest

from recallkit.pipeline import _executor
from recallkit.report_settings import ReportSettings
from recallkit.theory.errors import InputError

PROVENANCE = """
import json, sys
from pathlib import Path
{before}
from recallkit.empirics.cache import Cache
from recallkit.pipeline import _provenance
from recallkit.report_settings import ReportSettings
found = _provenance(ReportSettings(experiments=[], device={device!r}), [], {caches})
found.pop("date")
print(json.dumps({{"provenance": found, "torch": "torch" in sys.modules}}))
"""


def _provenance(caches, before="", device=None, **env):
    code = PROVENANCE.format(before=before, device=device, caches=f"Cache(Path({str(caches)!r}), b'a test secret')" if caches else None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SOURCE_DATE_EPOCH": "1764493200", **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_provenance_is_torchs_own_without_importing_torch(tmp_path):
    from_torch = _provenance(None, before="import torch")
    assert from_torch["torch"] is True
    first = _provenance(tmp_path)  # the math path is asked of torch once, then kept
    again = _provenance(tmp_path)
    assert first["provenance"] == again["provenance"] == from_torch["provenance"]
    assert again["torch"] is False
    assert _provenance(tmp_path, device="cpu") == again


@pytest.mark.slow  # five fresh interpreters (about 12 s); the default run keeps the cache key's unit tests
def test_another_math_library_branch_is_asked_again(tmp_path):
    _provenance(tmp_path)
    compatible = _provenance(tmp_path, MKL_CBWR="COMPATIBLE")
    assert compatible["provenance"] == _provenance(None, before="import torch", MKL_CBWR="COMPATIBLE")["provenance"]
    assert compatible["provenance"]["math_path"].endswith("MKL_CBWR=COMPATIBLE")


def test_the_executor_is_made_when_first_used_and_bad_flags_fail_first():
    deferred = _executor(ReportSettings(experiments=[], device="cpu"), 2)
    assert deferred.describe() == "local (2 processes)"
    assert deferred.pool is None  # no worker process until a round trains
    deferred.close()
    with pytest.raises(InputError, match="--scheduler/--dask-local: only with --executor dask"):
        _executor(ReportSettings(experiments=[], scheduler="tcp://x:1"), 2)

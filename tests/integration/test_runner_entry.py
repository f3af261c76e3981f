"""What a system's runner returns is checked where it returns it: a summary entry is a dict with a non-empty string
``name`` and a string ``kind`` (docs/ARCHITECTURE.md, "A runner's summary entry"). A runner that returned None or
an entry without a name ended ``recallkit report`` in a traceback after every experiment had run, and one without a
kind was drawn as a search experiment, silently without its system's pages and verdicts. Now each is one failure
line naming the experiment file, the runner and the key, and the other experiments are reported.

The toy system of tests/integration/test_fourth_system.py (registered through a .dist-info on PYTHONPATH) runs
four experiment files whose runner returns an entry, None, and an entry without its name or its kind.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.test_fourth_system import _dist_info, _env, _toy_package

__all__: list[str] = []

pytestmark = pytest.mark.integration

STEPS = '''
from recallkit.empirics.experiment import read_experiment_file


def toy_entry(path, context):
    raw = read_experiment_file(path)["toy"]
    entry = {"name": raw["name"], "kind": "toy", "title": "Toy system", "toy": {"value": raw["value"]}, "notes": []}
    if raw["returns"] == "none":
        return None
    entry.pop(raw["returns"].removeprefix("no_"), None)
    return entry
'''

RETURNS = {"toy_ok": "entry", "toy_none": "none", "toy_no_name": "no_name", "toy_no_kind": "no_kind"}
EXPECTED = "a runner or report step returns a summary entry: a dict with a non-empty string 'name' and a string 'kind'"


def _toy(root: Path) -> None:
    _toy_package(root, STEPS, {name: f'[toy]\nname = "{name}"\nvalue = 3\nreturns = "{returns}"\n'
                               for name, returns in RETURNS.items()})
    _dist_info(root, "toy_system")


def test_a_runner_entry_without_name_or_kind_or_none_is_one_failure_line_and_the_others_are_reported(tmp_path):
    recallkit = shutil.which("recallkit")
    assert recallkit is not None
    _toy(tmp_path)
    # one process: no worker to start (and import torch in) for the runners or the pages, nor a shared page cache
    env = {**_env(tmp_path), "RECALLKIT_CACHE": "off"}
    result = subprocess.run([recallkit, "report", *RETURNS, "--no-probes", "--workers", "1", "--jobs", "1", "--store",
                             "tmp/store.db", "--out", "tmp/out"], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 3, result.stderr[-3000:]  # asked-for work failed
    assert "error: 3 of 4 experiments failed" in result.stderr
    summary = json.loads((tmp_path / "tmp" / "out" / "summary.json").read_text())
    assert [e["name"] for e in summary["experiments"]] == ["toy_ok"]
    assert [r["verdict"] for r in summary["entries"] if r["experiment"] == "toy_ok"] == ["consistent"]
    ref = "toy_system.steps:toy_entry"
    assert summary["failures"] == [
        f"toy_none.toml: {ref} returned None; {EXPECTED}",
        f"toy_no_name.toml: {ref}: its entry has no 'name'; {EXPECTED}",
        f"toy_no_kind.toml: {ref}: its entry (toy_no_kind) has no 'kind'; {EXPECTED}",
    ]

"""``--set FIELD=VALUE`` on ``sweep``, ``fit`` and ``report`` changes one field of an experiment file for one
command (changing a threshold used to mean copying the TOML file), and the change is recorded beside the results.
Through the installed ``recallkit`` command, on the committed tiny store of tests/fixtures/schema1."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from recallkit.empirics.overrides import apply_settings, parse_settings
from recallkit.theory.errors import InputError

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "schema1"


def run(args, cwd, timeout=300):
    assert RECALLKIT, "the recallkit console script is not installed"
    env = {**os.environ, "MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0", "RECALLKIT_CACHE": str(cwd / "cache")}
    return subprocess.run([RECALLKIT, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def tiny(tmp_path):
    for name, copy in (("tiny.toml", "tiny.toml"), ("store.sqlite", "store.db")):
        shutil.copyfile(FIXTURE / name, tmp_path / copy)  # (committed as .sqlite: *.db is not tracked)
    return tmp_path


def test_fit_set_changes_the_margin_and_records_it(tiny):
    plain = json.loads(run(["fit", "tiny.toml", "--store", "store.db", "--no-run", "--json"], tiny).stdout)
    done = run(["fit", "tiny.toml", "--store", "store.db", "--no-run", "--json", "--set", "verdict.delta=0.0001"], tiny)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["set"] == {"verdict.delta": 0.0001}
    assert plain["fits"][0]["delta"] == 0.25 and doc["fits"][0]["delta"] == 0.0001
    assert doc["fits"][0]["band"] != plain["fits"][0]["band"]
    assert "set" not in plain
    assert (tiny / "tiny.toml").read_text() == (FIXTURE / "tiny.toml").read_text()  # the file is never changed


def test_sweep_set_runs_the_seeds_given_and_says_so(tiny):
    done = run(["sweep", "tiny.toml", "--store", "store.db", "--no-progress", "--set", "seeds=[0,1,2]"], tiny)
    assert done.returncode == 0, done.stderr
    assert "tiny_linear_memory [quick --set seeds=[0, 1, 2]]" in done.stdout.splitlines()[-1]
    with sqlite3.connect(tiny / "store.db") as db:
        seeds = {s for (s,) in db.execute("SELECT DISTINCT seed FROM runs")}
    assert seeds == {0, 1, 2}


def test_report_set_reaches_the_summary(tiny):
    done = run(["report", "tiny.toml", "--store", "store.db", "--out", "out", "--set", "verdict.delta=0.5"], tiny)
    assert done.returncode == 0, done.stderr
    summary = json.loads((tiny / "out" / "summary.json").read_text())
    (entry,) = summary["experiments"]
    assert entry["set"] == {"verdict.delta": 0.5} and entry["fits"][0]["delta"] == 0.5


@pytest.mark.parametrize("given, expected", [
    ("oops", "error: --set 'oops': expected FIELD=VALUE with FIELD a dotted path of the experiment file"),
    ("verdict.delta=-1", "error: tiny.toml: verdict.delta: expected a positive number, got -1 "
                         "(with --set verdict.delta=-1)"),
    ("name.x=1", "error: --set name.x: tiny.toml: name is not a table, so it has no field 'x'"),
])
def test_a_wrong_set_is_one_line_naming_the_field(tiny, given, expected):
    done = run(["fit", "tiny.toml", "--store", "store.db", "--no-run", "--set", given], tiny)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(expected), done.stderr


def test_values_are_toml_or_text_and_a_field_the_preset_sets_is_changed_there():
    settings = parse_settings(["seeds=[0, 1, 2]", "search.start=d**2/3", "verdict.delta=0.1", "preset.d=[4, 6]"])
    assert settings == (("seeds", [0, 1, 2]), ("search.start", "d**2/3"), ("verdict.delta", 0.1),
                        ("preset.d", [4, 6]))
    raw = {"search": {"start": "d"}, "presets": {"quick": {"seeds": [0], "d": [4]}}}
    out = apply_settings(raw, settings, "quick", "x.toml")
    assert out["presets"]["quick"] == {"seeds": [0, 1, 2], "d": [4, 6]} and "seeds" not in out
    assert out["search"]["start"] == "d**2/3" and out["verdict"] == {"delta": 0.1}
    assert raw == {"search": {"start": "d"}, "presets": {"quick": {"seeds": [0], "d": [4]}}}  # not changed
    with pytest.raises(InputError, match="given twice"):
        parse_settings(["a=1", "a=2"])
    with pytest.raises(InputError, match="longer than"):
        parse_settings(["a=" + "9" * 5000])

"""A law experiment through the installed ``recallkit`` command: ``sweep`` stores one run per (line, base value,
seed) and prints the metric per base value, ``fit`` after it trains nothing and prints one check per line (the
law's metric against the base) and ``--json`` says so, and a bad law field is one line on stderr naming the file and the field, exit 2.

The task is the toy system of tests/unit/empirics/test_law_experiment.py (stored test_error = 3 / p with 2%
seeded noise), registered through the ``recallkit.systems`` entry-point group from a temporary folder.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.empirics.test_law_experiment import LAW_EXPERIMENT, write_registered_toy

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    env.update(PYTHONPATH=str(root), MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    return env


def _recallkit(root: Path, *args: str) -> subprocess.CompletedProcess:
    assert RECALLKIT, "the recallkit console script is not installed"
    return subprocess.run([RECALLKIT, *args], cwd=root, env=_env(root), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    """The toy package with its entry point, the law pack and the experiment file, in one folder."""
    return write_registered_toy(tmp_path_factory.mktemp("law_toy"))


@pytest.fixture(scope="module")
def swept(toy) -> subprocess.CompletedProcess:
    """``recallkit sweep`` trains the runs into a new store."""
    return _recallkit(toy, "sweep", "law.toml", "--store", "store.db", "--no-progress")


def test_sweep_prints_the_metric_per_base_value(swept):
    assert swept.returncode == 0, swept.stderr[-2000:]
    assert "reused 0 / computed 20" in swept.stdout
    assert "line n = p^2" in swept.stdout and "test_error (median over 4 seeds):" in swept.stdout, swept.stdout
    # 3 / p within the 2% noise: 0.735..0.765 at p = 4, 0.0459..0.0479 at p = 64
    assert re.search(r"p=4: 0\.7[3-6]\d*;", swept.stdout) and re.search(r"p=64: 0\.04[5-7]\d*$", swept.stdout, re.M), \
        swept.stdout


def test_fit_json_trains_nothing_more_and_says_law_and_the_variable(toy, swept):
    result = _recallkit(toy, "fit", "law.toml", "--store", "store.db", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "reused 20 / computed 0" in result.stderr, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kind"] == "law"
    assert doc["law"] == {"name": "test_error", "metric": "test_error", "direction": "lower", "variable": "p"}
    (fit,) = doc["fits"]
    assert (fit["kind"], fit["law"], fit["metric"], fit["direction"], fit["variable"]) == (
        "law", "test_error", "test_error", "lower", "p")
    assert fit["verdict"] == "consistent" and fit["n_points"] == 20
    assert fit["slope"] == pytest.approx(-1.0, abs=0.03)


def test_fit_prints_one_check_per_line_against_the_base(toy, swept):
    result = _recallkit(toy, "fit", "law.toml", "--store", "store.db", "--no-run")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "x = log p, y = log(test_error)" in out, out
    assert "test_error against p" in out and "-1.000 +- 0.15" in out, out
    assert "[1] n = p^2, test_error against p: consistent" in out, out


def test_a_bad_law_field_is_one_line_naming_file_and_field(toy):
    # the unit tests check every field's message; one through the command shows it reaches the user as one line
    text = LAW_EXPERIMENT.format(pack="law_toy_pack.toml", extra="", lines="").replace('law = "test_error"',
                                                                                      'law = "nope"', 1)
    expected = "law: 'nope' is not a law of pack law_toy_pack (its laws: test_error)"
    (toy / "bad.toml").write_text(text, encoding="utf-8")
    result = _recallkit(toy, "sweep", "bad.toml", "--store", "bad.db")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("error: bad.toml: ") and expected in result.stderr, result.stderr


def test_a_relative_pack_path_is_read_from_the_experiment_files_folder(tmp_path):
    """``pack = "law_toy_pack.toml"`` beside the experiment file is found from any working directory (it was read
    from the working directory); a pack found in neither place is one line naming both."""
    root = write_registered_toy(tmp_path / "exps")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**_env(root), "PYTHONPATH": str(root)}
    shown = subprocess.run([RECALLKIT, "sweep", str(root / "law.toml"), "--store", "s.db", "--no-progress"],
                           cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "reused 0 / computed 20" in shown.stdout
    (root / "lost.toml").write_text(LAW_EXPERIMENT.format(pack="packs/lost.toml", extra="", lines=""),
                                    encoding="utf-8")
    lost = subprocess.run([RECALLKIT, "sweep", str(root / "lost.toml"), "--store", "s.db", "--no-progress"],
                          cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)
    assert lost.returncode == 2
    (line,) = lost.stderr.strip().splitlines()
    assert f"no pack file at {root / 'packs' / 'lost.toml'}" in line and "experiment file's folder" in line, line

"""recallkit sweep / results from the command line, on a tiny real experiment."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from tests.experiment_texts import linear_memory_grid

pytestmark = pytest.mark.integration

TINY = """
name = "cli_tiny"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
thresholds = [0.1]
[[lines]]
scaling = "N=V*log(V), L=V**0.5"
[fixed]
eta = 1.0
gamma = 1e7
n_eval = 512
[search]
min = 2
max = 64
start = "V/2"
[presets.quick]
V = [32, 64]
seeds = [0]
[presets.paper]
V = [32, 64, 128]
seeds = [0, 1]
"""


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "recallkit.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_sweep_then_results(tmp_path):
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY)
    db = tmp_path / "r.db"
    first = cli("sweep", str(toml), "--store", str(db), "--json", "--no-progress")
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)  # exactly one JSON document on stdout
    assert doc["experiment"] == "cli_tiny" and doc["computed"] > 0 and doc["reused"] == 0
    assert len(doc["boundary_points"]) == 2
    assert all(p["threshold"] == 0.1 and "d" in p for p in doc["boundary_points"])
    assert "reused 0 / computed" in first.stderr

    again = cli("sweep", str(toml), "--store", str(db), "--no-progress")
    assert again.returncode == 0, again.stderr
    assert f"reused {doc['computed']} / computed 0" in again.stdout.splitlines()[-1]

    shown = cli("results", str(toml), "--store", str(db), "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["boundary_points"] == doc["boundary_points"]

    table = cli("results", str(toml), "--store", str(db), "--csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert len(rows) == doc["computed"] and {"config_hash", "config.d", "metrics.accuracy", "code_version"} <= set(rows[0])

    human = cli("results", str(toml), "--store", str(db))
    assert "accuracy >= 0.1" in human.stdout and "0 missing" in human.stdout

    other = cli("results", str(toml), "--store", str(db), "--preset", "paper", "--json")
    assert other.returncode == 0
    points = json.loads(other.stdout)["boundary_points"]
    assert any(p["censored"] and "not in the results store" in p["censor_reason"] for p in points)


def test_default_store_path_and_env(tmp_path):
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY.replace("V = [32, 64]", "V = [32]"))
    out = cli("sweep", str(toml), "--no-progress", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "results" / "recallkit.db").exists()


@pytest.mark.parametrize("content,expected", [
    ("name = ", "bad.toml: malformed TOML"),
    (TINY.replace("V = [32, 64]", "V = [32, -3]"), "bad.toml: presets.quick.V[1]: expected a positive integer, got -3"),
])
def test_bad_experiment_is_one_line_exit_2(tmp_path, content, expected):
    bad = tmp_path / "bad.toml"
    bad.write_text(content)
    out = cli("sweep", str(bad), "--store", str(tmp_path / "r.db"))
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and expected in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "r.db").exists()


def test_foreign_store_is_refused(tmp_path):
    toml = tmp_path / "tiny.toml"
    toml.write_text(TINY)
    store = tmp_path / "thesis.db"
    store.write_text("not a database")
    out = cli("sweep", str(toml), "--store", str(store))
    assert out.returncode == 2 and "thesis.db: not a recallkit results store" in out.stderr
    assert store.read_text() == "not a database"


GRID = linear_memory_grid("cli_grid", "linear memory over an (N, d) grid, on a metric other than accuracy",
                          metric="train_accuracy")


def test_results_of_a_grid_prints_each_cell_with_its_mean_metric(tmp_path):
    import shutil

    recallkit = shutil.which("recallkit")
    assert recallkit is not None
    path = tmp_path / "cli_grid.toml"
    path.write_text(GRID)
    store = str(tmp_path / "s.db")
    swept = subprocess.run([recallkit, "sweep", str(path), "--store", store, "--no-progress"], capture_output=True,
                           text=True, timeout=600)
    assert swept.returncode == 0, swept.stderr
    shown = subprocess.run([recallkit, "results", str(path), "--store", store], capture_output=True, text=True,
                           timeout=600)
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    rows = json.loads(subprocess.run([recallkit, "results", str(path), "--store", store, "--json"],
                                     capture_output=True, text=True, timeout=600).stdout)["runs"]
    lines = shown.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["line", "N"])
    assert lines[header].split() == ["line", "N", "d", "seeds", "mean", "train_accuracy"]
    cells = [line.split() for line in lines[header + 2:header + 6]]
    assert [(c[1], c[2], c[3]) for c in cells] == [("8", "4", "2"), ("8", "8", "2"), ("16", "4", "2"), ("16", "8", "2")]
    for c in cells:
        mine = [r["train_accuracy"] for r in rows if r["N"] == int(c[1]) and r["d"] == int(c[2])]
        assert len(mine) == 2 and float(c[4]) == pytest.approx(sum(mine) / 2, abs=5e-4)

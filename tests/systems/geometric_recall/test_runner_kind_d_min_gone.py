"""The d_min(N) search is a search experiment (geo_dmin_learned_vs_frozen); a ``[geometric]`` file that still
says kind = "d_min" is told, in one line, how to write it as one."""
import os
import shutil
import subprocess

import pytest

from recallkit.systems.geometric_recall.runners import GEOMETRIC_SCHEMA, load_geometric_experiment
from recallkit.theory.errors import InputError

__all__: list[str] = []

OLD_D_MIN = """[geometric]
name = "old_dmin"
kind = "d_min"

[geometric.presets.quick]
N = [16]
R = [1]
d_grid = [2]
models = ["learned"]
steps = 1
"""
HOW = ('kind = "min_size"', 'base = "N"', 'size = "d"', "thresholds = [1.0]", "one line per model",
       "geo_dmin_learned_vs_frozen")


def test_the_runner_kind_is_gone_and_its_file_says_how_to_write_the_search(tmp_path):
    assert "d_min" not in GEOMETRIC_SCHEMA
    path = tmp_path / "old_dmin.toml"
    path.write_text(OLD_D_MIN)
    with pytest.raises(InputError) as info:
        load_geometric_experiment(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: geometric.kind: ")
    assert "search experiment" in message
    missing = [part for part in HOW if part not in message]
    assert not missing, message


@pytest.mark.skipif(shutil.which("recallkit") is None, reason="the recallkit command is not installed")
def test_report_of_a_runner_d_min_file_names_the_file_and_the_field(tmp_path):
    path = tmp_path / "old_dmin.toml"
    path.write_text(OLD_D_MIN)
    # the report goes on past a failed experiment (it is listed in the report), so the exit is 1, not 2;
    # the reason is one line naming the file and the field, with no traceback
    done = subprocess.run([shutil.which("recallkit"), "report", str(path), "--out", str(tmp_path / "out"),
                           "--store", str(tmp_path / "store.db"), "--workers", "1", "--jobs", "1"],
                          cwd=tmp_path, env={**os.environ, "MPLBACKEND": "Agg"}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 3, done.stderr  # asked-for work failed
    assert "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if f"{path}: geometric.kind: " in line]
    assert len(said) == 1, done.stderr
    missing = [part for part in HOW if part not in said[0]]
    assert not missing, said[0]

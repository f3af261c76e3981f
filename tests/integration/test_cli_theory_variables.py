"""A pack's declared variables through the installed ``recallkit theory`` command: ``show`` lists each with its
domain and meaning, ``predict`` and ``regions`` use them, and a bad declaration is one line on stderr, exit 2."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.pack_texts import theory_command
from tests.unit.theory.test_declared_variables import SAMPLES_PACK

pytestmark = pytest.mark.integration

__all__: list[str] = []


def run(tmp_path, args: list[str], text: str = SAMPLES_PACK) -> subprocess.CompletedProcess:
    return theory_command(tmp_path, "samples.toml", text, args)


def test_show_lists_the_declared_variables_with_domain_and_meaning(tmp_path):
    result = run(tmp_path, ["show", "samples.toml"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  variables: V, d, n, alpha" in lines, result.stdout
    assert "    n (integer): number of training samples" in lines, result.stdout
    assert "    alpha (real): exponent of the input distribution's power law" in lines, result.stdout


def test_show_json_carries_the_declared_variables(tmp_path):
    result = run(tmp_path, ["show", "samples.toml", "--json"])
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["variables"] == ["V", "d", "n", "alpha"]
    assert document["declared_variables"][0] == {"name": "n", "meaning": "number of training samples",
                                                 "domain": "integer"}


def test_predict_and_regions_use_the_declared_variables(tmp_path):
    result = run(tmp_path, ["predict", "samples.toml", "--scaling", "n=V**2, alpha=1/4", "--json"])
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["dominant"], document["slope_exact"]) == ("finite_sample", "3/2")
    result = run(tmp_path, ["regions", "samples.toml", "--json"])
    assert result.returncode == 0, result.stderr
    assert {region["dominant"] for region in json.loads(result.stdout)["regions"]} == {"finite_sample", "crosstalk"}


def test_a_reserved_name_is_one_line_naming_the_file_and_field(tmp_path):
    text = SAMPLES_PACK.replace('name = "n"', 'name = "a"', 1).replace("/n**alpha", "/alpha")
    result = run(tmp_path, ["show", "samples.toml"], text)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("error: samples.toml: variables[0].name: 'a' is reserved"), lines[0]

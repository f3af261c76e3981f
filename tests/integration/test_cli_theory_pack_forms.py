"""A pack's own variables ([[variables]]) and laws ([[laws]]) through the installed ``recallkit theory`` command:
``show`` lists them (a variable with its domain and meaning, a law with its terms and their provenance),
``predict`` and ``regions`` use them, and a bad declaration is one line on stderr naming file and field, exit 2."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.pack_texts import theory_command
from tests.unit.theory.test_declared_variables import SAMPLES_PACK
from tests.unit.theory.test_laws import LAW_PACK

pytestmark = pytest.mark.integration

__all__: list[str] = []

PACKS = {"samples.toml": SAMPLES_PACK, "toy.toml": LAW_PACK}


def run(tmp_path, filename: str, args: list[str], text: str | None = None) -> subprocess.CompletedProcess:
    return theory_command(tmp_path, filename, PACKS[filename] if text is None else text, [args[0], filename, *args[1:]])


@pytest.mark.parametrize("filename, shown", [
    ("samples.toml", [["variables:", "V,", "d,", "n,", "alpha"], ["n", "(integer):", "number", "of", "training", "samples"],
                      ["alpha", "(real):", "exponent", "of", "the", "input", "distribution's", "power", "law"]]),
    ("toy.toml", [["law", "excess_error:", "error", "~", "sum", "of"], ["approximation", "1/d", "[derived-here]"],
                  ["estimation", "1/sqrt(n)", "[paper-reported]"]]),
])
def test_show_lists_the_packs_own_variables_and_laws(tmp_path, filename, shown):
    result = run(tmp_path, filename, ["show"])
    assert result.returncode == 0, result.stderr
    words = [line.split() for line in result.stdout.splitlines()]
    assert all(line in words for line in shown), result.stdout


def test_show_json_carries_the_declared_variables(tmp_path):
    result = run(tmp_path, "samples.toml", ["show", "--json"])
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["variables"] == ["V", "d", "n", "alpha"]
    assert document["declared_variables"][0] == {"name": "n", "meaning": "number of training samples",
                                                 "domain": "integer"}


def test_predict_and_regions_use_the_declared_variables(tmp_path):
    result = run(tmp_path, "samples.toml", ["predict", "--scaling", "n=V**2, alpha=1/4", "--json"])
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["dominant"], document["slope_exact"]) == ("finite_sample", "3/2")
    result = run(tmp_path, "samples.toml", ["regions", "--json"])
    assert result.returncode == 0, result.stderr
    assert {region["dominant"] for region in json.loads(result.stdout)["regions"]} == {"finite_sample", "crosstalk"}


def test_predict_prints_each_region_of_a_law_with_its_exponents(tmp_path):
    result = run(tmp_path, "toy.toml", ["predict", "--scaling", "n=d**a"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "law excess_error (error, sum) along n=d**a, base d:" in lines, result.stdout
    assert "  region estimation, a in [0, 2]:" in lines, result.stdout
    assert "  region approximation, a in [2, 4]:" in lines, result.stdout
    assert "    error ~ d^(-a/2)   against d: 0, n: -1/2" in lines, result.stdout
    assert "    error ~ d^(-1)   against d: -1, n: 0" in lines, result.stdout


def test_predict_json_has_the_laws(tmp_path):
    result = run(tmp_path, "toy.toml", ["predict", "--scaling", "n=d**a", "--json"])
    assert result.returncode == 0, result.stderr
    (law,) = json.loads(result.stdout)["laws"]
    regions = {region["dominant"]: region for region in law["regions"]}
    assert regions["estimation"]["vertices"] == [["0"], ["2"]]
    assert regions["approximation"]["variables"]["d"] == {"exponent": "-1", "log_power": "0"}


@pytest.mark.parametrize("filename, old, new, expected", [
    ("samples.toml", 'name = "n"', 'name = "a"', "error: samples.toml: variables[0].name: 'a' is reserved"),
    ("toy.toml", 'provenance = "paper-reported"\n', "",
     "error: toy.toml: laws[0].terms[1]: missing required field 'provenance'"),
    ("toy.toml", 'metric = "error"', 'metric = "error"\ncombine = "mean"',
     "error: toy.toml: laws[0].combine: expected one of sum, max, got 'mean'"),
    ("toy.toml", 'expr = "n**(-1/2)"', 'expr = "m**(-1/2)"', "error: toy.toml: laws[0].terms[1].expr: "),
])
def test_a_bad_variable_or_law_is_one_line_naming_file_and_field(tmp_path, filename, old, new, expected):
    text = PACKS[filename].replace(old, new, 1).replace("/n**alpha", "/alpha")
    result = run(tmp_path, filename, ["show"], text)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(expected), lines[0]


def test_regions_of_a_laws_only_pack_gives_its_laws_regions(tmp_path):
    # a pack of laws has no success condition: its regions are where each term of its law dominates
    result = run(tmp_path, "toy.toml", ["regions", "--scaling", "n=d**a", "--axes", "a"])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "region approximation, a in [2, 4]:" in result.stdout and "region estimation, a in [0, 2]:" in result.stdout

"""A pack's [[laws]] through the installed ``recallkit theory`` command: ``show`` lists each law and its terms with
provenance, ``predict`` prints each law's dominant term and exponents per region, and a bad law is one line on
stderr, exit 2."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.pack_texts import theory_command
from tests.unit.theory.test_laws import LAW_PACK

pytestmark = pytest.mark.integration

__all__: list[str] = []


def run(tmp_path, args: list[str], text: str = LAW_PACK) -> subprocess.CompletedProcess:
    return theory_command(tmp_path, "toy.toml", text, args)


def test_show_lists_the_laws_and_their_terms_with_provenance(tmp_path):
    result = run(tmp_path, ["show", "toy.toml"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "law excess_error: error ~ sum of" in lines, result.stdout
    assert any(line.split() == ["approximation", "1/d", "[derived-here]"] for line in lines), result.stdout
    assert any(line.split() == ["estimation", "1/sqrt(n)", "[paper-reported]"] for line in lines), result.stdout


def test_predict_prints_each_region_with_its_exponents(tmp_path):
    result = run(tmp_path, ["predict", "toy.toml", "--scaling", "n=d**a"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "law excess_error (error, sum) along n=d**a, base d:" in lines, result.stdout
    assert "  region estimation, a in [0, 2]:" in lines, result.stdout
    assert "  region approximation, a in [2, 4]:" in lines, result.stdout
    assert "    error ~ d^(-a/2)   against d: 0, n: -1/2" in lines, result.stdout
    assert "    error ~ d^(-1)   against d: -1, n: 0" in lines, result.stdout


def test_predict_json_has_the_laws(tmp_path):
    result = run(tmp_path, ["predict", "toy.toml", "--scaling", "n=d**a", "--json"])
    assert result.returncode == 0, result.stderr
    (law,) = json.loads(result.stdout)["laws"]
    regions = {region["dominant"]: region for region in law["regions"]}
    assert regions["estimation"]["vertices"] == [["0"], ["2"]]
    assert regions["approximation"]["variables"]["d"] == {"exponent": "-1", "log_power": "0"}


@pytest.mark.parametrize("old, new, expected", [
    ('provenance = "paper-reported"\n', "", "error: toy.toml: laws[0].terms[1]: missing required field 'provenance'"),
    ('metric = "error"', 'metric = "error"\ncombine = "mean"',
     "error: toy.toml: laws[0].combine: expected one of sum, max, got 'mean'"),
    ('expr = "n**(-1/2)"', 'expr = "m**(-1/2)"', "error: toy.toml: laws[0].terms[1].expr: "),
])
def test_a_bad_law_is_one_line_naming_file_and_field(tmp_path, old, new, expected):
    result = run(tmp_path, ["show", "toy.toml"], LAW_PACK.replace(old, new, 1))
    assert result.returncode == 2 and result.stdout == "", result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(expected), lines[0]


def test_regions_of_a_laws_only_pack_is_one_line(tmp_path):
    result = run(tmp_path, ["regions", "toy.toml", "--scaling", "n=d**a", "--axes", "a"])
    assert result.returncode == 2, result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "no success condition" in lines[0], result.stderr

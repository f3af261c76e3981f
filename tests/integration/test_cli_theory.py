"""`recallkit theory ...` through typer's test runner (and one real subprocess for the error path)."""
from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from recallkit.cli import app

runner = CliRunner()


def invoke(*args: str):
    result = runner.invoke(app, ["theory", *args])
    assert result.exit_code == 0, (result.stdout, result.exception)
    return result


def test_list_and_show():
    out = invoke("list").stdout
    assert "assoc_memory" in out and "geometric_recall" in out and "example" in out
    listed = json.loads(invoke("list", "--json").stdout)
    assert {row["name"] for row in listed["packs"]} >= {"assoc_memory", "geometric_recall", "example"}
    shown = invoke("show", "geometric_recall").stdout
    assert "single_hop" in shown and "[paper-reported]" in shown and "[derived-here]" in shown
    assert r"\log{\left(N \right)}" in invoke("show", "assoc_memory", "--latex").stdout
    document = json.loads(invoke("show", "example", "--json").stdout)
    assert [t["name"] for t in document["terms"]] == ["signal", "crosstalk", "finite_sample"]


def test_regions_json_is_one_document():
    result = invoke("regions", "example", "--scaling", "N=V**a, L=V**c", "--axes", "a,c", "--box", "a=1:3,c=0:1",
                    "--json")
    document = json.loads(result.stdout)  # fails if anything else is printed on stdout
    regions = {r["dominant"]: r for r in document["regions"]}
    assert {tuple(v) for v in regions["finite_sample"]["vertices"]} == {("1", "0"), ("2", "1"), ("1", "1")}
    assert document["corollary_agrees"] is True


def test_regions_defaults_text_and_figure(tmp_path):
    out = invoke("regions", "assoc_memory").stdout
    assert "region facts" in out and "required d*m ~ N^(1) * log(N)^(1)" in out
    figure = tmp_path / "phase.png"
    result = invoke("regions", "geometric_recall", "--out", str(figure), "--json")
    assert json.loads(result.stdout)["regions"][0]["dominant"] == "chains_no_cot"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_predict_text_and_json(tmp_path):
    line = "N=V*log(V), L=V**0.5"
    assert "predicted slope of log(d**2) vs log(V): 2" in invoke("predict", "example", "--scaling", line).stdout
    document = json.loads(invoke("predict", "example", "--scaling", line, "--json").stdout)
    assert document["slope"] == 2.0 and document["log_power"] == "-1" and document["dominant"] == "finite_sample"
    pack = tmp_path / "copy.toml"
    pack.write_text((__import__("recallkit.theory.pack", fromlist=["PACKS_DIR"]).PACKS_DIR / "example.toml").read_text())
    assert json.loads(invoke("predict", str(pack), "--scaling", line, "--json").stdout)["slope"] == 2.0


def test_bad_input_is_one_line_on_stderr_with_status_2():
    result = subprocess.run([sys.executable, "-m", "recallkit.cli", "theory", "predict", "example", "--scaling",
                             "N=V**a, L=V**0.5"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --scaling: free exponent(s) a")


def test_a_pack_name_is_the_pack_even_beside_a_folder_or_file_of_that_name(tmp_path):
    """A plugin's layout puts a folder named like its pack in the working directory: the name still means the pack
    (it was read as a path, 'example: pack file not found'); a file of that name is ./example."""
    import shutil

    (tmp_path / "example").mkdir()
    show = subprocess.run([shutil.which("recallkit"), "theory", "show", "example"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert show.returncode == 0, show.stderr
    assert "example" in show.stdout and "counting" in show.stdout
    (tmp_path / "example").rmdir()
    (tmp_path / "example").write_text("not toml [")
    named = subprocess.run([shutil.which("recallkit"), "theory", "show", "example"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=120)
    assert named.returncode == 0 and named.stdout == show.stdout
    as_file = subprocess.run([shutil.which("recallkit"), "theory", "show", "./example"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
    assert as_file.returncode == 2 and as_file.stderr.count("\n") == 1 and "./example" in as_file.stderr

"""For CI, notebooks and papers, through the installed ``recallkit`` command as a user runs it:
``--fail-on`` on ``fit`` and ``report`` (exit 1 when a verdict matches, after the output is written),
``recallkit diff`` between two stores, the DataFrame API (``recallkit.results``, ``recallkit.fits``),
``recallkit figures`` and ``theory regions --out x.svg --line``. One tiny real sweep (a linear
associative memory, ~15 s) gives the store; a copy with some runs removed is the other."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pypdf
import pytest

from tests.experiment_texts import TINY_LINEAR_MEMORY

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
ENV = {**os.environ, "MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0"}
TINY = TINY_LINEAR_MEMORY


def run(args, cwd, timeout=300):
    assert RECALLKIT, "the recallkit console script is not installed"
    return subprocess.run([RECALLKIT, *map(str, args)], cwd=cwd, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def one_line_usage_error(result, *expected):
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("ci")
    (root / "tiny.toml").write_text(TINY)
    # the same experiment judged with a margin no fit can meet: never 'consistent'
    (root / "tiny_strict.toml").write_text(TINY.replace('name = "tiny_linear_memory"', 'name = "tiny_strict"')
                                           + "\n[verdict]\ndelta = 0.0001\n")
    done = run(["sweep", root / "tiny.toml", "--store", root / "a.db", "--no-progress"], root)
    assert done.returncode == 0, done.stderr
    shutil.copyfile(root / "a.db", root / "b.db")
    with sqlite3.connect(root / "b.db") as db:  # as if seed 1 had never run at the largest d
        removed = db.execute("DELETE FROM runs WHERE seed = 1 AND json_extract(config_json, '$.d') = 11").rowcount
    assert removed > 0
    return root


def test_fit_fail_on_exits_1_only_when_a_verdict_matches(stores):
    root = stores
    base = ["fit", root / "tiny.toml", "--store", root / "a.db", "--no-run"]
    verdict = json.loads(run([*base, "--json"], root).stdout)["fits"][0]["verdict"]
    other = "inconsistent" if verdict == "inconclusive" else "inconclusive"
    hit = run([*base, "--fail-on", verdict], root)
    assert hit.returncode == 1, hit.stderr
    assert "tiny_linear_memory" in hit.stdout  # the table is printed first
    assert hit.stderr.strip().splitlines()[-1].startswith(f"fail-on: 1 {verdict} of 1 checks: tiny_linear_memory [linear")
    miss = run([*base, "--fail-on", other], root)
    assert miss.returncode == 0, miss.stderr
    both = run([*base, "--delta", "0.0001", "--fail-on", "inconsistent,inconclusive"], root)
    assert both.returncode == 1 and "Traceback" not in both.stderr


def test_fit_trains_what_it_lacks_with_one_thread_as_sweep_does(stores, tmp_path):
    """``fit`` trained its missing runs with torch's default thread count (2 here) where ``sweep`` uses 1, so the
    same config's row recorded a different thread count depending on which command trained it."""
    root = stores
    doc = json.loads(run(["fit", root / "tiny.toml", "--store", tmp_path / "fresh.db", "--json"], root).stdout)
    assert doc["sweep"]["computed"] > 0
    assert doc["sweep"]["threads"] == {"1": doc["sweep"]["stored_runs"]}


def test_report_fail_on_writes_the_report_then_exits_1(stores, tmp_path):
    root = stores
    shutil.copyfile(root / "a.db", tmp_path / "a.db")
    result = run(["report", root / "tiny_strict.toml", "--store", tmp_path / "a.db", "--out", tmp_path / "out",
                  "--no-probes", "--fail-on", "inconsistent", "--fail-on", "inconclusive"], root)
    assert result.returncode == 1, result.stderr
    assert (tmp_path / "out" / "recallkit-report.pdf").is_file()  # CI still gets the report to look at
    assert result.stderr.strip().splitlines()[-1].startswith("fail-on: 1 ")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, expected", [
    (["fit", "tiny.toml", "--fail-on", "maybe"], ["--fail-on", "inconsistent or inconclusive", "'maybe'"]),
    (["report", "--fail-on", "consistent,bad"], ["--fail-on"]),
    (["diff", "a.db"], ["STORE_B", "recallkit diff --help"]),
    (["diff", "a.db", "nosuch.db"], ["STORE_B nosuch.db: no such results store"]),
    (["diff", "a.db", "b.db", "--exp", "no_such_experiment"], ["no_such_experiment"]),
    (["diff", "a.db", "b.db", "--no-such-flag"], ["--no-such-flag"]),
])
def test_wrong_usage_is_one_line_with_exit_2(stores, args, expected):
    one_line_usage_error(run(args, stores, timeout=120), *expected)


def test_diff_lists_what_changed_between_two_stores(stores):
    root = stores
    same = run(["diff", "a.db", "a.db", "--exp", "tiny.toml"], root)
    assert same.returncode == 0, same.stderr
    assert same.stdout.strip().splitlines()[-1] == "1 checks in 1 experiments (quick preset): 0 changed (0 verdicts), 1 the same"
    changed = run(["diff", "a.db", "b.db", "--exp", "tiny.toml"], root)
    assert changed.returncode == 0, changed.stderr
    out = changed.stdout.strip().splitlines()
    assert out[0].startswith("A: a.db  code versions: ") and out[1].startswith("B: b.db  code versions: ")
    row = next(line for line in out if line.startswith("tiny_linear_memory"))
    assert row.split()[1:3] == ["linear", "0.99"]
    assert row.rsplit("  ", 1)[-1].startswith("slope")  # the last column names what changed
    assert out[-1].startswith("1 checks in 1 experiments (quick preset): 1 changed")
    doc = json.loads(run(["diff", "a.db", "b.db", "--exp", "tiny.toml", "--json"], root).stdout)
    (change,) = doc["changed"]
    assert change["a"]["slope"] != change["b"]["slope"] and "slope" in change["fields"]
    assert change["a"]["n_points"] == 8 and change["b"]["n_censored"] >= 1


def test_diff_exit_code_is_1_when_something_changed_and_0_when_nothing_did(stores):
    """``diff`` always exited 0; with --exit-code a CI job can fail on any changed check."""
    root = stores
    same = run(["diff", "a.db", "a.db", "--exp", "tiny.toml", "--exit-code"], root)
    assert same.returncode == 0, same.stderr
    changed = run(["diff", "a.db", "b.db", "--exp", "tiny.toml", "--exit-code"], root)
    assert changed.returncode == 1, changed.stderr
    assert changed.stdout.strip().splitlines()[-1].startswith("1 checks in 1 experiments (quick preset): 1 changed")
    quiet = run(["diff", "a.db", "b.db", "--exp", "tiny.toml", "--json", "--exit-code"], root)
    assert quiet.returncode == 1 and json.loads(quiet.stdout)["changed"]


def test_dataframes_hold_the_same_numbers_as_fit_json(stores):
    pd = pytest.importorskip("pandas")
    import recallkit

    root = stores
    fits = recallkit.fits(root / "tiny.toml", store=root / "a.db")
    assert isinstance(fits, pd.DataFrame) and len(fits) == 1
    doc = json.loads(run(["fit", root / "tiny.toml", "--store", root / "a.db", "--no-run", "--json"], root).stdout)
    fit = doc["fits"][0]
    row = fits.iloc[0]
    assert row["slope"] == pytest.approx(fit["slope"]) and row["verdict"] == fit["verdict"]
    assert [row["slope_ci_lo"], row["slope_ci_hi"]] == pytest.approx(fit["slope_ci"])
    assert row["predicted_slope_tested"] == pytest.approx(fit["predicted_slope_finite_range"] or fit["predicted_slope"])
    assert row["predicted_slope_asymptotic"] == pytest.approx(fit.get("predicted_slope_asymptotic") or fit["predicted_slope"])
    assert row["threshold_relative"] == bool(fit.get("threshold_relative"))
    runs = recallkit.results(root / "tiny.toml", store=root / "a.db")
    with sqlite3.connect(root / "a.db") as db:
        assert len(runs) == db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    assert {"config_hash", "code_version", "config.d", "metrics.accuracy"} <= set(runs.columns)
    points = recallkit.results(root / "tiny.toml", store=root / "a.db", points=True)
    assert {"line", "threshold", "seed", "d", "N", "censored"} <= set(points.columns)


def test_dataframes_without_pandas_say_so_in_one_line(stores):
    code = ("import sys; sys.modules['pandas'] = None\n"
            "import recallkit\n"
            "from recallkit.theory.errors import InputError\n"
            "try:\n"
            f"    recallkit.fits({str(stores / 'tiny.toml')!r}, store={str(stores / 'a.db')!r})\n"
            "except InputError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=ENV)
    assert out.stdout.strip() == "recallkit.fits: needs pandas (pip install 'recallkit[export]')", out.stderr


@pytest.mark.parametrize("fmt", ["pdf", "svg", "png"])
def test_figures_are_single_tight_figures_without_page_furniture(stores, tmp_path, fmt):
    root = stores
    result = run(["figures", root / "tiny.toml", "--store", root / "a.db", "--out", tmp_path, "--format", fmt], root)
    assert result.returncode == 0, result.stderr
    written = [Path(line) for line in result.stdout.split()]
    names = sorted(p.name for p in written)
    assert names == sorted(f"tiny-linear-memory-{stem}.{fmt}" for stem in
                           ("phase", "heatmap-linear", "fit-linear-threshold-0-99", "capacity")), names
    assert "reused 33 / computed 0" in result.stderr  # drawn from the store: nothing trained
    for path in written:
        data = path.read_bytes()
        if fmt == "png":
            assert data.startswith(b"\x89PNG")
        elif fmt == "svg":
            assert b"<svg" in data[:400]
    if fmt != "pdf":
        return
    for path in written:
        page = pypdf.PdfReader(path).pages[0]
        width, height = float(page.mediabox.width), float(page.mediabox.height)
        assert width < 792 * 0.8 and height < 595 * 0.9, (path.name, width, height)  # cut to the drawing
        fonts = [f.get_object() for f in page["/Resources"]["/Font"].values()]
        assert fonts and all(f["/Subtype"] == "/Type0" for f in fonts), fonts  # TrueType (CID), no Type 3
        assert all(f["/DescendantFonts"][0].get_object()["/Subtype"] == "/CIDFontType2" for f in fonts)
        text = " ".join(page.extract_text().split())
        assert "page 1 of" not in text and "tiny_linear_memory:" not in text and "in full: appendix" not in text
    fit_text = " ".join(pypdf.PdfReader(tmp_path / "tiny-linear-memory-fit-linear-threshold-0-99.pdf")
                        .pages[0].extract_text().split())
    # --style paper (the default): the drawing and its legend; the verdict and the caption stay in the report
    assert "tested prediction" in fit_text and "inconclusive" not in fit_text and "reason" not in fit_text


def test_figures_style_report_keeps_each_figures_verdict_and_caption(stores, tmp_path):
    root = stores
    result = run(["figures", root / "tiny.toml", "--store", root / "a.db", "--out", tmp_path, "--style", "report"],
                 root)
    assert result.returncode == 0, result.stderr
    fit_text = " ".join(pypdf.PdfReader(tmp_path / "tiny-linear-memory-fit-linear-threshold-0-99.pdf")
                        .pages[0].extract_text().split())
    assert "tested prediction" in fit_text and "inconclusive" in fit_text
    wrong = run(["figures", root / "tiny.toml", "--store", root / "a.db", "--out", tmp_path, "--style", "poster"], root)
    one_line_usage_error(wrong, "--style: expected one of paper, report, got 'poster'")


def test_theory_regions_writes_svg_and_draws_experiment_lines(tmp_path):
    lines = ["--line", "N=V**1.5, L=V**0.5", "--line", "N=V**1.25, L=V**0.25"]
    svg = run(["theory", "regions", "token_retrieval_attn", "--out", tmp_path / "x.svg", *lines], tmp_path)
    assert svg.returncode == 0, svg.stderr
    assert b"<svg" in (tmp_path / "x.svg").read_bytes()[:400]
    pdf = run(["theory", "regions", "token_retrieval_attn", "--out", tmp_path / "x.pdf", *lines], tmp_path)
    assert pdf.returncode == 0, pdf.stderr
    text = pypdf.PdfReader(tmp_path / "x.pdf").pages[0].extract_text()
    assert "N=V**1.5, L=V**0.5" in text and "N=V**1.25, L=V**0.25" in text


@pytest.mark.parametrize("args, expected", [
    (["figures", "tiny.toml", "--store", "a.db", "--format", "gif"], ["--format", "pdf, svg, png", "'gif'"]),
    (["figures"], ["EXP"]),
    (["figures", "tiny.toml", "--store", "nosuch.db"], ["--store nosuch.db: no such results store"]),
    (["theory", "regions", "token_retrieval_attn", "--out", "x.gif"], ["--out", ".svg"]),
    (["theory", "regions", "token_retrieval_attn", "--line", "N=V**1.5, L=V**0.5"], ["--line", "--out"]),
    (["theory", "regions", "token_retrieval_attn", "--out", "x.svg", "--line", "N=V**1.5"], ["--line", "axis c"]),
])
def test_figures_wrong_usage_is_one_line_with_exit_2(stores, args, expected):
    one_line_usage_error(run(args, stores, timeout=120), *expected)

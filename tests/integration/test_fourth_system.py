"""A fourth system from outside recallkit: a toy package registered through the real entry-point group
``recallkit.systems`` (a ``.dist-info`` folder on PYTHONPATH, no pip, no file of recallkit edited), run
by the installed ``recallkit report`` next to a shipped system's experiment, its page in the PDF.

The neighbour is a tiny copy of the geometric construction (tests/integration/test_report_pipeline.py),
which trains nothing, and ``--no-probes`` skips the token-retrieval probe step: a few seconds of CPU.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.test_report_pipeline import CONSTRUCTION

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
SHIPPED = ["assoc_memory", "token_retrieval", "geometric_recall"]

INIT = '''
from pathlib import Path

from recallkit.registry import PageKind, SystemInfo, hookimpl


@hookimpl
def recallkit_system():
    return SystemInfo(name="toy", title="Toy system: a fourth system from outside recallkit", root=Path(__file__).parent)


@hookimpl
def recallkit_runners():
    return {"toy": "toy_system.steps:toy_entry"}


@hookimpl
def recallkit_page_kinds():
    return (PageKind("toy", pages="toy_system.pages:toy_pages", rows="toy_system.pages:toy_rows", compared="toy check"),)
'''

STEPS = '''
from recallkit.empirics.experiment import read_experiment_file


def toy_entry(path, context):
    raw = read_experiment_file(path)["toy"]
    print(f"{raw['name']}: toy runner ran", file=context.log)
    return {"name": raw["name"], "kind": "toy", "title": "Toy system", "toy": {"value": raw["value"]},
            "notes": []}
'''

PAGES = '''
from recallkit.reports.style import PAGE_LANDSCAPE, new_figure


def toy_pages(entry, head, experiments):
    value = entry["toy"]["value"]

    def builder():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.5, 0.5, f"TOY PAGE value {value}", ha="center", va="center", fontsize=24)
        fig.text(0.05, 0.95, head, va="top")
        return fig

    return [("toy-page", builder)]


def toy_rows(entry):
    value = entry["toy"]["value"]
    return [{"experiment": entry["name"], "line": "toy value", "threshold": None, "x": "toy",
             "slope": float(value), "slope_ci": [value - 0.5, value + 0.5], "slope_ci_bootstrap": None,
             "predicted_slope": 3.0, "delta": 1.0, "alpha": 0.05, "dominant": "toy",
             "verdict": "consistent", "verdict_reason": f"value {value} is the predicted 3",
             "n_points": 1, "n_censored": 0, "C": None, "C_ci": None}]
'''

EXPERIMENT = '''
[toy]
name = "toy_run"
value = 3
'''


def _dist_info(root: Path, target: str) -> None:
    """What pip would leave for a package declaring ``toy = <target>`` in the recallkit.systems group."""
    info = root / "toy_system-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-system\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[recallkit.systems]\ntoy = {target}\n")


def _toy_package(root: Path, steps: str = STEPS, experiments: dict[str, str] | None = None) -> None:
    """The toy system's package under ``root``: its registration, ``steps`` and pages, and ``experiments`` (file
    stem: text; by default the one toy_run) in its experiments folder."""
    package = root / "toy_system"
    (package / "experiments").mkdir(parents=True)
    (package / "__init__.py").write_text(INIT)
    (package / "steps.py").write_text(steps)
    (package / "pages.py").write_text(PAGES)
    for name, text in (experiments or {"toy_run": EXPERIMENT}).items():
        (package / "experiments" / f"{name}.toml").write_text(text)


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(root), MPLBACKEND="Agg", SOURCE_DATE_EPOCH="0", OMP_NUM_THREADS="1")
    return env


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    _toy_package(tmp_path)
    _dist_info(tmp_path, "toy_system")
    return tmp_path


def test_entry_point_system_is_registered_after_the_shipped_ones(toy):
    script = "from recallkit import registry; print([s.name for s in registry.systems()])"
    result = subprocess.run([sys.executable, "-c", script], cwd=toy, env=_env(toy), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    names = ast.literal_eval(result.stdout.strip())
    # the shipped ones first (recallkit's run order), then the others by name (an installed example package may be
    # among them, before "toy")
    assert names[:len(SHIPPED)] == SHIPPED and names[-1] == "toy" and names.count("toy") == 1


def test_report_draws_the_fourth_systems_page_next_to_a_shipped_one(toy):
    assert RECALLKIT, "the recallkit console script is not installed"
    (toy / "tiny_construction.toml").write_text(CONSTRUCTION)
    result = subprocess.run([RECALLKIT, "report", "toy_run", "tiny_construction.toml", "--no-probes",
                             "--store", "tmp/store.db", "--out", "tmp/out"], cwd=toy, env=_env(toy),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "toy_run: toy runner ran" in result.stderr
    out = toy / "tmp" / "out"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failures"] == []
    experiments = {e["name"]: e for e in summary["experiments"]}
    assert list(experiments) == ["toy_run", "tiny_construction"]
    assert experiments["toy_run"]["kind"] == "toy" and experiments["toy_run"]["toy"] == {"value": 3}
    assert experiments["tiny_construction"]["kind"] == "geometric"
    toy_rows = [r for r in summary["entries"] if r["experiment"] == "toy_run"]
    assert len(toy_rows) == 1 and toy_rows[0]["verdict"] == "consistent"
    assert "page_errors" not in summary
    figures = sorted(p.name for p in (out / "figures").iterdir())
    # pages are named NN-<slug of the experiment>-<stem>: the toy is section 1, the construction section 2
    assert "01-toy-run-toy-page.pdf" in figures and not any(f.endswith(".png") for f in figures), figures
    assert "01-toy-run-summary.pdf" in figures, figures
    assert any(name.startswith("02-tiny-construction-") for name in figures), figures
    pdf = out / "recallkit-report.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    if shutil.which("pdftotext") is None:
        return  # poppler-utils missing: the page's text is checked where it is installed
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "TOY PAGE value 3" in text
    assert "toy check" in text  # the PageKind's words on the title page's overview


@pytest.mark.parametrize("experiment", [
    "assoc_memory_linear",  # a shipped name: resolved through the registry, so it fails before anything runs
    "tiny_construction.toml",  # a file: the registry is loaded once, before anything runs
])
def test_broken_entry_point_is_one_line_naming_it(tmp_path, experiment):
    # the entry point's target module raises ImportError when imported
    (tmp_path / "broken_toy.py").write_text('raise ImportError("toy dependency missing")\n')
    _dist_info(tmp_path, "broken_toy:SYSTEM")
    (tmp_path / "tiny_construction.toml").write_text(CONSTRUCTION)
    result = subprocess.run([RECALLKIT, "report", experiment, "--no-probes", "--store", "tmp/store.db",
                             "--out", "tmp/out"], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True,
                            timeout=300)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "entry point toy = broken_toy:SYSTEM" in lines[0], lines[0]
    assert "toy dependency missing" in lines[0]
    assert not (tmp_path / "tmp" / "out" / "recallkit-report.pdf").exists()

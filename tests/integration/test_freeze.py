"""Freezing through the installed ``recallkit`` command: a verdict is confirmatory only when its prediction was frozen
before its runs and is unchanged since; sweeping first and freezing after is exploratory; a changed pack term says
"prediction changed since the freeze"; a pack edit that changes no number keeps the label; ``--require`` turns the
label into an exit code.

The task is the toy law system of tests/unit/empirics/test_law_experiment.py (test_error = 3 / p with 2% seeded noise;
the pack's law p^-1 + n^-2 along n = p^2, so its slope is -1), registered through the entry-point group from a
temporary folder: seconds per command.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.unit.empirics.test_law_experiment import write_registered_toy

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")


def _toy(root: Path) -> Path:
    return write_registered_toy(root)


def _recallkit(root: Path, *args: str) -> subprocess.CompletedProcess:
    assert RECALLKIT, "the recallkit console script is not installed"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    env.update(PYTHONPATH=str(root), MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    return subprocess.run([RECALLKIT, *args], cwd=root, env=env, capture_output=True, text=True, timeout=180)


def _fit(root: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = _recallkit(root, "fit", "law.toml", "--store", "store.db", "--json", *extra)
    return out, (json.loads(out.stdout) if out.stdout.strip() else {})


def _edit_pack(root: Path, old: str, new: str) -> None:
    pack = root / "law_toy_pack.toml"
    text = pack.read_text(encoding="utf-8")
    assert old in text
    pack.write_text(text.replace(old, new), encoding="utf-8")


@pytest.fixture(scope="module")
def frozen_first(tmp_path_factory) -> Path:
    """Freeze, then run: the runs come after the freeze."""
    root = _toy(tmp_path_factory.mktemp("freeze_first"))
    out = _recallkit(root, "freeze", "law.toml", "--store", "store.db")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "froze law_toy_width --preset quick: 1 checks, 1 predicted numbers" in out.stdout, out.stdout
    return root


def test_freeze_first_gives_confirmatory_and_require_passes(frozen_first):
    files = list((frozen_first / "frozen").glob("law_toy_width.quick.*.json"))
    assert len(files) == 1
    frozen = json.loads(files[0].read_text())
    assert frozen["checks"][0]["slope"] == -1.0 and frozen["grid"]["lines"]["n = p^2"]["base_values"] == [4, 8, 16, 32, 64]
    assert frozen["checks"][0]["inputs"][0]["evidence"] == "a priori"
    out, doc = _fit(frozen_first, "--require", "confirmatory")
    assert out.returncode == 0, out.stderr[-2000:]
    (fit,) = doc["fits"]
    assert fit["verdict"] == "consistent"
    assert fit["evidence"] == "confirmatory", fit["evidence_reason"]
    assert fit["freeze"].startswith(files[0].name.split(".")[-2])  # the file is named by the freeze's hash
    table = _recallkit(frozen_first, "fit", "law.toml", "--store", "store.db")
    assert "evidence: confirmatory: frozen (" in table.stdout, table.stdout


def test_freeze_show_lists_the_freeze_and_its_checks(frozen_first):
    out = _recallkit(frozen_first, "freeze", "law.toml", "--store", "store.db", "--show")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("freeze ") and "law_toy_width [n = p^2, test_error against p]: -1.0000" in out.stdout
    shown = _recallkit(frozen_first, "freeze", "law.toml", "--store", "store.db", "--show", "--json")
    assert json.loads(shown.stdout)["checks"][0]["slope"] == -1.0


@pytest.mark.slow  # 15 s: the default run keeps the freeze-first and sweep-first labels; the default run must stay under 10 minutes
def test_a_pack_edit_that_changes_no_number_keeps_the_label_and_a_changed_term_does_not(frozen_first):
    _fit(frozen_first)  # the runs exist (trained once, by the first fit or here)
    # n^-2 -> n^-3: not the dominant term along n = p^2, so the predicted slope stays -1
    _edit_pack(frozen_first, 'expr = "n**-2"', 'expr = "n**-3"')
    out, doc = _fit(frozen_first, "--no-run")
    assert out.returncode == 0, out.stderr[-2000:]
    assert doc["fits"][0]["evidence"] == "confirmatory", doc["fits"][0]["evidence_reason"]
    # p^-1 -> p^-0.5: the slope is -0.5 now, not the frozen -1
    _edit_pack(frozen_first, 'expr = "p**-1"', 'expr = "p**-0.5"')
    out, doc = _fit(frozen_first, "--no-run", "--require", "confirmatory")
    fit = doc["fits"][0]
    assert fit["evidence"] == "exploratory"
    assert fit["evidence_reason"].startswith("prediction changed since the freeze")
    assert "(frozen -1, now -0.5)" in fit["evidence_reason"]
    assert out.returncode == 1 and "require confirmatory: 1 of 1 checks are not" in out.stderr, out.stderr


def test_sweeping_first_and_freezing_after_is_exploratory(tmp_path):
    root = _toy(tmp_path)
    swept = _recallkit(root, "sweep", "law.toml", "--store", "store.db", "--no-progress")
    assert swept.returncode == 0, swept.stderr[-2000:]
    frozen = _recallkit(root, "freeze", "law.toml", "--store", "store.db")
    assert frozen.returncode == 0 and "a verdict on runs stored before this freeze is exploratory" in frozen.stderr
    out, doc = _fit(root, "--no-run", "--require", "conditional")
    (fit,) = doc["fits"]
    assert fit["verdict"] == "consistent"  # the verdict itself is the same; what it is worth is not
    assert fit["evidence"] == "exploratory" and fit["evidence_reason"].startswith("runs predate the freeze")
    assert out.returncode == 1 and "require conditional" in out.stderr


def test_without_a_freeze_every_verdict_is_exploratory_and_says_how_to_freeze(tmp_path):
    root = _toy(tmp_path)
    out, doc = _fit(root)
    assert out.returncode == 0, out.stderr[-2000:]
    fit = doc["fits"][0]
    assert fit["evidence"] == "exploratory"
    assert fit["evidence_reason"] == "prediction not frozen before its runs (recallkit freeze law_toy_width --preset quick)"


@pytest.mark.parametrize("args, named", [(("fit", "law.toml", "--require", "strong"), "--require"),
                                         (("freeze", "no/such.toml"), "no/such.toml")])
def test_wrong_usage_is_one_line(tmp_path, args, named):
    root = _toy(tmp_path)
    out = _recallkit(root, *args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], out.stderr


def test_experiments_lists_the_shipped_ones_with_their_presets():
    """``recallkit experiments`` (there was no command that listed the shipped experiments): each with its system,
    kind and presets, and the same as JSON."""
    assert RECALLKIT
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    out = subprocess.run([RECALLKIT, "experiments"], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith("tr_fig2_attention_only "))
    assert row.split()[1:3] == ["token_retrieval,", "min_size;"] and "confirm" in row and "quick" in row
    doc = json.loads(subprocess.run([RECALLKIT, "experiments", "--json"], env=env, capture_output=True, text=True,
                                    timeout=120).stdout)
    names = {e["name"]: e for e in doc["experiments"]}
    assert {"assoc_memory_linear", "tr_centring", "geo_capacity"} <= set(names)
    assert names["tr_centring"]["presets"] == ["confirm", "gpu", "paper", "quick"]

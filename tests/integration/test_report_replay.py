"""An unchanged ``recallkit report`` (same settings, store bytes, code and environment, into the folder it wrote)
answers from the files it wrote, without importing the pipeline; anything that could change its answer makes it
run: a changed store, an edited output file, no SOURCE_DATE_EPOCH, --redraw. Driven through the installed command."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "small_store" / "store.sqlite"
EXPERIMENT = "assoc_memory_linear"
UNCHANGED = "report unchanged (same settings, store, code and environment; its files as written): nothing recomputed"


def report(base: Path, *extra: str, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ, RECALLKIT_CACHE=str(base / "cache"), RECALLKIT_CACHE_KEY_FILE=str(base / "key"),
                SOURCE_DATE_EPOCH="1764493200")
    full.update(env)
    full = {name: value for name, value in full.items() if value is not None}
    done = subprocess.run(["recallkit", "report", EXPERIMENT, "--no-probes", "--store", "store.sqlite", "--out", "out",
                           *extra], cwd=base, env=full, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    base = tmp_path_factory.mktemp("replay")
    shutil.copy(FIXTURE, base / "store.sqlite")
    first = report(base)
    assert UNCHANGED not in first.stderr  # nothing to replay yet
    # the first report opened the copied store (SQLite wrote to it), so the second is the first that stored nothing
    assert UNCHANGED not in report(base).stderr
    return base


def test_the_unchanged_report_is_answered_from_its_files(reported):
    pdf = (reported / "out" / "recallkit-report.pdf").read_bytes()
    again = report(reported)
    assert UNCHANGED in again.stderr
    assert "report pages:" not in again.stderr  # nothing was drawn or joined
    assert f"report: {Path('out') / 'recallkit-report.pdf'}" in again.stdout
    assert (reported / "out" / "recallkit-report.pdf").read_bytes() == pdf


def test_an_edited_output_file_makes_it_run(reported):
    summary = reported / "out" / "summary.json"
    written = summary.read_text()
    summary.write_text(written.replace('"consistent"', '"inconsistent"', 1))
    edited = report(reported)
    assert UNCHANGED not in edited.stderr and "report pages:" in edited.stderr
    # written again from the store (its own run time aside)
    assert json.loads(summary.read_text())["entries"] == json.loads(written)["entries"]


@pytest.mark.slow  # two more reports (8 s): the default run must stay under 10 minutes
def test_no_fixed_date_or_redraw_makes_it_run(reported):
    assert UNCHANGED not in report(reported, SOURCE_DATE_EPOCH=None).stderr  # today's date is on the title page
    assert UNCHANGED not in report(reported, "--redraw").stderr


def test_a_changed_store_makes_it_run(reported):
    report(reported)  # recorded again after the runs above
    assert UNCHANGED in report(reported).stderr
    with sqlite3.connect(reported / "store.sqlite") as db:  # one more byte of the store: any change counts
        db.execute("CREATE TABLE IF NOT EXISTS touched (x)")
    changed = report(reported)
    assert UNCHANGED not in changed.stderr and "report pages:" in changed.stderr

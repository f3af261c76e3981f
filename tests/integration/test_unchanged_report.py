"""An unchanged report does no work twice: run in-process through ``recallkit.pipeline.run_report`` on a copy of the
committed small store with the cache on (in tmp_path), a second report of the same experiment into the same folder
computes no realised prediction (the token-retrieval all-terms form is the slowest thing an unchanged report used
to redo), fits nothing, draws no page and joins no PDF: each comes from the cache or the previous build. The cache is
strict (``RECALLKIT_CACHE_STRICT=1``), so a value it cannot keep fails the report instead of being computed again
on every run.

The experiment is the attention-only Fig 2 search cut down with ``--set`` to one line at three V values: every run
it needs is in the small store, and its realised predictions go through the system's all-terms form."""
from __future__ import annotations

import importlib
import io
import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from recallkit import registry
from recallkit.compare import assertions
from recallkit.empirics import cache as derived_cache
from recallkit.pipeline import ReportSettings, run_report
from recallkit.reports import pdf, render

pytestmark = pytest.mark.integration

STORE = Path(__file__).resolve().parents[1] / "fixtures" / "small_store" / "store.sqlite"
EXPERIMENT = "tr_fig2_attention_only"
SETTINGS = (("lines", ["N=V**1.5, L=V**0.25"]), ("V", [64, 128, 256]))


def _count(monkeypatch, counts: Counter, owner, name: str, label: str) -> None:
    """Wrap ``owner.name`` so that each call adds one to ``counts[label]``."""
    real = getattr(owner, name)

    def counted(*args, **kwargs):
        counts[label] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def _hook(monkeypatch, counts: Counter, reference: str, label: str) -> None:
    """Count the calls of a system's hook named ``module:attribute`` (looked up by the registry at each call)."""
    module, _, attribute = reference.partition(":")
    _count(monkeypatch, counts, importlib.import_module(module), attribute, label)


def _counted(monkeypatch) -> Counter:
    counts: Counter = Counter()
    _count(monkeypatch, counts, assertions, "realised_predictions", "realised predictions")
    _count(monkeypatch, counts, assertions, "fit_boundary_points", "fits")
    _count(monkeypatch, counts, assertions, "fit_law_points", "fits")
    _count(monkeypatch, counts, render, "draw_one", "pages drawn")
    _count(monkeypatch, counts, pdf, "_join", "joins")
    system = registry.system_of_pack("token_retrieval_attn")
    _hook(monkeypatch, counts, system.all_terms, "all-terms predictions")
    _hook(monkeypatch, counts, system.finite_size, "finite-size terms")
    return counts


def _report(root: Path) -> tuple[str, dict]:
    log = io.StringIO()
    settings = ReportSettings(experiments=[Path(EXPERIMENT)], out_dir=root / "out", store=root / "store.db",
                              workers=1, jobs=1, log=log, settings=SETTINGS)
    run_report(settings)
    summary = json.loads((root / "out" / "summary.json").read_text())
    summary.pop("run_wall_time_s", None)
    return log.getvalue(), summary


@pytest.mark.slow  # two real reports of a token-retrieval search (about a minute on 2 cores)
def test_a_second_unchanged_report_computes_nothing(tmp_path, monkeypatch):
    assert STORE.is_file(), f"{STORE} is missing: bash tests/fixtures/small_store/make.sh regenerates it"
    shutil.copyfile(STORE, tmp_path / "store.db")
    monkeypatch.setenv("RECALLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("RECALLKIT_CACHE_STRICT", "1")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    counts = _counted(monkeypatch)

    log, first = _report(tmp_path)
    assert re.search(rf"{EXPERIMENT}: reused [1-9]\d* / computed 0\b", log), log[-2000:]
    # the first report did the work the second must not redo, so the zeros below prove something
    for what in ("realised predictions", "all-terms predictions", "fits", "pages drawn", "joins"):
        assert counts[what] > 0, (what, counts)
    pdf_bytes = (tmp_path / "out" / "recallkit-report.pdf").read_bytes()

    counts.clear()
    log, again = _report(tmp_path)
    assert +counts == Counter(), f"the unchanged report computed again: {dict(counts)}"
    cache = derived_cache.from_env()  # the one object both reports counted in
    assert cache is not None and cache.hits > 0
    assert cache.declined == [], cache.declined
    assert again == first
    assert (tmp_path / "out" / "recallkit-report.pdf").read_bytes() == pdf_bytes

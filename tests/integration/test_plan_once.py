"""One report of one experiment plans it once: the experiment file and its pack are each read once, every run
config is validated once, and nothing replays the search after it ran (the fits keep its records).

Counted in-process around ``recallkit.pipeline.run_report``, cold (everything trained) and warm (everything
reused from the store), on a tiny curve search of the attention-only model, whose pack has a finite-size form and whose
system adds its own verdicts (both read the plan, not the file).
"""
from __future__ import annotations

import io
import json
import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from recallkit.empirics import config as config_module
from recallkit.empirics import search as search_module
from recallkit.pipeline import ReportSettings, run_report
from recallkit.theory import pack as pack_module
from tests.systems.token_retrieval.test_finite_size import TINY  # a tiny curve search on the attention-only pack

pytestmark = pytest.mark.integration



class Counts:
    """What one report reads and computes, counted by wrapping the one function that does each."""

    def __init__(self, monkeypatch, experiment_text: str, pack_text: str):
        self.toml = Counter()
        self.pack_loads = 0
        self.parses: Counter[str] = Counter()
        self.searches = Counter()
        loads, from_dict, build = tomllib.loads, config_module.RunConfig.from_dict.__func__, pack_module.pack_from_dict
        run = search_module.SweepDriver.run

        def counted_loads(text, *args, **kwargs):
            self.toml["experiment" if text == experiment_text else "pack" if text == pack_text else "other"] += 1
            return loads(text, *args, **kwargs)

        def counted_pack(*args, **kwargs):
            self.pack_loads += 1
            return build(*args, **kwargs)

        def counted_parse(cls, raw, where=""):
            self.parses[json.dumps(raw, sort_keys=True, default=str)] += 1
            return from_dict(cls, raw, where)

        def counted_run(driver):
            self.searches["replay" if driver.executor is None else "search"] += 1
            return run(driver)

        monkeypatch.setattr(tomllib, "loads", counted_loads)
        monkeypatch.setattr(pack_module, "pack_from_dict", counted_pack)
        monkeypatch.setattr(config_module.RunConfig, "from_dict", classmethod(counted_parse))
        monkeypatch.setattr(search_module.SweepDriver, "run", counted_run)
        pack_module._LOADED.clear()  # a pack loaded by an earlier test in this process would not be counted


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny_curve.toml"
    path.write_text(TINY)
    return tmp_path, path


def _report(root: Path, path: Path, out: str) -> tuple[dict, tuple[int, int]]:
    """The report's summary and its (reused, computed) run counts."""
    log = io.StringIO()
    settings = ReportSettings(experiments=[path], out_dir=root / out, store=root / "store.db", system_options={"token_retrieval": {"probes": False}},
                              workers=1, jobs=1, log=log)
    run_report(settings)
    counts = re.search(r"tiny_curve: reused (\d+) / computed (\d+)", log.getvalue())
    assert counts, log.getvalue()[-2000:]
    return json.loads((root / out / "summary.json").read_text()), (int(counts[1]), int(counts[2]))


@pytest.mark.parametrize("which", ["cold", "warm"])
def test_one_report_reads_each_file_once_and_replays_nothing(tiny, monkeypatch, which):
    root, path = tiny
    if which == "warm":  # the store filled by a report of its own first (not counted), so this case stands alone
        _report(root, path, "first")
    pack_text = pack_module.resolve_pack_path("token_retrieval_attn")[0].read_text(encoding="utf-8")
    counts = Counts(monkeypatch, path.read_text(), pack_text)
    summary, (reused, computed) = _report(root, path, which)
    (entry,) = summary["experiments"]
    assert entry["name"] == "tiny_curve" and summary["failures"] == []
    assert entry["fits"], "the report fitted nothing, so the counts below would prove nothing"
    assert (computed > 0 and reused == 0) if which == "cold" else (computed == 0 and reused > 0)
    assert counts.toml["experiment"] == 1, counts.toml
    assert counts.toml["pack"] == 1, counts.toml
    assert counts.pack_loads == 1
    assert counts.searches == Counter(search=1), counts.searches
    trained = len(entry["config_hashes"])
    assert trained > 0 and len(counts.parses) >= trained
    assert max(counts.parses.values()) == 1, [n for n in counts.parses.values() if n > 1]

"""The report's one pool of worker processes and its one judging of the claims, in-process through
``pipeline.run_report``: the searches' training rounds, the systems' steps and the pages go to the same pool, started
once; every claim is judged once, after every experiment is fitted, whatever the order of the experiments its
sides name; and the log says how long each experiment took."""
from __future__ import annotations

import io
import json
import re

import pytest

from recallkit import pipeline
from recallkit.compare import claims as compare_claims
from recallkit.empirics import workers
from recallkit.report_settings import ReportSettings
from tests.experiment_texts import TINY_LINEAR_MEMORY, tiny_construction

pytestmark = pytest.mark.integration

CONSTRUCTION = tiny_construction(N=[16, 32], R=[1])


def _claiming(name: str, other: str) -> str:
    """The tiny linear memory as experiment ``name``, with one claim whose side B is its line in ``other``."""
    text = TINY_LINEAR_MEMORY.replace('name = "tiny_linear_memory"', f'name = "{name}"')
    assert f'name = "{name}"' in text
    return text + f"""
[[claims]]
id = "{name}-against-{other}"
text = "the same memory needs no more than itself (test)"
relation = "level <"
a = {{ line = "linear" }}
b = {{ experiment = "{other}.toml", line = "linear" }}
provenance = "derived-here: a test"
"""


def test_one_pool_trains_runs_the_steps_and_draws(tmp_path, monkeypatch):
    search = tmp_path / "tiny_linear_memory.toml"
    search.write_text(TINY_LINEAR_MEMORY)
    runner = tmp_path / "tiny_construction.toml"
    runner.write_text(CONSTRUCTION)
    submitted: list[tuple[int, str]] = []
    starts: list[int] = []
    submit, start = workers.WorkerPool.submit, workers.WorkerPool._start

    def counting_submit(self, fn, /, *args, **kwargs):
        submitted.append((id(self), fn.__name__))
        return submit(self, fn, *args, **kwargs)

    def counting_start(self):
        starts.append(id(self))
        return start(self)

    monkeypatch.setattr(workers.WorkerPool, "submit", counting_submit)
    monkeypatch.setattr(workers.WorkerPool, "_start", counting_start)
    log = io.StringIO()
    settings = ReportSettings(experiments=[search, runner], out_dir=tmp_path / "out", store=tmp_path / "store.db",
                              workers=2, jobs=2, log=log)
    pipeline.run_report(settings)
    assert len(starts) == 1, starts
    assert {pool for pool, _ in submitted} == set(starts)
    assert {"run_with_threads", "_own_step_in_worker", "draw_one"} <= {name for _, name in submitted}, submitted
    timed = re.findall(r"(?m)^step time: (\S+) ([\d.]+) s wall$", log.getvalue())
    assert [name for name, _ in timed] == ["tiny_linear_memory", "tiny_construction"], log.getvalue()[-2000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [e["name"] for e in summary["experiments"]] == ["tiny_linear_memory", "tiny_construction"]
    assert summary["failures"] == []


def test_every_claim_is_judged_once_from_the_reports_fits(tmp_path, monkeypatch):
    """tiny_a's claim names tiny_b, which comes after it, and tiny_b's names tiny_a, before it: each experiment's
    claims are judged once, both from this report's fits (the first was judged from the stored runs, then again)."""
    (tmp_path / "tiny_a.toml").write_text(_claiming("tiny_a", "tiny_b"))
    (tmp_path / "tiny_b.toml").write_text(_claiming("tiny_b", "tiny_a"))
    judged: list[str] = []
    judge = compare_claims.judge_claims

    def counting_judge(fitted, claims, experiment=None, **options):
        judged.append(experiment)
        return judge(fitted, claims, experiment=experiment, **options)

    monkeypatch.setattr(compare_claims, "judge_claims", counting_judge)
    monkeypatch.setattr(pipeline, "judge_claims", counting_judge)
    settings = ReportSettings(experiments=[tmp_path / "tiny_a.toml", tmp_path / "tiny_b.toml"],
                              out_dir=tmp_path / "out", store=tmp_path / "store.db", workers=1,
                              log=io.StringIO())
    pipeline.run_report(settings)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["failures"] == []
    assert sorted(judged) == ["tiny_a", "tiny_b"], judged
    sides = {entry["name"]: [side for claim in entry["claims"] for side in (claim["a"], claim["b"])]
             for entry in summary["experiments"]}
    assert sorted(sides) == ["tiny_a", "tiny_b"]
    for name, (own, other) in sides.items():
        assert other["experiment"] != name and other["fitted_from"] == "this report", (name, other)

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


def test_the_next_search_trains_while_the_one_before_is_fitted(tmp_path, monkeypatch):
    """The searches are swept in a thread of their own: while the main thread fits tiny_a (held here until tiny_b's
    sweep has begun), tiny_b's sweep starts; the fits stay in the main thread, in the experiments' order, and the
    numbers are those of one experiment after the other."""
    import threading

    for name in ("tiny_a", "tiny_b"):
        (tmp_path / f"{name}.toml").write_text(
            TINY_LINEAR_MEMORY.replace('name = "tiny_linear_memory"', f'name = "{name}"'))
    events: list[tuple[str, str, bool]] = []
    b_swept = threading.Event()
    swept, entry = pipeline._swept, pipeline._search_entry

    def watched_sweep(planned, *args):
        name = planned.experiment.name
        events.append(("sweep", name, threading.current_thread() is threading.main_thread()))
        if name == "tiny_b":
            b_swept.set()
        return swept(planned, *args)

    def watched_fit(planned, *args, **kwargs):
        name = planned.experiment.name
        if name == "tiny_a":
            assert b_swept.wait(120), "tiny_b's sweep did not start while tiny_a was fitted"
        events.append(("fit", name, threading.current_thread() is threading.main_thread()))
        return entry(planned, *args, **kwargs)

    monkeypatch.setattr(pipeline, "_swept", watched_sweep)
    monkeypatch.setattr(pipeline, "_search_entry", watched_fit)
    out = tmp_path / "out"
    settings = ReportSettings(experiments=[tmp_path / "tiny_a.toml", tmp_path / "tiny_b.toml"], out_dir=out,
                              store=tmp_path / "store.db", workers=2, jobs=2, log=io.StringIO())
    pipeline.run_report(settings)
    assert [e for e in events if e[0] == "fit"] == [("fit", "tiny_a", True), ("fit", "tiny_b", True)], events
    assert [e for e in events if e[0] == "sweep"] == [("sweep", "tiny_a", False), ("sweep", "tiny_b", False)]
    assert events.index(("sweep", "tiny_b", False)) < events.index(("fit", "tiny_a", True))
    entries = json.loads((out / "summary.json").read_text())["experiments"]
    assert [e["name"] for e in entries] == ["tiny_a", "tiny_b"]
    # the same memory twice: the same slopes, whichever ran beside what
    slopes = [[fit["slope"] for fit in e["fits"]] for e in entries]
    assert slopes[0] == slopes[1] and slopes[0] and all(s is not None for s in slopes[0])


def test_the_sweeping_thread_runs_in_order_hands_errors_over_and_drops_what_was_not_started():
    import concurrent.futures
    import threading

    release = threading.Event()
    sweeper = pipeline._Sweeper()
    first = sweeper.submit(lambda: (release.wait(60), "first"))
    failing = sweeper.submit(lambda: (_ for _ in ()).throw(ValueError("bad sweep")))
    third = sweeper.submit(lambda: ("third",))
    release.set()
    assert first.result(timeout=60)[:2] == (True, "first") and first.result()[2] >= 0.0  # (its seconds last)
    with pytest.raises(ValueError, match="bad sweep"):
        failing.result(timeout=60)
    assert third.result(timeout=60)[0] == "third"
    blocker, started = threading.Event(), threading.Event()
    running = sweeper.submit(lambda: (started.set(), blocker.wait(60)))
    waiting = sweeper.submit(lambda: ("never",))
    assert started.wait(60)
    sweeper.close()  # the running sweep ends on its own (its workers are stopped by the report); the next is dropped
    blocker.set()
    assert running.result(timeout=60)[1] is True
    with pytest.raises(concurrent.futures.CancelledError):
        waiting.result(timeout=60)


def test_a_sweep_stops_instead_of_retrying_once_the_report_stops():
    """After Ctrl-C the main thread stops the workers; the sweep in its thread must not read the broken round as a
    failed batch (it would say so and retry each model in this process): it stops."""
    import threading

    class Broken:
        def __init__(self):
            self.rounds, self.stop_during = 0, False

        def run(self, configs):
            self.rounds += 1
            if self.stop_during:  # Ctrl-C in the main thread while this round runs: its workers are stopped
                stopped.set()
            raise RuntimeError("the workers were stopped")

        def describe(self):
            return "local (2 processes)"

    stopped = threading.Event()
    inner = Broken()
    executor = pipeline._StoppedWith(inner, stopped)
    assert executor.describe() == "local (2 processes)"
    with pytest.raises(RuntimeError, match="workers were stopped"):  # still running: a failure is the sweep's
        executor.run([{}])
    inner.stop_during = True
    with pytest.raises(pipeline.SweepStopped):  # stopped during the round: the broken round stops the sweep
        executor.run([{}])
    assert inner.rounds == 2
    with pytest.raises(pipeline.SweepStopped):  # stopped: nothing more is trained
        executor.run([{}])
    assert inner.rounds == 2 and not issubclass(pipeline.SweepStopped, Exception)

"""The main job's runner experiments and report steps in a worker process beside the searches
(``recallkit.own_steps.OwnSteps``): results in the order asked for, log lines forwarded, a step's bad input a failure
of that step, and Ctrl-C or an error stops the worker at once instead of waiting for its work."""
import io
import os
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from recallkit.own_steps import OwnSteps
from recallkit.report_settings import ReportSettings, StepContext
from recallkit.theory.errors import RecallkitError


@pytest.fixture
def steps_module(tmp_path, monkeypatch):
    (tmp_path / "own_steps_probe.py").write_text(textwrap.dedent("""
        import os, time
        from recallkit.theory.errors import InputError

        def runner(path, context):
            print(f"{path.name}: computed in {os.getpid()}", file=context.log)
            return {"name": path.name, "pid": os.getpid(), "preset": context.preset}

        def bad(path, context):
            raise InputError(f"{path.name}: [geometric].d: expected a positive integer, got 0")

        def step(context):
            return {"name": "step", "pid": os.getpid(), "store": str(context.store_path)}

        def slow(path, context):
            time.sleep(60)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))  # a spawned worker starts with the parent's sys.path
    return tmp_path


def own_steps(tmp_path, background, log):
    settings = ReportSettings(experiments=[], preset="quick", store=tmp_path / "s.db", log=log)
    return OwnSteps(settings, tmp_path / "s.db", StepContext(settings, tmp_path / "s.db"), background)


@pytest.mark.parametrize("background", [True, False])
def test_entries_come_back_in_the_order_asked_with_their_log(steps_module, tmp_path, background, capsys):
    own = own_steps(tmp_path, background, sys.stdout)
    own.start("b", "own_steps_probe:runner", Path("b.toml"))
    own.start("bad", "own_steps_probe:bad", Path("c.toml"))
    own.start(0, "own_steps_probe:step", None)
    first = own.result("b")
    assert first["name"] == "b.toml" and first["preset"] == "quick"
    assert (first["pid"] != os.getpid()) is background  # in a worker process only when asked for
    with pytest.raises(RecallkitError, match=r"^c.toml: \[geometric\].d: expected a positive integer, got 0$"):
        own.result("bad")
    assert own.result(0) == {"name": "step", "pid": first["pid"], "store": str(tmp_path / "s.db")}
    own.close()
    assert f"b.toml: computed in {first['pid']}" in capsys.readouterr().out


def test_an_interrupted_report_stops_the_worker_at_once(steps_module, tmp_path):
    own = own_steps(tmp_path, True, sys.stdout)
    own.start("slow", "own_steps_probe:slow", Path("slow.toml"))
    time.sleep(3)  # let the worker start the step
    started = time.perf_counter()
    own.close(failed=True)
    assert time.perf_counter() - started < 10


def test_a_report_runs_only_the_steps_of_its_experiments_systems(tmp_path):
    """A report of one associative-memory experiment trained token retrieval's term probes too, unless told
    --no-probes, and one of Fig 2 alone did so untold; the main job (no experiment named) runs every system's
    steps."""
    from recallkit.empirics.plan import plan
    from recallkit.pipeline import ReportSettings, steps_for

    probes = "recallkit.systems.token_retrieval.steps:term_probe_entry"
    gradient_access = "recallkit.systems.token_retrieval.steps:gradient_access_entry"
    memory = [plan("assoc_memory_linear")]
    assert steps_for(ReportSettings(experiments=[Path("assoc_memory_linear")]), memory) == []
    fig2 = [plan("tr_fig2_attention_only")]
    # a report of named experiments runs a system's diagnostics only when asked (--probes): each step decides
    assert steps_for(ReportSettings(experiments=[Path("tr_fig2_attention_only")]), fig2) == []
    asked = ReportSettings(experiments=[Path("tr_fig2_attention_only")], system_options={"token_retrieval": {"probes": True}})
    assert steps_for(asked, fig2) == [probes, gradient_access]
    assert steps_for(replace(asked, experiments=[Path("assoc_memory_linear")]), memory) == []
    assert probes in steps_for(ReportSettings(experiments=[]), memory)


def test_a_report_of_fig2_alone_probes_the_attention_only_terms(tmp_path, monkeypatch):
    """A report of the attention-only Fig 2 probed the attention-MLP pack's terms (the main job's grid), not the
    terms of the model it trains; the main job keeps its grid."""
    from recallkit.empirics.plan import plan
    from recallkit.pipeline import ReportSettings, with_packs
    from recallkit.report_settings import StepContext
    from recallkit.systems.token_retrieval import steps

    fig2 = [plan("tr_fig2_attention_only")]
    named = with_packs(ReportSettings(experiments=[Path("tr_fig2_attention_only")], log=io.StringIO(),
                                      system_options={"token_retrieval": {"probes": True}}), fig2)  # --probes
    assert named.packs == ("token_retrieval_attn",)
    assert with_packs(ReportSettings(experiments=[]), fig2).packs == ()
    asked = []
    monkeypatch.setattr(steps, "run_probe", lambda source, pack, preset, **_: asked.append((pack, preset)) or {})
    entry = steps.term_probe_entry(StepContext(named, tmp_path / "store.db"))
    assert asked == [("token_retrieval_attn", "quick")] and entry["name"] == "token_retrieval_attn_probes"
    main = steps.term_probe_entry(StepContext(ReportSettings(experiments=[], log=io.StringIO()), tmp_path / "s.db"))
    assert asked[-1] == ("token_retrieval", "quick") and main["name"] == "token_retrieval_probes"

"""Commands print and run what they say. ``recallkit sweep``, per check: a fraction of the ceiling is named as one
(it printed "accuracy >= 0.25" for the check at 0.25 x ceiling, merged with an absolute 0.25), and a curve's
interpolated size is shown to three figures, not six. ``recallkit report`` of named experiments runs those."""
from __future__ import annotations

from types import SimpleNamespace

from recallkit.cli_sweep import _format_points


def _point(threshold, relative, V, d, censored=False):
    return SimpleNamespace(line="l", threshold=threshold, relative=relative, base_value=V, size_value=d,
                           censored=censored)


def test_a_fraction_of_the_ceiling_is_its_own_row_and_sizes_read_as_a_person_writes_them():
    experiment = SimpleNamespace(kind="min_size", lines=[SimpleNamespace(label="l")], base="V", size="d",
                                 metric="accuracy", values_of=lambda index: [64, 128], base_values=[64, 128])
    points = [_point(0.25, False, 64, 45.25483399593904), _point(0.25, False, 128, 181.0193359837562),
              _point(0.25, True, 64, 22.627416997969522), _point(0.25, True, 128, 64.0, censored=False)]
    out = _format_points(SimpleNamespace(experiment=experiment, points=points, violations=[]))
    assert out == ["line l",
                   "  accuracy >= 0.25:  V=64: d=45.3;  V=128: d=181",
                   "  accuracy >= 0.25 x ceiling:  V=64: d=22.6;  V=128: d=64"]


def test_a_report_of_named_experiments_runs_only_those_unless_probes_are_asked_for(monkeypatch):
    """``recallkit report tr_fig2_attention_only assoc_memory_linear`` also ran token retrieval's term probes and
    gradient-access check (minutes): the diagnostics join the main job, or a named report given --probes."""
    from typer.testing import CliRunner

    import recallkit.cli_report_run as report_run
    from recallkit.cli import app

    seen = []
    monkeypatch.setattr(report_run, "run", lambda settings, experiments, **kw: seen.append(settings.option("token_retrieval", "probes", not settings.experiments)))
    for args, probes in ((["report", "tr_fig2_attention_only", "assoc_memory_linear"], False),
                         (["report"], True),
                         (["report", "tr_fig2_attention_only", "--probes"], True),
                         (["report", "--no-probes"], False)):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert seen[-1] is probes, args

"""Search: finds the exact integer boundary, batches rounds, resumes from the store, reports violations."""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from recallkit.empirics.executors import LocalExecutor
from recallkit.empirics.experiment import experiment_from_dict
from recallkit.empirics.plan import plan_of
from recallkit.empirics.search import boundary_points, replay, run_sweep
from recallkit.empirics.store import ResultStore
from recallkit.theory.errors import InputError


def boundary(V: int, seed: int) -> float:
    """The fake model's d at which accuracy crosses 0.5: ~ V**0.75, shifted a little per seed."""
    return 0.4 * V ** 0.75 * (1 + 0.05 * seed)


def fake_accuracy(config: dict) -> float:
    if "V" in config:  # min size: accuracy grows with d
        return 1 / (1 + math.exp(-4 * math.log(config["d"] / boundary(config["V"], config["seed"]))))
    # capacity: accuracy falls with N past N* = d**2 / 2
    return 1 / (1 + math.exp(4 * math.log(config["N"] / (config["d"] ** 2 / 2 * (1 + 0.05 * config["seed"])))))


class FakeRunner:
    """Deterministic stand-in for empirics.engine.run_configs that counts its calls."""

    def __init__(self, bad_d: set[int] | None = None, dip: tuple[int, int] | None = None, fail_d: int | None = None):
        self.calls: list[list[dict]] = []
        self.bad_d = bad_d or set()
        self.dip = dip
        self.fail_d = fail_d

    def __call__(self, configs, device=None, progress=False):
        self.calls.append(list(configs))
        out = []
        for c in configs:
            if c.get("d") == self.fail_d and "V" in c:
                raise RuntimeError(f"simulated failure at d={c['d']}")
            acc = fake_accuracy(c)
            if self.dip and "V" in c and c["V"] == self.dip[0] and c["d"] == self.dip[1]:
                acc = 0.0  # a non-monotone point
            out.append({"accuracy": acc, "train_accuracy": acc, "param_count": c.get("d", 1) ** 2,
                        "wall_time_s": 0.0, "device": "cpu", "threads": 1})
        return out


def min_size_experiment(**preset_extra) -> dict:
    return {
        "name": "fake_min", "task": "token_retrieval", "model": "attention-only", "trainer": "three_step",
        "kind": "min_size", "thresholds": [0.3, 0.5, 0.7],
        "lines": [{"scaling": "N=V*log(V), L=V**0.5"}],
        "fixed": {"eta": 1.0, "gamma": 1e7},
        "search": {"min": 4, "max": 1024},
        "presets": {"quick": {"V": [64, 128, 256, 512], "seeds": [0, 1], **preset_extra}},
    }


def brute_force_min(V, seed, t, lo=4, hi=1024):
    for d in range(lo, hi + 1):
        if fake_accuracy({"V": V, "d": d, "seed": seed}) >= t:
            return d
    return None


@pytest.fixture
def store(tmp_path):
    with ResultStore(tmp_path / "s.db") as s:
        yield s


def test_min_size_finds_the_exact_integer_boundary_with_few_batched_calls(store):
    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    runner = FakeRunner()
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    assert len(result.points) == 4 * 2 * 3
    for p in result.points:
        assert not p.censored, p
        assert p.values["d"] == brute_force_min(p.values["V"], p.seed, p.threshold), p
        assert p.param_count == p.values["d"] ** 2 and p.values["N"] == math.floor(p.values["V"] * math.log(p.values["V"]))
    n_probes = sum(len(c) for c in runner.calls)
    assert result.computed == n_probes and result.reused == 0 and not result.violations
    # Rounds are batched across seeds and thresholds: far fewer engine calls than probes.
    assert len(runner.calls) * 2 < n_probes
    assert any(len({c["seed"] for c in call}) == 2 for call in runner.calls)
    # Bisection in log d beats scanning: a few probes per (V, seed), not hundreds.
    assert n_probes < 4 * 2 * 20


def test_rerun_reuses_everything_and_replay_matches(store):
    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    first = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None)
    runner = FakeRunner()
    second = run_sweep(exp, store, LocalExecutor(runner), log=None)
    assert runner.calls == [] and second.computed == 0 and second.reused == first.computed
    assert second.summary_line() == f"reused {first.computed} / computed 0"
    assert second.points == first.points
    assert boundary_points(exp, store) == [p.to_dict() for p in first.points]


def test_partial_store_computes_only_the_missing_probes(tmp_path):
    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    with ResultStore(tmp_path / "full.db") as full:
        complete = run_sweep(exp, full, LocalExecutor(FakeRunner()), log=None)
        rows = full.rows()
    with ResultStore(tmp_path / "half.db") as half:
        keep = rows[: len(rows) // 2]
        half.add("fake_min", [r["config"] for r in keep], [r["config_hash"] for r in keep],
                 [r["metrics"] for r in keep], "v", None)
        resumed = run_sweep(exp, half, LocalExecutor(FakeRunner()), log=None)
    assert resumed.reused == len(keep) and resumed.computed == len(rows) - len(keep)
    assert resumed.points == complete.points


def test_replay_of_an_empty_store_censors_every_point(store):
    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    points = boundary_points(exp, store)
    assert points and all(p["censored"] and "not in the results store" in p["censor_reason"] for p in points)


def test_censoring_at_both_search_bounds(store):
    raw = min_size_experiment()
    raw["search"] = {"min": 4, "max": 40}
    raw["presets"]["quick"]["V"] = [8, 2048]
    exp = experiment_from_dict(raw, "fake.toml")
    points = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None).points
    small = [p for p in points if p.values["V"] == 8]
    large = [p for p in points if p.values["V"] == 2048]
    assert small and large, points
    assert all(p.censored and "search.min" in p.censor_reason and p.values["d"] == 4 for p in small)
    assert all(p.censored and "search.max" in p.censor_reason and p.values["d"] == 40 for p in large)


def test_a_lines_own_cap_stops_its_cells_there_and_leaves_the_other_lines_alone(store):
    raw = min_size_experiment()
    raw["lines"] = [{"scaling": "N=V*log(V), L=V**0.5"},
                    {"scaling": "N=V*log(V), L=V", "search": {"max": 40}, "label": "capped"}]
    raw["presets"]["quick"]["V"] = [1024, 2048]  # every threshold's boundary is above d = 55: beyond the cap of 40
    exp = experiment_from_dict(raw, "fake.toml")
    assert exp.lines[1].search.max == 40 and exp.lines[0].search is None and exp.search.max == 1024
    assert exp.planned_runs() < experiment_from_dict(min_size_experiment(**{"V": [1024, 2048]}), "f.toml").planned_runs() * 2
    runner = FakeRunner()
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    capped = [p for p in result.points if p.line == "capped"]
    free = [p for p in result.points if p.line != "capped"]
    assert capped and all(p.censored and p.values["d"] == 40 for p in capped)
    assert all("no d <= 40 (the line's search.max cap) reached" in p.censor_reason for p in capped)
    assert all(not p.censored and p.values["d"] == brute_force_min(p.values["V"], p.seed, p.threshold) for p in free)
    assert max(c["d"] for call in runner.calls for c in call if c["L"] == c["V"]) == 40
    # a cap above the experiment's own search.max changes nothing, and a cap is checked like a size
    raw["lines"][1]["search"] = {"max": 2000}
    loose = experiment_from_dict(raw, "f.toml")
    assert loose.lines[1].search.max == loose.search.max == 1024
    raw["lines"][1]["search"] = {"max": 1 << 20}
    with pytest.raises(InputError, match=r"lines\[1\].search.max: 1048576 is above the limit 16384 for d"):
        experiment_from_dict(raw, "f.toml")
    raw["lines"][1]["search"] = {"colour": 3}
    with pytest.raises(InputError, match=r"lines\[1\].search: unknown key 'colour'"):
        experiment_from_dict(raw, "f.toml")


def test_non_monotone_accuracy_is_reported_not_hidden(store):
    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    clean = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None)
    # The first bracket at V=64 is [64/1.5, 64*1.5] = {42, 96}: both far above the boundary (d ~ 9).
    assert {42, 96} <= {r.size_value for r in clean.runs if r.base_value == 64}
    with ResultStore(store.path.with_name("dip.db")) as other:
        result = run_sweep(exp, other, LocalExecutor(FakeRunner(dip=(64, 96))), log=None)
    bad = [v for v in result.violations if v.base_value == 64]
    assert len(bad) == 2 * 3 and all(v.missed_at == [96] for v in bad)
    assert {(v.seed, v.threshold) for v in bad} == {(s, t) for s in (0, 1) for t in (0.3, 0.5, 0.7)}
    flagged = [p for p in result.points if p.non_monotone]
    assert len(flagged) == 6 and all(p.values["V"] == 64 for p in flagged)
    # the boundary itself is still found (the dip is far above it)
    assert [p.values["d"] for p in result.points] == [p.values["d"] for p in clean.points]


def test_a_failing_probe_is_logged_and_the_sweep_goes_on(store):
    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    clean = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None)
    some_d = clean.runs[len(clean.runs) // 2].size_value
    with ResultStore(store.path.with_name("f.db")) as other:
        result = run_sweep(exp, other, LocalExecutor(FakeRunner(fail_d=some_d)), log=None)
        assert result.failed >= 1
        assert any(p.censored and "simulated failure" in (p.censor_reason or "") for p in result.points)
        assert sum(not p.censored for p in result.points) > 0
        # failures are not stored, so a rerun with a healthy runner retries them
        assert run_sweep(exp, other, LocalExecutor(FakeRunner()), log=None).points == clean.points


def test_max_capacity_finds_the_largest_n(store):
    raw = {
        "name": "fake_cap", "task": "assoc_memory", "model": "linear", "trainer": "adamw", "kind": "max_capacity",
        "pack": "assoc_memory", "thresholds": [0.5],
        "lines": [{"scaling": "", "theory_scaling": "m=d", "label": "linear"}],
        "fixed": {"lr": 1.0, "steps": 10}, "search": {"min": 2, "max": 100000, "start": "d**2/3"},
        "presets": {"quick": {"d": [8, 16, 32], "seeds": [0, 1]}},
    }
    exp = experiment_from_dict(raw, "cap.toml")
    assert plan_of(exp).search_exponents["linear"] == pytest.approx((2.0, -1.0))  # N ~ d^2 / log d
    result = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None)
    for p in result.points:
        expected = max(n for n in range(2, 5000) if fake_accuracy({"N": n, "d": p.values["d"], "seed": p.seed}) >= 0.5)
        assert p.values["N"] == expected and not p.censored


def test_grid_kind_trains_the_product_and_derives_points(store):
    raw = min_size_experiment(sizes=[8, 16, 32, 64, 128])
    raw["kind"] = "grid"
    raw["presets"]["quick"]["V"] = [64, 256]
    exp = experiment_from_dict(raw, "grid.toml")
    result = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None)
    assert result.computed == 2 * 5 * 2 and len(result.runs) == 20
    for p in result.points:
        reached = [d for d in (8, 16, 32, 64, 128) if fake_accuracy({"V": p.values["V"], "d": d, "seed": p.seed}) >= p.threshold]
        assert p.values["d"] == (reached[0] if reached else 128)
        assert p.censored == (not reached or reached[0] == 8)
    assert replay(exp, store).runs == result.runs


def curve_experiment(**search_extra) -> dict:
    raw = min_size_experiment()
    raw["relative_thresholds"] = [0.5]
    raw["search"] = {"min": 4, "max": 1024, "method": "curve", "points": 5, "ratio": 1.5, "ceiling": 1024,
                     "resolution": 0.05, **search_extra}
    return raw


def test_curve_search_trains_every_seed_at_the_same_sizes_and_brackets_each_threshold(store):
    exp = experiment_from_dict(curve_experiment(), "fake.toml")
    runner = FakeRunner()
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    assert len(result.points) == 4 * (3 + 1)  # (V) x (three absolute + one relative threshold), seeds pooled
    for p in result.points:
        assert not p.censored, p
        curve = p.curve
        assert curve["seeds"] == [0, 1] and all(len(row) == len(curve["sizes"]) for row in curve["metric"])
        lo, hi = p.bracket
        assert hi <= lo * 1.05 + 1  # bisected down to the resolution
        # the seed-mean curve of the fake model crosses where the mean of the two logistic curves does
        mean = lambda d: sum(fake_accuracy({"V": p.values["V"], "d": d, "seed": s}) for s in (0, 1)) / 2  # noqa: E731
        target = p.threshold_value
        assert mean(lo) < target <= mean(hi) and lo <= p.values["d"] <= hi
    relative = [p for p in result.points if p.relative]
    assert all(p.threshold_value == pytest.approx(0.5 * p.ceiling["mean"]) for p in relative)
    assert all(p.ceiling["d"] == 1024 and len(p.ceiling["per_seed"]) == 2 for p in relative)
    sizes_by_seed = {}
    for call in runner.calls:
        for c in call:
            sizes_by_seed.setdefault((c["V"], c["seed"]), set()).add(c["d"])
    assert sizes_by_seed[(64, 0)] == sizes_by_seed[(64, 1)]
    assert boundary_points(exp, store) == [p.to_dict() for p in result.points]  # replay re-derives the same rounds


def test_a_curve_that_never_reaches_a_threshold_is_censored_at_the_largest_size_run(store):
    """Censored curve points carry their bound (d and parameter count at the largest size run), so a fit page
    can draw them as lower bounds, as it draws a bisection's."""
    exp = experiment_from_dict(curve_experiment(max=32, ceiling=32), "fake.toml")  # at V = 512 d* ~ 43 > 32
    result = run_sweep(exp, store, LocalExecutor(FakeRunner()), log=None)
    censored = [p for p in result.points if p.censored]
    assert censored, "some threshold must be out of reach at d <= 32"
    for p in censored:
        assert "did not reach" in p.censor_reason and p.values["d"] == max(p.curve["sizes"])
        assert p.param_count == p.values["d"] ** 2


def test_reach_lets_a_curve_go_past_its_ceiling_size_for_the_thresholds_not_reached_there(store, tmp_path):
    """With the ceiling at d = 24 the fake model reaches 0.5 and 0.7 only further out at the larger V (d* up to 56);
    ``reach`` lets the curve go on to 2 x the ceiling for those thresholds alone. The relative threshold keeps the ceiling
    measured at 24, and a censored point names the reach it stopped at."""
    capped = experiment_from_dict(curve_experiment(ceiling=24), "fake.toml")
    first = run_sweep(capped, store, LocalExecutor(FakeRunner()), log=None)
    censored = {(p.values["V"], p.threshold) for p in first.points if p.censored}
    assert censored and all(not p.relative for p in first.points if p.censored)
    assert max(max(p.curve["sizes"]) for p in first.points) == 24

    reaching = experiment_from_dict(curve_experiment(ceiling=24, reach="2*24"), "fake.toml")
    assert reaching.search.reach_size("V", 64) == 48
    runner = FakeRunner()
    with ResultStore(tmp_path / "reach.db") as other:
        result = run_sweep(reaching, other, LocalExecutor(runner), log=None)
        assert boundary_points(reaching, other) == [p.to_dict() for p in result.points]
    by_key = {(p.values["V"], p.threshold, p.relative): p for p in result.points}
    outcomes = set()
    for (V, t) in censored:
        point = by_key[(V, t, False)]
        truth = brute_force_min(V, 0, t), brute_force_min(V, 1, t)
        outcomes.add(max(truth) <= 48)
        if max(truth) <= 48:  # reached within the reach: a crossing between the two seeds' own boundaries
            assert not point.censored, point
            assert min(truth) - 1 <= point.values["d"] <= max(truth) + 1
        else:
            assert point.censored and "its reach 48" in point.censor_reason, point.censor_reason
    assert outcomes == {True, False}  # some decided past the ceiling, some still out of reach
    assert max(c["d"] for call in runner.calls for c in call) == 48
    # the next V's first round is calibrated on the boundaries inside the ceiling size only, so every size the
    # capped search ran there is run again: the thresholds the ceiling brackets keep their sizes and answers
    for V in (64, 128, 256, 512):
        capped_sizes = set(next(p for p in first.points if p.values["V"] == V).curve["sizes"])
        reaching_sizes = set(next(p for p in result.points if p.values["V"] == V).curve["sizes"])
        assert capped_sizes <= reaching_sizes, (V, sorted(capped_sizes - reaching_sizes))
    for p in first.points:
        if not p.censored:
            assert by_key[(p.values["V"], p.threshold, p.relative)].values["d"] == pytest.approx(p.values["d"])
    for p in result.points:  # the ceiling is still measured at 24, so the relative targets are unchanged
        if p.relative:
            assert p.ceiling["d"] == 24
    first_relative = {p.values["V"]: p.threshold_value for p in first.points if p.relative}
    assert {p.values["V"]: p.threshold_value for p in result.points if p.relative} == first_relative


def test_reach_is_for_curves_only():
    raw = min_size_experiment()
    raw["search"] = {"min": 4, "max": 1024, "reach": "8*V"}
    with pytest.raises(InputError, match=r"reach: only with method = 'curve'"):
        experiment_from_dict(raw, "fake.toml")
    with pytest.raises(InputError, match=r"^fake\.toml: search\.reach: expected an integer or an expression in the "
                                         r"base variable$"):
        experiment_from_dict(curve_experiment(reach=[96]), "fake.toml")


def test_relative_thresholds_need_the_curve_method():
    raw = min_size_experiment()
    raw["relative_thresholds"] = [0.5]
    with pytest.raises(Exception, match="relative_thresholds: only with kind = 'min_size' and search.method = 'curve'"):
        experiment_from_dict(raw, "fake.toml")


def test_absolute_thresholds_may_be_empty_only_beside_relative_ones():
    raw = curve_experiment()
    raw["thresholds"] = []
    exp = experiment_from_dict(raw, "fake.toml")
    assert exp.thresholds == [] and exp.threshold_targets() == [(0.5, True)]
    raw.pop("relative_thresholds")
    with pytest.raises(Exception, match="thresholds: expected a non-empty list"):
        experiment_from_dict(raw, "fake.toml")


def test_lines_that_differ_only_in_their_metric_share_their_runs_and_each_is_judged_on_its_own(store):
    """A per-line ``metric`` (e.g. the accuracy after an earlier epoch, stored by the same run): the two lines ask
    for the same configs, so each is trained once, and each line's boundary is where its own metric crosses."""
    raw = min_size_experiment()
    raw["lines"] = [{"scaling": "N=V*log(V), L=V**0.5"},
                    {"scaling": "N=V*log(V), L=V**0.5", "label": "early", "metric": "early_accuracy"}]

    class TwoMetrics(FakeRunner):
        def __call__(self, configs, device=None, progress=False):
            out = super().__call__(configs, device, progress)
            for c, row in zip(configs, out):  # the "early" metric crosses at twice the d
                row["early_accuracy"] = fake_accuracy({**c, "d": c["d"] / 2})
            return out

    exp = experiment_from_dict(raw, "fake.toml")
    assert exp.metric_of(1) == "early_accuracy" and exp.metric_of("early") == "early_accuracy"
    assert exp.metric_of(0) == "accuracy"
    runner = TwoMetrics()
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    trained = [(c["V"], c["d"], c["seed"]) for call in runner.calls for c in call]
    assert len(trained) == len(set(trained))  # no config trained twice
    for p in result.points:
        own = brute_force_min(p.values["V"], p.seed, p.threshold)
        if p.line == "early":  # the smallest d with fake_accuracy(d / 2) >= t
            assert p.values["d"] in (2 * own - 1, 2 * own) and p.metric_value >= p.threshold, p
        else:
            assert p.values["d"] == own, p
    assert boundary_points(exp, store) == [p.to_dict() for p in result.points]


def test_a_lines_metric_must_be_a_name():
    raw = min_size_experiment()
    raw["lines"][0]["metric"] = ""
    with pytest.raises(InputError, match=r"lines\[0\]\.metric: expected a non-empty string"):
        experiment_from_dict(raw, "fake.toml")


def test_a_curve_search_without_relative_thresholds_never_trains_the_ceiling_size(store):
    """The instance's ceiling is only needed for thresholds relative to it; without them the first round is the
    guess's sizes alone (probing the ceiling size cost up to 200 s a model for nothing)."""
    raw = curve_experiment()
    del raw["relative_thresholds"]
    exp = experiment_from_dict(raw, "fake.toml")
    runner = FakeRunner()
    result = run_sweep(exp, store, LocalExecutor(runner), log=None)
    assert all(not p.censored for p in result.points)
    assert 1024 not in {c["d"] for call in runner.calls for c in call}
    with_ceiling = experiment_from_dict(curve_experiment(), "fake.toml")
    again = FakeRunner()
    run_sweep(with_ceiling, ResultStore(store.path.parent / "other.db"), LocalExecutor(again), log=None)
    assert 1024 in {c["d"] for call in again.calls for c in call}


class ExtraMetrics(FakeRunner):
    """Runs that measure more than a run row keeps: a loss, a step count and token retrieval's attention mass."""

    def __call__(self, configs, device=None, progress=False):
        out = super().__call__(configs, device, progress)
        for row in out:
            row.update({"loss": 0.5, "steps_run": 3, "attention_mass": 0.25})
        return out


def test_run_rows_keep_the_generic_metrics_and_those_of_their_task(tmp_path):
    """summary.json and the report pages read the run rows: every row keeps the line's metric, the training
    accuracy, the parameter count and the wall time, plus what its task keeps (token retrieval: the attention
    mass, which its finite-size form reads); no row keeps the loss or the step count."""
    generic = ["line", "seed", "config_hash", "accuracy", "train_accuracy", "param_count", "wall_time_s"]
    tr = experiment_from_dict(min_size_experiment(), "fake.toml")
    with ResultStore(tmp_path / "tr.db") as store:
        rows = [r.to_dict() for r in run_sweep(tr, store, LocalExecutor(ExtraMetrics()), log=None).runs]
    assert len(rows) > 10
    for row in rows:
        assert list(row) == ["line", "V", "d", "seed", "config_hash", "accuracy", "train_accuracy", "param_count",
                             "attention_mass", "wall_time_s"], row
    raw = {
        "name": "fake_cap", "task": "assoc_memory", "model": "linear", "trainer": "adamw", "kind": "max_capacity",
        "thresholds": [0.5], "lines": [{"scaling": "", "theory_scaling": "m=d", "label": "linear"}], "fixed": {"lr": 1.0, "steps": 10},
        "search": {"min": 2, "max": 100000, "start": "d**2/3"}, "presets": {"quick": {"d": [8, 16], "seeds": [0]}},
    }
    with ResultStore(tmp_path / "am.db") as store:
        rows = [r.to_dict() for r in run_sweep(experiment_from_dict(raw, "cap.toml"), store,
                                               LocalExecutor(ExtraMetrics()), log=None).runs]
    assert len(rows) > 3
    for row in rows:
        assert sorted(row) == sorted(generic + ["d", "N"]), row


def test_a_curve_search_shows_its_progress_curve_by_curve_with_each_round(store, capsys):
    """A curve search (Fig 1a's, minutes in the main job) showed no inner progress: the report's bar sat at its
    experiment. It now counts the curves settled and names each round's models."""
    exp = experiment_from_dict(curve_experiment(), "fake.toml")
    run_sweep(exp, store, LocalExecutor(FakeRunner()), progress=True, log=None)
    err = capsys.readouterr().err
    assert "curve" in err and "4/4" in err, err[-500:]  # four V values, one line: four curves
    assert "round " in err and " models" in err

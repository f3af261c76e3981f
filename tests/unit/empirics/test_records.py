"""The search's typed records write exactly the dicts the search wrote before them (same keys, same order, same
values): summary.json, the results store's exports and the report read those dicts. Each expected dict below
was printed by the search before its points became records."""
from __future__ import annotations

import json

from recallkit.empirics.records import BoundaryPoint, CheckKey, ProbeRun, Violation

LINE = "N=V*log(V), L=V**0.5"


def same(record, expected: dict) -> None:
    """Equal as dicts and written the same way (key order included)."""
    assert record.to_dict() == expected
    assert json.dumps(record.to_dict()) == json.dumps(expected)


def test_a_bisection_point_writes_its_old_dict_and_names_its_check():
    point = BoundaryPoint(
        experiment="fake_min", line=LINE, scaling=LINE, threshold=0.3, seed=0, base="V", base_value=64, size="d",
        values={"V": 64, "N": 266, "L": 8, "d": 8}, param_count=64, metric="accuracy",
        metric_value=0.37901758641600947, config_hash="47c043e570fe54ba", censored=False, censor_reason=None,
        non_monotone=False)
    same(point, {"experiment": "fake_min", "line": LINE, "scaling": LINE, "threshold": 0.3, "seed": 0, "V": 64,
                 "N": 266, "L": 8, "d": 8, "param_count": 64, "accuracy": 0.37901758641600947,
                 "config_hash": "47c043e570fe54ba", "censored": False, "censor_reason": None, "non_monotone": False})
    assert point.key == CheckKey("fake_min", LINE, "accuracy", 0.3)
    assert str(point.key) == f"fake_min [{LINE}, threshold 0.3]" and point.size_value == 8


def test_a_censored_point_without_an_answer_has_no_metric_or_run():
    point = BoundaryPoint(
        experiment="fake_min", line=LINE, scaling=LINE, threshold=0.7, seed=1, base="V", base_value=128, size="d",
        values={"V": 128, "d": None}, param_count=None, censored=True,
        censor_reason="probe at d=20 failed: RuntimeError: simulated failure at d=20", non_monotone=False)
    same(point, {"experiment": "fake_min", "line": LINE, "scaling": LINE, "threshold": 0.7, "seed": 1, "V": 128,
                 "d": None, "param_count": None, "censored": True,
                 "censor_reason": "probe at d=20 failed: RuntimeError: simulated failure at d=20",
                 "non_monotone": False})


def test_a_capacity_point_with_its_budget_check_keeps_the_base_first():
    check = {"line": "learned, R=4", "d": 7, "seed": 0, "threshold": 1.0, "key": "steps", "factor": 3.0, "N": 431,
             "answer": 362, "value": 3000, "config_hash": "705365bfff823925", "accuracy": 1.0, "reached": True}
    point = BoundaryPoint(
        experiment="geo_capacity", line="learned, R=4", scaling="R=4", threshold=1.0, seed=0, base="d", base_value=7,
        size="N", values={"d": 7, "N": 362, "R": 4}, param_count=5516, metric_value=1.0,
        config_hash="cfcc3a1641bd94b3", non_monotone=False, budget_check=check, budget_flagged=True, largest=True)
    same(point, {"experiment": "geo_capacity", "line": "learned, R=4", "scaling": "R=4", "threshold": 1.0, "seed": 0,
                 "d": 7, "N": 362, "R": 4, "param_count": 5516, "accuracy": 1.0, "config_hash": "cfcc3a1641bd94b3",
                 "censored": False, "censor_reason": None, "non_monotone": False, "budget_check": check,
                 "budget_flagged": True})


def test_a_seed_mean_curve_point_writes_its_old_dict():
    curve = {"sizes": [10, 32], "param_counts": [100.0, 1024.0], "seeds": [0, 1],
             "metric": [[0.02, 0.71], [0.01, 0.66]], "mean": [0.015, 0.685], "fitted": [0.015, 0.685],
             "failed_sizes": []}
    ceiling = {"line": LINE, "d": 32, "mean": 0.685, "per_seed": [0.71, 0.66]}
    censored = BoundaryPoint(
        experiment="fake_min", line=LINE, scaling=LINE, threshold=0.7, seed=None, base="V", base_value=256, size="d",
        values={"V": 256, "N": 1419, "L": 16, "d": 32}, param_count=1024.0, censored=True,
        censor_reason="the seed-mean curve did not reach 0.7 by d=32", relative=False, threshold_value=0.7,
        n_seeds=2, ceiling=ceiling, curve=curve, non_monotone=False)
    same(censored, {"experiment": "fake_min", "line": LINE, "scaling": LINE, "threshold": 0.7,
                    "threshold_relative": False, "threshold_value": 0.7, "seed": "mean", "n_seeds": 2, "V": 256,
                    "method": "curve", "N": 1419, "L": 16, "d": 32, "param_count": 1024.0, "censored": True,
                    "censor_reason": "the seed-mean curve did not reach 0.7 by d=32", "ceiling": ceiling,
                    "curve": curve, "non_monotone": False})
    found = BoundaryPoint(
        experiment="tr", line="x", scaling="x", threshold=0.5, seed=None, base="V", base_value=64, size="d",
        values={"V": 64, "N": 266, "d": 21.5, "m": 441.0}, param_count=9481.5, config_hash="ab", relative=True,
        threshold_value=0.4, n_seeds=2, bracket=(21, 22), ceiling=ceiling, curve=curve, non_monotone=True)
    same(found, {"experiment": "tr", "line": "x", "scaling": "x", "threshold": 0.5, "threshold_relative": True,
                 "threshold_value": 0.4, "seed": "mean", "n_seeds": 2, "V": 64, "method": "curve", "N": 266,
                 "d": 21.5, "param_count": 9481.5, "m": 441.0, "bracket": [21, 22], "config_hash": "ab",
                 "censored": False, "censor_reason": None, "ceiling": ceiling, "curve": curve, "non_monotone": True})
    assert found.seed_label == "mean" and found.key.relative and str(found.key) == "tr [x, threshold 0.5 x ceiling]"


def test_a_grid_point_and_a_grid_cell_write_their_old_dicts():
    point = BoundaryPoint(
        experiment="fake_min", line=LINE, scaling=LINE, threshold=0.3, seed=0, base="V", base_value=64, size="d",
        values={"V": 64, "N": 266, "L": 8, "d": 8}, param_count=64, metric_value=0.37901758641600947,
        config_hash="47c043e570fe54ba", censored=True, censor_reason="already reached 0.3 at the smallest grid d=8",
        non_monotone=False)
    same(point, {"experiment": "fake_min", "line": LINE, "scaling": LINE, "threshold": 0.3, "seed": 0, "V": 64,
                 "N": 266, "L": 8, "d": 8, "param_count": 64, "accuracy": 0.37901758641600947,
                 "config_hash": "47c043e570fe54ba", "censored": True,
                 "censor_reason": "already reached 0.3 at the smallest grid d=8", "non_monotone": False})
    cell = ProbeRun(line=LINE, base="V", base_value=64, size="d", size_value=8, seed=0,
                    config_hash="47c043e570fe54ba", metric="accuracy", metric_value=0.37901758641600947,
                    metrics={"train_accuracy": 0.37901758641600947, "param_count": 64, "wall_time_s": 0.0})
    same(cell, {"line": LINE, "V": 64, "d": 8, "seed": 0, "config_hash": "47c043e570fe54ba",
                "accuracy": 0.37901758641600947, "train_accuracy": 0.37901758641600947, "param_count": 64,
                "wall_time_s": 0.0})
    failed = ProbeRun(line=LINE, base="V", base_value=64, size="d", size_value=20, seed=1, config_hash="cd",
                      error="RuntimeError: simulated failure at d=20")
    same(failed, {"line": LINE, "V": 64, "d": 20, "seed": 1, "config_hash": "cd",
                  "error": "RuntimeError: simulated failure at d=20"})
    assert failed.measured == {}


def test_a_violation_writes_its_old_dict_in_both_directions():
    values = {5: 0.085, 8: 0.379, 42: 0.998, 96: 0.0}
    rising = Violation(line=LINE, base="V", base_value=64, seed=0, threshold=0.3, size="d", reached_at=8,
                       missed_at=[96], values=values)
    same(rising, {"line": LINE, "V": 64, "seed": 0, "threshold": 0.3, "reached_at": 8, "missed_at": [96],
                  "d_values": {"5": 0.085, "8": 0.379, "42": 0.998, "96": 0.0}})
    falling = Violation(line="l", base="d", base_value=8, seed=1, threshold=0.5, size="N", reached_at=[40, 60],
                        missed_at=30, values={60: 0.6, 30: 0.2, 40: 0.7}, largest=True)
    same(falling, {"line": "l", "d": 8, "seed": 1, "threshold": 0.5, "reached_at": [40, 60], "missed_at": 30,
                   "N_values": {"30": 0.2, "40": 0.7, "60": 0.6}})


def test_a_sweep_holds_records_and_writes_the_dicts_it_always_wrote(tmp_path):
    from recallkit.empirics.executors import LocalExecutor
    from recallkit.empirics.experiment import experiment_from_dict
    from recallkit.empirics.search import boundary_points, run_sweep
    from recallkit.empirics.store import ResultStore

    from tests.unit.empirics.test_search import FakeRunner, min_size_experiment

    exp = experiment_from_dict(min_size_experiment(), "fake.toml")
    with ResultStore(tmp_path / "s.db") as store:
        result = run_sweep(exp, store, LocalExecutor(FakeRunner(dip=(64, 96))), log=None)
        replayed = boundary_points(exp, store)
    assert result.points and all(isinstance(p, BoundaryPoint) for p in result.points)
    assert result.violations and all(isinstance(v, Violation) for v in result.violations)
    assert result.runs and all(isinstance(r, ProbeRun) for r in result.runs)
    doc = result.to_dict()
    first = dict(doc["boundary_points"][0])
    assert first.pop("config_hash") == result.points[0].config_hash
    # the sizes in the one order of theory.sizes.SIZE_SYMBOLS (V, N, d, L, m, R; before it, this record had its own)
    assert json.dumps(first) == json.dumps(
        {"experiment": "fake_min", "line": LINE, "scaling": LINE, "threshold": 0.3, "seed": 0, "V": 64, "N": 266,
         "d": 8, "L": 8, "param_count": 64, "accuracy": 0.37901758641600947, "censored": False,
         "censor_reason": None, "non_monotone": True})
    assert doc["monotonicity_violations"][0] == {
        "line": LINE, "V": 64, "seed": 0, "threshold": 0.3, "reached_at": 8, "missed_at": [96],
        "d_values": {"5": 0.08519761156606784, "7": 0.26350196815447546, "8": 0.37901758641600947,
                     "9": 0.49435323677875936, "10": 0.5984123020547849, "11": 0.6857005383842806,
                     "12": 0.7554955304511334, "14": 0.8512885125617706, "21": 0.9666443487355263,
                     "42": 0.9978479760196568, "96": 0.0}}
    assert list(doc["runs"][0]) == ["line", "V", "d", "seed", "config_hash", "accuracy", "train_accuracy",
                                    "param_count", "wall_time_s"]
    assert json.loads(json.dumps(doc)) == doc  # strictly JSON: no record left inside
    assert replayed == doc["boundary_points"]  # the public contract: one dict per point

"""The associative-memory anchor (Nichani, Lee, Bietti, ICLR 2025) on the SHIPPED experiment
files: their protocol values, and real capacity sweeps fitted against the assoc_memory pack
(log(param_count) on log(N ln N), slope 1) with the constant C in param_count = C * N ln N.

Default run: the linear memory's quick preset exactly as shipped (5 d values x 2 seeds, ~17 s of one
CPU thread). Slow: the MLP memory's quick preset (alpha = 4, 4 d values x 2 seeds, ~37 s) and the
linear memory at the protocol's own 2^12 steps (d = 8 ... 32, ~1 min). Measured numbers: docs/anchor.md.
"""
import math
import tomllib
from pathlib import Path

import pytest

import recallkit
from recallkit import compare
from recallkit.empirics.experiment import load_experiment, resolve_experiment

pytestmark = pytest.mark.integration

LINEAR = resolve_experiment("assoc_memory_linear")
MLP = resolve_experiment("assoc_memory_mlp")


def half_octaves(first: float, last: float) -> list[int]:
    """d = int(2**i) for i = first, first + 0.5, ..., last: the paper's grid, truncated as it does."""
    return [int(2 ** (k / 2)) for k in range(int(2 * first), int(2 * last) + 1)]


def _with_preset(source: Path, tmp_path: Path, name: str, body: str) -> Path:
    """The shipped file unchanged plus one more preset, so every protocol value comes from the file."""
    path = tmp_path / source.name
    path.write_text(source.read_text() + f"\n[presets.{name}]\n{body}\n")
    return path


def _check_constant(fit: dict) -> None:
    lo, hi = fit["C_ci"]
    assert all(math.isfinite(v) and v > 0 for v in (fit["C"], lo, hi))
    assert lo < fit["C"] < hi
    # C is exp(mean(log param_count - log(N ln N))) over the fitted points (slope fixed at 1).
    mean_log_ratio = sum(p["y"] - p["x"] for p in fit["points"]) / len(fit["points"])
    assert fit["C"] == pytest.approx(math.exp(mean_log_ratio), rel=1e-9)


@pytest.mark.parametrize("path, preset, steps", [
    (LINEAR, "paper", 2**12), (LINEAR, "medium", 2**12), (MLP, "paper", 2**15),
])
def test_paper_presets_keep_the_published_protocol(path, preset, steps):
    experiment = load_experiment(path, preset)
    raw = tomllib.loads(path.read_text())
    lr = 1000.0 if experiment.model == "linear" else 3e-2
    for line in experiment.lines:
        config = experiment.build_config(line, 16, 40, 0)
        assert (config["trainer"], config["lr"], config["steps"]) == ("adamw", lr, steps)
        assert (config["weight_decay"], config["early_stop"]) == (0.0, 0.99)
    assert experiment.kind == "max_capacity" and raw["thresholds"] == [0.99]
    assert len(raw["presets"][preset]["seeds"]) >= 3
    if preset == "paper":
        grid = half_octaves(3, 8) if experiment.model == "linear" else half_octaves(3, 6.5)
        assert raw["presets"]["paper"]["d"] == grid
        assert raw["presets"]["paper"]["search"]["resolution"] == 0.01  # the paper bisects to 1%
    if experiment.model == "mlp":
        widths = [experiment.build_config(line, 16, 40, 0)["m"] for line in experiment.lines]
        assert widths == [16, 32, 64, 128]  # m = alpha * d, alpha in {1, 2, 4, 8}


def test_linear_memory_quick_preset_reproduces_the_anchor(tmp_path):
    fitted = recallkit.assert_scaling(LINEAR, "consistent", store=tmp_path / "store.db", preset="quick")
    doc = fitted.to_dict()
    assert doc["sweep"]["computed"] > 0 and doc["sweep"]["failed"] == 0
    (fit,) = doc["fits"]
    assert fit["x"] == "log(N ln N)" and fit["predicted_slope"] == 1.0
    assert fit["n_points"] == 10 and fit["df_resid"] == 8 and not fit["censored"]
    _check_constant(fit)
    # The paper's own guide line is d^2 = 1.3 N ln N; ours sits within a factor 2 of it.
    assert 0.65 < fit["C"] < 2.6


@pytest.mark.slow
def test_mlp_memory_quick_preset_reproduces_the_anchor(tmp_path):
    # ~37 s of one CPU thread: too long for the default run next to the linear memory.
    fitted = recallkit.assert_scaling(MLP, "consistent", store=tmp_path / "store.db", preset="quick")
    (fit,) = fitted.to_dict()["fits"]
    assert fit["line"] == "alpha=4" and fit["n_points"] == 8 and not fit["censored"]
    _check_constant(fit)


@pytest.mark.slow
def test_linear_memory_at_the_protocols_step_count(tmp_path):
    # The protocol's 2^12 steps (the quick preset cuts them to 2^10): ~1 min of one CPU thread.
    # The finite-range slope is about 1.1 here (docs/anchor.md): one thread and fixed seeds give slope 1.137,
    # 95% CI [1.103, 1.171], across the band's upper edge 1.15, so the verdict is inconclusive.
    path = _with_preset(LINEAR, tmp_path, "protocol_steps",
                        "d = [8, 11, 16, 22, 32]\nseeds = [0, 1]\nsearch = { resolution = 0.1 }")
    fitted = recallkit.assert_scaling(path, "inconclusive", store=tmp_path / "store.db", preset="protocol_steps")
    (fit,) = fitted.to_dict()["fits"]
    assert fit["n_points"] == 10 and not fit["censored"]
    assert 0.9 < fit["slope"] < 1.3
    _check_constant(fit)

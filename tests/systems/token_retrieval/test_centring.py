"""The mean-bias-free ("centred") variant of token retrieval: config key ``centring`` (``none`` | ``labels``).

With ``centring = "labels"`` step 3's value update reads the training labels' embeddings minus their empirical
mean, u_{y_n} - u_hat, so the coefficients c'_kn = u_k . (u_{y_n} - u_hat) sum to zero over the training set and
the mean-bias terms of DERIVATION.md §4.2 (the shared trigger component times sum_n c_kn) vanish exactly
(DERIVATION.md §10). ``none`` is the default model, bit for bit (numbers pinned per math path).
"""
from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from recallkit.empirics.config import config_hash, parse_config, shape_key
from recallkit.empirics.engine import run_configs
from recallkit.empirics.tasks import build_problem
from recallkit.empirics.trainers import three_step
from recallkit.theory.errors import InputError

CPU = torch.device("cpu")
# the pinned config (one thread, float32)
PINNED = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=64, N=266, L=8, d=24, eta=1e-3,
              kappa=1.0, n_eval=512)


def test_default_centring_keeps_store_keys_and_labels_changes_them():
    assert config_hash(PINNED) == "fadea22ffd1d93ee"
    assert config_hash({**PINNED, "centring": "none"}) == "fadea22ffd1d93ee"
    assert "centring" not in parse_config({**PINNED, "centring": "none"}).to_dict()
    centred = parse_config({**PINNED, "centring": "labels"})
    assert centred.to_dict()["centring"] == "labels" and config_hash(centred.to_dict()) != "fadea22ffd1d93ee"
    # a centred and a plain model never share a batch (the problem reads the option from its first config)
    assert shape_key(centred) != shape_key(parse_config(PINNED))


def test_bad_centring_is_a_one_line_error():
    with pytest.raises(InputError) as info:
        parse_config({**PINNED, "centring": "mean"})
    assert str(info.value) == "centring: expected one of none, labels, got 'mean'"


def test_bad_centring_on_the_command_line_is_one_line_exit_2():
    exe = shutil.which("recallkit")
    assert exe, "the recallkit command is not installed"
    done = subprocess.run([exe, "train", "token_retrieval", "--model", "attention-only", "--trainer", "three_step",
                           "--set", "V=16", "--set", "N=50", "--set", "L=2", "--set", "d=4", "--set", "eta=0.001",
                           "--set", "gamma=1", "--set", "centring=both"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "centring" in lines[0] and "none, labels" in lines[0], lines[0]


def test_centring_other_than_three_step_is_refused():
    raw = {k: v for k, v in PINNED.items() if k not in ("eta", "kappa")}
    cfg = parse_config({**raw, "trainer": "adam", "lr": 0.01, "epochs": 1, "centring": "labels"})
    with pytest.raises(InputError) as info:
        build_problem([cfg], CPU)
    assert str(info.value).startswith("centring: ") and "three_step" in str(info.value)


# The default's numbers, per math path (empirics.numerics.math_path): MKL takes other kernels on an AMD CPU than
# on an Intel one at the same CNR branch, so bits are reproducible per path, not across vendors. First recorded
# before the option existed; recorded again when the attention-only model's steps 1 and 3 and its logits moved to
# label space (the read-out U V once per value matrix), which moved the sums in the 7th digit and one loss in the
# 8th, no accuracy. The Intel path's numbers are re-recorded on the next Intel machine (until then it skips).
# Each: (sum of V, sum of |V|, sum of W) after three steps, then (accuracy, train_accuracy, loss) per seed.
TODAYS_NUMBERS = {
    "cpu AVX512 AuthenticAMD, MKL_CBWR=AVX2": (
        (155290.42271995544, 6465190.954839706, 1.055866722470455),
        [(0.095703125, 0.19924812018871307, 8667.2373046875), (0.041015625, 0.10526315867900848, 15287.34375)]),
}


def test_none_reproduces_todays_numbers_bit_for_bit():
    from recallkit.empirics.numerics import math_path

    path = math_path()
    if path not in TODAYS_NUMBERS:
        pytest.skip(f"no numbers recorded for the math path {path!r} (recorded: {', '.join(TODAYS_NUMBERS)})")
    sums, metrics = TODAYS_NUMBERS[path]
    for extra in ({}, {"centring": "none"}):
        problem = build_problem([parse_config({**PINNED, **extra, "seed": s}) for s in (0, 1)], CPU)
        params, _ = three_step(problem, [1e-3] * 2, [None] * 2, [1.0] * 2)
        assert (params["V"].double().sum().item(), params["V"].double().abs().sum().item(),
                params["W"].double().sum().item()) == sums
    rows = run_configs([{**PINNED, "centring": "none", "seed": s} for s in (0, 1)], progress=False)
    assert [(r["accuracy"], r["train_accuracy"], r["loss"]) for r in rows] == metrics


def _label_mean_deviation(centring: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The label-mean deviation that step 3's value update carries, read off the trained update itself, and the
    empirical one u_hat - u_bar. d > V, so a vector w with e_v . w = 1 for every token and z_trig . w = 0 exists;
    every attended vector o_n = sum_j a_nj e_{x_nj} + a_n z_trig then has o_n . w = 1, and at eta -> 0 the update
    D = (V2 - V1) / gamma = (1/N) sum_n (u_{y_n} - centre) o_n^T + O(eta) gives D w = (1/N) sum_n (u_{y_n} - centre):
    the factor that multiplies the shared trigger component a_bar (z_trig . o) in the mean-bias terms."""
    raw = dict(task="token_retrieval", model="attention-only", trainer="three_step", V=16, N=200, L=4, d=24,
               eta=1e-6, gamma=1.0, n_eval=64, centring=centring)
    problem = build_problem([parse_config(raw)], CPU)
    params, _ = three_step(problem, [1e-6], [1.0], None)
    V1 = -1e-6 * problem.value_gradient_at_zero()
    D = (params["V"][0] - V1[0]).double()
    rows = torch.cat([problem.E[0], problem.z_trig]).double()
    target = torch.cat([torch.ones(16), torch.zeros(1)]).double()
    w = torch.linalg.lstsq(rows, target[:, None]).solution[:, 0]
    assert torch.allclose(rows @ w, target, atol=1e-9)
    U = problem.U[0].double()
    u_hat = U[problem.train["labels"][0]].mean(0)
    return D @ w, u_hat - U.mean(0)


def test_labels_centring_removes_the_mean_bias_component_of_step_three():
    plain, deviation = _label_mean_deviation("none")
    centred, same = _label_mean_deviation("labels")
    assert torch.equal(deviation, same)
    # the plain update carries the empirical label-mean deviation (norm ~ 1/sqrt(N)), so every label k gets the
    # mean bias u_k . (u_hat - u_bar) a_bar (z_trig . o); the centred update carries nothing of it
    assert deviation.norm() > 0.03
    assert torch.allclose(plain, deviation, atol=1e-3 * deviation.norm().item())
    assert centred.norm() < 1e-4 * deviation.norm(), (centred.norm(), deviation.norm())
    # the centred label vectors sum to zero over the training set: sum_n c'_kn = 0 for every label k
    problem = build_problem([parse_config(dict(PINNED, centring="labels"))], CPU)
    U = problem.U[0].double()
    targets = U[problem.train["labels"][0]]
    coefficients = U @ (targets - targets.mean(0)).T  # c'_kn [V, N]
    assert coefficients.sum(1).abs().max() < 1e-12 * coefficients.abs().sum(1).max()

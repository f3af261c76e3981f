"""The sample bound checked numerically (derivation §7.1): no trained model beats the exact ceiling.

Real runs of the engine (three-step GD with the derivation's schedule, and Adam long enough to fit
its training set) at N < V, where many test tokens were never seen in training, so the ceiling is
far below 1 and Adam comes close to it. Each run is judged against the ceiling of ITS training set,
(K + [K < V]) / V with K the distinct informative tokens it saw, with an exact one-sided binomial
tolerance for the finite evaluation set; the average over runs is judged against acc*(V, N).
The check can fail: an estimator that peeks at more samples than it was given is flagged.
"""
import math

import pytest
import torch

from recallkit.empirics.engine import run_configs
from recallkit.systems.token_retrieval.term_probes import schedule_expression
from recallkit.systems.token_retrieval.task import draw_samples
from recallkit.theory.errors import InputError
from recallkit.systems.token_retrieval.sample_bound import (ceiling_check, instance_ceiling, sample_bound_accuracy, sample_bound_bracket,
                                 sample_bound_exact)

pytestmark = pytest.mark.integration

N_EVAL = 4096
ALPHA = 1e-3


def seen_tokens(seed: int, V: int, N: int, L: int, stream: str = "train") -> set[int]:
    """The distinct informative tokens of a run's training samples (the engine's own draw)."""
    tokens, positions = draw_samples(seed, stream, N, V, L)
    return set(tokens.gather(1, positions[:, None])[:, 0].tolist())


def _configs():
    out = []
    for V, N in ((64, 40), (128, 96)):
        for seed in (0, 1):
            base = dict(task="token_retrieval", seed=seed, V=V, N=N, L=2, n_eval=N_EVAL)
            out.append(dict(base, model="attention-only", trainer="adam", d=64, lr=0.05, epochs=300))
            out.append(dict(base, model="attention-mlp", trainer="adam", d=32, m=256, features="relu_centred",
                            lr=0.02, epochs=300))
            out.append(dict(base, model="attention-only", trainer="three_step", d=64, eta=1e-3,
                            gamma=schedule_expression(3.0, 1e-3)))
    return out


@pytest.fixture(scope="module")
def runs(one_torch_thread_module):
    configs = _configs()
    return list(zip(configs, run_configs(configs, device="cpu", progress=False)))


def test_no_trained_model_beats_its_training_sets_ceiling(runs):
    gaps = []
    for cfg, metrics in runs:
        K = len(seen_tokens(cfg["seed"], cfg["V"], cfg["N"], cfg["L"]))
        check = ceiling_check(metrics["accuracy"], N_EVAL, instance_ceiling(cfg["V"], K), alpha=ALPHA)
        assert not check["violates"], (cfg, check)
        gaps.append(check["ceiling"] - metrics["accuracy"])
    # not vacuous: the ceiling binds (far below 1) and Adam gets close to it
    adam = [gap for (cfg, _), gap in zip(runs, gaps) if cfg["trainer"] == "adam"]
    assert min(adam) < 0.05
    assert all(instance_ceiling(c["V"], len(seen_tokens(c["seed"], c["V"], c["N"], c["L"]))) < 0.6 for c, _ in runs)


def test_average_over_runs_stays_below_the_expected_ceiling(runs):
    for V, N in ((64, 40), (128, 96)):
        accs = [m["accuracy"] for c, m in runs if (c["V"], c["N"]) == (V, N) and c["trainer"] == "adam"]
        pooled = round(sum(accs) / len(accs) * N_EVAL * len(accs)) / (N_EVAL * len(accs))
        check = ceiling_check(pooled, N_EVAL * len(accs), sample_bound_accuracy(V, N), alpha=ALPHA)
        assert not check["violates"], check


def _bayes_estimator_accuracy(seed, V, N, L, known: set[int]) -> float:
    """Right on every token in ``known``; a uniform guess among the other labels otherwise."""
    gen = torch.Generator().manual_seed(1000 + seed)
    tokens, positions = draw_samples(seed, "eval", N_EVAL, V, L)
    informative = tokens.gather(1, positions[:, None])[:, 0].tolist()
    unknown = V - len(known)
    guesses = torch.rand(N_EVAL, generator=gen).tolist()
    correct = sum(1 for x, g in zip(informative, guesses) if x in known or (unknown and g < 1 / unknown))
    return correct / N_EVAL


def test_the_check_flags_an_estimator_that_saw_more_than_its_samples():
    V, N, L = 128, 96, 2
    for seed in (0, 1):
        seen = seen_tokens(seed, V, N, L)
        ceiling = instance_ceiling(V, len(seen))
        # the Bayes-optimal estimator on its own samples sits at the ceiling and passes
        honest = _bayes_estimator_accuracy(seed, V, N, L, seen)
        assert abs(honest - ceiling) < 0.03
        assert not ceiling_check(honest, N_EVAL, ceiling, alpha=ALPHA)["violates"]
        # one that also memorised a second batch of N samples (a leak) beats the ceiling and is flagged
        leaked = seen | seen_tokens(seed, V, N, L, stream="leak")
        cheat = _bayes_estimator_accuracy(seed, V, N, L, leaked)
        flagged = ceiling_check(cheat, N_EVAL, ceiling, alpha=ALPHA)
        assert flagged["violates"] and flagged["p_value"] < 1e-6, flagged
        assert cheat > flagged["largest_accepted_accuracy"] > ceiling


def test_exact_ceiling_agrees_with_brute_force_and_the_float_paths():
    # brute force over all N-tuples of informative tokens: V = 4, N = 3 -> K <= 3 < V always
    V, N = 4, 3
    from itertools import product
    from fractions import Fraction

    total = sum(Fraction(len(set(t)) + (len(set(t)) < V), V) for t in product(range(V), repeat=N)) / V**N
    assert sample_bound_exact(V, N) == total
    for V, N in ((5, 7), (16, 40), (64, 300), (256, 1420)):
        exact = float(sample_bound_exact(V, N))
        lo, hi = sample_bound_bracket(V, N)
        assert lo <= exact + 1e-15 and exact - 1e-15 <= hi and hi - lo < 1e-12
        assert sample_bound_accuracy(V, N) == pytest.approx(exact, abs=1e-14)
    # a size beyond the exact budget: the Bonferroni bracket is tight, and P(some token unseen) matches
    # the Poisson approximation 1 - exp(-mu), mu = V (1 - 1/V)^N expected unseen tokens
    V, N = 4096, 4096 * 12
    lo, hi = sample_bound_bracket(V, N)
    seen_part = 1 - (1 - 1 / V) ** N
    mu = V * (1 - 1 / V) ** N
    assert hi - lo < 1e-12
    assert (lo - seen_part) * V == pytest.approx(1 - math.exp(-mu), rel=1e-2)
    assert sample_bound_accuracy(64, 40) == pytest.approx(1 - (63 / 64) ** 40 + 1 / 64)
    with pytest.raises(InputError, match="V: expected an integer >= 1"):
        sample_bound_accuracy(0, 5)
    with pytest.raises(InputError, match="seen: expected an integer in"):
        instance_ceiling(8, 9)
    assert math.isclose(instance_ceiling(8, 8), 1.0) and math.isclose(instance_ceiling(8, 3), 0.5)

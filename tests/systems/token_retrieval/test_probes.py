"""Term probes: the named components add up to the three-step logits, and the probe model is the engine's."""
import math

import pytest
import torch

from recallkit.empirics.experiment import resolve_experiment

from recallkit.systems.token_retrieval.term_probes import (COMPONENTS, PACK_TERM_COMPONENTS, accuracy_without, probe_rows, ProbeConfig, decompose, margin_parts, sample_bound_accuracy,
                             schedule_expression, schedule_gamma, spread_over_labels)
from recallkit.theory.errors import InputError

SMALL = dict(V=48, N=300, d=16, L=4, n_test=40)


@pytest.mark.parametrize("m, features", [(None, "relu_centred"), (64, "relu_centred"), (64, "relu"),
                                         (64, "relu_normalised")])
def test_components_add_up_to_the_logits(m, features):
    result = decompose(ProbeConfig(**SMALL, m=m, features=features))
    total = sum(result["components"].values())
    scale = result["logits"].abs().max()
    assert set(result["components"]) == set(COMPONENTS)
    assert torch.allclose(total, result["logits"], rtol=0, atol=1e-9 * float(scale))
    # the decomposition is not trivially one component: several carry weight
    spreads = spread_over_labels(result)
    assert sum(v["spread"] > 1e-3 * float(scale) for v in spreads.values()) >= 5


def test_signal_sits_only_on_the_correct_label_and_margin_parts_add_up():
    result = decompose(ProbeConfig(**SMALL))
    signal, labels = result["components"]["signal"], result["labels"]
    off = signal.clone()
    off[torch.arange(len(labels)), labels] = 0
    assert off.abs().max() == 0
    assert (signal[torch.arange(len(labels)), labels] >= 0).all()
    parts = margin_parts(result)
    margin = parts.pop("margin")
    assert torch.allclose(sum(parts.values()), margin, atol=1e-9 * float(result["logits"].abs().max()))


def test_step1_and_finite_eta_vanish_with_eta():
    big = decompose(ProbeConfig(**SMALL, eta=1e-1))
    small = decompose(ProbeConfig(**SMALL, eta=1e-4))
    def share(r, name):
        return float(r["components"][name].abs().max() / r["logits"].abs().max())
    assert share(small, "finite_eta") < share(big, "finite_eta") / 100
    assert share(small, "step1") < 1e-8


def test_schedule_sets_the_informative_attention_logit():
    # derivation §2: informative logit after step 2 ~ kappa (1 - 1/L) for attention-only
    for kappa in (1.0, 3.0):
        r = decompose(ProbeConfig(V=128, N=1500, d=64, L=8, kappa=kappa, n_test=64))
        assert r["kappa_measured"] == pytest.approx(kappa * (1 - 1 / 8), rel=0.3)


def test_probe_model_is_the_engines_model():
    from recallkit.empirics.engine import run_configs
    eta = 1e-3
    cfg = dict(task="token_retrieval", model="attention-only", trainer="three_step", seed=3, V=32, N=1000,
               d=32, L=2, eta=eta, gamma=schedule_expression(2.0, eta), n_eval=200)
    engine = run_configs([cfg], device="cpu", progress=False)[0]
    probe = decompose(ProbeConfig(V=32, N=1000, d=32, L=2, eta=eta, kappa=2.0, n_test=200, seed=3))
    assert probe["gamma"] == pytest.approx(schedule_gamma(2.0, eta, 32, 1000, 2))
    assert 0.3 < probe["accuracy"] < 0.7  # a regime where the comparison means something
    assert probe["accuracy"] == pytest.approx(engine["accuracy"], abs=3 / 200)
    assert probe["attention_informative"] == pytest.approx(engine["attention_mass"], rel=1e-3)


def test_sample_bound_matches_brute_force_and_simulation():
    # exact: V = 4, N = 3 -> at most 3 distinct tokens seen
    assert sample_bound_accuracy(4, 3) == pytest.approx(1 - (3 / 4) ** 3 + 1 / 4)
    V, N = 16, 40
    inclusion_exclusion = sum((-1) ** j * math.comb(V, j) * (1 - j / V) ** N for j in range(V + 1))
    assert sample_bound_accuracy(V, N) == pytest.approx(1 - (1 - 1 / V) ** N + (1 - inclusion_exclusion) / V)
    # Monte Carlo of the Bayes-optimal estimator: seen tokens right, unseen guessed among unseen labels
    gen = torch.Generator().manual_seed(0)
    trials, total = 4000, 0.0
    for _ in range(trials):
        seen = torch.zeros(V, dtype=torch.bool)
        seen[torch.randint(V, (N,), generator=gen)] = True
        unseen = int((~seen).sum())
        total += (V - unseen) / V + (1 / V if unseen else 0.0)
    assert total / trials == pytest.approx(sample_bound_accuracy(V, N), abs=0.01)


def test_bad_probe_config_is_one_line_error():
    with pytest.raises(InputError, match="features"):
        ProbeConfig(**SMALL, m=8, features="gelu")
    with pytest.raises(InputError, match="d: expected a positive integer"):
        ProbeConfig(V=8, N=8, d=0, L=2)


def test_signal_alone_recalls_exactly_the_tokens_seen_in_training():
    result = decompose(ProbeConfig(V=64, N=120, d=16, L=4, n_test=200))   # N < V: many unseen tokens
    noise = [name for name in COMPONENTS if name != "signal"]
    seen = result["seen_in_training"].double().mean()
    assert 0.5 < float(seen) < 0.95
    # seen tokens are all recalled; unseen ones are left with rounding residue (right only by chance)
    assert float(seen) <= accuracy_without(result, noise) <= float(seen) + 3 / 200
    signal = result["components"]["signal"]
    seen_rows = result["seen_in_training"]
    assert (signal[seen_rows].argmax(-1) == result["labels"][seen_rows]).all()
    assert accuracy_without(result, []) == result["accuracy"]
    with pytest.raises(InputError, match="unknown component"):
        accuracy_without(result, ["mean_biass"])


def test_gradient_noise_parts_scale_with_N_as_derived():
    # derivation §4.3: the token-grouped part does not depend on N; the noise-position part ~ N^-1/2
    def ratios(N):
        rows = probe_rows([ProbeConfig(V=128, N=N, d=32, L=16, kappa=1.0, n_test=128, seed=s) for s in (0, 1)])
        out = {}
        for name in ("grad_noise", "grad_noise_positions"):
            out[name] = sum(r["components"][name]["spread"] / r["components"]["signal"]["at_label"] for r in rows) / 2
        return out
    small, large = ratios(1000), ratios(4000)
    assert small["grad_noise"] / large["grad_noise"] == pytest.approx(1.0, abs=0.15)
    assert 1.6 < small["grad_noise_positions"] / large["grad_noise_positions"] < 2.6


def test_pack_terms_map_onto_probe_components():
    from recallkit.theory.pack import load_pack
    names = set()
    for pack in ("token_retrieval", "token_retrieval_attn"):
        names |= {term.name for term in load_pack(pack).terms}
    assert names == set(PACK_TERM_COMPONENTS)
    assert all(set(parts) <= set(COMPONENTS) for parts in PACK_TERM_COMPONENTS.values())


def test_probe_rows_are_plain_json():
    import json
    rows = probe_rows([ProbeConfig(**SMALL)])
    assert set(rows[0]["components"]) == set(COMPONENTS)
    assert json.loads(json.dumps(rows))[0]["norms"]["A_test"] > 0


def test_same_config_same_numbers():
    first, second = decompose(ProbeConfig(**SMALL, m=32)), decompose(ProbeConfig(**SMALL, m=32))
    assert torch.equal(first["logits"], second["logits"])
    assert all(torch.equal(first["components"][k], second["components"][k]) for k in COMPONENTS)


def test_term_sizes_sum_a_terms_components_on_the_packs_scale():
    from recallkit.systems.token_retrieval.term_probes import term_sizes, feature_scale
    cfg = ProbeConfig(**SMALL, m=64)
    result = decompose(cfg)
    assert result["common_factor"] == pytest.approx(result["gamma"] * feature_scale(cfg.features, 64, cfg.d, cfg.L))
    sizes = term_sizes(result)
    assert set(sizes) == set(PACK_TERM_COMPONENTS)
    labels = result["labels"]
    idx = torch.arange(len(labels))
    total = sum(result["components"][p] for p in PACK_TERM_COMPONENTS["embedding_crosstalk"]) / result["common_factor"]
    assert sizes["embedding_crosstalk"]["at_label"] == pytest.approx(float(total[idx, labels].mean()))
    wrong = total.clone()
    wrong[idx, labels] = 0.0
    assert sizes["embedding_crosstalk"]["max_wrong"] == pytest.approx(float(wrong.abs().max(dim=1).values.mean()))


def test_attention_fluctuation_parts_are_present_and_smaller_than_the_mean_parts():
    # derivation §4.2: a_n = mean + fluctuation; the exact sum is checked by test_components_add_up_to_the_logits
    result = decompose(ProbeConfig(**SMALL))
    model_parts = result["components"]
    for own, fluct in (("mean_bias", "mean_bias_attention"), ("mean_bias_counts", "mean_bias_counts_attention")):
        assert model_parts[fluct].abs().max() > 0
        assert model_parts[fluct].abs().max() < model_parts[own].abs().max()
    # the label's own trigger cross-talk sits on the diagonal part only: grouped part is other labels
    assert model_parts["trigger_crosstalk_grouped"].abs().max() > 0


def test_three_step_experiments_use_the_theorys_schedule():
    # The step-size schedule is part of the experiment config and of the theory, and is the same in both.
    # Every shipped three-step token-retrieval experiment must give schedule_gamma(kappa=1), or the measured
    # schedule kappa = 1 where the features have no linear part.
    from pathlib import Path
    from recallkit.empirics.config import evaluate
    from recallkit.empirics.experiment import load_experiment

    root = resolve_experiment("tr_probe").parent
    checked = 0
    for path in sorted(root.glob("tr_fig*.toml")):
        exp = load_experiment(path, "quick")
        if exp.trainer != "three_step":
            continue
        for line in exp.lines:
            cfg = exp.build_config(line, 256, 32, 0)
            sizes = {k: cfg[k] for k in ("V", "N", "d", "L", "m") if k in cfg}
            eta = evaluate(cfg["eta"], "eta", sizes)
            if "kappa" in cfg:  # the measured schedule: features without a linear part (README.md "kappa")
                assert cfg["kappa"] == 1.0 and "gamma" not in cfg and cfg["features"] == "abs_centred", path.name
                assert eta == pytest.approx(1e-3), path.name
                checked += 1
                continue
            gamma = evaluate(cfg["gamma"], "gamma", sizes)
            expected = schedule_gamma(1.0, eta, cfg["V"], cfg["N"], cfg["L"], cfg["d"], cfg.get("m"),
                                      cfg.get("features", "relu"))
            assert eta == pytest.approx(1e-3), path.name
            assert gamma == pytest.approx(expected, rel=1e-12), (path.name, line)
            checked += 1
    assert checked >= 4

"""compare.probe_fits: predicted exponents from the pack, fits and verdicts on rows with known exponents,
grid validation, and store reuse of probe rows."""
import json
import math

import numpy as np
import pytest
import sympy as sp

from recallkit.systems.token_retrieval.judge import (collect_rows, fit_terms, load_probe_grid, predicted_exponent, probe_config_hash,
                                probe_table, run_probe, term_exponents)
from recallkit.systems.token_retrieval.term_probes import NORMALISER_L_POWER, PACK_TERM_COMPONENTS, TERM_NORMALISERS
from recallkit.theory.errors import InputError
from recallkit.theory.pack import load_pack
from recallkit.theory.symbols import VARIABLES
from tests.experiment_texts import probe_grid

GRID_TOML = probe_grid(
    "probe_test", vary="{ V = [128, 256, 512, 1024], N = [2000, 4000, 8000], d = [16, 32, 64], L = [8, 16, 32] }",
    seeds="[0, 1, 2, 3]", n_test=16) + """[packs.token_retrieval_attn.presets.tiny]
base = { V = 32, N = 200, d = 8, L = 4 }
vary = { d = [8, 16, 32] }
seeds = [0, 1]
n_test = 8
"""


@pytest.fixture()
def grid_file(tmp_path):
    path = tmp_path / "probe.toml"
    path.write_text(GRID_TOML)
    return path


def test_exponents_are_read_off_the_pack_expression():
    term = {t.name: t for t in load_pack("token_retrieval_attn").terms}["grad_noise"]
    exponents, log_power = term_exponents(term.expr, ["V", "N", "d", "L"])
    assert exponents == {"V": sp.Rational(-1, 2), "N": 0, "d": -1, "L": sp.Rational(-3, 2)}
    assert log_power == sp.Rational(1, 2)
    # the spread over labels carries no union-bound log factor; the max over labels keeps it
    assert predicted_exponent(term, "V", "spread")["log_power"] == 0
    assert predicted_exponent(term, "V", "max_wrong")["log_power"] == 0.5
    assert predicted_exponent(term, "d", "max_wrong")["log_power"] == 0
    with pytest.raises(InputError, match="power law"):
        V, d = VARIABLES["V"], VARIABLES["d"]
        term_exponents(V + d, ["V"])


def _synthetic_rows(grid, exponents: dict[str, dict[str, float]], noise=0.05, seed=0):
    """Rows shaped like empirics.probes.probe_rows whose term sizes follow known power laws."""
    rng = np.random.default_rng(seed)
    rows = []
    for cfg in grid.configs():
        point = {"V": cfg.V, "N": cfg.N, "d": cfg.d, "L": cfg.L, "m": cfg.m or 1}
        terms = {}
        for name in PACK_TERM_COMPONENTS:
            powers = exponents.get(name, {})
            size = math.exp(sum(p * math.log(point[v]) for v, p in powers.items()) + noise * rng.standard_normal())
            terms[name] = {"at_label": size, "spread": size, "max_wrong": size}
        norms = {k: cfg.L ** p for k, p in NORMALISER_L_POWER.items()}   # asymptotic: no drift to correct
        rows.append({"config": {"V": cfg.V, "N": cfg.N, "d": cfg.d, "L": cfg.L, "m": cfg.m, "seed": cfg.seed},
                     "terms": terms, "norms": norms, "accuracy": 0.0, "threads": 1, "device": "cpu"})
    return rows


def _pack_exponents(pack):
    out = {}
    for term in pack.terms:
        exps, _ = term_exponents(term.expr, ["V", "N", "d", "L"])
        out[term.name] = {v: float(e) for v, e in exps.items()}
    return out


def test_rows_that_follow_the_pack_are_consistent_and_a_wrong_exponent_is_caught(grid_file):
    grid = load_probe_grid(str(grid_file), "token_retrieval_attn", "quick")
    pack = load_pack("token_retrieval_attn")
    right = _pack_exponents(pack)
    table = fit_terms(_synthetic_rows(grid, right), grid)
    assert {(e["term"], e["variable"]) for e in table} == {(t.name, v) for t in pack.terms for v in "VNdL"}
    assert all(e["verdict"] == "consistent" for e in table), [(e["term"], e["variable"], e["verdict_reason"]) for e in table
                                                              if e["verdict"] != "consistent"]
    wrong = {k: dict(v) for k, v in right.items()}
    wrong["grad_noise"]["d"] = -0.5          # e.g. a derivation that got the grouping wrong
    table = fit_terms(_synthetic_rows(grid, wrong), grid)
    verdicts = {(e["term"], e["variable"]): e for e in table}
    bad = verdicts[("grad_noise", "d")]
    assert bad["verdict"] == "inconsistent" and bad["fitted_exponent"] == pytest.approx(-0.5, abs=0.1)
    assert bad["drift_corrected"]["verdict"] == "inconsistent"
    assert verdicts[("grad_noise", "V")]["verdict"] == "consistent"


def test_drift_correction_divides_out_the_measured_attention(grid_file):
    # a signal ~ A_train A_test / V whose A is stuck at L^-0.8 (finite L) instead of L^-1
    grid = load_probe_grid(str(grid_file), "token_retrieval_attn", "quick")
    rows = _synthetic_rows(grid, {"signal": {"V": -1.0, "L": -1.6}}, noise=0.02)
    for row in rows:
        row["norms"]["A_train"] = row["norms"]["A_test"] = row["config"]["L"] ** -0.8
    entry = next(e for e in fit_terms(rows, grid) if (e["term"], e["variable"]) == ("signal", "L"))
    assert entry["verdict"] == "inconsistent" and entry["fitted_exponent"] == pytest.approx(-1.6, abs=0.05)
    assert entry["drift_corrected"]["verdict"] == "consistent"
    assert entry["drift_corrected"]["fitted_exponent"] == pytest.approx(-2.0, abs=0.05)
    assert TERM_NORMALISERS["signal"] == {"A_train": 1, "A_test": 1}


def test_joint_method_agrees_with_the_axis_fits_on_power_laws(grid_file):
    grid = load_probe_grid(str(grid_file), "token_retrieval_attn", "quick")
    rows = _synthetic_rows(grid, _pack_exponents(load_pack("token_retrieval_attn")))
    joint = fit_terms(rows, grid, method="joint")
    pack = load_pack("token_retrieval_attn")
    assert {(e["term"], e["variable"]) for e in joint} == {(t.name, v) for t in pack.terms for v in "VNdL"}
    assert all(e["verdict"] == "consistent" for e in joint)
    assert all("joint OLS" in e["method"] for e in joint)


@pytest.mark.parametrize("text, match", [
    ('[packs.token_retrieval_attn.presets.quick]\nbase = { V = 256, N = 4000, d = 32 }\nvary = { d = [8, 16, 32] }',
     "base: missing L"),
    ('[packs.token_retrieval_attn.presets.quick]\nbase = { V = 256, N = 4000, d = 32, L = 4 }\nvary = { m = [8, 16] }',
     r"vary\.m: expected a variable of base"),
    ('[packs.token_retrieval_attn.presets.quick]\nbase = { V = 256, N = 4000, d = 32, L = 4 }\nvary = { d = [8, -16] }',
     r"vary\.d: expected a non-empty list of positive integers"),
    ('[packs.token_retrieval_attn.presets.quick]\nbase = { V = 256, N = 4000, d = 32, L = 4 }\nvary = { d = [8] }\n'
     'seeds = [1, 1]', r"seeds: expected a non-empty list of distinct"),
])
def test_bad_grid_files_give_one_line_errors_naming_the_field(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=match) as info:
        load_probe_grid(str(path), "token_retrieval_attn", "quick")
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_unknown_pack_preset_or_file(grid_file):
    with pytest.raises(InputError, match="--preset: expected one of quick, tiny"):
        load_probe_grid(str(grid_file), "token_retrieval_attn", "huge")
    with pytest.raises(InputError, match="--pack: expected one of token_retrieval_attn"):
        load_probe_grid(str(grid_file), "token_retrieval", "quick")
    with pytest.raises(InputError, match="probe name"):
        load_probe_grid("no_such_probe")


def test_the_shipped_probe_file_loads_for_both_packs():
    for pack in ("token_retrieval_attn", "token_retrieval"):
        for preset in ("quick", "paper"):
            grid = load_probe_grid("token_retrieval", pack, preset)
            assert grid.kappa == 1.0 and grid.eta == 1e-3
            assert ("m" in grid.vary) == (pack == "token_retrieval")
            # Assumption 1 at every grid point: N >= V log V keeps the attention near e^kappa / L
            assert grid.points(), (pack, preset)
            assert all(p["N"] >= p["V"] * math.log(p["V"]) for p in grid.points())


def test_probe_rows_are_stored_and_reused(grid_file, tmp_path):
    from recallkit.empirics.store import ResultStore

    grid = load_probe_grid(str(grid_file), "token_retrieval_attn", "tiny")
    with ResultStore(tmp_path / "store.db") as store:
        first, counts = collect_rows(grid, store=store, code_version="test")
        assert counts == {"reused": 0, "computed": 6}
        second, counts = collect_rows(grid, store=store, code_version="test")
        assert counts == {"reused": 6, "computed": 0}
        assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
        stored = store.rows("probe_test")
        assert len(stored) == 6 and all(r["config"]["task"] == "token_retrieval_probe" for r in stored)
        assert all(r["threads"] == 1 and r["device"] == "cpu" for r in stored)
        # the key covers every knob of the probe: another n_test is another row
        assert probe_config_hash(stored[0]["config"]) == stored[0]["config_hash"]
    table = probe_table(str(grid_file), "token_retrieval_attn", "tiny", rows=second)
    assert {e["variable"] for e in table} == {"d"}
    assert all(isinstance(e["verdict"], str) and "fitted_exponent" in e for e in table)
    doc = run_probe(str(grid_file), "token_retrieval_attn", "tiny", rows=second)
    json.dumps(doc, allow_nan=False)


def test_terms_sharing_one_probe_component_say_so(tmp_path):
    path = tmp_path / "mlp.toml"
    path.write_text("""
[packs.token_retrieval.presets.quick]
base = { V = 256, N = 4000, d = 32, L = 16, m = 512 }
vary = { m = [128, 512, 2048], d = [16, 32, 64] }
seeds = [0, 1, 2]
""")
    grid = load_probe_grid(str(path), "token_retrieval", "quick")
    pack = load_pack("token_retrieval")
    exps = {t.name: {v: float(e) for v, e in term_exponents(t.expr, ["V", "N", "d", "L", "m"])[0].items()}
            for t in pack.terms}
    rows = _synthetic_rows(grid, exps)
    rng = np.random.default_rng(1)
    for row, cfg in zip(rows, grid.configs()):
        # the shared component follows the group-coherent mlp_noise (as measured, derivation §5.2)
        size = math.exp(-0.5 * math.log(cfg.m) - 0.5 * math.log(cfg.d) + 0.05 * rng.standard_normal())
        row["terms"]["mlp_noise"] = row["terms"]["mlp_noise_samples"] = {"at_label": 0.0, "spread": size, "max_wrong": size}
    table = {(e["term"], e["variable"]): e for e in fit_terms(rows, grid)}
    for name in ("mlp_noise", "mlp_noise_samples"):
        assert any("shares its probe component" in n for n in table[(name, "m")]["notes"])
    assert not any("shares" in n for n in table[("grad_noise", "m")]["notes"])
    # the two terms whose components the probes measure without their token coincidences say so; the others do not
    for name in ("noise_self", "grad_noise_positions"):
        assert any("without its exact token coincidences" in n for n in table[(name, "d")]["notes"])
    assert not any("coincidences" in n for n in table[("grad_noise", "d")]["notes"])
    # and the two whose components they measure without the exact hits (§11.5)
    for name in ("grad_noise", "localisation"):
        assert any("without the exact hits" in n for n in table[(name, "d")]["notes"])
    assert not any("exact hits" in n for n in table[("noise_self", "d")]["notes"])
    assert table[("mlp_noise", "m")]["verdict"] == "consistent"
    assert table[("grad_noise", "m")]["predicted_exponent"] == 0.0


def test_finite_size_prediction_explains_the_finite_l_softmax_and_still_catches_a_wrong_power(grid_file):
    """A signal ~ A(L)^2 / V with the exact finite-L softmax weight A = e^k/(e^k + L - 1) (k = 2) fits a raw L
    exponent far from the asymptotic -2 (inconsistent); against the finite-size prediction it is consistent.
    A term whose L power is really wrong stays inconsistent."""
    from recallkit.systems.token_retrieval.judge import finite_normalisers

    assert finite_normalisers(1, 3.0)["A_test"] == 1.0
    assert finite_normalisers(8, 0.0)["A_train"] == pytest.approx(1 / 8)
    n = finite_normalisers(16, 1.0)
    assert n["A_test"] == pytest.approx(math.e / (math.e + 15))
    assert n["t_test"] ** 2 == pytest.approx(n["A_test"] ** 2 + (1 - n["A_test"]) ** 2 / 15)
    grid = load_probe_grid(str(grid_file), "token_retrieval_attn", "quick")
    rows = _synthetic_rows(grid, {"grad_noise": {"L": -0.3}}, noise=0.02)
    for row in rows:
        L = row["config"]["L"]
        A = finite_normalisers(L, 2.0)["A_test"]
        row["kappa_measured"] = 2.0
        row["terms"]["signal"] = {k: A * A / row["config"]["V"] for k in ("at_label", "spread", "max_wrong")}
    table = {(e["term"], e["variable"]): e for e in fit_terms(rows, grid)}
    signal = table[("signal", "L")]
    assert signal["verdict"] == "inconsistent"
    assert signal["finite_size"]["verdict"] == "consistent"
    assert signal["finite_size"]["predicted_exponent"] == pytest.approx(signal["fitted_exponent"], abs=1e-6)
    wrong = table[("grad_noise", "L")]
    assert wrong["finite_size"]["verdict"] == "inconsistent"

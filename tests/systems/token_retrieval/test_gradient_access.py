"""The gradient-access lower bound of token retrieval (DERIVATION.md §7.4) and its numerical check.

The pack entry is a lower bound over a named class (estimators of the first gradient through Gaussian noise of
the sampling-noise level), so it takes part in the strongest-bound gaps; its exponent is checked at two (a, c)
points against the hand check of §7.4. The numerical check must be able to fail: a bound made too large on
purpose is reported as violated.
"""
from __future__ import annotations

import io
import json
import math

import pytest
import sympy as sp

from recallkit import theory
from recallkit.theory.symbols import EXPONENTS

a, c = EXPONENTS["a"], EXPONENTS["c"]
NAME = "first_gradient_access"


def _entry(pack: str) -> dict:
    regions = theory.compute_regions(theory.load_pack(pack)).to_dict()["regions"]
    (entry,) = {g["name"]: g for g in regions[0]["lower_bound_gaps"] if g["name"] == NAME}.values()
    return entry


def test_the_attention_pack_holds_the_gradient_access_bound_over_its_class():
    bounds = {bound.name: bound for bound in theory.load_pack("token_retrieval_attn").lower_bounds}
    bound = bounds[NAME]
    assert bound.kind == "lower-bound" and bound.provenance == "derived-here"
    assert "first gradient" in bound.bound_class and "Gaussian noise" in bound.bound_class
    assert "W = 0" in bound.bound_class and "§7.4" in bound.reference


def test_the_mlp_pack_does_not_take_the_attention_only_bound():
    # DERIVATION.md §7.4: the MLP's first gradient is d x m with a feature-dependent SNR, not derived here
    assert NAME not in {bound.name for bound in theory.load_pack("token_retrieval").lower_bounds}


def test_its_exponent_matches_the_hand_check_at_two_points():
    # §7.4: d^2 >= 2 alpha V^2 L ln V / N, so log_V d^2 = 2 + c - a with one power of log V:
    # (a, c) = (5/4, 1/2) gives 5/4 (above counting's 1), (3/2, 1/4) gives 3/4 (below it)
    entry = _entry("token_retrieval_attn")
    exponent = sp.sympify(entry["exponent"], locals={"a": a, "c": c})
    assert exponent.subs({a: sp.Rational(5, 4), c: sp.Rational(1, 2)}) == sp.Rational(5, 4)
    assert exponent.subs({a: sp.Rational(3, 2), c: sp.Rational(1, 4)}) == sp.Rational(3, 4)
    assert sp.sympify(entry["log_power"]) == 1


# ----------------------------------------------------------------------------- the numerical check

TINY = dict(lines=[{"a": 1.5, "c": 0.5}], decoders=("hungarian",), observations=("surrogate",), seeds=(0, 1))


def test_the_first_gradient_is_the_models_step_one_gradient():
    import torch

    from recallkit.empirics.config import parse_config
    from recallkit.empirics.tasks import build_problem
    from recallkit.systems.token_retrieval.gradient_access import first_gradient

    cfg = parse_config(dict(task="token_retrieval", model="attention-only", trainer="three_step", V=32, N=181, L=5, d=12,
                            eta=1e-3, kappa=1.0, seed=3))
    model_gradient = build_problem([cfg], torch.device("cpu")).value_gradient_at_zero()[0].double().numpy()
    fg = first_gradient(3, 32, 181, 5, 12)
    assert abs(fg.G + model_gradient).max() < 1e-5 * abs(fg.G).max()  # the descent direction: minus the gradient
    # S carries Pi: N L |S|^2 is about N/(V L) + 2/L + L/V (DERIVATION.md §7.4), here 181/160 + 0.4 + 0.16 = 1.69
    assert 0.8 * 1.69 < fg.snr < 1.25 * 1.69


def test_fano_nats_is_alpha_ln_v_factorial_minus_v_entropy():
    from recallkit.systems.token_retrieval.gradient_access import fano_nats

    assert abs(fano_nats(4, 0.5) - (0.5 * math.log(24) - 4 * math.log(2))) < 1e-12
    assert fano_nats(128, 0.1) < 10 < fano_nats(128, 0.5)  # the O(V) term: alpha = 0.1 is nearly vacuous at V = 128


def test_a_decoder_of_the_noisy_first_gradient_needs_at_least_the_bounds_d():
    from recallkit.systems.token_retrieval.gradient_access import check

    doc = check([32], **TINY)
    (row,) = doc["rows"]
    assert row["needed_d"] is not None and row["accuracy"] >= 0.5
    assert row["bound_d"] > 3 and row["needed_d"] >= row["bound_d"] and row["holds"] is True and doc["holds"] is True


def test_a_bound_too_large_is_reported_as_violated():
    from recallkit.systems.token_retrieval.gradient_access import check

    doc = check([32], scale=10.0, **TINY)
    (row,) = doc["rows"]
    assert row["needed_d"] < row["bound_d"] and row["holds"] is False
    assert doc["holds"] is False and doc["violated"] == ["hungarian/surrogate V=32"]


# ----------------------------------------------------------------------------- in the report

def _entry_of(doc: dict) -> dict:
    return {"name": "token_retrieval_gradient_access", "kind": "gradient_access", "title": "t", "check": doc}


def test_the_report_step_writes_the_check_and_its_page_and_rows(monkeypatch, tmp_path):
    from types import SimpleNamespace

    from matplotlib.figure import Figure

    from recallkit import registry
    from recallkit.systems.token_retrieval import gradient_access, pages, steps

    # the step's check, shrunk to the tiny instance (the real one runs V = 32, 64, 128 on both lines)
    monkeypatch.setattr(steps, "GRADIENT_ACCESS_CHECK", dict(V_values=(32,), **TINY))
    context = SimpleNamespace(settings=SimpleNamespace(experiments=[], system_options={}), log=io.StringIO(), store_path=str(tmp_path / "s.db"))
    entry = steps.gradient_access_entry(context)
    assert entry["kind"] == "gradient_access" and entry["check"]["holds"] is True
    # stored like a trained model: a second report reuses it (the real check takes about 25 s)
    assert context.log.getvalue().splitlines()[-1].startswith("token_retrieval_gradient_access: reused 0 / computed 1")
    monkeypatch.setattr(steps, "check", lambda **kwargs: pytest.fail("the stored check was computed again"))
    assert steps.gradient_access_entry(context)["check"] == json.loads(json.dumps(entry["check"]))
    assert context.log.getvalue().splitlines()[-1] == "token_retrieval_gradient_access: reused 1 / computed 0"
    off = SimpleNamespace(experiments=[], system_options={"token_retrieval": {"probes": False}})
    assert steps.gradient_access_entry(SimpleNamespace(settings=off, log=None)) is None
    kind = registry.page_kinds()["gradient_access"]
    assert "recallkit.systems.token_retrieval.steps:gradient_access_entry" in registry.get("token_retrieval").report_steps
    (page,) = registry.load_object(kind.pages)(entry, "Token retrieval")
    assert page[0] == "gradient-access" and isinstance(page[1](), Figure)
    (row,) = registry.load_object(kind.rows)(entry)
    assert row["verdict"] == "consistent" and row["experiment"] == "token_retrieval_gradient_access"
    assert "hungarian" in row["line"] and "S + W" in row["line"] and "bound" in row["verdict_reason"]
    # a bound too large: the same row is inconsistent
    (bad,) = pages.gradient_access_rows(_entry_of(gradient_access.check([32], scale=10.0, **TINY)))
    assert bad["verdict"] == "inconsistent" and "V=32" in bad["verdict_reason"]


def test_the_report_draws_the_gradient_access_page_and_lists_its_verdicts(tmp_path, monkeypatch):
    from recallkit.reports.pdf import build_report, summary_entries
    from recallkit.systems.token_retrieval.gradient_access import check

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    entry = _entry_of(check([32], **TINY))
    summary = {"schema": "recallkit.summary/1", "title": "gradient access",
               "provenance": {"code_version": "0.1.0+gabc", "date": "2026-11-30T09:00:00Z", "device": "cpu",
                              "threads": 1, "torch_version": "2.13.0", "preset": "quick"},
               "experiments": [entry]}
    path = build_report(summary, tmp_path, jobs=1)
    assert path.exists()
    stems = sorted(p.stem for p in (tmp_path / "figures").glob("*.pdf"))
    assert any(stem.endswith("gradient-access") for stem in stems), stems
    (row,) = summary_entries(summary)
    assert row["verdict"] == "consistent" and row["experiment"] == "token_retrieval_gradient_access"


def test_the_check_reports_its_progress_line_by_line():
    """The report's gradient-access step ran for minutes (359 s on a busy machine) with nothing said until the end."""
    from recallkit.systems.token_retrieval.gradient_access import check

    calls = []
    check([32, 48], progress=lambda done, total: calls.append((done, total)), **TINY)
    assert calls == [(1, 2), (2, 2)]  # one line, two V

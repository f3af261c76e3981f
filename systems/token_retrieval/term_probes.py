"""Term probes for token retrieval: split the logits after the three steps into named components.

The derivation (systems/token_retrieval/DERIVATION.md §3-§5) writes the logit of label k on a test
input after step 3 as a sum over training samples n of
    (gamma/N) * c_kn * <phi_n, phi>,   c_kn = u_k . (u_{y_n} - u_mean),
plus two pieces that vanish as eta -> 0 (the step-1 residue and the finite-eta softmax correction).
This module runs the three steps of the token-retrieval model in float64 on exactly the engine's instance and samples
(``model.draw_instance`` / ``model.draw_samples``), and returns every named
component as a tensor [n_test, V]; the components add up to the logits exactly (to rounding).

Attended vectors are split as o_n = a_n z_trig + t_n, t_n = a_n e_{x_n} + r_n (informative token
content plus the noise positions r_n), and the test vector as o = a z_trig + t. For attention-MLP the
feature inner product is split into the infinite-width kernel's linear part lambda * <o_n, o> (which is
decomposed like attention-only), its constant part (plain relu only), its nonlinear rest and the
finite-width fluctuation (MLP noise); see the derivation §5.

Components (keys of :func:`decompose`):
  signal             class-y samples whose informative token is the test token, e.x . e_x part
  mean_bias          training trigger component A_mean z_trig against the whole test vector, k != y_n
                     (A_mean = the training samples' mean attention on the informative position)
  mean_bias_counts   the same for the label's own samples (k = y_n): the label-count part
  mean_bias_attention        (a_n - A_mean) z_trig against the test vector, k != y_n: the attention's
                             token-to-token fluctuation (it moves with e_{x_n} . z_trig), grouped by token
  mean_bias_counts_attention the same for k = y_n
  trigger_crosstalk  training informative token a_n e_{x_n} against the test trigger a z_trig, k = y_n
  trigger_crosstalk_grouped  the same for k != y_n: grouped by token like grad_noise
  trigger_crosstalk_positions  training noise positions r_n against the test trigger
  grad_noise         a_n e_{x_n} . t for other-label samples (k != y_n), less grad_noise_label and grad_noise_hits
  grad_noise_hits    the same where the training informative token IS a noise token of the test input (the exact
                     hits of derivation §4.5, spread over the other labels through u_k . u_{y_n}): falls like
                     d^-1/2, not d^-1 (derivation §4.3)
  grad_noise_positions  r_n . t for other-label samples (k != y_n), where the tokens differ
  grad_noise_positions_coincidences  the same where a training noise token is a token of the test input:
                     through u_k . u_{y_n} only, so it falls like d^-1/2, not d^-1 (derivation §4.4)
  grad_noise_label   k != y_n, x_n = x: same informative token, other label (u_k . u_y overlap)
  token_crosstalk    k = y_n, x_n != x: informative-token overlap e_{x_n} . e_x
  localisation       k = y_n: training informative token against the test noise positions r, where the tokens differ
  localisation_hits  the same where they are equal: the exact hits of derivation §4.5 (the labels of the test's noise
                     tokens, d-free); in no pack term: the all-terms prediction takes them exactly
  noise_self         k = y_n: training noise positions r_n against the test content t, where the tokens differ
  noise_self_coincidences  the same where a training noise token IS a token of the test input (e . e = 1):
                     d-free, on average (1 - A) / (A^2 V) signal units per training sample of the label
                     (derivation §4.4); in no pack term: the all-terms prediction takes it exactly
  feature_mean       (relu only) the constant part of the relu kernel
  kernel_nonlinear   (mlp) kernel minus its linear and constant parts
  mlp_noise          (mlp) finite-width features minus the infinite-width kernel
  finite_eta         -(gamma/N) sum_n u_k . U^T (p_n - 1/V) <phi_n, phi>, O(eta)
  step1              u_k V1 phi, O(eta/gamma)
"""
from __future__ import annotations

import dataclasses
import math

import torch

from recallkit.empirics import cost
from recallkit.empirics.config import ModelTooLarge
from recallkit.systems.token_retrieval.model import draw_instance, draw_samples, feature_map, sample_labels
from recallkit.systems.token_retrieval.sample_bound import sample_bound_accuracy
# the tables and the config, written without torch in terms.py; re-exported, as callers and tests name them here
from recallkit.systems.token_retrieval.terms import (COMPONENTS, NORMALISER_L_POWER, PACK_TERM_COMPONENTS,
                                                     PROBE_FEATURES, RELU_VARIANCE, TERM_NORMALISERS, ProbeConfig,
                                                     feature_scale, schedule_expression, schedule_gamma)
from recallkit.theory.errors import InputError

__all__ = ["COMPONENTS", "NORMALISER_L_POWER", "PACK_TERM_COMPONENTS", "PROBE_FEATURES", "RELU_VARIANCE",
           "TERM_NORMALISERS", "ProbeConfig", "ThreeStepModel", "accuracy_without", "check_probe_work", "decompose",
           "feature_scale", "margin_parts", "probe_bytes", "probe_flops", "probe_rows", "sample_bound_accuracy",
           "schedule_expression", "schedule_gamma", "spread_over_labels", "term_sizes"]

class ThreeStepModel:
    """The token-retrieval model in float64 for one instance (same draws as the engine for the same seed)."""

    def __init__(self, cfg: ProbeConfig):
        self.cfg = cfg
        inst = draw_instance(cfg.seed, cfg.V, cfg.d, cfg.m)
        self.E = inst["E"].double()
        self.U = inst["U"].double()
        self.z = inst["z_trig"].double()
        self.q = inst["z_eos"].double()
        self.perm = inst["perm"]
        self.W1 = inst["W1"].double() if cfg.m is not None else None
        self.train = self._samples("train", cfg.N)
        self.test = self._samples("eval", cfg.n_test)

    def _samples(self, stream: str, n: int) -> dict[str, torch.Tensor]:
        tokens, positions = draw_samples(self.cfg.seed, stream, n, self.cfg.V, self.cfg.L)
        informative, labels = sample_labels(self.perm, tokens, positions)
        return {"tokens": tokens, "positions": positions, "informative": informative, "labels": labels}

    def attend(self, W: torch.Tensor, s: dict
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (o [n, d], a = attention on the informative position [n], r = noise-position part [n, d],
        the attention itself [n, L])."""
        h = self.E[s["tokens"]]                                          # [n, L, d]
        is_inf = torch.nn.functional.one_hot(s["positions"], self.cfg.L).double()
        h = h + is_inf[..., None] * self.z
        att = torch.softmax(h @ (W @ self.q), dim=-1)                   # [n, L]
        o = torch.einsum("nl,nld->nd", att, h)
        a = (att * is_inf).sum(-1)
        r = torch.einsum("nl,nld->nd", att * (1 - is_inf), self.E[s["tokens"]])
        return o, a, r, att

    def token_mass(self, att: torch.Tensor, s: dict, positions: str, scale: torch.Tensor,
                   sparse: bool = False) -> torch.Tensor:
        """[n, V]: the attention each sample gives each token of the vocabulary (times the sample's ``scale``),
        over its ``positions``: "noise", "informative" or "all" (a token that occurs twice gets both weights); sparse
        (COO, at most L entries a row) or dense."""
        informative = torch.nn.functional.one_hot(s["positions"], self.cfg.L).double()
        weights = {"noise": att * (1 - informative), "informative": att * informative, "all": att}[positions]
        weights = weights * scale[:, None]
        n, L = weights.shape
        if sparse:
            rows = torch.arange(n).repeat_interleave(L)
            return torch.sparse_coo_tensor(torch.stack([rows, s["tokens"].reshape(-1)]), weights.reshape(-1),
                                           (n, self.cfg.V), check_invariants=True).coalesce()
        return torch.zeros(n, self.cfg.V, dtype=torch.float64).scatter_add_(1, s["tokens"], weights)

    def features(self, o: torch.Tensor) -> torch.Tensor:
        return o if self.W1 is None else feature_map(o @ self.W1.T, self.cfg.features)

    def loss(self, phi: torch.Tensor, Vm: torch.Tensor) -> torch.Tensor:
        """The training loss at the training inputs' features ``phi`` (:meth:`features` of :meth:`attend`)."""
        return torch.nn.functional.cross_entropy(phi @ Vm.T @ self.U.T, self.train["labels"])

    def three_steps(self) -> dict[str, torch.Tensor]:
        """V1 = -eta grad_V L(0,0); W1 = -gamma grad_W L(V1,0); V2 = V1 - gamma grad_V L(V1,W1). Also
        ``train_side``, the training inputs' :meth:`attend` at W1, and ``train_features``, their features there.

        Steps 1 and 2 read the same attention (W = 0), made once with W's graph for step 2; step 3's attention at
        W1 is the one :func:`decompose` splits. Each is the very tensor a separate pass makes (same operations on
        the same values), at two fifths less of the attention's cost."""
        d = self.cfg.d
        width = d if self.W1 is None else self.cfg.m
        eta, gamma = self.cfg.eta, self.cfg.step_gamma
        W0 = torch.zeros(d, d, dtype=torch.float64, requires_grad=True)
        V0 = torch.zeros(d, width, dtype=torch.float64, requires_grad=True)
        at_zero = self.features(self.attend(W0, self.train)[0])
        (g,) = torch.autograd.grad(self.loss(at_zero, V0), [V0], retain_graph=True)
        V1 = -eta * g
        (g,) = torch.autograd.grad(self.loss(at_zero, V1), [W0])
        W1 = -gamma * g
        train_side = self.attend(W1, self.train)  # W1 carries no graph: nor does this
        train_features = self.features(train_side[0])
        Vleaf = V1.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.loss(train_features, Vleaf), [Vleaf])
        V2 = V1 - gamma * g
        return {"V1": V1, "W1": W1, "V2": V2, "train_side": train_side, "train_features": train_features}


def _kernel_parts(cfg: ProbeConfig, o_tr: torch.Tensor, o_te: torch.Tensor):
    """Infinite-width kernel of the features on (train, test) pairs -> (kernel, constant part,
    linear scale per train row, linear scale per test row): linear part = s_n s_i <o_n, o_i>."""
    m, d = cfg.m, cfg.d
    n_tr, n_te = o_tr.norm(dim=-1), o_te.norm(dim=-1)
    rho = ((o_tr @ o_te.T) / (n_tr[:, None] * n_te[None, :])).clamp(-1.0, 1.0)
    arc = torch.sqrt(1 - rho**2) + (math.pi - torch.arccos(rho)) * rho   # 1 + pi/2 rho + rho^2/2 + ...
    if cfg.features == "relu_normalised":
        kernel = m * (arc - 1) / (2 * math.pi * RELU_VARIANCE)
        scale = math.sqrt(m / (4 * RELU_VARIANCE))
        return kernel, torch.zeros_like(kernel), scale / n_tr, scale / n_te
    norms = n_tr[:, None] * n_te[None, :] * m / (2 * math.pi * d)
    constant = norms if cfg.features == "relu" else torch.zeros_like(norms)
    kernel = norms * (arc - 1) + constant
    scale = math.sqrt(m / (4 * d))
    return kernel, constant, scale * torch.ones_like(n_tr), scale * torch.ones_like(n_te)


@torch.no_grad()
def decompose(cfg: ProbeConfig) -> dict:
    """Run the three steps and split the test logits into the named components.

    Returns {"logits": [n_test, V], "components": {name: [n_test, V]}, "labels": [n_test],
    "accuracy": float, "attention_informative": float, "gamma": float, "kappa_measured": float}.
    """
    model = ThreeStepModel(cfg)
    with torch.enable_grad():
        steps = model.three_steps()
    V1, W1, V2 = steps["V1"], steps["W1"], steps["V2"]
    train_side, test_side = steps["train_side"], model.attend(W1, model.test)
    o_tr, o_te = train_side[0], test_side[0]
    phi_tr, phi_te = steps["train_features"], model.features(o_te)
    logits = phi_te @ V2.T @ model.U.T
    # exact split of V2: V1 + (gamma/N) sum_n U^T (e_{y_n} - p_n) phi_n^T
    C = model.U @ (model.U[model.train["labels"]] - model.U.mean(0)).T     # c_kn [V, N]
    F = phi_tr @ phi_te.T                                                    # <phi_n, phi_i> [N, n_test]
    w = cfg.step_gamma / cfg.N
    comp = _step_parts(model, V1, phi_tr, phi_te, F, w)
    scales, rest, constant, mlp = _feature_parts(cfg, o_tr, o_te, F)
    comp.update(_linear_components(model, C, w, train_side, test_side, scales))
    comp["feature_mean"] = w * (C @ constant).T
    comp["kernel_nonlinear"] = w * (C @ rest).T
    comp["mlp_noise"] = w * (C @ mlp).T
    return _decomposition(cfg, model, W1, logits, comp, train_side, test_side)


def _step_parts(model: ThreeStepModel, V1: torch.Tensor, phi_tr: torch.Tensor, phi_te: torch.Tensor, F: torch.Tensor,
                w: float) -> dict[str, torch.Tensor]:
    """The two components that vanish as eta -> 0: step 1's own logits and the finite-eta softmax correction."""
    U, V = model.U, model.cfg.V
    p = torch.softmax(phi_tr @ V1.T @ U.T, dim=-1)                          # [N, V]
    C_eta = -(U @ (U.T @ (p - 1.0 / V).T))                                   # [V, N]
    return {"step1": phi_te @ V1.T @ U.T, "finite_eta": w * (C_eta @ F).T}


def _feature_parts(cfg: ProbeConfig, o_tr: torch.Tensor, o_te: torch.Tensor, F: torch.Tensor):
    """((the linear part's scale per train row, per test row), the kernel's nonlinear rest, its constant part, the
    finite-width fluctuation): for attention-only the scales are 1 and the three parts 0."""
    if cfg.m is None:
        ones = (torch.ones(cfg.N, dtype=torch.float64), torch.ones(cfg.n_test, dtype=torch.float64))
        return ones, torch.zeros_like(F), torch.zeros_like(F), torch.zeros_like(F)
    kernel, constant, lin_tr, lin_te = _kernel_parts(cfg, o_tr, o_te)
    linear = (lin_tr[:, None] * lin_te[None, :]) * (o_tr @ o_te.T)
    return (lin_tr, lin_te), kernel - constant - linear, constant, F - kernel


def _linear_components(model: ThreeStepModel, C: torch.Tensor, w: float, train_side, test_side, scales
                       ) -> dict[str, torch.Tensor]:
    """The linear part's components: pair products of the scaled split vectors (a z_trig, a e_x, r) of the training
    and test inputs, weighted by c_kn over the label's own samples (k = y_n) or the others'."""
    (_, a_tr, r_tr, att_tr), (o_te, a_te, r_te, att_te) = train_side, test_side
    (lin_tr, lin_te), tr, te, z, V = scales, model.train, model.test, model.z, model.cfg.V
    ae = a_te * lin_te
    t_te = (a_te[:, None] * model.E[te["informative"]] + r_te) * lin_te[:, None]
    inf_tr = (a_tr * lin_tr)[:, None] * model.E[tr["informative"]]       # a_n e_{x_n}, scaled
    inf_te = (a_te * lin_te)[:, None] * model.E[te["informative"]]
    rr_tr, rr_te = r_tr * lin_tr[:, None], r_te * lin_te[:, None]
    diag = (tr["labels"][None, :] == torch.arange(V)[:, None]).double()     # [V, N]: y_n = k
    same_token = (tr["informative"][:, None] == te["informative"][None, :]).double()  # [N, n_test]
    EE = inf_tr @ inf_te.T
    Cd, Co = C * diag, C * (1 - diag)

    def s(coeff: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        return w * (coeff @ pairs).T                                        # [n_test, V]

    comp = _trigger_components(s, Cd, Co, C, a_tr * lin_tr, (z @ (o_te * lin_te[:, None]).T)[None, :],
                               (inf_tr @ z)[:, None] * ae[None, :], (rr_tr @ z)[:, None] * ae[None, :])
    comp["grad_noise_label"] = s(Co, EE * same_token)
    # a training informative token that is a noise token of the test input adds a_n beta_j (e . e = 1): the exact
    # hits (derivation §4.5), by the token matches of each training sample's informative mass with each test input's
    # noise mass
    hits = torch.sparse.mm(model.token_mass(att_tr, tr, "informative", lin_tr, sparse=True),
                           model.token_mass(att_te, te, "noise", lin_te).T)
    comp["grad_noise_hits"] = s(Co, hits)
    comp["grad_noise"] = s(Co, inf_tr @ t_te.T) - comp["grad_noise_label"] - comp["grad_noise_hits"]
    comp["signal"] = s(Cd, EE * same_token)
    comp["token_crosstalk"] = s(Cd, EE * (1 - same_token))
    comp["localisation_hits"] = s(Cd, hits)
    comp["localisation"] = s(Cd, inf_tr @ rr_te.T) - comp["localisation_hits"]
    # a training noise token equal to a token of the test input adds e . e = 1, not O(1/sqrt(d)): its own, d-free part
    # (derivation §4.4), by the exact token matches: the [N, V] noise mass of each training sample against the
    # [n_test, V] mass of each test input (its t: every position, the informative one included)
    matches = torch.sparse.mm(model.token_mass(att_tr, tr, "noise", lin_tr, sparse=True),
                              model.token_mass(att_te, te, "all", lin_te).T)
    positions = rr_tr @ t_te.T
    comp["noise_self_coincidences"] = s(Cd, matches)
    comp["noise_self"] = s(Cd, positions) - comp["noise_self_coincidences"]
    comp["grad_noise_positions_coincidences"] = s(Co, matches)
    comp["grad_noise_positions"] = s(Co, positions) - comp["grad_noise_positions_coincidences"]
    return comp


def _trigger_components(s, Cd, Co, C, at, z_test, trigger_pairs, position_pairs) -> dict[str, torch.Tensor]:
    """The components through the trigger z_trig: the mean bias (the training trigger against the test vector) and
    the trigger crosstalk (the training content against the test trigger)."""
    # a_n = mean + fluctuation: the fluctuation of the informative attention across tokens (it moves
    # with e_{x_n} . z_trig) is a separate, token-grouped term (derivation §4.2, §4.6)
    at_mean = at.mean()
    shared = at_mean * z_test.expand(len(at), -1)
    shared_fluctuation = (at - at_mean)[:, None] * z_test
    return {"mean_bias": s(Co, shared), "mean_bias_counts": s(Cd, shared),
            "mean_bias_attention": s(Co, shared_fluctuation), "mean_bias_counts_attention": s(Cd, shared_fluctuation),
            "trigger_crosstalk": s(Cd, trigger_pairs), "trigger_crosstalk_grouped": s(Co, trigger_pairs),
            "trigger_crosstalk_positions": s(C, position_pairs)}


def _decomposition(cfg: ProbeConfig, model: ThreeStepModel, W1: torch.Tensor, logits: torch.Tensor,
                   comp: dict[str, torch.Tensor], train_side, test_side) -> dict:
    """decompose's document: the logits, the components in :data:`COMPONENTS`' order, the measured normalisers."""
    (o_tr, a_tr, r_tr, _), (o_te, a_te, r_te, _) = train_side, test_side
    tr, te, gamma = model.train, model.test, cfg.step_gamma
    labels = te["labels"]
    informative_logit = (model.E[te["informative"]] + model.z) @ (W1 @ model.q)
    return {
        "logits": logits,
        "components": {k: comp[k] for k in COMPONENTS},
        "labels": labels,
        "accuracy": float((logits.argmax(-1) == labels).double().mean()),
        "attention_informative": float(a_te.mean()),
        "gamma": gamma,
        # gamma * lambda multiplies every term of the packs (derivation §2.2, §5.2); lambda = 1 attention-only
        "common_factor": gamma * feature_scale(cfg.features, cfg.m, cfg.d, cfg.L),
        "kappa_measured": float(informative_logit.mean()),
        "seen_in_training": torch.isin(te["informative"], tr["informative"]),
        # the normalisers of the derivation's orders (§4): A, |r|, |t| measured, train and test
        "norms": {"A_train": float(a_tr.mean()), "A_test": float(a_te.mean()),
                  "r_train": float(r_tr.norm(dim=-1).pow(2).mean().sqrt()),
                  "r_test": float(r_te.norm(dim=-1).pow(2).mean().sqrt()),
                  "t_train": float((a_tr[:, None] * model.E[tr["informative"]] + r_tr).norm(dim=-1).pow(2).mean().sqrt()),
                  "t_test": float((a_te[:, None] * model.E[te["informative"]] + r_te).norm(dim=-1).pow(2).mean().sqrt()),
                  "o_train": float(o_tr.norm(dim=-1).pow(2).mean().sqrt()),
                  "o_test": float(o_te.norm(dim=-1).pow(2).mean().sqrt())},
    }


def margin_parts(result: dict) -> dict[str, torch.Tensor]:
    """Each component's share of the correct-label margin f_y - f_k*, k* the best wrong label
    (taken from the full logits): {name: [n_test]} plus "margin"; the shares add up to the margin."""
    logits, labels = result["logits"], result["labels"]
    wrong = logits.clone()
    wrong[torch.arange(len(labels)), labels] = -torch.inf
    runner_up = wrong.argmax(-1)
    idx = torch.arange(len(labels))
    parts = {k: c[idx, labels] - c[idx, runner_up] for k, c in result["components"].items()}
    parts["margin"] = logits[idx, labels] - logits[idx, runner_up]
    return parts


def spread_over_labels(result: dict) -> dict[str, float]:
    """Per component: mean over test inputs of the signal value (label y) and the standard deviation
    over wrong labels (the noise scale that the union bound multiplies by sqrt(2 log V))."""
    labels = result["labels"]
    idx = torch.arange(len(labels))
    out = {}
    for name, c in result["components"].items():
        at_label = c[idx, labels]
        mask = torch.ones_like(c, dtype=torch.bool)
        mask[idx, labels] = False
        wrong = c[mask].reshape(len(labels), -1)
        out[name] = {"at_label": float(at_label.mean()), "spread": float(wrong.std(dim=1).mean())}
    return out


def term_sizes(result: dict, term_components: dict | None = None) -> dict[str, dict]:
    """Per pack term (PACK_TERM_COMPONENTS): the size of the SUM of its components, divided by the
    common factor gamma * lambda (lambda the feature scale, 1 for attention-only) so that it is on the
    scale of the pack's expressions:
    ``at_label`` (mean over test inputs of the value at the correct label: the signal's size),
    ``spread`` (mean over test inputs of the standard deviation over the wrong labels: a noise
    term's per-label scale, without the union-bound factor sqrt(2 log V)), and ``max_wrong`` (mean
    over test inputs of the largest |value| over the wrong labels: the union bound measured)."""
    term_components = PACK_TERM_COMPONENTS if term_components is None else term_components
    labels = result["labels"]
    idx = torch.arange(len(labels))
    common = result["common_factor"]
    out = {}
    for term, parts in term_components.items():
        c = sum(result["components"][p] for p in parts) / common
        mask = torch.ones_like(c, dtype=torch.bool)
        mask[idx, labels] = False
        wrong = c[mask].reshape(len(labels), -1)
        out[term] = {"at_label": float(c[idx, labels].mean()), "spread": float(wrong.std(dim=1).mean()),
                     "max_wrong": float(wrong.abs().max(dim=1).values.mean())}
    return out


def accuracy_without(result: dict, names) -> float:
    """Test accuracy after removing the named components from the logits (an ablation: how much a
    term costs at this size). Removing every component but ``signal`` leaves the fraction of test
    inputs whose informative token was seen in training."""
    unknown = sorted(set(names) - set(result["components"]))
    if unknown:
        raise InputError(f"accuracy_without: unknown component(s) {', '.join(unknown)}; "
                         f"expected names from {', '.join(COMPONENTS)}")
    logits = result["logits"] - sum(result["components"][n] for n in names)
    return float((logits.argmax(-1) == result["labels"]).double().mean())


def probe_rows(configs: list[ProbeConfig]) -> list[dict]:
    """One plain JSON-ready row per config: the config, accuracy, the measured normalisers, per
    component its mean at the correct label and its spread over the wrong labels, and per pack term
    the sizes of :func:`term_sizes` (divided by gamma; what compare.probe_fits fits)."""
    rows = []
    for cfg in configs:
        result = decompose(cfg)
        rows.append({"config": dataclasses.asdict(cfg), "gamma": result["gamma"],
                     "common_factor": result["common_factor"], "accuracy": result["accuracy"],
                     "kappa_measured": result["kappa_measured"], "norms": result["norms"],
                     "threads": torch.get_num_threads(), "device": "cpu",
                     "components": spread_over_labels(result), "terms": term_sizes(result)})
    return rows


# ----------------------------------------------------------------------------- price of a grid
PROBE_FLOAT_BYTES = 8
# The probes compute in float64, at half float32's matmul rate (empirics.cost.CPU_MATMUL_GFLOPS), and reach
# this fraction of it: the 55 rows of the main job's cold store took 32 s where their FLOPs at a rate of 213 GFLOP/s
# take 7 (0.15); the cost model's rate is now the measured 68 GFLOP/s, so the same measurement gives 0.15 * 213 / 68.
PROBE_EFFICIENCY = 0.15 * 213.0 / 68.0


def probe_flops(cfg: ProbeConfig) -> float:
    """FLOPs (2 per multiply-add) of one probe row: the three steps (three losses, each a forward and a
    backward of about twice its work) and the decomposition, whose [V, N] x [N, n_test] products dominate."""
    N, n, V, L, d, m = cfg.N, cfg.n_test, cfg.V, cfg.L, cfg.d, cfg.m or 0
    w = m or d
    steps = 9 * N * (3 * L * d + m * d + w * d + d * V)
    split = (3 * (N + n) * L * d + (N + n) * m * d + (N + 2 * n) * (w * d + d * V) + 3 * V * N * d
             + N * n * (w + 8 * d + L) + 19 * V * N * n)
    return 2.0 * (steps + split)


def probe_bytes(cfg: ProbeConfig) -> int:
    """Peak memory of one probe row, from its largest float64 tensors alive at once: in the three steps the
    autograd's [N, L, d] gathers of the attention and the MLP's [N, m] features, with the [N, V] logits and
    softmax; in the decomposition the [V, N] coefficient matrices, the [N, n_test] pair products and the
    [n_test, V] components; plus the instance and the int64 samples. Against the peak RSS of a fresh process
    (one thread) it was 3-12% above on four rows of 150 MiB to 2 GiB (attention-only and MLP): enough to
    refuse a grid that cannot fit before its first row."""
    N, n, V, L, d, m = cfg.N, cfg.n_test, cfg.V, cfg.L, cfg.d, cfg.m or 0
    f = PROBE_FLOAT_BYTES
    instance = f * (2 * V * d + 2 * d + m * d) + 8 * V
    samples = 8 * (N + n) * (L + 3)
    steps = f * (3 * N * L * d + 3 * N * m + 3 * N * V)
    split = f * (2 * N * L * d + 2 * N * m + 6 * V * N + 16 * N * n + 22 * n * V)
    return instance + samples + max(steps, split)


def check_probe_work(configs: list[ProbeConfig], what: str = "probe") -> None:
    """Refuse, in one line and before the first row is computed, probe rows that would not fit in the memory
    free now (naming the largest config, its estimate and what is free) or whose estimated time passes the
    cost limit (``empirics.cost``: the open budget, else ``--max-cost`` / $RECALLKIT_MAX_COST / 2 h)."""
    if not configs:
        return
    largest = max(configs, key=probe_bytes)
    need = probe_bytes(largest)
    free, bound = cost.free_memory()
    if need > free:
        sizes = ", ".join(f"{k}={getattr(largest, k)}" for k in ("V", "N", "d", "L", "m", "n_test")
                          if getattr(largest, k) is not None)
        raise ModelTooLarge(f"{what}: one probe row ({sizes}) needs about {need / 2**30:,.1f} GiB, more than the "
                            f"{free / 2**30:,.1f} GiB {bound}")
    rate = cost.CPU_MATMUL_GFLOPS * 1e9 / 2 * PROBE_EFFICIENCY
    flops = sum(probe_flops(c) for c in configs)
    cost.charge(cost.Estimate(len(configs), flops, flops / rate + cost.MODEL_SECONDS * len(configs)), what)

"""The term probes' tables and config, without torch: which probe components each pack term predicts, the
measured normalisers each term's size is proportional to, the derivation's step-size schedule and the term-probe
config (:class:`ProbeConfig`). ``term_probes`` (the float64 model, torch) and the pure finite-size numbers
(``finite_size``, ``all_terms``) both read them; importing this module imports no torch."""
from __future__ import annotations

import math
from dataclasses import dataclass

from recallkit.theory.errors import InputError

# the variables a probe grid point names (the pack's sizes; m only for the MLP packs)
GRID_VARIABLES = ("V", "N", "d", "L", "m")
# the feature maps the term probes decompose (the model also has abs_centred, config.FEATURES; no probe form for it)
PROBE_FEATURES = ("relu", "relu_centred", "relu_normalised")
RELU_VARIANCE = 0.5 - 1.0 / (2.0 * math.pi)  # Var relu(g), g ~ N(0, 1)

COMPONENTS = ("signal", "mean_bias", "mean_bias_counts", "mean_bias_attention", "mean_bias_counts_attention",
              "trigger_crosstalk", "trigger_crosstalk_grouped", "trigger_crosstalk_positions",
              "grad_noise", "grad_noise_hits", "grad_noise_positions", "grad_noise_positions_coincidences",
              "grad_noise_label", "token_crosstalk", "localisation", "localisation_hits", "noise_self",
              "noise_self_coincidences", "feature_mean",
              "kernel_nonlinear", "mlp_noise", "finite_eta", "step1")

# pack term (theory/packs/token_retrieval*.toml) -> probe components whose sum it predicts.
# mlp_noise and mlp_noise_samples share one component (the finite-width fluctuation cannot be split
# exactly into its group-coherent and per-sample parts): fit each only where it dominates.
PACK_TERM_COMPONENTS = {
    "signal": ("signal",),
    "mean_bias": ("mean_bias",),
    "mean_bias_counts": ("mean_bias_counts",),
    "grad_noise": ("grad_noise",),
    "grad_noise_positions": ("grad_noise_positions",),
    "noise_self": ("noise_self",),
    "localisation": ("localisation",),
    "embedding_crosstalk": ("grad_noise_label", "token_crosstalk", "trigger_crosstalk", "mean_bias_counts_attention"),
    "trigger_overlap": ("trigger_crosstalk_grouped", "mean_bias_attention"),
    "trigger_crosstalk_positions": ("trigger_crosstalk_positions",),
    "mlp_noise": ("mlp_noise",),
    "mlp_noise_samples": ("mlp_noise",),
}

# pack term -> the measured normalisers its size is proportional to (derivation §4, §5.2): A = attention
# on the informative position, r = noise-position part, t = content part, o = attended vector; train
# and test sides. The pack's powers of L are these at their asymptotic sizes A ~ e^kappa / L and
# |r| ~ |t| ~ |o| ~ L^-1/2 (L >> e^kappa); at CPU sizes A is still far from that (derivation §8), so
# compare.probe_fits also fits each size with the measured normalisers swapped for the asymptotic ones.
TERM_NORMALISERS = {
    "signal": {"A_train": 1, "A_test": 1},
    "mean_bias": {"A_train": 1, "A_test": 1},
    "mean_bias_counts": {"A_train": 1, "A_test": 1},
    "grad_noise": {"A_train": 1, "t_test": 1},
    "grad_noise_positions": {"r_train": 1, "t_test": 1},
    "noise_self": {"r_train": 1, "t_test": 1},
    "localisation": {"A_train": 1, "r_test": 1},
    "embedding_crosstalk": {"A_train": 1, "A_test": 1},
    "trigger_overlap": {"A_train": 1, "A_test": 1},
    "trigger_crosstalk_positions": {"r_train": 1, "A_test": 1},
    "mlp_noise": {"A_train": 1, "o_test": 1},
    "mlp_noise_samples": {"o_train": 1, "o_test": 1},
}
# the asymptotic L-power of each normaliser (constants such as e^kappa dropped)
NORMALISER_L_POWER = {"A_train": -1.0, "A_test": -1.0, "r_train": -0.5, "r_test": -0.5, "t_train": -0.5,
                      "t_test": -0.5, "o_train": -0.5, "o_test": -0.5}


def feature_scale(features: str | None, m: int | None, d: int, L: int) -> float:
    """lambda: the features' kernel is about lambda * <o, o'> for nearly orthogonal inputs at the
    uniform attention of step 1 (derivation §2, §5); 1 for attention-only."""
    if m is None:
        return 1.0
    if features == "relu_normalised":
        # per-sample standardised units: kernel m rho / (4 Var relu), |o|^2 ~ (L + 1) / L^2 at W = 0
        return m * L**2 / (4 * RELU_VARIANCE * (L + 1))
    return m / (4.0 * d)


def schedule_gamma(kappa: float, eta: float, V: int, N: int, L: int, d: int = 1, m: int | None = None,
                   features: str | None = None) -> float:
    """The derivation's step-size schedule (§2): gamma such that the informative attention logit
    after step 2 is about kappa (1 - 1/L): gamma * eta * lambda = kappa * L**2 / (1/V + 1/N)."""
    return kappa * L**2 / (eta * (1.0 / V + 1.0 / N) * feature_scale(features, m, d, L))


def schedule_expression(kappa: float, eta: float, model: str = "attention-only", features: str = "relu_centred") -> str:
    """The same schedule as a gamma expression in V, N, d, L, m for run configs (empirics.config),
    so that experiments and probes use one schedule: gamma = kappa L^2 / (eta lambda (1/V + 1/N))."""
    c = repr(float(kappa) / float(eta))
    if model == "attention-only":
        return f"{c}*L**2/(1/V + 1/N)"
    if features == "relu_normalised":
        return f"{c}*4*{RELU_VARIANCE!r}*(L + 1)/(m*(1/V + 1/N))"
    return f"{c}*4*d*L**2/(m*(1/V + 1/N))"


@dataclass(frozen=True)
class ProbeConfig:
    V: int
    N: int
    d: int
    L: int
    m: int | None = None          # None: attention-only
    features: str = "relu_centred"
    eta: float = 1e-3
    kappa: float = 1.0            # gamma = schedule_gamma(...) unless gamma is given; derivation §2.2
    gamma: float | None = None
    n_test: int = 256
    seed: int = 0

    def __post_init__(self):
        for key in ("V", "N", "d", "L", "n_test"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"probe config: {key}: expected a positive integer, got {value!r}")
        if self.m is not None and (not isinstance(self.m, int) or self.m < 1):
            raise InputError(f"probe config: m: expected a positive integer or None, got {self.m!r}")
        if self.features not in PROBE_FEATURES:
            raise InputError(f"probe config: features: expected one of {', '.join(PROBE_FEATURES)}, got {self.features!r}")
        if not self.eta > 0:
            raise InputError(f"probe config: eta: expected a positive number, got {self.eta!r}")

    @property
    def step_gamma(self) -> float:
        if self.gamma is not None:
            return self.gamma
        return schedule_gamma(self.kappa, self.eta, self.V, self.N, self.L, self.d, self.m, self.features)

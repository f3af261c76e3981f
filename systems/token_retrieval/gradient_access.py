"""The numerical check of the gradient-access lower bound (DERIVATION.md §7.4), attention-only model.

The bound: an estimator that sees the first gradient at W = 0 through Gaussian noise of the sampling-noise level
and recovers a fraction alpha of the permutation Pi (expected fraction of tokens right) needs

    d^2 ln(1 + N L E|S|^2) >= 2 F(V, alpha),     F(V, alpha) = alpha ln V! - V h(alpha)   (nats, h in nats),

where S = E[G | Pi, informative tokens] is the permutation-carrying part of G = grad_V L(0, 0) and the noise has
i.i.d. N(0, 1/(N L d^2)) entries. The constant is explicit, so the check compares levels, not only slopes: for each
decoder and V it finds the smallest d whose seed-mean accuracy reaches alpha and asks whether it is at least the
bound's d.

Decoders (each knows the embeddings and is told the test token, as E1 of §7.3):
- ``correlation``: label-mean direction projected out of the observation Y, then Pi_hat(v) = argmax_k u_k . Y e_v;
- ``hungarian``: the same V x V score matrix, assigned as a permutation (``scipy.optimize.linear_sum_assignment``).
Observations: ``surrogate`` (S + W, the bound's class, where the bound is a theorem) and ``noisy_gradient``
(G + W: the real first gradient, its own sampling noise plus W; the bound is the Gaussian-surrogate heuristic
there, §7.4). Three-step GD (exact gradients, no added noise) is compared with the adaptive bound of §7.4 with
q = 3 queries at attention gap kappa: d^2 >= 2 F / (q ln(1 + e^{2 kappa} N L E|S|^2)).

Everything is float64 numpy; the embeddings, permutation and training samples are the model's own draws
(``task.draw_instance`` / ``task.draw_samples``), so seed s here is seed s of a trained model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from recallkit.empirics.numerics import one_blas_thread
from recallkit.theory.errors import InputError

__all__ = ["fano_nats", "FirstGradient", "first_gradient", "training_samples", "observe", "score_matrix", "DECODERS",
           "accuracy", "bound_d", "Instances", "Needed", "needed_d", "three_step_needed_d", "check", "LINES"]

# the lines N = V^a, L = V^c of the check: both have N <= V L, where the bound is above counting (§7.4)
LINES = ({"a": 1.25, "c": 0.5}, {"a": 1.5, "c": 0.5})


def fano_nats(V: int, alpha: float) -> float:
    """alpha ln V! - V h(alpha): the nats about Pi that any estimator with expected token accuracy alpha must hold
    (Fano per token with the alphabet shrinking along a random order, §7.4). May be negative (then vacuous)."""
    if not 0.0 < alpha < 1.0:
        raise InputError(f"alpha: expected a number in (0, 1), got {alpha!r}")
    entropy = -alpha * math.log(alpha) - (1.0 - alpha) * math.log(1.0 - alpha)
    return alpha * math.lgamma(V + 1) - V * entropy


@dataclass
class FirstGradient:
    """One instance's first gradient G = S + R at V = 0, W = 0 (the descent direction, d x d) and what decodes it."""
    G: np.ndarray
    S: np.ndarray  # E[G | Pi, informative tokens]: carries Pi
    U: np.ndarray
    E: np.ndarray
    z: np.ndarray
    perm: np.ndarray
    N: int
    L: int

    @property
    def noise_var(self) -> float:
        """The sampling-noise level per entry, 1/(N L d^2) (§7.4)."""
        return 1.0 / (self.N * self.L * self.G.shape[0] ** 2)

    @property
    def snr(self) -> float:
        """N L |S|^2 = |S|^2 / (d^2 sigma^2): about N/(V L) + 2/L + L/V (§7.4)."""
        return float(self.N * self.L * np.sum(self.S**2))


def _model():
    """The token-retrieval model's draws (``model``), the same the training uses."""
    from recallkit.systems.token_retrieval import model  # torch, about 1 s: only where a gradient is drawn

    return model


def first_gradient(seed: int, V: int, N: int, L: int, d: int,
                   samples: tuple[np.ndarray, np.ndarray] | None = None) -> FirstGradient:
    """The model's instance (seed) and its exact first gradient, split into S and the noise positions' part.
    ``samples``: the seed's (tokens, positions) from :func:`training_samples`, which do not depend on d."""
    instance = _model().draw_instance(seed, V, d, None)
    tokens, positions = training_samples(seed, V, N, L) if samples is None else samples
    E, U = instance["E"].double().numpy(), instance["U"].double().numpy()
    z, perm = instance["z_trig"].double().numpy(), instance["perm"].numpy()
    informative = tokens[np.arange(N), positions]
    w = U[perm[informative]] - U.mean(0)  # u_{y_n} - u_bar
    # o_n = (z + sum_j e_{x_nj}) / L; its mean given the informative token: (z + e_x + (L - 1) e_bar) / L
    o = (z + E[tokens].sum(1)) / L
    o_mean = (z + E[informative] + (L - 1) * E.mean(0)) / L
    return FirstGradient(G=w.T @ o / N, S=w.T @ o_mean / N, U=U, E=E, z=z, perm=perm, N=N, L=L)


def training_samples(seed: int, V: int, N: int, L: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed's N training samples, tokens [N, L] and informative positions [N] (the model's own draws,
    ``task.draw_samples``)."""
    tokens, positions = _model().draw_samples(seed, "train", N, V, L)
    return tokens.numpy(), positions.numpy()


def observe(fg: FirstGradient, kind: str, rng: np.random.Generator) -> np.ndarray:
    """``surrogate``: S + W; ``noisy_gradient``: G + W; W i.i.d. N(0, 1/(N L d^2))."""
    if kind not in ("surrogate", "noisy_gradient"):
        raise InputError(f"observation: expected one of surrogate, noisy_gradient, got {kind!r}")
    base = fg.S if kind == "surrogate" else fg.G
    return base + rng.normal(0.0, math.sqrt(fg.noise_var), base.shape)


def score_matrix(fg: FirstGradient, Y: np.ndarray) -> np.ndarray:
    """[V labels, V tokens]: u_k . Y' e_v, with Y' = Y minus its label-mean direction (read from Y z, §7.3), which
    would otherwise add the same label ranking to every token."""
    g = Y @ fg.z
    g /= np.linalg.norm(g)
    projected = Y - np.outer(g, g @ Y)
    return fg.U @ projected @ fg.E.T


def _correlation(scores: np.ndarray) -> np.ndarray:
    return scores.argmax(0)


def _hungarian(scores: np.ndarray) -> np.ndarray:
    labels, tokens = linear_sum_assignment(scores, maximize=True)
    guess = np.empty(scores.shape[1], dtype=np.int64)
    guess[tokens] = labels
    return guess


DECODERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {"correlation": _correlation, "hungarian": _hungarian}


def accuracy(fg: FirstGradient, guess: np.ndarray) -> float:
    """Fraction of tokens whose label is right: the population accuracy of an oracle told the informative token."""
    return float(np.mean(guess == fg.perm))


def bound_d(V: int, alpha: float, snr: float, queries: int = 1, kappa: float = 0.0, scale: float = 1.0) -> float:
    """The bound's d: sqrt(2 F / (q ln(1 + e^{2 kappa} snr))), times ``scale`` (a deliberately wrong bound for the
    test that the check can fail). 0 where F <= 0 (vacuous)."""
    nats = fano_nats(V, alpha)
    if nats <= 0:
        return 0.0
    return scale * math.sqrt(2.0 * nats / (queries * math.log1p(math.exp(2.0 * kappa) * snr)))


@dataclass
class Needed:
    """The smallest d (scanned upward) whose seed-mean accuracy reaches alpha, with what was seen on the way."""
    d: int | None
    accuracy: float | None
    snr: float  # mean N L |S|^2 over the seeds at the needed d (or the last d scanned)
    curve: list[tuple[int, float]] = field(default_factory=list)


class Instances:
    """The first gradients and score matrices of one (V, N, L), each computed once: the scans of every decoder and
    observation ask for the same (seed, d), and both decoders read the same observation (its noise is drawn from
    (seed, d) alone). The training samples do not depend on d, so they are drawn once per seed."""

    def __init__(self, V: int, N: int, L: int):
        self.V, self.N, self.L = V, N, L
        self._samples: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._gradients: dict[tuple[int, int], FirstGradient] = {}
        self._scores: dict[tuple[int, int, str], np.ndarray] = {}

    def gradient(self, seed: int, d: int) -> FirstGradient:
        if (seed, d) not in self._gradients:
            if seed not in self._samples:
                self._samples[seed] = training_samples(seed, self.V, self.N, self.L)
            self._gradients[seed, d] = first_gradient(seed, self.V, self.N, self.L, d, self._samples[seed])
        return self._gradients[seed, d]

    def scores(self, seed: int, d: int, observation: str) -> np.ndarray:
        if (seed, d, observation) not in self._scores:
            fg = self.gradient(seed, d)
            self._scores[seed, d, observation] = score_matrix(fg, observe(fg, observation,
                                                                          np.random.default_rng([seed, d, 7])))
        return self._scores[seed, d, observation]


def needed_d(V: int, N: int, L: int, alpha: float, decoder: str, observation: str, seeds: Sequence[int],
             d_max: int, d_min: int = 2, instances: Instances | None = None) -> Needed:
    """Scan d = d_min, d_min + 1, ... and stop at the first d whose accuracy, averaged over ``seeds``, reaches alpha.
    Stopping at the first crossing can only make the needed d smaller, i.e. the check harder to pass.
    ``instances`` (of this V, N, L) shares first gradients and scores with other scans."""
    if decoder not in DECODERS:
        raise InputError(f"decoder: expected one of {', '.join(DECODERS)}, got {decoder!r}")
    instances = Instances(V, N, L) if instances is None else instances
    curve, snr = [], float("nan")
    for d in range(d_min, d_max + 1):
        accs, snrs = [], []
        for seed in seeds:
            fg = instances.gradient(seed, d)
            accs.append(accuracy(fg, DECODERS[decoder](instances.scores(seed, d, observation))))
            snrs.append(fg.snr)
        mean, snr = float(np.mean(accs)), float(np.mean(snrs))
        curve.append((d, mean))
        if mean >= alpha:
            return Needed(d, mean, snr, curve)
    return Needed(None, None, snr, curve)


def three_step_needed_d(V: int, N: int, L: int, alpha: float, seeds: Sequence[int], d_values: Sequence[int],
                        kappa: float = 1.0, n_eval: int = 2048) -> Needed:
    """The smallest d in ``d_values`` at which three-step GD (eta = 1e-3, the measured kappa schedule) reaches seed-mean
    fresh accuracy alpha. Its training data are the same draws as :func:`first_gradient`'s for each seed."""
    from recallkit.empirics.engine import run_configs  # torch (about 1 s) when a model trains

    curve = []
    for d in d_values:
        rows = run_configs([dict(task="token_retrieval", model="attention-only", trainer="three_step", V=V, N=N, L=L,
                                 d=d, eta=1e-3, kappa=kappa, n_eval=n_eval, seed=s) for s in seeds], progress=False)
        mean = float(np.mean([row["accuracy"] for row in rows]))
        curve.append((d, mean))
        if mean >= alpha:
            snr = float(np.mean([first_gradient(s, V, N, L, d).snr for s in seeds]))
            return Needed(d, mean, snr, curve)
    return Needed(None, None, float("nan"), curve)


def check(V_values: Sequence[int], lines: Sequence[dict] = LINES, alpha: float = 0.5, seeds: Sequence[int] = (0, 1, 2),
          decoders: Sequence[str] = ("correlation", "hungarian"),
          observations: Sequence[str] = ("surrogate", "noisy_gradient"), scale: float = 1.0,
          gd_alpha: float | None = None, gd_d_values: Sequence[int] = (),
          progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Rows (line, V, N, L, decoder, observation, needed d, bound d, holds) and the verdict: the bound holds when every
    decoder that reaches alpha needs d >= the bound's d. ``scale`` multiplies the bound's d (a test passes a wrong
    one). With ``gd_alpha``, three-step GD at those d values is compared with the adaptive bound (q = 3, kappa = 1).
    ``progress(done, total)`` is called after each (line, V)."""

    rows = []
    total, done = len(lines) * len(V_values), 0
    with one_blas_thread():
        for line in lines:
            for V in V_values:
                N, L = int(math.floor(V ** line["a"])), max(2, int(math.floor(V ** line["c"])))
                rows += _line_rows(line, V, N, L, alpha, seeds, decoders, observations, scale)
                if gd_alpha is not None:
                    found = three_step_needed_d(V, N, L, gd_alpha, seeds, gd_d_values)
                    rows.append(_row(line, V, N, L, "three_step", "exact data", gd_alpha, found,
                                     bound_d(V, gd_alpha, found.snr, queries=3, kappa=1.0, scale=scale)))
                done += 1
                if progress is not None:
                    progress(done, total)
    judged = [row for row in rows if row["needed_d"] is not None]
    return {"alpha": alpha, "seeds": list(seeds), "scale": scale, "rows": rows,
            "holds": bool(judged) and all(row["holds"] for row in judged),
            "violated": [f"{r['decoder']}/{r['observation']} V={r['V']}" for r in judged if not r["holds"]]}


def _line_rows(line, V, N, L, alpha, seeds, decoders, observations, scale) -> list[dict[str, Any]]:
    """One row per (observation, decoder) at one (V, N, L); their scans share first gradients and scores."""
    instances, rows = Instances(V, N, L), []
    for observation in observations:
        for decoder in decoders:
            found = needed_d(V, N, L, alpha, decoder, observation, seeds, d_max=2 * V, instances=instances)
            rows.append(_row(line, V, N, L, decoder, observation, alpha, found, bound_d(V, alpha, found.snr, scale=scale)))
    return rows


def _row(line, V, N, L, decoder, observation, alpha, found: Needed, bound: float) -> dict[str, Any]:
    return {"line": f"N=V^{line['a']}, L=V^{line['c']}", "V": V, "N": N, "L": L, "decoder": decoder,
            "observation": observation, "alpha": alpha, "needed_d": found.d, "accuracy": found.accuracy,
            "snr": found.snr, "snr_order": N / (V * L) + 2.0 / L + L / V, "bound_d": bound,
            "holds": None if found.d is None else found.d >= bound, "curve": found.curve}


def main(argv: Sequence[str] | None = None) -> None:
    """python -m recallkit.systems.token_retrieval.gradient_access [V ...]: print the check's table."""
    import sys

    V_values = [int(v) for v in (argv if argv is not None else sys.argv[1:])] or [32, 64, 128, 256]
    # three-step GD stays below ~0.3 here (the exact-hit cap of §4.5), so it is judged at 0.15
    doc = check(V_values, gd_alpha=0.15, gd_d_values=(8, 16, 32, 64, 128, 256, 512))
    print("line  V  N  L  decoder  observation  needed_d (acc)  bound_d  snr (order)  holds")
    for r in doc["rows"]:
        acc = "n/a" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        print(f"{r['line']}  {r['V']}  {r['N']}  {r['L']}  {r['decoder']}  {r['observation']}  {r['needed_d']} ({acc})  "
              f"{r['bound_d']:.1f}  {r['snr']:.3f} ({r['snr_order']:.3f})  {r['holds']}")
    print("holds" if doc["holds"] else f"violated: {', '.join(doc['violated']) or 'nothing reached alpha'}")


if __name__ == "__main__":
    main()

"""Token retrieval's finite-size numbers, without torch: the pack terms at finite L, the argmax over V labels,
the finite-size hook (:func:`finite_size_factor`) and the all-terms form (:func:`all_terms_prediction`: every noise
term at once, the label counts as Poisson counts, DERIVATION.md §11). compare calls these once per check of every
token-retrieval line, so importing this module imports no torch (a test checks it); the term probes that measured
:data:`PROBED_CONSTANTS` are ``term_probes`` (torch) and ``judge`` (their fits).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import sympy as sp
from scipy import optimize, special, stats

from recallkit.systems.token_retrieval.terms import GRID_VARIABLES, NORMALISER_L_POWER, TERM_NORMALISERS
from recallkit.theory.errors import InputError
from recallkit.theory.pack import load_pack
from recallkit.theory.realised import realised_prediction
from recallkit.theory.symbols import VARIABLES


def finite_normalisers(L: int, kappa_prime: float) -> dict[str, float]:
    """The derivation's normalisers at a finite L (DERIVATION.md §2.2, §8): the exact softmax weight of
    the informative position when it scores kappa' above L - 1 noise positions that score alike,
    A = e^kappa' / (e^kappa' + L - 1); the noise positions share 1 - A equally, |r| = (1 - A)/sqrt(L - 1);
    |t| = sqrt(A^2 + |r|^2); |o| = sqrt(2 A^2 + |r|^2) (|z + e_x|^2 = 2 up to O(1/sqrt(d)))."""
    weight = math.exp(kappa_prime)
    A = weight / (weight + L - 1)
    r = (1 - A) / math.sqrt(L - 1) if L > 1 else 0.0
    values = {"A": A, "r": r, "t": math.sqrt(A * A + r * r), "o": math.sqrt(2 * A * A + r * r)}
    return {f"{name}_{side}": value for name, value in values.items() for side in ("train", "test")}


def finite_size_value(term, point: Mapping[str, Any], kappa_prime: float, statistic: str) -> float:
    """The pack term at the sizes of one probe row, with its asymptotic normalisers (A ~ 1/L, |r|, |t|,
    |o| ~ L^-1/2, constants e^kappa dropped) replaced by their exact finite-L values at the row's measured
    kappa' (:func:`finite_normalisers`). The spread statistic drops the union-bound sqrt(log V)."""
    expr = term.expr
    if term.role == "noise" and statistic == "spread":
        expr = expr / sp.sqrt(sp.log(VARIABLES["V"]))
    env = {VARIABLES[v]: point[v] for v in GRID_VARIABLES if point.get(v) is not None}
    value = float(expr.subs(env))
    L = point["L"]
    finite = finite_normalisers(L, kappa_prime)
    for name, power in TERM_NORMALISERS.get(term.name, {}).items():
        value *= (finite[name] / L ** NORMALISER_L_POWER[name]) ** power
    return value


# pack term -> its normalisers and their powers, for the rank-2 pack on the content (DERIVATION.md §5.4):
# the degree-2 kernel |t||t'| rho^2 with rho = (shared overlap) / (|t||t'|)
RANK2_NORMALISERS = {
    "signal": {"A_train": 2, "A_test": 2, "t_train": -1, "t_test": -1},
    "kernel_crosstalk": {"A_train": 2, "t_test": 1, "t_train": -1},
    "own_label_crosstalk": {"A_train": 2, "t_test": 1, "t_train": -1},
    "mlp_noise": {"A_train": 2, "t_test": 1, "t_train": -1},
    "kernel_samples": {"r_train": 2, "t_test": 1, "t_train": -1},
    "label_count": {"t_train": 1, "t_test": 1},
    "mlp_noise_samples": {"t_train": 1, "t_test": 1},
}


# The normaliser tables a finite-size form can name: "attention" (term_probes.TERM_NORMALISERS: A, |r|, |t|, |o| per term
# of the attention-only and attention-MLP packs, DERIVATION.md §2.2, §8) and "rank2" (RANK2_NORMALISERS, §5.4).
_NORMALISER_TABLES = {"attention": TERM_NORMALISERS, "rank2": RANK2_NORMALISERS}


@dataclass(frozen=True)
class FiniteSizeForm:
    """A finite-size treatment of the system's packs: its name and what it does, the packs it covers with the
    normaliser table each reads (``normalisers``: (pack, table) pairs, the table a key of the tables above;
    :attr:`covers` is their packs, listed once), the accuracy a line's own drawn prediction takes the argmax at when
    no check's level is given, the experiment and presets on whose runs the form was chosen, and where it is
    derived."""

    name: str
    description: str
    normalisers: tuple[tuple[str, str], ...]
    argmax_accuracy: float
    selected_experiment: str
    selected_on: tuple[str, ...]
    derivation: str

    def __post_init__(self) -> None:
        unknown = sorted({table for _, table in self.normalisers} - set(_NORMALISER_TABLES))
        if unknown:
            raise InputError(f"FiniteSizeForm {self.name!r}: unknown normaliser tables {unknown}")
        packs = [pack for pack, _ in self.normalisers]
        if len(set(packs)) != len(packs):
            raise InputError(f"FiniteSizeForm {self.name!r}: a pack is listed twice in {packs}")

    @property
    def covers(self) -> tuple[str, ...]:
        """The packs the form is applied to, in the order declared."""
        return tuple(pack for pack, _ in self.normalisers)

    def table(self, pack: str) -> str | None:
        """The name of the normaliser table ``pack`` reads; None if the form does not cover it."""
        return dict(self.normalisers).get(pack)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "covers": list(self.covers),
                "selected_experiment": self.selected_experiment, "selected_on": list(self.selected_on),
                "derivation": self.derivation}


# The one finite-size treatment of token retrieval (DERIVATION.md §11, §11.8). Every pack whose terms have a
# normaliser form takes it whole: the attention-only pack and its centred variant (whose terms are a subset of it),
# the attention-MLP pack, and the rank-2 pack on the content (every noise term of it carries the same union bound
# sqrt(log V), so the argmax replaces it as in the others; §11.8 says why nothing in §5.4 forbids it). No normaliser
# table is derived for the attended rank-2 pack, and the capacity pack has no noise terms: they are not covered, and
# finite_size_factor returns None for them. The form (the argmax at a check's own level beside the finite-L
# normalisers, and the all-terms form of §11.3-§11.6) was chosen looking at tr_fig2_attention_only's quick, medium and
# gpu runs: a verdict on those presets is exploratory (predictions.PREDICTION_SOURCE says so to compare).
FINITE_SIZE_FORM = FiniteSizeForm(
    name="argmax at the check's level, finite-L normalisers",
    description=("every term's normalisers A, |r|, |t|, |o| at their exact finite-L values at the step-2 gap kappa' "
                 "(finite_normalisers, step_two_gap), and every noise term's union bound sqrt(log V) replaced by the "
                 "signal-to-noise ratio the argmax over V labels needs at the check's accuracy (argmax_snr); for the "
                 "attention-only pack every term at once (all_terms_prediction)"),
    normalisers=(("token_retrieval_attn", "attention"), ("token_retrieval_attn_centred", "attention"),
                 ("token_retrieval", "attention"), ("token_retrieval_rank2", "rank2")),
    argmax_accuracy=0.1,  # tr_fig2_attention_only's lowest absolute threshold (DERIVATION.md §11, "Encoded")
    selected_experiment="tr_fig2_attention_only",
    selected_on=("quick", "medium", "gpu"),
    derivation="DERIVATION.md §11",
)


def _pack_normalisers(pack: str) -> dict[str, dict[str, int]] | None:
    """The normalisers of each term of ``pack`` under :data:`FINITE_SIZE_FORM`; None for a pack it does not cover."""
    table = FINITE_SIZE_FORM.table(pack)
    return None if table is None else _NORMALISER_TABLES[table]


def step_two_gap(L: int, measured: Mapping[str, Any]) -> tuple[float, str]:
    """kappa' (the informative position's score above the others after step 2) for a grid row, and where it
    came from: inverted from the runs' mean attention mass A = e^k'/(e^k' + L - 1) when measured, else the
    config's measured-schedule ``kappa``, else the expression schedule's kappa (1 - 1/L) at kappa = 1."""
    A = measured.get("attention_mass")
    if isinstance(A, (int, float)) and 0 < A < 1 and L > 1:
        return math.log(A * (L - 1) / (1 - A)), "measured attention mass"
    config = measured.get("config") or {}
    if isinstance(config.get("kappa"), (int, float)):
        return float(config["kappa"]), "the kappa schedule"
    return 1.0 - 1.0 / L, "the expression schedule at kappa = 1"


# The grid of the argmax integral (standard-normal units): the integrand is smooth and negligible beyond |z| = 10,
# so the trapezoid rule on it is exact to far below the slopes' third decimal.
_ARGMAX_GRID = np.linspace(-10.0, 10.0, 4001)
_ARGMAX_WEIGHTS = np.exp(-0.5 * _ARGMAX_GRID ** 2) / math.sqrt(2 * math.pi)

# The packs whose finite-size prediction takes the extreme-value cost of the argmax (DERIVATION.md §11, §11.8): every
# pack FINITE_SIZE_FORM covers, with the accuracy a line's prediction takes it at when no check's own level is given
# (the line's drawn prediction): compare calls the hook again per check with the accuracy that check's boundary
# reaches at each V (``target``: the threshold, or a fraction of that V's ceiling), and the check's verdict is taken
# against that. 0.1 is the attention-only experiment's lowest absolute threshold (tr_fig2_attention_only). Every
# noise term of each covered pack (attention-only, centred, attention-MLP, rank-2 on the content) carries the same
# union bound sqrt(log V), which the argmax replaces.
ARGMAX_ACCURACY = {pack: FINITE_SIZE_FORM.argmax_accuracy for pack in FINITE_SIZE_FORM.covers}


def _argmax_accuracy(snr: float, V: int) -> float:
    """P(snr + Z_0 > max(Z_1..Z_{V-1})), the Z i.i.d. standard normal: argmax accuracy at signal-to-noise snr."""
    log_cdf = (V - 1) * special.log_ndtr(_ARGMAX_GRID + snr)
    return float(np.trapezoid(_ARGMAX_WEIGHTS * np.exp(log_cdf), _ARGMAX_GRID))


@functools.lru_cache(maxsize=4096)
def argmax_snr(accuracy: float, V: int) -> float:
    """The signal-to-noise ratio (signal over the per-label noise spread, the correct label's own noise of the same
    spread) at which the argmax over V labels with i.i.d. Gaussian noise is right with probability ``accuracy``
    (DERIVATION.md §11). It tends to sqrt(2 log V) as V grows (the union bound of the packs' sqrt(log V)), but at a
    low accuracy and V <= 1024 it is far below it and grows much faster: 0.94, 1.21, 1.45, 1.68 at accuracy 0.1 and
    V = 64, 128, 256, 512, i.e. its square grows like V^0.56 there, the union bound's like V^0.20."""
    if not (isinstance(accuracy, (int, float)) and 0 < accuracy < 1):
        raise InputError(f"argmax_snr: accuracy: expected a number in (0, 1), got {accuracy!r}")
    if not (isinstance(V, int) and V >= 2):
        raise InputError(f"argmax_snr: V: expected an integer >= 2, got {V!r}")
    return float(optimize.brentq(lambda s: _argmax_accuracy(s, V) - accuracy, -20.0, 40.0, xtol=1e-10))


_DEFAULT = object()


def finite_size_factor(pack: str, term: str | None, row: Mapping[str, Any], measured: Mapping[str, Any],
                       accuracy: float | None | object = _DEFAULT):
    """The registry's finite-size hook (``recallkit_finite_size``): the factor that replaces a term's asymptotic
    normalisers (A ~ e^k/L, |r|, |t|, |o| ~ L^-1/2) by their exact finite-L values at the row's kappa'
    (:func:`finite_normalisers`, :func:`step_two_gap`), and, for a noise term, the union bound sqrt(2 log V) by the
    signal-to-noise ratio an argmax over V labels needs at ``accuracy`` (:func:`argmax_snr`; DERIVATION.md §11).
    ``accuracy`` defaults to the pack's :data:`ARGMAX_ACCURACY` (none: no argmax factor); None leaves the union
    bound as the pack writes it. ``term=None`` returns the constants used. None for packs :data:`FINITE_SIZE_FORM`
    does not cover (the attended rank-2 pack, the capacity pack) or terms without a normaliser form, and for a noise
    term where ``accuracy`` is at or below chance 1/V."""
    table = _pack_normalisers(pack)
    if table is None or "L" not in row:
        return None
    L = int(row["L"])
    kappa_prime, source = step_two_gap(L, measured)
    if accuracy is _DEFAULT:
        accuracy = ARGMAX_ACCURACY.get(pack)
        if accuracy is not None and measured.get("target_metric") == "accuracy" and measured.get("target") is not None:
            accuracy = float(measured["target"])  # one check's own level (compare hands it per check)
    if term is None:
        constants = {"L": L, "kappa_prime": kappa_prime, "A": finite_normalisers(L, kappa_prime)["A_test"],
                     "source": source}
        if accuracy is not None and "V" in row and argmax_snr(accuracy, int(row["V"])) > 0:
            constants.update(accuracy=accuracy, argmax_snr=argmax_snr(accuracy, int(row["V"])))
        return constants
    if term not in table:
        return None
    finite = finite_normalisers(L, kappa_prime)
    factor = 1.0
    for name, power in table[term].items():
        factor *= (finite[name] / L ** NORMALISER_L_POWER[name]) ** power
    if accuracy is not None and term != "signal":
        # every noise term of these packs is its spread over the labels times the union bound's sqrt(log V) (the
        # probes measure the spread at 1.0-1.4 times the term without that factor, DERIVATION.md §11), and the argmax
        # needs the signal at argmax_snr times the spread: the factor replaces the one by the other
        if "V" not in row:
            return None
        V = int(row["V"])
        needed = argmax_snr(accuracy, V)
        if needed <= 0:
            return None  # at or below chance (1/V) the argmax needs no signal: no d to solve for
        factor *= needed / math.sqrt(math.log(V))
    return factor



def argmax_check_predictions(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per check of a token-retrieval min-size fit (the document of ``recallkit fit --json``): the finite-size slope
    with the argmax taken at the check's own accuracy (DERIVATION.md §11), which the report's hook cannot do since it
    is called per line: an absolute threshold is that accuracy at every V; a fraction of the ceiling is that fraction
    of each V's measured ceiling. Rows: line, threshold, threshold_relative, the measured slope, the slope the report
    tested (``predicted_slope``), the accuracies used per V and ``predicted_slope_argmax``."""
    out = []
    for fit in doc.get("fits", []):
        prediction = (doc.get("predictions") or {}).get(fit["line"]) or {}
        finite = (prediction.get("realised") or {}).get("finite_size") or {}
        if not finite.get("points") or fit.get("threshold") is None:
            continue
        pack = load_pack(prediction["pack"])
        rows = [{"V": p["V"], "N": p["N"], "L": p["L"]} for p in finite["points"]]
        masses = {row["V"]: c["A"] for row, c in zip(rows, finite["constants"])}
        if fit.get("threshold_relative"):
            ceilings = fit.get("ceilings") or {}
            if any(ceilings.get(str(row["V"])) is None for row in rows):
                continue
            accuracies = {row["V"]: fit["threshold"] * ceilings[str(row["V"])] for row in rows}
        else:
            accuracies = {row["V"]: fit["threshold"] for row in rows}

        def factor(term, row):
            return finite_size_factor(pack.name, term, row, {"attention_mass": masses[row["V"]]},
                                      accuracy=accuracies[row["V"]])

        found = realised_prediction(pack, prediction["scaling"], rows, factors=factor)
        out.append({"line": fit["line"], "threshold": fit["threshold"],
                    "threshold_relative": bool(fit.get("threshold_relative")), "slope": fit.get("slope"),
                    "predicted_slope": fit.get("predicted_slope"), "accuracies": [accuracies[r["V"]] for r in rows],
                    "predicted_slope_argmax": found["slope"]})
    return out


# Each attention-only pack term's measured spread over the wrong labels (the signal: its mean at the label) over its
# finite-size value without the union bound (term_sizes against finite_size_factor): the median over 72 probe rows
# at and around tr_fig2_attention_only's quick-preset boundaries (3 lines x 4 V x d at 0.71, 1, 1.41 times the
# boundary x 2 seeds; DERIVATION.md §11). The spread of the pack's constants the derivation drops. noise_self and
# grad_noise_positions are measured without their token coincidences (term_probes splits them off; DERIVATION.md
# §4.4): with them they were 1.40 and 1.42, and grew with d. grad_noise and localisation are measured without the
# exact hits (term_probes splits them off; DERIVATION.md §4.3, §4.5): with them they were 1.21 and 1.31. The runs they
# were measured on: PROBED_CONSTANTS_CALIBRATION (below; tr_fig2_attention_only quick, seeds 0-1, V = 64..512).
PROBED_CONSTANTS = {"signal": 0.99, "mean_bias": 0.99, "mean_bias_counts": 1.01, "grad_noise": 1.05,
                    "grad_noise_positions": 1.03, "noise_self": 1.04, "localisation": 1.07, "embedding_crosstalk": 2.39,
                    "trigger_overlap": 1.86, "trigger_crosstalk_positions": 1.27}


@dataclass(frozen=True)
class ConstantsCalibration:
    """The runs a set of calibrated constants was measured on: the experiment and preset, the seeds, the base values
    and the lines (their labels), with one line saying what was measured. :meth:`to_dict` has the keys
    experiment, preset, seeds, base_values, lines, description."""

    experiment: str
    preset: str
    seeds: tuple[int, ...]
    base_values: tuple[int, ...]
    lines: tuple[str, ...]
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "preset": self.preset, "seeds": list(self.seeds),
                "base_values": list(self.base_values), "lines": list(self.lines), "description": self.description}


# The runs of PROBED_CONSTANTS: the term probes (boundary_terms at its default seeds (0, 1)) at and around
# tr_fig2_attention_only's quick-preset seed-mean boundaries at accuracy 0.1: 72 rows, 3 lines x 4 V x d at 0.71, 1 and
# 1.41 times the boundary x 2 seeds (DERIVATION.md §11 (e)). The probes draw the same instances as the engine for the
# same seed (term_probes.ThreeStepModel), so these seeds of these lines and V share their instances with the runs.
PROBED_CONSTANTS_CALIBRATION = ConstantsCalibration(
    experiment="tr_fig2_attention_only",
    preset="quick",
    seeds=(0, 1),
    base_values=(64, 128, 256, 512),
    lines=("N=V**1.5, L=V**0.25", "N=V**1.5, L=V**0.5", "N=V*log(V), L=V**0.5"),
    description=("each attention-only term's spread over the wrong labels over its finite-size value without the "
                 "union bound, median over 72 term-probe rows at 0.71, 1 and 1.41 times the quick preset's "
                 "boundaries at accuracy 0.1 (DERIVATION.md §11 (e), §11.4, §11.5)"),
)


class _TermsAtRows:
    """Every noise term of a pack at a line's realised rows, as :func:`sum_of_terms_prediction` and
    :func:`all_terms_accuracy` take them (DERIVATION.md §11.3-§11.6): ``finite_size`` (a line's finite-size
    prediction: its points give V, N, L, its constants the attention A per row), each term in its finite-size form
    times ``constants`` (default 1), and the options of :func:`sum_of_terms_prediction` (``counts``, ``exact_hits``,
    ``coincidences``, ``own_counts``). :meth:`parts` gives the signal and the noise spreads at a d, :meth:`ratio` the
    signal over the Gaussian part of the noise, :meth:`grown_accuracy` the count mixture's accuracy with the
    own-sample terms at each label's count; the solver and the form's accuracy at a given d both call these."""

    def __init__(self, pack: str, finite_size: Mapping[str, Any], constants: Mapping[str, float] | None,
                 counts: str | None, exact_hits: bool, coincidences: bool, own_counts: bool):
        self.pack = load_pack(pack)
        self.rows = [{"V": p["V"], "N": p["N"], "L": p["L"]} for p in finite_size["points"]]
        self.masses = {row["V"]: c["A"] for row, c in zip(self.rows, finite_size["constants"])}
        self.counts, self.exact_hits, self.coincidences, self.own_counts = counts, exact_hits, coincidences, own_counts
        # (rho, q) of the token coincidences per row (DERIVATION.md §4.4), (0, 0) without them
        self.coincident = {row["V"]: coincidence_share(row["V"], row["L"], self.masses[row["V"]]) if coincidences
                           else (0.0, 0.0) for row in self.rows}
        # (hits, r) of the exact hits per row (§4.5), the one that rides through the other labels' overlaps too; and
        # the trigger's factor g per row (§11.6): both fixed by the row's L and attention, not by the d tried
        self.hit = {row["V"]: exact_hit_share(row["L"], self.masses[row["V"]]) for row in self.rows}
        self.trigger = {row["V"]: crosstalk_factor(row["L"], self.masses[row["V"]]) for row in self.rows}
        self.constants = constants or {}
        symbols = [VARIABLES[v] for v in self.pack.variables]
        self.terms = {t.name: (t.role, sp.lambdify(symbols, t.expr, "math")) for t in self.pack.terms
                      if t.role in ("signal", "noise")}

    def parts(self, row: Mapping[str, Any], d: float) -> tuple[float, dict[str, float]]:
        pack, constants, masses = self.pack, self.constants, self.masses
        values = [{**row, "d": d}[v] for v in pack.variables]
        measured = {"attention_mass": masses[row["V"]]}
        signal, noise = 0.0, {}
        for name, (role, f) in self.terms.items():
            value = (f(*values) * finite_size_factor(pack.name, name, row, measured, accuracy=None)
                     * constants.get(name, 1.0))
            if role == "signal":
                signal = value
            else:
                noise[name] = value / math.sqrt(math.log(row["V"]))  # its spread: the union bound taken out
        # in units of the signal per training sample, signal / lam (DERIVATION.md §4.4, §11.5)
        lam = row["N"] / row["V"]
        unit = signal / lam
        overlap = row["N"] / d  # the variance of the overlap sum sum_y (n_y - lam) u_k . (u_y - u_bar) (§4.2)
        # the mean bias's coefficient on that sum; a per-sample mean that rides on the same sum adds to it coherently
        coherent = noise.get("mean_bias", 0.0) / unit / math.sqrt(overlap)
        rho, q = self.coincident[row["V"]]
        if self.coincidences:
            # the label's own samples: d-free, over the labels' counts. The other labels' samples: their mean rho per
            # sample rides on the mean bias's overlap sum (the same c_kn, summed over the same samples), so the two
            # add as (m + rho)^2 N / d, not m^2 + rho^2; the rest, q per sample, is independent (§11.5)
            noise[COINCIDENCES] = unit * math.sqrt((rho * rho + q) * lam)
            noise[POSITION_COINCIDENCES] = unit * math.sqrt(((coherent + rho) ** 2 - coherent ** 2 + q) * overlap)
        if self.own_counts:
            # the two terms of the trigger's content, derived rather than at their probed constants (medians over
            # lines whose parts weigh differently, §11.6): embedding_crosstalk's four parts, grad_noise_label,
            # token_crosstalk and trigger_crosstalk 1 / d each per count squared, mean_bias_counts_attention moving
            # with trigger_crosstalk's e . z, the two together g^2 / d; trigger_overlap, the same e . z over the other
            # labels' token groups through u_k . u_y, g^2 V (lam^2 + lam) / d^2
            g = self.trigger[row["V"]]
            if "embedding_crosstalk" in noise:
                noise["embedding_crosstalk"] = unit * math.sqrt((lam * lam + lam) * (2.0 + g * g) / d)
            if "trigger_overlap" in noise:
                noise["trigger_overlap"] = unit * g * math.sqrt(row["V"] * (lam * lam + lam)) / d
        if self.exact_hits:
            # the exact hits (§4.5) through the other labels: the n_{x_j} samples of each test noise token x_j, r each,
            # through u_k . (u_{Pi(x_j)} - u_bar): variance r^2 (L - 1) lam (lam + 1) / d, and a covariance with the
            # coherent overlap sum, whose count deviation n_{x_j} - lam they share (§4.3, §11.5)
            hits, r = self.hit[row["V"]]
            shared = coherent + (rho if self.coincidences else 0.0)
            noise[HIT_OVERLAPS] = unit * math.sqrt(hits * r * r * lam * (lam + 1) / d + 2 * shared * hits * r * lam / d)
        return signal, noise

    def ratio(self, row: Mapping[str, Any], d: float) -> float:
        signal, noise = self.parts(row, d)
        mixed = (self.counts, COINCIDENCES) if self.counts is not None else ()  # the mixture takes these as they are
        return signal / math.sqrt(sum(v * v for name, v in noise.items() if name not in mixed))

    def grown_accuracy(self, row: Mapping[str, Any], d: float, scale: float) -> float:
        """The mixture's accuracy at d with the own-sample terms at each label's count, every spread times ``scale``."""
        signal, noise = self.parts(row, d)
        V, lam = row["V"], row["N"] / row["V"]
        unit = signal / lam  # count units
        own = {name: (noise.get(name, 0.0) / unit) ** 2 for name in OWN_COUNT_TERMS}
        rest = sum((v / unit) ** 2 for name, v in noise.items()
                   if name not in (self.counts, COINCIDENCES) and name not in OWN_COUNT_TERMS)
        grown = own_count_spread(own, lam, self.trigger[V])
        hits, r = self.hit[V] if self.exact_hits else (0, 0.0)
        return count_mixture_accuracy(V, row["N"], scale * math.sqrt(rest), 1.0, hits, r, *self.coincident[V],
                                      grown=tuple(scale * scale * g for g in grown))


def sum_of_terms_prediction(line_prediction: Mapping[str, Any], boundary_d: Mapping[int, float] | None,
                            reference_V: int | None, accuracy: float | Mapping[int, float] | None = None,
                            constants: Mapping[str, float] | None = None, C: float | None = None,
                            counts: str | None = None, exact_hits: bool = False,
                            coincidences: bool = False, own_counts: bool = False) -> dict[str, Any]:
    """The boundary along one line from every noise term at once (DERIVATION.md §11), not from the binding ones:
    at each realised row (``line_prediction``: a fit document's prediction of the line, whose finite-size points and
    constants give V, N, L and the measured attention) the smallest d with signal >= C g(V) sqrt(sum of the terms'
    spreads squared), each term in its finite-size form times ``constants`` (default 1), g the union bound sqrt(log V)
    (``accuracy`` None) or :func:`argmax_snr` at ``accuracy``, and C fitted so that the d at ``reference_V`` is the
    measured ``boundary_d`` there, or given (``C``: then no boundary is read, and the prediction uses no run).
    Returns the d per V (inf where the d-free terms alone exceed the signal), the least-squares slope of log d^2 on
    log V over the finite ones, each term's share of the noise variance at them and C. ``counts`` names the d-free
    label-count term to keep as Poisson counts (:func:`count_mixture_tau`, needs ``accuracy``) instead of one more
    Gaussian spread: then the rest of the noise is the Gaussian, and the signal over it must reach C times the
    mean count N / V over the spread the mixture allows (count units); ``exact_hits`` adds to it the labels of the
    test input's L - 1 noise tokens, each r of the signal per count ahead (:func:`exact_hit_share`, DERIVATION.md
    §4.5, at the measured attention). ``coincidences`` adds the token coincidences (training noise tokens equal to
    the test's tokens, :func:`coincidence_share`, §4.4), which :data:`PROBED_CONSTANTS` leaves out of ``noise_self``
    and ``grad_noise_positions``: on the label's own samples a d-free part, inside the mixture with ``counts``, else
    one more Gaussian spread (:data:`COINCIDENCES`, variance (rho^2 + q) N / V count units); on the other labels'
    samples a Gaussian term (:data:`POSITION_COINCIDENCES`) whose mean per sample rides on the mean bias's overlap sum:
    variance ((m + rho)^2 - m^2 + q) N / d, m the mean bias's coefficient (DERIVATION.md §11.5). ``exact_hits`` adds
    the hits' part in the other labels (:data:`HIT_OVERLAPS`, §4.3): variance r^2 (L - 1) lam (lam + 1) / d plus its
    covariance with that overlap sum, 2 (m + rho) r (L - 1) lam / d. ``own_counts`` (with ``counts``) takes the terms
    that sum over a label's own samples (:data:`OWN_COUNT_TERMS`) at the label's own count rather than at the mean
    count N / V (``count_mixture_accuracy``'s ``grown``; DERIVATION.md §11.6), and embedding_crosstalk and
    trigger_overlap as derived from their parts (:func:`crosstalk_factor`) rather than at their probed constants: the
    d is then solved on the mixture's accuracy itself, C scaling every spread."""
    if counts is not None and accuracy is None:
        raise InputError("sum_of_terms_prediction: counts needs an accuracy (the mixture is solved at a level)")
    if own_counts and counts is None:
        raise InputError("sum_of_terms_prediction: own_counts needs counts (it grows the spreads inside the mixture)")
    model = _TermsAtRows(line_prediction["pack"], line_prediction["realised"]["finite_size"], constants, counts,
                         exact_hits, coincidences, own_counts)

    def level(V: int) -> float:
        return float(accuracy[V] if isinstance(accuracy, Mapping) else accuracy)

    def needed(row: Mapping[str, Any]) -> float:
        return _needed_ratio(model, row, None if accuracy is None else level(row["V"]))

    if C is None:
        reference = next(row for row in model.rows if row["V"] == reference_V)
        if own_counts:
            at = float(boundary_d[reference_V])
            miss = lambda log_c: model.grown_accuracy(reference, at, math.exp(log_c)) - level(reference_V)  # noqa: E731
            C = math.exp(optimize.brentq(miss, -7.0, 7.0, xtol=1e-6))
        else:
            C = model.ratio(reference, float(boundary_d[reference_V])) / needed(reference)
    found = {row["V"]: (_grown_d(model, row, C, level(row["V"])) if own_counts
                        else _ratio_d(model, row, C * needed(row))) for row in model.rows}
    reached = [(V, d) for V, d in found.items() if math.isfinite(d)]
    slope = (float(np.polyfit(np.log([V for V, _ in reached]), 2 * np.log([d for _, d in reached]), 1)[0])
             if len(reached) > 1 else None)
    shares = {}
    for row in model.rows:
        if math.isfinite(found[row["V"]]):
            noise = model.parts(row, found[row["V"]])[1]
            total = sum(v * v for v in noise.values())
            shares[row["V"]] = {name: v * v / total for name, v in noise.items()}
    return {"d": found, "slope": slope, "shares": shares, "C": C}


def _needed_ratio(model: _TermsAtRows, row: Mapping[str, Any], level: float | None) -> float:
    """The signal over the Gaussian spread the argmax needs at ``level`` on ``row`` (:func:`sum_of_terms_prediction`):
    the union bound sqrt(log V) without a level, :func:`argmax_snr` without counts, else the mean count over the
    spread the count mixture allows (inf where the level is above what the counts allow at any d)."""
    V = row["V"]
    if level is None:
        return math.sqrt(math.log(V))
    if model.counts is None:
        return argmax_snr(level, V)
    # b = 1: the count bias and the signal are the same A^2 / N per training sample (DERIVATION.md §4.1, §4.2;
    # their probed constants, 0.99 and 1.01, agree within the probes' spread). Taking their ratio 1.02 instead
    # would decide every tie 2 n_x = n_k against the correct label, a 0.02 bias in the cap at N ~ V log V.
    hits, r = model.hit[V] if model.exact_hits else (0, 0.0)
    tau = count_mixture_tau(level, V, row["N"], 1.0, hits, r, *model.coincident[V])
    lam = row["N"] / V
    return lam / tau if tau > 0 else math.inf  # tau 0: the level is above what the counts allow at any d


def _grown_d(model: _TermsAtRows, row: Mapping[str, Any], C: float, level: float) -> float:
    """The d at which the count mixture with the own-sample terms grown reaches ``level`` on ``row`` (every spread
    times C); inf below chance, where d = 1 already reaches it, or where no d does."""
    gap = lambda log_d: model.grown_accuracy(row, math.exp(log_d), C) - level  # noqa: E731
    solvable = level > 1.0 / row["V"] and gap(0.0) < 0 < gap(math.log(1e7))
    return math.exp(optimize.brentq(gap, 0.0, math.log(1e7), xtol=1e-4)) if solvable else math.inf


def _ratio_d(model: _TermsAtRows, row: Mapping[str, Any], target: float) -> float:
    """The d at which the signal over the Gaussian spread reaches ``target`` on ``row``; inf where it is out of reach
    at any d, or (near chance) where no signal is needed."""
    if not 0 < target < math.inf:
        return math.inf
    gap = lambda log_d: math.log(model.ratio(row, math.exp(log_d))) - math.log(target)  # noqa: E731
    return math.exp(optimize.brentq(gap, 0.0, math.log(1e7))) if gap(math.log(1e7)) > 0 else math.inf


# The name of the d-free coincidences of noise_self (DERIVATION.md §4.4) among a prediction's noise shares: a probe
# component (term_probes), not a pack term.
COINCIDENCES = "noise_self_coincidences"
# The same coincidences in the other labels' samples, the part of grad_noise_positions that falls like d^-1/2, not d^-1.
POSITION_COINCIDENCES = "grad_noise_positions_coincidences"
# The pack terms whose probe components are measured without those coincidences (term_probes splits them off).
COINCIDENT_TERMS = ("noise_self", "grad_noise_positions")
# The exact hits (DERIVATION.md §4.5) through the other labels' overlaps: the part of grad_noise that falls like d^-1/2.
# Their own labels' part (probe component localisation_hits) is in the count mixture (count_mixture_accuracy's hits).
HIT_OVERLAPS = "grad_noise_hits"
# The pack terms whose probe components are measured without the exact hits (term_probes splits them off).
HIT_TERMS = ("grad_noise", "localisation")
# The pack terms that sum over a label's own samples, so that their spread on a label follows its own count (most of
# them as the count, noise_self as its square root) and not the mean count the pack writes (DERIVATION.md §11.6).
OWN_COUNT_TERMS = ("embedding_crosstalk", "localisation", "noise_self")


def crosstalk_factor(L: int, attention: float) -> float:
    """g = 1 + kappa' (1 - A) (DERIVATION.md §11.6): trigger_crosstalk (a_n a e_{x_n} . z) and the attention fluctuation
    on the label's own samples (mean_bias_counts_attention: a_n - A = A (1 - A) kappa' e_{x_n} . z, since the informative
    score is kappa' (1 + e_{x_n} . z)) share the factor e_{x_n} . z, so together they are g times trigger_crosstalk;
    kappa' from the measured attention A (:func:`step_two_gap`)."""
    kappa_prime, _ = step_two_gap(L, {"attention_mass": attention})
    return 1.0 + kappa_prime * (1.0 - attention)


def own_count_spread(variances: Mapping[str, float], lam: float, g: float = 1.0) -> tuple[float, float, float, float]:
    """(v1, v2, v2_correct, w) of :func:`count_mixture_accuracy`'s ``grown`` from the :data:`OWN_COUNT_TERMS`'
    variances (count units squared) as the pack writes them, over the labels and so over their Poisson(lam) counts
    (DERIVATION.md §11.6): noise_self sums a label's m samples (v1 m, E m = lam); localisation and three of
    embedding_crosstalk's four components (§4.6: token_crosstalk, trigger_crosstalk, mean_bias_counts_attention) are m
    times one per-label factor (v2 m^2, E m^2 = lam^2 + lam); the fourth, grad_noise_label, is the test token's count
    n_x times one (w n_x^2, the same for every wrong label). Of embedding_crosstalk's variance, grad_noise_label and
    token_crosstalk carry 1 / (2 + g^2) each and trigger_crosstalk with mean_bias_counts_attention g^2 / (2 + g^2)
    (:func:`crosstalk_factor`); the correct label has only that last part (its own samples are the signal's)."""
    second = lam * lam + lam
    crosstalk, local = variances["embedding_crosstalk"], variances["localisation"]
    parts = 2.0 + g * g
    return (variances["noise_self"] / lam, (crosstalk * (1.0 + g * g) / parts + local) / second,
            (crosstalk * g * g / parts + local) / second, crosstalk / parts / second)


@functools.lru_cache(maxsize=1024)
def count_cap(V: int, N: int) -> float:
    """The accuracy three steps cannot exceed however large d is, from the label counts alone (DERIVATION.md §11.3):
    the count part of the mean bias gives label k the logit A^2 (n_k / N - 1/V) on every input, and the signal gives
    the correct label A^2 n_x / N more, where n_x is the test token's training count. Since labels are a permutation
    of tokens, the correct label's own count is n_x too, so as d grows the correct label wins exactly when
    2 n_x > max over the other labels of n_k: inputs of frequent tokens can be right, those of rare ones cannot.
    With the counts i.i.d. Poisson(N / V) (ties counted half) this is E_x[P(max_k n_k < 2 n_x)]: on N ~ V log V it
    stays near 0.3 (0.34 at V = 128, 0.26 at 2048), on N ~ V^1.5 it rises to 1 (0.58, 0.94)."""
    if not (isinstance(V, int) and V >= 2 and isinstance(N, int) and N >= 1):
        raise InputError(f"count_cap: expected integers V >= 2 and N >= 1, got V={V!r}, N={N!r}")
    lam = N / V
    counts = np.arange(0, int(lam + 12 * math.sqrt(lam) + 30))
    pmf, cdf = stats.poisson.pmf(counts, lam), stats.poisson.cdf(counts, lam)
    below = np.where(counts >= 1, cdf[np.clip(2 * counts - 1, 0, len(cdf) - 1)] ** (V - 1), 0.0)
    at = cdf[np.clip(2 * counts, 0, len(cdf) - 1)] ** (V - 1)
    return float(np.sum(pmf * (below + 0.5 * (at - below))))


# The grid of the count mixture's inner integral (standard-normal units): coarser than the argmax's, since the integrand
# is smooth at every tau the solver asks for (tau >= 1e-3 count units) and the sum over counts already averages it.
_MIXTURE_GRID = np.linspace(-8.0, 8.0, 201)
_MIXTURE_WEIGHTS = np.exp(-0.5 * _MIXTURE_GRID ** 2) / math.sqrt(2 * math.pi)


# Cached on its exact arguments: compare asks the all-terms form several times per check with the same rows (the a
# priori and the measured reading, each check of a line), and each solve retraces the same brentq steps, so most calls
# repeat one already made (2977 calls, 841 distinct, for the three lines of tr_fig2_attention_only's gpu preset at one
# check each); a cached value is the very float computed before, so the numbers do not change.
@functools.lru_cache(maxsize=1 << 16)
def count_mixture_accuracy(V: int, N: int, tau: float, b: float = 1.0, hits: int = 0, r: float = 0.0,
                           rho: float = 0.0, q: float = 0.0, grown: tuple[float, float, float, float] | None = None
                           ) -> float:
    """The argmax accuracy when the label counts are kept as the Poisson counts they are (DERIVATION.md §11.3), not
    folded into one Gaussian spread: in units of the signal per training sample of the test token, label k gets
    b n_k from the count part of the mean bias, the correct label (whose count is the test token's own, n_x: labels
    are a permutation of tokens) gets n_x more from the signal, and every label an i.i.d. Gaussian of spread ``tau``
    from the d-dependent noise; the counts i.i.d. Poisson(N / V). ``hits`` of the wrong labels (the labels of the
    test input's noise tokens, the exact hits of §4.5) get r n_k more, r the attention on one noise position over
    the attention on the informative one. The coincidences of §4.4 (a noise token of one of label k's n_k training
    samples that is a token of the test input) give every label, the correct one included, rho n_k more on average
    and a spread sqrt(q n_k) about it (:func:`coincidence_share`), taken as Gaussian beside tau. So it is
    E_{n_x} E_z[ P((b + rho) n + s(n) z' < (1 + b + rho) n_x + s(n_x) z)^(V-1-hits) P((b + rho + r) n + ...)^hits ],
    s(n) = sqrt(tau^2 + q n): the cap of the counts, hits and coincidences as tau -> 0 (:func:`count_cap` without
    hits and coincidences; ties broken at random rather than counted half), chance 1/V as tau -> infinity. ``b`` is
    the count bias per sample over the signal per sample (1 in the derivation: both are A^2 / N per training sample
    of a token). ``grown`` = (v1, v2, v2_correct, w) adds the terms that sum over a label's own samples and so grow
    with its count (DERIVATION.md §11.6): a wrong label of count m gets the variance v1 m + v2 m^2 + w n_x^2 more
    (w: the part that follows the test token's count n_x instead), the correct label v1 n_x + v2_correct n_x^2."""
    lam = N / V
    counts = np.arange(0, int(lam + 10 * math.sqrt(lam) + 20))
    pmf = stats.poisson.pmf(counts, lam)
    keep = pmf > 1e-10  # the counts left out move the accuracy by under V * 1e-10
    counts, pmf = counts[keep], pmf[keep]
    v1, v2, v2_correct, w = grown or (0.0, 0.0, 0.0, 0.0)
    own = tau * tau + (q + v1) * counts
    spread = np.sqrt(own + v2_correct * counts * counts)  # the correct label's Gaussian spread, by its count n_x
    # a wrong label's, by its own count m (last axis) and the test token's n_x (first axis)
    wrong = np.sqrt(own[None, :] + v2 * counts[None, :] ** 2 + w * counts[:, None] ** 2)[:, None, :]
    correct = (1.0 + b + rho) * counts[:, None] + spread[:, None] * _MIXTURE_GRID[None, :]  # n_x by z

    def log_below(per_count: float) -> np.ndarray:  # log P(a wrong label's logit < t), at every t the correct takes
        above = special.ndtr((per_count * counts[None, None, :] - correct[:, :, None]) / wrong) @ pmf
        return np.log1p(-np.clip(above, 0.0, 1.0 - 1e-16))

    log_all = (V - 1 - hits) * log_below(b + rho) + (hits * log_below(b + rho + r) if hits else 0.0)
    return float(pmf @ np.trapezoid(_MIXTURE_WEIGHTS[None, :] * np.exp(log_all), _MIXTURE_GRID, axis=1))


@functools.lru_cache(maxsize=4096)
def count_mixture_tau(accuracy: float, V: int, N: int, b: float = 1.0, hits: int = 0, r: float = 0.0,
                      rho: float = 0.0, q: float = 0.0) -> float:
    """The largest Gaussian spread ``tau`` (count units, :func:`count_mixture_accuracy`, same ``b``, ``hits``, ``r``,
    ``rho``, ``q``) at which the argmax is still right with probability ``accuracy``: 0.0 where the accuracy is out
    of reach at any spread (at or above the cap of the counts, hits and coincidences), inf where it needs no signal
    (near chance). The accuracy falls with tau over the range solved in."""
    if not (isinstance(accuracy, (int, float)) and 0 < accuracy < 1):
        raise InputError(f"count_mixture_tau: accuracy: expected a number in (0, 1), got {accuracy!r}")
    low, high = math.log(1e-3), math.log(1e3)
    gap = lambda log_tau: count_mixture_accuracy(V, N, math.exp(log_tau), b, hits, r, rho, q) - accuracy  # noqa: E731
    if gap(low) <= 0:
        return 0.0
    if gap(high) >= 0:
        return math.inf
    return math.exp(optimize.brentq(gap, low, high, xtol=1e-5))


def exact_hit_share(L: int, attention: float) -> tuple[int, float]:
    """(hits, r) of :func:`count_mixture_accuracy` for a test input of length L (DERIVATION.md §4.5): its L - 1 noise
    tokens' labels, each r = (1 - A) / ((L - 1) A) of the signal per count ahead of the other wrong labels, A the
    attention on the informative position (the rest split evenly over the noise positions). r is rounded to 6
    digits, so that equal rows share the cached solve."""
    if L <= 1:
        return 0, 0.0
    return L - 1, round((1.0 - attention) / ((L - 1) * attention), 6)


def coincidence_share(V: int, L: int, attention: float) -> tuple[float, float]:
    """(rho, q) of :func:`count_mixture_accuracy` for a test input of length L (DERIVATION.md §4.4): a training
    sample's noise token that is a token of the test input adds e . e = 1 to its label's logit, not O(1/sqrt(d)).
    Per training sample of a label, in units of the signal per sample (A^2, A the attention on the informative
    position), the mean is exactly (1 - A) / (A^2 V): each of its noise weights (summing to 1 - A) meets each of
    the test's weights (summing to 1) with probability 1 / V. With the noise weights even, r = (1 - A) / ((L - 1) A),
    the matches are nearly Poisson and add the variance q = r^2 (L - 1) (1 + (L - 1) r^2) / V per sample (the
    informative test token met at weight r, a noise one at r^2). Both are rounded to 6 digits, so that equal rows
    share the cached solve."""
    if L <= 1:
        return 0.0, 0.0
    r = (1.0 - attention) / ((L - 1) * attention)
    return (round((1.0 - attention) / (attention * attention * V), 6),
            round(r * r * (L - 1) * (1.0 + (L - 1) * r * r) / V, 6))


@functools.lru_cache(maxsize=1024)
def hits_cap(V: int, N: int, L: int, attention: float) -> float:
    """The accuracy three steps cannot exceed however large d is, from the label counts, the exact hits and the
    coincidences together (DERIVATION.md §4.4, §4.5, §11.3): :func:`count_mixture_accuracy` as the d-dependent
    Gaussian noise vanishes, with :func:`exact_hit_share` and :func:`coincidence_share`. Below :func:`count_cap`
    (0.52 against 0.85 at V = 1024, N = V^1.5, L = 32 and the attention 0.0785). Cached: the all-terms hook asks
    it for every check of a line, at the same rows."""
    return count_mixture_accuracy(V, N, 1e-3, 1.0, *exact_hit_share(L, attention), *coincidence_share(V, L, attention))


# The packs whose checks are predicted from every noise term at once (DERIVATION.md §11.3), with the constant each
# term is taken at: the attention-only pack, whose terms the probes measured (PROBED_CONSTANTS, quick-preset
# boundaries). The attention-MLP pack's MLP terms have no probed constants; it keeps the binding terms.
ALL_TERMS_CONSTANTS = {"token_retrieval_attn": PROBED_CONSTANTS}
# The d-free label-count term each of those packs keeps as Poisson counts (count_mixture_tau) rather than as one more
# Gaussian spread (DERIVATION.md §11.3): the correct label's own count is the test token's, so it enters the signal
# and the count bias together, and on N ~ V log V (a few samples per token) it is far from Gaussian. The same packs
# take the exact hits beside it (§4.5: the labels of the test input's noise tokens), the other d-free competitor.
COUNT_TERMS = {"token_retrieval_attn": "mean_bias_counts"}


def _all_terms_options(pack: str) -> dict[str, Any] | None:
    """The options of :func:`sum_of_terms_prediction` that make it the all-terms form of ``pack`` (with ``C`` = 1):
    its probed constants, its count term kept as counts and, with it, the exact hits, the coincidences and the own
    counts (DERIVATION.md §11.3-§11.6). None for a pack without probed constants."""
    constants = ALL_TERMS_CONSTANTS.get(pack)
    if constants is None:
        return None
    counts = COUNT_TERMS.get(pack)
    return {"constants": constants, "counts": counts, "exact_hits": counts is not None,
            "coincidences": counts is not None, "own_counts": counts is not None}


def all_terms_accuracy(pack: str, finite_size: Mapping[str, Any], sizes: Mapping[int, float]
                       ) -> dict[int, float] | None:
    """The accuracy the all-terms form gives at d = ``sizes[V]`` on each realised row of ``finite_size`` (the input
    :func:`all_terms_prediction` takes: ``points`` with V, N, L and ``constants`` with the attention A per row): the
    very form that function solves for d (:data:`ALL_TERMS_CONSTANTS`, :data:`COUNT_TERMS` kept as counts, the exact
    hits, the coincidences, the own counts, C = 1; the same :class:`_TermsAtRows` code), read the other way. At the
    ceiling size (``sizes``: V -> min(2V, cap)) it is the form's own ceiling, which fixes a fraction of the ceiling
    a priori when A is the a priori attention (DERIVATION.md §11.8). Rows whose V has no size are left out; None for a
    pack without an all-terms form, or without rows."""
    options = _all_terms_options(pack)
    points = (finite_size or {}).get("points") or []
    if options is None or not points:
        return None
    model = _TermsAtRows(pack, finite_size, **options)
    out: dict[int, float] = {}
    for row in model.rows:
        V = int(row["V"])
        size = sizes.get(V, sizes.get(str(V)))
        if size is None:
            continue
        if options["own_counts"]:  # the mixture's accuracy, as the solver reads it (C = 1)
            out[V] = model.grown_accuracy(row, float(size), 1.0)
        else:  # no count term: the Gaussian argmax at the signal over every spread (the solver's argmax_snr, C = 1)
            out[V] = _argmax_accuracy(model.ratio(row, float(size)), V)
    return out


def all_terms_prediction(pack: str, finite_size: Mapping[str, Any], targets: Mapping[int, float]
                         ) -> dict[str, Any] | None:
    """The registry's all-terms hook (``System.all_terms``): one check's boundary along a line from every noise term
    at once, no constant fitted (DERIVATION.md §11.3). At each realised row (``finite_size``: the line's finite-size
    prediction, whose points and constants give V, N, L and the measured attention) the smallest d at which the argmax
    over V labels is right with the check's probability (``targets``: V -> the accuracy the check's boundary reaches
    there), every term in its finite-size form times its probed constant (:data:`ALL_TERMS_CONSTANTS`): the
    d-dependent terms as one Gaussian spread per label, the d-free label counts (:data:`COUNT_TERMS`) as the Poisson
    counts they are, the correct label's count being the test token's, the labels of the test input's L - 1
    noise tokens with their exact hits (:func:`count_mixture_tau`; DERIVATION.md §4.5) and the token coincidences
    (:func:`coincidence_share`; §4.4, §11.4), both also through the other labels (§11.5), the terms on a label's own
    samples at its own count and the trigger's content in the embeddings derived part by part (§11.6). So the
    prediction reads the level against the line's cap without being told which reading applies.
    Returns ``slope`` (of log d^2 on log V), ``d`` and ``param_count`` (d^2) per V and each term's share of the
    noise variance at it,
    ``slope_gaussian_counts`` (the same with the counts and coincidences folded into one Gaussian spread,
    :func:`argmax_snr`), and a ``note`` where the label counts cap the line's accuracy at a level that does not rise
    with V (:func:`hits_cap`:
    the effect that makes a fraction of such a line's ceiling a level among the inputs that can be right); slope
    None for a row without a target or a target the counts keep out of reach at any d; None for another pack."""
    options = _all_terms_options(pack)
    points = (finite_size or {}).get("points") or []
    if options is None or not points:
        return None
    counts = options["counts"]
    counted = [count_cap(int(p["V"]), int(p["N"])) for p in points]
    caps = [hits_cap(int(p["V"]), int(p["N"]), int(p["L"]), float(c["A"]))
            for p, c in zip(points, finite_size.get("constants") or [])] if counts else counted
    out: dict[str, Any] = {"slope": None, "count_cap": {int(p["V"]): c for p, c in zip(points, counted)},
                           "cap": {int(p["V"]): c for p, c in zip(points, caps)}}
    if len(caps) == len(points) and caps[-1] <= caps[0]:
        out["note"] = (f"the label counts, the exact hits and the coincidences cap this line's accuracy at "
                       f"{min(caps):.2f}-{max(caps):.2f} at any d, not rising with V (DERIVATION.md §11.3, §11.4): "
                       f"inputs of rare tokens "
                       f"cannot be right, so a fraction of its ceiling is a level among those that can (the "
                       f"within-ceiling reading)")
    if any(int(p["V"]) not in targets or not 1.0 / int(p["V"]) < float(targets[int(p["V"])]) < 1.0 for p in points):
        return out  # no target, or at or below chance (no signal needed) or at 1 (an infinite one)
    line = {"pack": pack, "realised": {"finite_size": finite_size}}
    levels = {int(V): float(t) for V, t in targets.items()}
    found = sum_of_terms_prediction(line, None, None, accuracy=levels, C=1.0, **options)
    if found["slope"] is not None and all(math.isfinite(d) for d in found["d"].values()):
        out.update(slope=found["slope"], d={int(V): d for V, d in found["d"].items()}, shares=found["shares"],
                   param_count={int(V): d * d for V, d in found["d"].items()})  # the pack's d^2, as in the slope
    out_of_reach = sorted(int(V) for V, d in found["d"].items() if not math.isfinite(d))
    if out_of_reach:  # say why this check has no prediction from every term (the caller falls back to another form)
        at = ", ".join(f"{levels[V]:.3g} at V = {V} (cap {out['cap'][V]:.3f})" for V in out_of_reach)
        reach = (f"every term at once has no d for this check's level where it is at or above the cap of the "
                 f"counts, hits and coincidences: {at}")
        out["note"] = f"{out['note']}; {reach}" if out.get("note") else reach
    if counts is not None:  # the same with the counts folded into one Gaussian spread, for the record
        gaussian = sum_of_terms_prediction(line, None, None, accuracy=levels, constants=options["constants"], C=1.0,
                                           coincidences=True)
        if gaussian["slope"] is not None and all(math.isfinite(d) for d in gaussian["d"].values()):
            out["slope_gaussian_counts"] = gaussian["slope"]
    return out

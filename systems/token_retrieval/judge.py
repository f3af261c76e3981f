"""Term-by-term verification: each pack term's measured size against each variable, with a verdict.

The packs ``token_retrieval_attn`` / ``token_retrieval`` state every term of the reconstructed
Theorem 1 as an expression in V, N, d, L (and m). ``empirics.probes`` splits the logits after the
three steps exactly into the same terms on real instances. This module

1. reads the probe grid (``experiments/tr_probe.toml``: a star design around a base point, one
   variable moving at a time, several seeds),
2. gets one probe row per (grid point, seed) from the results store, computing the missing ones
   (``empirics.probes.probe_rows``; stored under a config with ``task = "token_retrieval_probe"``),
3. fits log(size) on log(variable) along each axis of the star (``compare.fits.fit_slope``: OLS,
   HC3, t intervals, bootstrap over seeds), or all variables jointly (``method="joint"``: one OLS of
   log size on log V, log N, log d, log L, log m over every row, HC3, t),
4. judges each slope against the term's exponent in that variable, d log(term) / d log(variable) at
   fixed others, read off the pack's sympy expression (``compare.verdicts``: TOST with delta).

What is measured for a term: the signal's mean value at the correct label; a noise term's spread
(standard deviation over the wrong labels, averaged over test inputs), both divided by the common
factor gamma * lambda. The pack writes each noise term with the union-bound factor sqrt(log V) over
the V - 1 wrong labels; the spread does not carry it, so the compared V exponent drops that log
factor (and says so). With ``statistic="max_wrong"`` (largest |value| over the wrong labels) the log
factor stays and the V verdict is taken against the prediction's finite-range slope.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import sympy as sp
import torch  # loaded by term_probes below anyway
from scipy import optimize, special, stats

from recallkit.compare.fits import finite_range_slope, fit_slope
from recallkit.compare.verdicts import decide, decide_numbers, undecidable
from recallkit.empirics.config import store_key
# term_probes loads torch (about 1 s): the judge's callers (the probe step, a token-retrieval fit's finite-size
# form) train or need its constants anyway
from recallkit.systems.token_retrieval.term_probes import (FEATURES, NORMALISER_L_POWER, PACK_TERM_COMPONENTS,
                                                           TERM_NORMALISERS, ProbeConfig, check_probe_work, decompose,
                                                           probe_rows, term_sizes)
from recallkit.theory.errors import InputError
from recallkit.theory.pack import load_pack
from recallkit.theory.realised import realised_prediction
from recallkit.theory.schema import (
    REQUIRED, Field, Section, check_value, converts, loads_toml, number, satisfies, table, validate,
)
from recallkit.theory.symbols import VARIABLES

PROBE_FILES = {"token_retrieval": Path(__file__).resolve().parent / "experiments" / "tr_probe.toml"}
DEFAULT_PACK = {"token_retrieval": "token_retrieval"}
GRID_VARIABLES = ("V", "N", "d", "L", "m")
STATISTICS = ("spread", "max_wrong")
METHODS = ("axis", "joint")
# Bumped whenever empirics.probes changes what a row holds, so that stale stored rows are not reused.
PROBE_ROW_VERSION = 3
STORE_TASK = "token_retrieval_probe"


# ----------------------------------------------------------------------------- the grid
@dataclass(frozen=True)
class ProbeGrid:
    """One preset of a probe file for one pack: a base point, the values each variable takes, seeds."""

    name: str
    path: str
    pack: str
    preset: str
    base: dict[str, int]
    vary: dict[str, tuple[int, ...]]
    seeds: tuple[int, ...]
    n_test: int
    kappa: float
    eta: float
    features: str = "relu_centred"
    delta: float = 0.25
    alpha: float = 0.05

    def points(self) -> list[dict[str, int]]:
        """The star's grid points (base first), each once."""
        out = [dict(self.base)]
        for variable, values in self.vary.items():
            for value in values:
                point = {**self.base, variable: value}
                if point not in out:
                    out.append(point)
        return out

    def configs(self):
        return [ProbeConfig(V=p["V"], N=p["N"], d=p["d"], L=p["L"], m=p.get("m"), features=self.features,
                            eta=self.eta, kappa=self.kappa, n_test=self.n_test, seed=seed)
                for p in self.points() for seed in self.seeds]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "pack": self.pack, "preset": self.preset,
                "base": dict(self.base), "vary": {k: list(v) for k, v in self.vary.items()},
                "seeds": list(self.seeds), "n_test": self.n_test, "kappa": self.kappa, "eta": self.eta,
                "features": self.features if "m" in self.base else None, "delta": self.delta, "alpha": self.alpha}


def _positive_ints(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value):
        raise InputError(f"{where}: expected a non-empty list of positive integers, got {value!r}")
    return tuple(value)


def _positive_number(value: Any, where: str) -> float:
    return check_value(_POSITIVE, value, where)


# The sections of a probe file, declared with theory.schema like every other file kind.
def _base_point(value: dict, at: str, context: Mapping[str, Any]) -> dict[str, int]:
    for variable, size in value.items():
        if variable not in GRID_VARIABLES:
            raise InputError(f"{at}.{variable}: expected one of {', '.join(GRID_VARIABLES)}")
        _positive_ints([size], f"{at}.{variable}")
    missing = {"V", "N", "d", "L"} - set(value)
    if missing:
        raise InputError(f"{at}: missing {', '.join(sorted(missing))}")
    return dict(value)


def _vary(value: dict, at: str, context: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    for variable in value:
        if variable not in context["base"]:
            raise InputError(f"{at}.{variable}: expected a variable of base ({', '.join(context['base'])})")
    return {variable: _positive_ints(values, f"{at}.{variable}") for variable, values in value.items()}


def _features(value: Any, at: str, context: Mapping[str, Any]) -> str:
    if value not in FEATURES:
        raise InputError(f"{at}: expected one of {', '.join(FEATURES)}, got {value!r}")
    return value


_POSITIVE = Field("value", (number(0, closed="neither", expected="a positive number"),), "a positive number")
_PRESET = Section("[packs.P.presets.Q]", (
    Field("base", (table(message="{at}: expected a table like {{ V = 256, N = 4000, d = 32, L = 16 }}"),
                   converts(_base_point)), "the star's centre: V, N, d, L (and m)", REQUIRED),
    Field("vary", (satisfies(lambda v: isinstance(v, dict) and bool(v), "", "{at}: expected a table of variable -> "
                             "list of values"), converts(_vary)), "variable -> its values, one at a time", REQUIRED),
    Field("features", (converts(_features),), "feature map of the MLP packs", "relu_centred"),
    Field("n_test", (satisfies(lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0, "a non-empty list "
                               "of positive integers", "{at}: expected {expected}, got [{got}]"),), "test inputs", 96),
    Field("seeds", (satisfies(lambda v: isinstance(v, list) and bool(v) and all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in v) and len(set(v)) == len(v),
        "a non-empty list of distinct non-negative integers", convert=lambda v, at, context: tuple(v)),), "seeds", (0,)),
), unknown="{where}: unknown key(s) {keys}")
# The file's [schedule] and [verdict] tables: other keys are allowed (and ignored), as they always were.
_SCHEDULE = Section("[schedule]", (
    Field("kappa", _POSITIVE.rules, "kappa of the step-size schedule", 1.0),
    Field("eta", _POSITIVE.rules, "eta of the step-size schedule", 1e-3),
), open=True)
_VERDICT = Section("[verdict]", (
    Field("delta", _POSITIVE.rules, "equivalence margin on the exponent", 0.25),
    Field("alpha", _POSITIVE.rules, "test level", 0.05),
), open=True)


def load_probe_grid(source: str = "token_retrieval", pack: str | None = None, preset: str = "quick") -> ProbeGrid:
    """Read one (pack, preset) of a probe file. ``source`` is a probe name (``token_retrieval``) or a
    path to a TOML file; ``pack`` defaults to the name's default pack (or the file's only pack)."""
    path = PROBE_FILES.get(source, Path(source))
    if not path.is_file():
        raise InputError(f"probe: {source!r}: expected a probe name ({', '.join(PROBE_FILES)}) or a probe TOML file")
    doc = loads_toml(path.read_text(encoding="utf-8"), str(path))  # nesting bounded before tomllib recurses
    packs = doc.get("packs")
    if not isinstance(packs, dict) or not packs:
        raise InputError(f"{path}: packs: expected a table of packs, each with presets")
    if pack is None:
        pack = DEFAULT_PACK.get(source) or (next(iter(packs)) if len(packs) == 1 else None)
        if pack is None:
            raise InputError(f"{path}: --pack: expected one of {', '.join(packs)}")
    if pack not in packs:
        raise InputError(f"{path}: --pack: expected one of {', '.join(packs)}, got {pack!r}")
    presets = packs[pack].get("presets", {}) if isinstance(packs[pack], dict) else None
    if not isinstance(presets, dict):
        raise InputError(f"{path}: packs.{pack}.presets: expected a table of presets")
    if preset not in presets:
        raise InputError(f"{path}: packs.{pack}.presets: --preset: expected one of {', '.join(presets)}, got {preset!r}")
    spec = validate(presets[preset], _PRESET, f"{path}: packs.{pack}.presets.{preset}")
    schedule = validate(doc.get("schedule", {}), _SCHEDULE, f"{path}: schedule")
    verdict = validate(doc.get("verdict", {}), _VERDICT, f"{path}: verdict")
    return ProbeGrid(
        name=str(doc.get("name", path.stem)), path=str(path), pack=pack, preset=preset, base=spec["base"],
        vary=spec["vary"], seeds=spec["seeds"], n_test=spec["n_test"], kappa=schedule["kappa"], eta=schedule["eta"],
        features=spec["features"], delta=verdict["delta"], alpha=verdict["alpha"])


def probe_grid_packs(source: str = "token_retrieval") -> tuple[str, ...]:
    """The packs a probe file has grids for, in its order."""
    path = PROBE_FILES.get(source, Path(source))
    packs = loads_toml(path.read_text(encoding="utf-8"), str(path)).get("packs") if path.is_file() else None
    return tuple(packs) if isinstance(packs, dict) else ()


# ----------------------------------------------------------------------------- predictions
def term_exponents(expr: sp.Expr, variables: Iterable[str]) -> tuple[dict[str, sp.Rational], sp.Rational]:
    """A pack term as coef * prod(v ** e_v) * log(V) ** P -> ({v: e_v}, P): e_v = d log term / d log v
    at fixed others, exact. InputError if the term is not of that form (sums, other logs)."""
    ell = sp.Symbol("ell_logV", positive=True)
    plain = expr.subs(sp.log(VARIABLES["V"]), ell)
    if plain.has(sp.log):
        raise InputError(f"term {expr}: expected a power law times a power of log(V)")
    log_term = sp.expand_log(sp.log(plain), force=True)
    exponents = {}
    for name in variables:
        sym = VARIABLES[name]
        value = sp.nsimplify(sp.simplify(sp.diff(log_term, sym) * sym))
        if value.free_symbols:
            raise InputError(f"term {expr}: not a power law in {name} (d log term / d log {name} = {value})")
        exponents[name] = value
    log_power = sp.nsimplify(sp.simplify(sp.diff(log_term, ell) * ell))
    if log_power.free_symbols:
        raise InputError(f"term {expr}: not a power of log(V)")
    return exponents, log_power


def predicted_exponent(term, variable: str, statistic: str = "spread") -> dict[str, Any]:
    """What the probe statistic of ``term`` (a theory.pack.Term) should scale like in ``variable``."""
    exponents, log_power = term_exponents(term.expr, [variable])
    notes = []
    if term.role == "noise" and statistic == "spread" and log_power != 0:
        notes.append(f"the pack term carries log(V)^{log_power} (union bound over the wrong labels); the spread "
                     f"over labels does not, so it is compared without it")
        log_power = log_power - sp.Rational(1, 2)
    if variable != "V":
        log_power = sp.Integer(0)
    elif log_power != 0:
        notes.append(f"log(V)^{log_power} remains: the verdict uses the finite-range slope over the fitted V range")
    return {"exponent": float(exponents[variable]), "exponent_exact": str(exponents[variable]),
            "log_power": float(log_power), "log_power_exact": str(log_power), "notes": notes}


# ----------------------------------------------------------------------------- rows (store-backed)
def _store_config(cfg) -> dict[str, Any]:
    return {"task": STORE_TASK, "probe_row_version": PROBE_ROW_VERSION, **dataclasses.asdict(cfg)}


def probe_config_hash(store_config: Mapping[str, Any]) -> str:
    """The store key of a probe row's config (the store's one key scheme, empirics.config.store_key)."""
    return store_key(dict(store_config))


def collect_rows(grid: ProbeGrid, store=None, code_version: str = "unknown",
                 log: Callable[[str], None] | None = None) -> tuple[list[dict], dict[str, int]]:
    """One probe row per (grid point, seed): reused from ``store`` (an empirics.store.ResultStore or
    None) when present, computed (and stored, one row at a time) otherwise. -> (rows, counts)."""
    import torch


    configs = grid.configs()
    store_cfgs = [_store_config(c) for c in configs]
    hashes = [probe_config_hash(c) for c in store_cfgs]
    stored = store.get(hashes) if store is not None else {}
    check_probe_work([cfg for cfg, h in zip(configs, hashes) if h not in stored], f"probe {grid.name}")
    rows, reused, computed = [], 0, 0
    for index, (cfg, scfg, h) in enumerate(zip(configs, store_cfgs, hashes)):
        if h in stored:
            rows.append(stored[h]["metrics"])
            reused += 1
            continue
        if log:
            log(f"probe {index + 1}/{len(configs)}: V={cfg.V} N={cfg.N} d={cfg.d} L={cfg.L}"
                + (f" m={cfg.m}" if cfg.m else "") + f" seed={cfg.seed}")
        start = time.perf_counter()
        row = probe_rows([cfg])[0]
        row["wall_time_s"] = time.perf_counter() - start
        rows.append(row)
        computed += 1
        if store is not None and not store.readonly:
            store.add(grid.name, [scfg], [h], [row], code_version, torch.__version__)
    if store is not None and reused:
        store.link(grid.name, [h for h in hashes if h in stored])
    return rows, {"reused": reused, "computed": computed}


# ----------------------------------------------------------------------------- fits
def _statistic_for(term, statistic: str) -> str:
    return "at_label" if term.role == "signal" else statistic


def _row_point(row: Mapping[str, Any]) -> dict[str, Any]:
    cfg = row["config"]
    return {v: cfg.get(v) for v in GRID_VARIABLES}


def _shared_components(pack_terms) -> dict[str, list[str]]:
    shared: dict[str, list[str]] = {}
    for term in pack_terms:
        for other in pack_terms:
            if other.name != term.name and PACK_TERM_COMPONENTS.get(term.name) == PACK_TERM_COMPONENTS.get(other.name):
                shared.setdefault(term.name, []).append(other.name)
    return shared


def _entry(term, variable, statistic, prediction, components, shared, grid) -> dict[str, Any]:
    notes = list(prediction["notes"])
    if shared:
        notes.append(f"shares its probe component with {', '.join(shared)} (the two cannot be split exactly); "
                     f"the fit measures whichever dominates on this grid, so at most one of them can agree")
    if term.name in COINCIDENT_TERMS:
        notes.append("measured without its exact token coincidences (a training noise token that is a token of the "
                     "test input), which follow other orders and enter the all-terms prediction as derived "
                     "(DERIVATION.md §4.4)")
    if term.name in HIT_TERMS:
        notes.append("measured without the exact hits (a training sample's informative token that is a noise token of "
                     "the test input), which the all-terms prediction takes as derived, on their own labels and "
                     "through the others (DERIVATION.md §4.3, §4.5, §11.5)")
    return {"pack": grid.pack, "preset": grid.preset, "term": term.name, "role": term.role, "variable": variable,
            "statistic": _statistic_for(term, statistic), "components": list(components),
            "predicted_exponent": prediction["exponent"], "predicted_exponent_exact": prediction["exponent_exact"],
            "log_power": prediction["log_power"], "notes": notes, "reference": term.reference}


def _size(row: Mapping[str, Any], term: str, stat: str, corrected: bool) -> float:
    """A row's measured size of ``term``; ``corrected``: with the measured normalisers (A, |r|, |t|,
    |o|) replaced by their asymptotic L-powers, i.e. with the finite-L drift of the attention divided out."""
    size = row["terms"][term][stat]
    if not corrected:
        return size
    L = row["config"]["L"]
    for name, power in TERM_NORMALISERS[term].items():
        measured = row["norms"][name]
        if not measured > 0:
            return math.nan
        size *= (L ** NORMALISER_L_POWER[name] / measured) ** power
    return size


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
    """The registry's finite-size hook (``System.finite_size``): the factor that replaces a term's asymptotic
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


def boundary_terms(points: Iterable[Mapping[str, int]], seeds: Iterable[int] = (0, 1), n_test: int = 512,
                   accuracy: float = 0.1) -> list[dict[str, Any]]:
    """The term probes at given (V, N, L, d) of the attention-only model, e.g. a fit's boundary points (DERIVATION.md
    §11): per point and seed the accuracy, the measured signal-to-noise ratio ``snr`` (the correct label's mean signal
    over the mean spread of the whole logit over the wrong labels), ``argmax_snr_needed`` (:func:`argmax_snr` at
    ``accuracy``), ``gauss_accuracy`` (the accuracy if the wrong labels' logits were Gaussian around their mean,
    given each input's own margin), each pack term's share of the summed noise variance (``shares``) and its spread
    over the wrong labels divided by gamma (``terms``), the token coincidences (:data:`COINCIDENCES`,
    :data:`POSITION_COINCIDENCES`) among them. One thread of float64 work each; 1-10 s at V = 512."""
    # the pack's noise terms and the token coincidences, which are in none of them (DERIVATION.md §4.4)
    parts = {**PACK_TERM_COMPONENTS, COINCIDENCES: (COINCIDENCES,), POSITION_COINCIDENCES: (POSITION_COINCIDENCES,),
             HIT_OVERLAPS: (HIT_OVERLAPS,)}
    out = []
    for point in points:
        for seed in seeds:
            cfg = ProbeConfig(V=int(point["V"]), N=int(point["N"]), d=int(point["d"]), L=int(point["L"]),
                              n_test=n_test, seed=int(seed))
            result = decompose(cfg)
            logits, labels = result["logits"], result["labels"]
            index = torch.arange(len(labels))
            wrong_mask = torch.ones_like(logits, dtype=torch.bool)
            wrong_mask[index, labels] = False
            wrong = logits[wrong_mask].reshape(len(labels), -1)
            centre, spread = wrong.mean(1), wrong.std(1)
            margin = (logits[index, labels] - centre) / spread
            sizes = {name: size["spread"] for name, size in term_sizes(result, parts).items()
                     if name != "signal" and not name.startswith("mlp")}
            total = sum(v * v for v in sizes.values())
            signal = float(result["components"]["signal"][index, labels].mean())
            out.append({**{k: int(point[k]) for k in ("V", "N", "L", "d")}, "seed": int(seed),
                        "accuracy": result["accuracy"], "snr": signal / float(spread.mean()),
                        "argmax_snr_needed": argmax_snr(accuracy, cfg.V),
                        "gauss_accuracy": float(torch.special.ndtr(margin).pow(cfg.V - 1).mean()),
                        "shares": {k: v * v / total for k, v in sizes.items()}, "terms": sizes})
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
    model = _TermsAtRows(line_prediction["pack"], line_prediction["realised"]["finite_size"], constants, counts,
                         exact_hits, coincidences, own_counts)
    rows, parts, ratio, grown_accuracy = model.rows, model.parts, model.ratio, model.grown_accuracy
    hit, coincident = model.hit, model.coincident

    def level(V: int) -> float:
        return float(accuracy[V] if isinstance(accuracy, Mapping) else accuracy)

    def needed(row: Mapping[str, Any]) -> float:
        V = row["V"]
        if accuracy is None:
            return math.sqrt(math.log(V))
        if counts is None:
            return argmax_snr(level(V), V)
        # b = 1: the count bias and the signal are the same A^2 / N per training sample (DERIVATION.md §4.1, §4.2;
        # their probed constants, 0.99 and 1.01, agree within the probes' spread). Taking their ratio 1.02 instead
        # would decide every tie 2 n_x = n_k against the correct label, a 0.02 bias in the cap at N ~ V log V.
        hits, r = hit[V] if exact_hits else (0, 0.0)
        tau = count_mixture_tau(level(V), V, row["N"], 1.0, hits, r, *coincident[V])
        lam = row["N"] / V
        return lam / tau if tau > 0 else math.inf  # tau 0: the level is above what the counts allow at any d

    if counts is not None and accuracy is None:
        raise InputError("sum_of_terms_prediction: counts needs an accuracy (the mixture is solved at a level)")
    if own_counts and counts is None:
        raise InputError("sum_of_terms_prediction: own_counts needs counts (it grows the spreads inside the mixture)")
    if C is None:
        reference = next(row for row in rows if row["V"] == reference_V)
        if own_counts:
            at = float(boundary_d[reference_V])
            miss = lambda log_c: grown_accuracy(reference, at, math.exp(log_c)) - level(reference_V)  # noqa: E731
            C = math.exp(optimize.brentq(miss, -7.0, 7.0, xtol=1e-6))
        else:
            C = ratio(reference, float(boundary_d[reference_V])) / needed(reference)
    found: dict[int, float] = {}
    for row in rows:
        if own_counts:
            gap = lambda log_d, row=row: grown_accuracy(row, math.exp(log_d), C) - level(row["V"])  # noqa: E731
            # below chance or reached at d = 1 (no signal needed), or out of reach at any d: no d to solve for
            solvable = level(row["V"]) > 1.0 / row["V"] and gap(0.0) < 0 < gap(math.log(1e7))
            found[row["V"]] = math.exp(optimize.brentq(gap, 0.0, math.log(1e7), xtol=1e-4)) if solvable else math.inf
            continue
        target = C * needed(row)
        if not 0 < target < math.inf:  # out of reach at any d, or (near chance) no signal needed: no d to solve for
            found[row["V"]] = math.inf
            continue
        gap = lambda log_d, row=row, target=target: (  # noqa: E731
            math.log(ratio(row, math.exp(log_d))) - math.log(target))
        found[row["V"]] = math.exp(optimize.brentq(gap, 0.0, math.log(1e7))) if gap(math.log(1e7)) > 0 else math.inf
    reached = [(V, d) for V, d in found.items() if math.isfinite(d)]
    slope = (float(np.polyfit(np.log([V for V, _ in reached]), 2 * np.log([d for _, d in reached]), 1)[0])
             if len(reached) > 1 else None)
    shares = {}
    for row in rows:
        if math.isfinite(found[row["V"]]):
            noise = parts(row, found[row["V"]])[1]
            total = sum(v * v for v in noise.values())
            shares[row["V"]] = {name: v * v / total for name, v in noise.items()}
    return {"d": found, "slope": slope, "shares": shares, "C": C}


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


def _finite_size_fit(rows, grid, term, variable, stat, fit_entry, statistic) -> dict[str, Any]:
    """The raw fit judged against the finite-size prediction: the slope, over the same rows, of log of
    :func:`finite_size_value` on log ``variable`` (each row at its own measured kappa')."""
    xs, ys, kappas = [], [], []
    for row in rows:
        point = _row_point(row)
        if any(point[v] != grid.base.get(v) for v in grid.base if v != variable):
            continue
        size = _size(row, term.name, stat, False)
        if not (size > 0 and math.isfinite(size)):
            continue
        kappa = float(row.get("kappa_measured", grid.kappa))
        xs.append(math.log(point[variable]))
        ys.append(math.log(finite_size_value(term, point, kappa, statistic)))
        kappas.append(kappa)
    out = {"predicted_exponent": None, "kappa_measured": None, "verdict": None, "verdict_reason": None}
    if len(set(xs)) < 2:
        return {**out, "verdict": "inconclusive", "verdict_reason": "fewer than 2 distinct values"}
    x, y = np.asarray(xs), np.asarray(ys)
    predicted = float(np.polyfit(x, y, 1)[0])
    out["predicted_exponent"] = predicted
    out["kappa_measured"] = [float(min(kappas)), float(max(kappas))]
    if fit_entry.get("fitted_exponent") is None or fit_entry.get("se") is None or not fit_entry.get("df_resid"):
        verdict = undecidable(predicted, grid.delta, grid.alpha, fit_entry.get("verdict_reason") or "no fit")
    else:
        verdict = decide_numbers(fit_entry["fitted_exponent"], fit_entry["se"], fit_entry["df_resid"], predicted,
                                 delta=grid.delta, alpha=grid.alpha)
    reason = (f"{verdict.reason}; finite-size prediction: the pack term at the probed sizes with the exact finite-L "
              f"softmax weights at the measured kappa' {min(kappas):.2f}-{max(kappas):.2f} (DERIVATION.md §8)")
    return {**out, "verdict": verdict.verdict, "verdict_reason": reason, "p_tost": verdict.p_tost}


def _axis_fit(rows, grid, term, variable, stat, prediction, corrected: bool) -> dict[str, Any]:
    xs, ys, seeds, values, dropped = [], [], [], [], 0
    for row in rows:
        point = _row_point(row)
        if any(point[v] != grid.base.get(v) for v in grid.base if v != variable):
            continue
        size = _size(row, term.name, stat, corrected)
        if not (size > 0 and math.isfinite(size)):
            dropped += 1
            continue
        xs.append(math.log(point[variable]))
        ys.append(math.log(size))
        seeds.append(row["config"]["seed"])
        values.append(point[variable])
    if len(set(xs)) < 3:
        verdict = undecidable(prediction["exponent"], grid.delta, grid.alpha,
                              f"only {len(set(xs))} distinct {variable} values with a positive size "
                              f"({dropped} non-positive dropped); a slope with an interval needs >= 3")
        return {**_fit_fields(None), **verdict.to_dict()}
    fit = fit_slope(xs, ys, seeds, alpha=grid.alpha)
    verdict = decide(fit, prediction["exponent"], delta=grid.delta, alpha=grid.alpha, log_power=prediction["log_power"])
    return {**_fit_fields(fit), "values": sorted(set(values)), **verdict.to_dict()}


def _joint_fit_fields(fitted, variable, prediction, grid) -> dict[str, Any]:
    if fitted is None or fitted.get("error"):
        verdict = undecidable(prediction["exponent"], grid.delta, grid.alpha, (fitted or {}).get("error", "no joint fit"))
        return {**_fit_fields(None), **verdict.to_dict()}
    index = fitted["names"].index(variable)
    compared = finite_range_slope(prediction["exponent"], prediction["log_power"], fitted["x_range"][index])
    verdict = decide_numbers(fitted["params"][index], fitted["bse"][index], fitted["df_resid"], compared,
                             delta=grid.delta, alpha=grid.alpha)
    out = {"fitted_exponent": fitted["params"][index], "se": fitted["bse"][index], "ci": fitted["ci"][index],
           "ci_bootstrap": None, "r2": fitted["r2"], "n_points": fitted["n_points"], "n_seeds": fitted["n_seeds"],
           "values": fitted["values"][index], "df_resid": fitted["df_resid"], **verdict.to_dict()}
    out["predicted_slope"] = prediction["exponent"]
    return out


_CORRECTED_KEYS = ("fitted_exponent", "se", "ci", "ci_bootstrap", "r2", "n_points", "verdict", "verdict_reason",
                   "p_tost", "predicted_slope_tested", "band")


def fit_terms(rows: list[dict], grid: ProbeGrid, pack=None, statistic: str = "spread",
              method: str = "axis") -> list[dict[str, Any]]:
    """One entry per (pack term, varied variable): prediction, fitted exponent with intervals, verdict,
    and under ``"drift_corrected"`` the same fit with the measured attention normalisers swapped for
    their asymptotic L-powers (what is left is the derivation's structure, not the finite-L transient)."""
    if statistic not in STATISTICS:
        raise InputError(f"--statistic: expected one of {', '.join(STATISTICS)}, got {statistic!r}")
    if method not in METHODS:
        raise InputError(f"--method: expected one of {', '.join(METHODS)}, got {method!r}")
    pack = load_pack(grid.pack) if pack is None else pack
    terms = [t for t in pack.terms if t.name in PACK_TERM_COMPONENTS]
    shared = _shared_components(terms)
    variables = [v for v in GRID_VARIABLES if v in grid.vary]
    joint = {flag: _joint_fits(rows, terms, variables, statistic, grid.alpha, flag)
             for flag in (False, True)} if method == "joint" else {}
    out = []
    for term in terms:
        stat = _statistic_for(term, statistic)
        for variable in variables:
            prediction = predicted_exponent(term, variable, statistic)
            entry = _entry(term, variable, statistic, prediction, PACK_TERM_COMPONENTS[term.name],
                           shared.get(term.name), grid)
            fits = {}
            for corrected in (False, True):
                if method == "joint":
                    fits[corrected] = _joint_fit_fields(joint[corrected].get(term.name), variable, prediction, grid)
                else:
                    fits[corrected] = _axis_fit(rows, grid, term, variable, stat, prediction, corrected)
            entry.update(fits[False])
            entry["drift_corrected"] = {k: fits[True].get(k) for k in _CORRECTED_KEYS}
            if method == "axis":
                entry["finite_size"] = _finite_size_fit(rows, grid, term, variable, stat, fits[False], statistic)
            entry["method"] = ("joint OLS of log size on log " + ", log ".join(variables) + " (HC3, t)"
                               if method == "joint" else
                               f"OLS of log size on log {variable} along the {variable} axis (HC3, t; bootstrap over seeds)")
            out.append(entry)
    return out


def _fit_fields(fit) -> dict[str, Any]:
    if fit is None:
        return {"fitted_exponent": None, "se": None, "ci": None, "ci_bootstrap": None, "r2": None,
                "n_points": 0, "n_seeds": 0, "values": [], "df_resid": None}
    return {"fitted_exponent": fit.slope, "se": fit.slope_se, "ci": list(fit.slope_ci),
            "ci_bootstrap": [None if not math.isfinite(v) else v for v in fit.slope_ci_bootstrap],
            "r2": fit.r2, "n_points": fit.n_points, "n_seeds": fit.n_seeds, "df_resid": fit.df_resid}


def _joint_fits(rows, terms, variables, statistic, alpha, corrected=False) -> dict[str, dict[str, Any]]:
    """log size = b0 + sum_v b_v log v over every row, per term (statsmodels OLS, HC3, use_t)."""
    from statsmodels.regression.linear_model import OLS  # not statsmodels.api: it imports every model (0.4 s)
    from statsmodels.tools.tools import add_constant

    out = {}
    for term in terms:
        stat = _statistic_for(term, statistic)
        X, y, seeds = [], [], set()
        for row in rows:
            size = _size(row, term.name, stat, corrected)
            if size > 0 and math.isfinite(size):
                point = _row_point(row)
                X.append([math.log(point[v]) for v in variables])
                y.append(math.log(size))
                seeds.add(row["config"]["seed"])
        X_arr = np.asarray(X)
        if len(y) <= len(variables) + 1 or any(len(set(X_arr[:, i])) < 3 for i in range(len(variables))):
            out[term.name] = {"error": "too few rows with a positive size for a joint fit"}
            continue
        result = OLS(np.asarray(y), add_constant(X_arr, has_constant="add")).fit(cov_type="HC3", use_t=True)
        ci = result.conf_int(alpha)
        out[term.name] = {"names": list(variables), "params": [float(v) for v in result.params[1:]],
                          "bse": [float(v) for v in result.bse[1:]], "ci": [[float(a), float(b)] for a, b in ci[1:]],
                          "df_resid": int(round(result.df_resid)), "r2": float(result.rsquared), "n_points": len(y),
                          "n_seeds": len(seeds),
                          "x_range": [(float(X_arr[:, i].min()), float(X_arr[:, i].max())) for i in range(len(variables))],
                          "values": [sorted({int(round(math.exp(v))) for v in X_arr[:, i]}) for i in range(len(variables))]}
    return out


# ----------------------------------------------------------------------------- entry points
def run_probe(source: str = "token_retrieval", pack: str | None = None, preset: str = "quick", *, store=None,
              code_version: str = "unknown", statistic: str = "spread", method: str = "axis",
              delta: float | None = None, alpha: float | None = None, rows: list[dict] | None = None,
              log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The whole probe document (= ``recallkit probe --json``): grid, provenance of the rows, fits."""
    if statistic not in STATISTICS:
        raise InputError(f"--statistic: expected one of {', '.join(STATISTICS)}, got {statistic!r}")
    if method not in METHODS:
        raise InputError(f"--method: expected one of {', '.join(METHODS)}, got {method!r}")
    grid = load_probe_grid(source, pack, preset)
    if delta is not None:
        grid = dataclasses.replace(grid, delta=_positive_number(delta, "--delta"))
    if alpha is not None:
        if not 0 < alpha < 0.5:
            raise InputError(f"--alpha: expected a number in (0, 0.5), got {alpha}")
        grid = dataclasses.replace(grid, alpha=float(alpha))
    counts = {"reused": 0, "computed": 0}
    if rows is None:
        rows, counts = collect_rows(grid, store=store, code_version=code_version, log=log)
    table = fit_terms(rows, grid, statistic=statistic, method=method)
    verdicts = ("consistent", "inconsistent", "inconclusive")
    summary = {v: sum(1 for e in table if e["verdict"] == v) for v in verdicts}
    summary_corrected = {v: sum(1 for e in table if e["drift_corrected"]["verdict"] == v) for v in verdicts}
    summary_finite = {v: sum(1 for e in table if (e.get("finite_size") or {}).get("verdict") == v) for v in verdicts}
    return {"grid": grid.to_dict(), "statistic": statistic, "method": method, "rows": counts,
            "store": str(store.path) if store is not None else None,
            "threads": sorted({r.get("threads") for r in rows}), "devices": sorted({r.get("device") for r in rows}),
            "accuracy": {"mean": float(np.mean([r["accuracy"] for r in rows])),
                         "min": float(min(r["accuracy"] for r in rows)), "max": float(max(r["accuracy"] for r in rows))},
            "attention_informative": {"min": float(min(r["norms"]["A_test"] for r in rows)),
                                      "max": float(max(r["norms"]["A_test"] for r in rows))},
            "summary": summary, "summary_drift_corrected": summary_corrected, "summary_finite_size": summary_finite,
            "inconsistent_finite_size": [f"{e['term']} in {e['variable']}" for e in table
                                         if (e.get("finite_size") or {}).get("verdict") == "inconsistent"],
            "inconsistent": [f"{e['term']} in {e['variable']}" for e in table if e["verdict"] == "inconsistent"],
            "inconsistent_drift_corrected": [f"{e['term']} in {e['variable']}" for e in table
                                             if e["drift_corrected"]["verdict"] == "inconsistent"],
            "table": table}


def probe_table(source: str = "token_retrieval", pack: str | None = None, preset: str = "quick", **kwargs) -> list[dict]:
    """The probe table as plain dicts (one per term and variable) for the report; keyword arguments as
    :func:`run_probe` (``store``, ``rows``, ``statistic``, ``method``, ``delta``, ``alpha``, ``log``)."""
    return run_probe(source, pack, preset, **kwargs)["table"]


def _interval_text(pair) -> str:
    return "-" if not pair or pair[0] is None else f"[{pair[0]:+.2f}, {pair[1]:+.2f}]"


def format_table(doc: dict[str, Any]) -> str:
    """The probe document as an aligned text table, with each verdict's reason below it."""
    grid = doc["grid"]
    level = f"{100 * (1 - grid['alpha']):g}%"
    header = ["term", "var", "predicted", "fitted", f"{level} CI (HC3)", "verdict", "finite-size pred.",
              "verdict (finite)", "drift-corrected", f"{level} CI", "verdict (corrected)"]
    body = []
    for e in doc["table"]:
        c = e["drift_corrected"]
        predicted = f"{e['predicted_exponent']:+.3f}"
        finite = e.get("predicted_slope_tested", e.get("predicted_slope_finite_range"))  # (an older probe document)
        if finite is not None and abs(finite - e["predicted_exponent"]) > 1e-12:
            predicted += f" (range {finite:+.3f})"
        body.append([e["term"], e["variable"], predicted,
                     "-" if e["fitted_exponent"] is None else f"{e['fitted_exponent']:+.3f}",
                     _interval_text(e["ci"]), e["verdict"],
                     "-" if (e.get("finite_size") or {}).get("predicted_exponent") is None
                     else f"{e['finite_size']['predicted_exponent']:+.3f}",
                     (e.get("finite_size") or {}).get("verdict") or "-",
                     "-" if c["fitted_exponent"] is None else f"{c['fitted_exponent']:+.3f}",
                     _interval_text(c["ci"]), c["verdict"]])
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    base = ", ".join(f"{k}={v}" for k, v in grid["base"].items())
    vary = "; ".join(f"{k} in {v}" for k, v in grid["vary"].items())
    text = [f"{grid['name']}: pack {grid['pack']}, preset {grid['preset']}; base {base}; {vary}; seeds {grid['seeds']}, "
            f"n_test {grid['n_test']}; kappa {grid['kappa']:g}, eta {grid['eta']:g}"
            + (f", features {grid['features']}" if grid.get("features") else ""),
            f"size = term / (gamma * lambda); signal: mean at the correct label; noise: {doc['statistic']} over the "
            f"wrong labels; {doc['method']} fits of log size; verdict: TOST, delta {grid['delta']:g}, alpha {grid['alpha']:g}; "
            f"drift-corrected: measured A, |r|, |t|, |o| replaced by their asymptotic L-powers",
            f"rows: reused {doc['rows']['reused']}, computed {doc['rows']['computed']}; threads {doc['threads']}; "
            f"devices {doc['devices']}; accuracy {doc['accuracy']['min']:.3f}-{doc['accuracy']['max']:.3f}; "
            f"A_test {doc['attention_informative']['min']:.3f}-{doc['attention_informative']['max']:.3f}",
            "  ".join(h.ljust(w) for h, w in zip(header, widths)),
            "  ".join("-" * w for w in widths)]
    text.extend("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in body)
    text.append("")
    for label, key, bad in (("raw", "summary", "inconsistent"),
                            ("finite-size", "summary_finite_size", "inconsistent_finite_size"),
                            ("drift-corrected", "summary_drift_corrected", "inconsistent_drift_corrected")):
        if key not in doc:
            continue
        s = doc[key]
        text.append(f"{label}: {s['consistent']} consistent, {s['inconsistent']} inconsistent, "
                    f"{s['inconclusive']} inconclusive" + (f"; inconsistent: {', '.join(doc[bad])}" if doc[bad] else ""))
    notes = sorted({n for e in doc["table"] for n in e["notes"]})
    for note in notes:
        text.append(f"note: {note}")
    for index, e in enumerate(doc["table"], 1):
        text.append(f"[{index}] {e['term']} in {e['variable']}: {e['verdict']}: {e['verdict_reason']}")
        f = e.get("finite_size") or {}
        if f.get("verdict"):
            text.append(f"    finite-size: {f['verdict']}: {f['verdict_reason']}")
        c = e["drift_corrected"]
        text.append(f"    drift-corrected: {c['verdict']}: {c['verdict_reason']}")
    return "\n".join(text)

"""The exact sample-bound ceiling of token retrieval (systems/token_retrieval/DERIVATION.md §7.1).

A test token that never appeared as the informative token of one of the N training samples has a
label that is uniform over the labels not seen in training, whatever else the data hold. So the
population accuracy of ANY estimator trained on N samples over a vocabulary of V tokens is at most

    acc*(V, N) = E[K]/V + P(K < V)/V,   K = number of distinct informative tokens seen,
    E[K]/V     = 1 - (1 - 1/V)^N,
    P(K = V)   = sum_j (-1)^j binom(V, j) (1 - j/V)^N   (= V! S(N, V) / V^N, surjections).

Everything here is pure Python integer/float arithmetic (no numpy, no torch): ``sample_bound_exact``
returns the ceiling as a ``fractions.Fraction`` computed with integers only; ``sample_bound_accuracy``
returns a float (the exact value rounded, or a Bonferroni bracket's midpoint for sizes where the
integers would be huge). ``instance_ceiling`` is the same ceiling for one given training set, and
``ceiling_check`` decides whether a measured accuracy on a finite evaluation set beats a ceiling by
more than binomial sampling explains.
"""
from __future__ import annotations

import math
from fractions import Fraction

from recallkit.theory.errors import InputError

# Exact integers cost about V pows of N log2 V bits each; above this budget (about 0.25 s on one
# core) the float Bonferroni bracket is used instead.
_EXACT_BIT_BUDGET = 20_000_000


def _check(V: int, N: int) -> None:
    for name, value, low in (("V", V, 1), ("N", N, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"sample bound: {name}: expected an integer >= {low}, got {value!r}")


def surjection_count(V: int, N: int) -> int:
    """Number of maps [N] -> [V] that hit every token: sum_j (-1)^j binom(V, j) (V - j)^N (exact)."""
    _check(V, N)
    if N < V:
        return 0
    total, binom = 0, 1
    for j in range(V + 1):
        total += (-1) ** j * binom * (V - j) ** N
        binom = binom * (V - j) // (j + 1)
    return total


def sample_bound_exact(V: int, N: int) -> Fraction:
    """acc*(V, N) as an exact fraction (integer arithmetic only; cost grows like V * N log V bits)."""
    _check(V, N)
    total = V**N
    seen = Fraction(total - (V - 1) ** N, total)
    some_unseen = Fraction(total - surjection_count(V, N), total)
    return seen + some_unseen / V


def _some_unseen_probability(V: int, N: int) -> tuple[float, float]:
    """P(K < V) bracketed by Bonferroni partial sums of inclusion-exclusion (floats, log space).

    The partial sums of sum_{j>=1} (-1)^(j+1) binom(V, j) (1 - j/V)^N alternately over- and
    under-estimate the union probability, so two consecutive ones bracket it. Returns (lo, hi)."""
    lo, hi = 0.0, 1.0
    partial = 0.0
    for j in range(1, V):
        log_term = (math.lgamma(V + 1) - math.lgamma(j + 1) - math.lgamma(V - j + 1)
                    + N * math.log1p(-j / V))
        term = math.exp(log_term) if log_term < 700 else math.inf
        partial += term if j % 2 else -term
        if j % 2:
            hi = min(hi, partial)
        else:
            lo = max(lo, partial)
        if term <= 1e-17 * max(partial, 1e-300) or hi - lo <= 1e-15:
            break
    return max(0.0, lo), min(1.0, hi)


def sample_bound_accuracy(V: int, N: int) -> float:
    """acc*(V, N) as a float: exact (rounded) when the integers stay moderate, else the midpoint of a
    Bonferroni bracket (tight to about 1e-15 / V wherever N >= V log V) (see :func:`sample_bound_bracket`)."""
    lo, hi = sample_bound_bracket(V, N)
    return 0.5 * (lo + hi)


def sample_bound_bracket(V: int, N: int) -> tuple[float, float]:
    """(lower, upper) floats enclosing acc*(V, N); equal up to rounding when computed exactly.

    When neither the exact integers (too large) nor the Bonferroni bracket (cancellation: many
    unseen tokens expected) settle P(K < V), the bracket is widened to the safe [lo, hi] it has,
    never narrowed; an upper bound is what a ceiling check needs."""
    _check(V, N)
    seen = -math.expm1(N * math.log1p(-1.0 / V)) if V > 1 else float(N > 0)
    if N < V:
        value = seen + 1.0 / V
        return value, value
    if V * N * math.log2(V) <= _EXACT_BIT_BUDGET:
        value = float(sample_bound_exact(V, N))
        return value, value
    lo, hi = _some_unseen_probability(V, N)
    return seen + lo / V, seen + hi / V


def instance_ceiling(V: int, seen: int) -> float:
    """The ceiling for ONE training set in which ``seen`` distinct tokens appeared as informative tokens:
    (K + [K < V]) / V. The Bayes-optimal estimator is right on the K seen tokens and, on an unseen one,
    guesses among the V - K unseen labels. A single run is judged against this, since its own K may
    exceed E[K] (so its accuracy may exceed acc*(V, N), the average over training sets)."""
    _check(V, 0)
    if isinstance(seen, bool) or not isinstance(seen, int) or not 0 <= seen <= V:
        raise InputError(f"instance ceiling: seen: expected an integer in [0, V={V}], got {seen!r}")
    return (seen + (1 if seen < V else 0)) / V


def ceiling_check(accuracy: float, n_eval: int, ceiling: float, alpha: float = 1e-3) -> dict:
    """Does a measured accuracy (correct / n_eval on fresh samples) beat ``ceiling``?

    One-sided exact binomial test of H0: population accuracy <= ceiling. The model is flagged
    (``"violates": True``) when P(Binomial(n_eval, ceiling) >= correct) < alpha, i.e. when the excess
    over the ceiling is too large to be evaluation-set noise. Returns a plain dict with the numbers,
    including the largest accuracy this n_eval lets pass (what the tolerance amounts to)."""
    from scipy import stats  # about 0.7 s to import: only a ceiling check needs it, not the bound itself

    if isinstance(n_eval, bool) or not isinstance(n_eval, int) or n_eval < 1:
        raise InputError(f"ceiling check: n_eval: expected a positive integer, got {n_eval!r}")
    for name, value in (("accuracy", accuracy), ("ceiling", ceiling)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise InputError(f"ceiling check: {name}: expected a number in [0, 1], got {value!r}")
    if not 0 < alpha < 1:
        raise InputError(f"ceiling check: alpha: expected a number in (0, 1), got {alpha!r}")
    correct = int(round(accuracy * n_eval))
    p_value = float(stats.binom.sf(correct - 1, n_eval, ceiling))
    largest = int(stats.binom.isf(alpha, n_eval, ceiling))
    while largest < n_eval and stats.binom.sf(largest, n_eval, ceiling) >= alpha:
        largest += 1    # isf can sit one below the last accepted count at the discrete edge
    return {"accuracy": float(accuracy), "n_eval": n_eval, "correct": correct, "ceiling": float(ceiling),
            "largest_accepted_accuracy": largest / n_eval, "p_value": p_value, "alpha": alpha,
            "violates": p_value < alpha}

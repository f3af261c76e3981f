"""The finite-size numbers compare asks for on every token-retrieval check are importable without torch: the pure
module, its tables and the judge that re-exports them (the registry's hooks name judge:finite_size_factor)."""
import subprocess
import sys

import pytest

CHECK = """
import sys
import {module}
assert {names!r} and all(hasattr({module}, name) for name in {names!r})
print("torch" in sys.modules)
"""


@pytest.mark.parametrize("module, names", [
    ("recallkit.systems.token_retrieval.finite_size",
     ("finite_size_factor", "all_terms_prediction", "count_mixture_accuracy", "argmax_snr")),
    ("recallkit.systems.token_retrieval.terms", ("ProbeConfig", "TERM_NORMALISERS", "schedule_gamma")),
    ("recallkit.systems.token_retrieval.judge",
     ("finite_size_factor", "all_terms_prediction", "run_probe", "DEFAULT_PACK", "probe_grid_packs")),
    ("recallkit.systems.token_retrieval.predictions", ("PREDICTION_SOURCE",)),
])
def test_the_finite_size_numbers_import_no_torch(module, names):
    done = subprocess.run([sys.executable, "-c", CHECK.format(module=module, names=names)], capture_output=True,
                          text=True, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", f"importing {module} imported torch"


def test_the_check_sees_torch():
    """The same check on the module that trains: it does import torch, so the check can fail."""
    module = "recallkit.systems.token_retrieval.term_probes"
    done = subprocess.run([sys.executable, "-c", CHECK.format(module=module, names=("decompose",))],
                          capture_output=True, text=True, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


def test_the_cached_mixture_accuracy_is_the_computed_one():
    """count_mixture_accuracy is cached on its arguments: a repeated call returns the very float, and a call that
    differs in one argument is computed anew."""
    from recallkit.systems.token_retrieval.finite_size import count_mixture_accuracy

    count_mixture_accuracy.cache_clear()
    first = count_mixture_accuracy(128, 1448, 2.0, 1.0, 10, 0.4, 0.01, 0.02)
    fresh = count_mixture_accuracy.__wrapped__(128, 1448, 2.0, 1.0, 10, 0.4, 0.01, 0.02)
    assert count_mixture_accuracy(128, 1448, 2.0, 1.0, 10, 0.4, 0.01, 0.02) == first == fresh
    assert count_mixture_accuracy.cache_info().hits == 1
    assert count_mixture_accuracy(128, 1448, 2.5, 1.0, 10, 0.4, 0.01, 0.02) < first  # a wider spread: less accurate

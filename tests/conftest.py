"""Shared test setup: the one place that sets torch's thread count for the tests.

One torch thread: on the shared 2-core machines two OpenMP threads per process oversubscribe the cores
and tiny models run far slower, and the float results of a trained config depend on the thread count
(``recallkit train``, ``sweep`` and ``report`` all default to one thread too). torch is imported inside
the fixtures, never at import time, so collecting a test that does not need torch stays cheap.
"""
from __future__ import annotations

import contextlib

import pytest


@contextlib.contextmanager
def _torch_threads(n: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Every test runs on one torch thread; the previous count is restored after it."""
    with _torch_threads(1):
        yield


@pytest.fixture(scope="module")
def one_torch_thread_module():
    """For a module-scoped fixture that trains: module fixtures are set up before the per-test one above,
    so such a fixture asks for this one (one thread for the whole module, restored after it)."""
    with _torch_threads(1):
        yield

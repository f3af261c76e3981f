"""Shared test setup: the one place that sets torch's thread count for the tests.

One torch thread: on the shared 2-core machines two OpenMP threads per process oversubscribe the cores
and tiny models run far slower, and the float results of a trained config depend on the thread count
(``recallkit train``, ``sweep`` and ``report`` all default to one thread too). torch is imported inside
the fixtures, never at import time, so collecting a test that does not need torch stays cheap.

Every test under tests/systems/<name>/ carries the marker <name> (registered in pyproject.toml), so one
system's tests run alone: ``python -m pytest -m geometric_recall``.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from recallkit.empirics.executors import fixed_threads

SYSTEMS_DIR = Path(__file__).parent / "systems"
os.environ["RECALLKIT_CACHE"] = "off"  # no test reads or fills the user's page cache; its own tests set a tmp_path
# nor makes or reads the user's cache secret: one of the session's own (created on first use, like the user's)
os.environ["RECALLKIT_CACHE_KEY_FILE"] = str(Path(tempfile.mkdtemp(prefix="recallkit-key-")) / "cache-key")


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Every test runs on one torch thread; the previous count is restored after it."""
    with fixed_threads(1):
        yield


@pytest.fixture(scope="module")
def one_torch_thread_module():
    """For a module-scoped fixture that trains: module fixtures are set up before the per-test one above,
    so such a fixture asks for this one (one thread for the whole module, restored after it)."""
    with fixed_threads(1):
        yield


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by -m
def pytest_collection_modifyitems(config, items):
    """Mark each test under tests/systems/<name>/ with <name>; a folder not registered as a marker warns."""
    systems = SYSTEMS_DIR.resolve()
    for item in items:
        path = Path(item.path).resolve()
        if path.is_relative_to(systems) and len(path.relative_to(systems).parts) > 1:
            item.add_marker(getattr(pytest.mark, path.relative_to(systems).parts[0]))

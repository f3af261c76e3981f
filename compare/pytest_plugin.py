"""pytest plugin (entry point ``pytest11``): assert a scaling law in a user's own test suite.

Two ways, both run the experiment's sweep (training only what the results store lacks) and fit it:

* the marker runs after the test body passes::

      @pytest.mark.scaling_law("my_experiment", expect="consistent")
      def test_linear_memory_capacity():
          pass

  keyword arguments: ``expect`` (a verdict or a list of them), ``preset`` ("quick"),
  ``threshold``, ``store``, ``delta``, ``alpha``, ``predicted`` (replaces the pack's slope), ``evidence``
  ("confirmatory" or "conditional": every verdict's evidence at least that strong, e.g.
  ``expect="consistent", evidence="confirmatory"`` after ``recallkit freeze``);
* the fixture ``recallkit_scaling`` (formerly ``recallkit_sweep``) is a function with the signature of
  :func:`recallkit.assert_scaling` that returns the fits, for tests that also look at the numbers::

      def test_slopes(recallkit_scaling):
          fits = recallkit_scaling("experiments/x.toml", expect=("consistent", "inconclusive"))
          assert fits.fits[0].fit.n_points >= 6

Comparative claims (an experiment's ``[[claims]]``, ``compare.claims``) the same two ways: the marker
``@pytest.mark.scaling_claim("my_experiment", claim="fig4c", expect="consistent")`` (``claim``: an id, a list of
ids, or None for all; also ``preset``, ``store``, ``alpha``) and the fixture ``recallkit_claim`` with the signature
of :func:`recallkit.assert_claim`; a claim whose verdict is not expected fails with its reason.

A system plug-in's own tests check it against recallkit's hooks (:func:`recallkit.check_system`) with the fixture
``recallkit_check_system``::

    def test_my_system_plugs_in(recallkit_check_system):
        recallkit_check_system("my_package")

Options: ``--recallkit-store PATH`` (default: $RECALLKIT_STORE, else results/recallkit.db),
``--recallkit-preset NAME`` (overrides the marker's preset). The experiment is a shipped experiment's
name (from any directory) or a path, looked up from the current directory, then from pytest's rootdir.

The plugin is an entry point like the CLI: its marker runs a sweep, which is orchestration
(``recallkit.assert_scaling``), so it is the one module of ``compare`` that calls above its stage,
and only inside the check.

This module imports nothing heavy at load time: pytest loads it in every run of every project
installed next to recallkit.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

from recallkit.plugin_check import check_system  # pluggy and the registry only: light

_MARKER_KEYWORDS = {"expect", "preset", "threshold", "store", "delta", "alpha", "predicted", "evidence"}
_CLAIM_KEYWORDS = {"claim", "expect", "preset", "store", "alpha"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recallkit", "recallkit scaling-law checks")
    group.addoption("--recallkit-store", default=None, metavar="PATH",
                    help="results store reused by scaling_law checks (default: $RECALLKIT_STORE or "
                         "results/recallkit.db)")
    group.addoption("--recallkit-preset", default=None, metavar="NAME",
                    help="preset for scaling_law checks, overriding the marker's (default: quick)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "scaling_law(experiment, expect='consistent', preset='quick', threshold=None, store=None, delta=None, "
        "alpha=None, evidence=None): after the test passes, run the experiment's sweep (reusing the results store), fit it "
        "and assert the verdicts (recallkit)",
    )
    config.addinivalue_line(
        "markers",
        "scaling_claim(experiment, claim=None, expect='consistent', preset='quick', store=None, alpha=None): after "
        "the test passes, run and fit the experiment (and any other its claims name) and assert the verdicts of "
        "its comparative claims (recallkit)",
    )


def _resolve(config: pytest.Config, experiment: Any) -> str:
    """A path relative to the test's cwd or the rootdir; anything else (a shipped experiment's name)
    is resolved by the experiment loader."""
    path = Path(str(experiment))
    if not path.is_absolute() and not path.exists() and (config.rootpath / path).exists():
        path = config.rootpath / path
    return str(path)


def _checker(config: pytest.Config) -> Callable[..., Any]:
    def check(experiment: Any, expect: Any = "consistent", **options: Any) -> Any:
        # orchestration (this marker runs the sweep first); here, not at the top: pytest loads this plugin in
        # every run, and recallkit.assertions brings scipy and sympy (about 1 s)
        from recallkit import assertions  # scipy.stats and sympy, about 1.5 s: only when a marker runs

        unknown = set(options) - (_MARKER_KEYWORDS - {"expect"})
        if unknown:
            raise TypeError(f"recallkit scaling_law: unknown option(s) {sorted(unknown)}; "
                            f"allowed: {sorted(_MARKER_KEYWORDS)}")
        store = options.pop("store", None) or config.getoption("recallkit_store")
        preset = config.getoption("recallkit_preset") or options.pop("preset", None) or "quick"
        options.pop("preset", None)
        return assertions.assert_scaling(_resolve(config, experiment), expect, store=store, preset=preset,
                                         **options)

    return check


def _claim_checker(config: pytest.Config) -> Callable[..., Any]:
    def check(experiment: Any, claim: Any = None, expect: Any = "consistent", **options: Any) -> Any:
        from recallkit import assertions  # scipy.stats and sympy, about 1.5 s: see _checker

        unknown = set(options) - (_CLAIM_KEYWORDS - {"claim", "expect"})
        if unknown:
            raise TypeError(f"recallkit scaling_claim: unknown option(s) {sorted(unknown)}; "
                            f"allowed: {sorted(_CLAIM_KEYWORDS)}")
        store = options.pop("store", None) or config.getoption("recallkit_store")
        preset = config.getoption("recallkit_preset") or options.pop("preset", None) or "quick"
        options.pop("preset", None)
        return assertions.assert_claim(_resolve(config, experiment), claim, expect, store=store, preset=preset,
                                       **options)

    return check


@pytest.fixture
def recallkit_claim(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``recallkit_claim(experiment, claim=None, expect="consistent", *, preset, store, alpha)``: run + fit + judge
    the experiment's comparative claims and assert their verdicts, returning the claim results."""
    return _claim_checker(request.config)


@pytest.fixture
def recallkit_scaling(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``recallkit_scaling(experiment, expect="consistent", *, preset, threshold, store, delta, alpha)``:
    run + fit + assert the scaling law (:func:`recallkit.assert_scaling`), returning
    :class:`compare.assertions.ExperimentFits`."""
    return _checker(request.config)


@pytest.fixture
def recallkit_check_system() -> Callable[[Any], list[str]]:
    """``recallkit_check_system(package_or_plugin)``: check a system plug-in against recallkit's hooks
    (:func:`recallkit.check_system`); fails the test with one line naming the hook and the fault."""
    return check_system


@pytest.fixture
def recallkit_sweep(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """The old name of :func:`recallkit_scaling` (it asserts the scaling law, not only the sweep); it works the same
    and warns."""
    warnings.warn("the recallkit_sweep fixture is now recallkit_scaling", DeprecationWarning, stacklevel=2)
    return _checker(request.config)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
    result = yield  # the test body; if it failed, that failure is reported and nothing else runs
    marker = pyfuncitem.get_closest_marker("scaling_law")
    if marker is not None:
        if len(marker.args) != 1:
            raise pytest.UsageError(
                f"{pyfuncitem.nodeid}: scaling_law takes exactly one experiment path, got {marker.args!r}")
        _checker(pyfuncitem.config)(marker.args[0], **marker.kwargs)
    claim_marker = pyfuncitem.get_closest_marker("scaling_claim")
    if claim_marker is not None:
        if len(claim_marker.args) != 1:
            raise pytest.UsageError(
                f"{pyfuncitem.nodeid}: scaling_claim takes exactly one experiment path, got {claim_marker.args!r}")
        _claim_checker(pyfuncitem.config)(claim_marker.args[0], **claim_marker.kwargs)
    return result

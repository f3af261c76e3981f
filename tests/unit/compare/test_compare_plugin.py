"""The pytest plugin: marker and fixture wiring, with recallkit.assert_scaling replaced by a recorder
(the real sweep through assert_scaling is tested in tests/integration/test_assert_scaling.py)."""
import importlib
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import pytest

@pytest.mark.scaling_law("experiments/good.toml", expect="consistent", threshold=0.1)
def test_good():
    pass

@pytest.mark.scaling_law("experiments/bad.toml")
def test_bad():
    pass

@pytest.mark.scaling_law("experiments/good.toml")
def test_body_fails_first():
    assert 1 == 2

def test_fixture(recallkit_scaling):
    fits = recallkit_scaling("experiments/good.toml", expect=("consistent", "inconclusive"), delta=0.1)
    assert fits == "fits of experiments/good.toml"
"""


@pytest.fixture
def recorded(monkeypatch):
    assertions = importlib.import_module("recallkit.assertions")  # the module the CLI will import (sys.modules)

    calls = []

    def fake_assert_scaling(experiment, expect="consistent", **options):
        calls.append((experiment, expect, options))
        if "bad" in str(experiment):
            raise AssertionError("scaling law of bad: expected verdict 'consistent', fitted slope 2.000")
        return f"fits of {experiment}"

    monkeypatch.setattr(assertions, "assert_scaling", fake_assert_scaling)
    return calls


def test_marker_and_fixture_call_assert_scaling(pytester, recorded):
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--recallkit-store", "my.sqlite")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*fitted slope 2.000*"])
    result.stdout.fnmatch_lines(["*assert 1 == 2*"])
    experiments = [call[0] for call in recorded]
    # the failing body never reaches the scaling check
    assert sorted(experiments) == ["experiments/bad.toml", "experiments/good.toml", "experiments/good.toml"]
    good = next(c for c in recorded if c[2].get("threshold") == 0.1)
    assert good[1] == "consistent" and good[2]["store"] == "my.sqlite" and good[2]["preset"] == "quick"
    fixture_call = next(c for c in recorded if c[2].get("delta") == 0.1)
    assert fixture_call[1] == ("consistent", "inconclusive")


def test_preset_option_overrides_marker(pytester, recorded):
    pytester.makepyfile(test_user="""
import pytest

@pytest.mark.scaling_law("experiments/good.toml", preset="quick")
def test_good():
    pass
""")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--recallkit-preset", "paper")
    result.assert_outcomes(passed=1)
    assert recorded[0][2]["preset"] == "paper"


def test_marker_is_registered_and_plugin_import_is_light():
    out = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "no:cacheprovider"],
                         capture_output=True, text=True)
    assert "@pytest.mark.scaling_law(experiment" in out.stdout
    probe = ("import sys, compare.pytest_plugin; "
             "print(any(m in sys.modules for m in ('numpy', 'scipy', 'statsmodels', 'torch')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert loaded.stdout.strip() == "False", loaded.stderr


CLAIM_TESTS = """
import pytest

@pytest.mark.scaling_claim("experiments/good.toml", claim="fig4c", alpha=0.1)
def test_claim_holds():
    pass

@pytest.mark.scaling_claim("experiments/bad.toml")
def test_claim_fails():
    pass

def test_claim_fixture(recallkit_claim):
    assert recallkit_claim("experiments/good.toml", expect=("consistent", "inconclusive")) == "claims of good"

@pytest.mark.scaling_claim("experiments/good.toml", colour="red")
def test_unknown_option():
    pass
"""


def test_claim_marker_and_fixture_call_assert_claim(pytester, monkeypatch):
    assertions = importlib.import_module("recallkit.assertions")
    calls = []

    def fake_assert_claim(experiment, claim=None, expect="consistent", **options):
        calls.append((experiment, claim, expect, options))
        if "bad" in str(experiment):
            raise AssertionError("claims of bad: expected verdict 'consistent'; reason: the opposite ordering is significant")
        return "claims of good"

    monkeypatch.setattr(assertions, "assert_claim", fake_assert_claim)
    pytester.makepyfile(test_user=CLAIM_TESTS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--recallkit-store", "my.sqlite")
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*the opposite ordering is significant*"])
    result.stdout.fnmatch_lines(["*scaling_claim: unknown option(s)*colour*"])
    marker_call = next(c for c in calls if c[1] == "fig4c")
    assert marker_call[2] == "consistent" and marker_call[3] == {"store": "my.sqlite", "preset": "quick", "alpha": 0.1}
    assert any(c[2] == ("consistent", "inconclusive") for c in calls)

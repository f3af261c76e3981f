"""recallkit installs its stages under the one ``recallkit`` namespace, so a user's own ``compare.py``,
``reports/`` or ``theory.py`` never collides with ours, not even inside pytest, where the recallkit
plugin (entry point ``pytest11``) is loaded into every project installed next to recallkit.

It used to: the plugin was the top-level module ``compare.pytest_plugin``, and a user project with its
own ``compare.py`` crashed pytest at start-up with "'compare' is not a package".
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

USER_TEST = '''
import compare
import reports
import theory

import recallkit.compare


def test_user_modules_are_the_users(recallkit_scaling):
    # recallkit_scaling: the plugin's fixture, so the recallkit plugin really was loaded
    assert callable(recallkit_scaling)
    assert compare.VALUE == 1 and reports.OWNER == "user" and theory.OWNER == "user"
    assert recallkit.compare is not compare
    assert recallkit.compare.__name__ == "recallkit.compare"
    assert recallkit.compare.__file__ != compare.__file__
'''


def _env() -> dict[str, str]:
    """The user's environment: recallkit installed, nothing of this checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env.update(OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    return env


def test_user_project_with_its_own_compare_reports_and_theory_runs_under_pytest(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "compare.py").write_text("VALUE = 1\n")
    (project / "reports").mkdir()
    (project / "reports" / "__init__.py").write_text('OWNER = "user"\n')
    (project / "theory.py").write_text('OWNER = "user"\n')
    (project / "test_user.py").write_text(USER_TEST)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project,
                            env=_env(), capture_output=True, text=True, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "1 passed" in output, output
    assert "is not a package" not in output


@pytest.mark.parametrize("name", ["compare", "theory", "empirics", "reports"])
def test_stages_are_not_top_level_modules(tmp_path, name):
    empty = tmp_path / "empty"
    empty.mkdir()
    script = (f"try:\n    import {name}\nexcept ModuleNotFoundError as exc:\n    print('missing', exc.name)\n"
              f"else:\n    print('found', {name}.__file__)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=empty, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"missing {name}", result.stdout


def test_stages_and_systems_import_under_recallkit(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    script = ("import recallkit.compare, recallkit.theory, recallkit.empirics, recallkit.reports, recallkit.systems\n"
              "for m in (recallkit.compare, recallkit.theory, recallkit.empirics, recallkit.reports, "
              "recallkit.systems):\n    print(m.__name__)\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=empty, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["recallkit.compare", "recallkit.theory", "recallkit.empirics",
                                     "recallkit.reports", "recallkit.systems"]

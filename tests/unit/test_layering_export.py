"""The layering test docs/adding-a-system.md tells a plugin to write, run as written on a plugin package outside
recallkit by pytest in a subprocess: it passes on a package that follows the rules and fails, naming the file,
on one that breaks them (the guide once pointed at tests/unit/test_layering.py, which only reads systems/)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[2]


def _guide_test() -> str:
    """The python block of the guide that calls check_layering."""
    text = (ROOT / "docs" / "adding-a-system.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S)
              if "check_layering(" in b and "recallkit.layering" in b]
    assert len(blocks) == 1, "expected one python block with the plugin's layering test in the guide"
    return blocks[0]


def _plugin(tmp_path: Path) -> Path:
    package = tmp_path / "my_package"
    package.mkdir()
    (package / "__init__.py").write_text("from recallkit.registry import hookimpl\n", encoding="utf-8")
    (package / "config.py").write_text("import dataclasses\n", encoding="utf-8")
    (package / "task.py").write_text("import torch\nfrom my_package import config\n", encoding="utf-8")
    (package / "pages.py").write_text("from recallkit.reports import figures\nfrom my_package import task\n",
                                      encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_layering.py").write_text(_guide_test(), encoding="utf-8")
    return package


def _pytest(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_layering.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_the_guides_layering_test_passes_on_a_plugin_that_follows_the_rules_and_fails_on_one_that_breaks_them(
        tmp_path):
    package = _plugin(tmp_path)
    passed = _pytest(tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "1 passed" in passed.stdout
    # the task (empirics) imports the pages (reports): a stage to its right
    (package / "task.py").write_text("def draw():\n    from my_package import pages\n", encoding="utf-8")
    failed = _pytest(tmp_path)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "task.py (empirics) imports ['my_package.pages']" in failed.stdout

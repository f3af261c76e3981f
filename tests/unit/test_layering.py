"""The house rule: data flows theory -> empirics -> compare -> reports, and no package imports
one to its right. Checked statically over every module (an import inside a function counts too)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORDER = ["theory", "empirics", "compare", "reports"]
# Third-party libraries a stage must not import (theory stays pure sympy/scipy).
FORBIDDEN_LIBS = {"theory": {"torch", "matplotlib", "statsmodels"}, "empirics": {"matplotlib"}}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.update(_prefixes(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(_prefixes(node.module))
            names.update(n for alias in node.names for n in _prefixes(f"{node.module}.{alias.name}"))
    return names


def _prefixes(dotted: str) -> set[str]:
    """'recallkit.cli.main' -> {'recallkit', 'recallkit.cli', 'recallkit.cli.main'}."""
    parts = dotted.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


@pytest.mark.parametrize("stage", ORDER)
def test_no_stage_imports_a_stage_to_its_right(stage):
    # recallkit/__init__ (version, code_version) is a leaf every stage may use; the CLI and the
    # pipeline sit on top of all four stages and must not be imported by any of them.
    forbidden = set(ORDER[ORDER.index(stage) + 1 :]) | {"recallkit.cli", "recallkit.pipeline"}
    forbidden |= FORBIDDEN_LIBS.get(stage, set())
    offenders = []
    for path in sorted((ROOT / stage).rglob("*.py")):
        bad = _imported_modules(path) & forbidden
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


def test_checker_detects_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    import torch\n    from reports import pdf\n    from recallkit import cli\n")
    assert {"torch", "reports", "recallkit.cli"} <= _imported_modules(bad)

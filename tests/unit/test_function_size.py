"""No function of the stages or the orchestration is longer than 80 lines: a longer one does several jobs and
hides them from readers (the house rule; systems' runners are exempt, their experiments are long recipes)."""
import ast
import importlib
from pathlib import Path

PACKAGES = ("recallkit.theory", "recallkit.empirics", "recallkit.compare", "recallkit.reports", "recallkit")
LIMIT = 80


def _long_functions(path: Path) -> list[str]:
    return [f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LIMIT]


def test_no_function_in_the_stages_is_longer_than_80_lines():
    files = [p for name in PACKAGES for p in sorted(Path(importlib.import_module(name).__file__).parent.glob("*.py"))]
    assert len(files) > 80
    long = [found for path in files for found in _long_functions(path)]
    assert not long, long


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n")
    assert _long_functions(tmp_path / "m.py") == [f"m.py:1 long ({LIMIT + 1} lines)"]

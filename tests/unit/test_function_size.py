"""No function anywhere in recallkit (the stages, the orchestration, every system, every subpackage) is longer than
80 lines: a longer one does several jobs and hides them from readers (the house rule)."""
import ast
import importlib
from pathlib import Path

PACKAGES = ("recallkit.theory", "recallkit.empirics", "recallkit.compare", "recallkit.reports", "recallkit.systems",
            "recallkit")
LIMIT = 80
# Functions still to be split, each named once as "<path under its package folder>:<function>"; remove an entry when
# its function is split (the test fails on an entry that is no longer long, so the list only shrinks).
NOT_YET_SPLIT: frozenset[str] = frozenset()  # every long function is split; one added here needs its reason


def _long_functions(path: Path, root: Path | None = None) -> list[str]:
    name = path.relative_to(root).as_posix() if root is not None else path.name
    return [f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > LIMIT]


def _files() -> list[tuple[Path, Path]]:
    """(file, its package's folder) for every module of every package, subpackages included, each file once."""
    seen, out = set(), []
    for package in PACKAGES:
        folder = Path(importlib.import_module(package).__file__).resolve().parent
        for path in sorted(folder.rglob("*.py")):
            if path not in seen:
                seen.add(path)
                out.append((path, folder))
    return out


def _key(found: str) -> str:
    """'path:line name (n lines)' -> 'path:name', the allow-list's form (line numbers move as files are edited)."""
    where, rest = found.split(" ", 1)
    return f"{where.rsplit(':', 1)[0]}:{rest.split(' ', 1)[0]}"


def test_no_function_anywhere_is_longer_than_80_lines():
    files = _files()
    assert len(files) > 120 and any("systems" in p.parts and "token_retrieval" in p.parts for p, _ in files)
    assert any(p.parent.name == "tasks" for p, _ in files)  # a subpackage (empirics/tasks/) is walked too
    long = [found for path, root in files for found in _long_functions(path, root)]
    assert not [f for f in long if _key(f) not in NOT_YET_SPLIT], [f for f in long if _key(f) not in NOT_YET_SPLIT]
    split_already = NOT_YET_SPLIT - {_key(f) for f in long}
    assert not split_already, f"split now: remove from NOT_YET_SPLIT: {sorted(split_already)}"


def test_the_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "m.py").write_text(f"def long():\n{body}\n")
    assert _long_functions(tmp_path / "m.py") == [f"m.py:1 long ({LIMIT + 1} lines)"]


def test_the_check_walks_subpackages(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.py").write_text(f"def long():\n{body}\n")
    found = [f for path in sorted(tmp_path.rglob("*.py")) for f in _long_functions(path, tmp_path)]
    assert found == [f"sub/m.py:1 long ({LIMIT + 1} lines)"] and _key(found[0]) == "sub/m.py:long"

"""The house rules, checked statically over every module (an import inside a function counts too):

- data flows theory -> empirics -> compare -> reports, and no stage imports one to its right;
- no stage imports a system (``recallkit.systems``) or the orchestration on top (CLI, pipeline,
  assertions); stages find systems through ``recallkit.registry``, which imports no stage;
- a system's files obey the stage their role names: its config, task and runners like ``empirics``,
  its judge like ``compare``, its pages like ``reports``; its ``__init__`` only registers it;
- a system never imports another system.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from recallkit.layering import (FORBIDDEN_LIBS, ORCHESTRATION, ORDER, STAGE_MODULES, SYSTEM_ROLES, check_file,
                                check_layering, check_system)
from recallkit.layering import imported_modules as _imported_modules

ROOT = Path(__file__).resolve().parents[2]
# The pytest plugin is an entry point like the CLI: its marker runs a sweep (recallkit.assertions).
ALLOWED = {("compare/pytest_plugin.py", "recallkit.assertions")}


def _stage_violations(stage: str) -> list[str]:
    right = {STAGE_MODULES[s] for s in ORDER[ORDER.index(stage) + 1:]}
    forbidden = right | ORCHESTRATION | {"recallkit.systems"} | FORBIDDEN_LIBS.get(stage, set())
    offenders = []
    for path in sorted((ROOT / stage).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        bad = {m for m in _imported_modules(path) & forbidden if (rel, m) not in ALLOWED}
        if bad:
            offenders.append(f"{rel} imports {sorted(bad)}")
    return offenders


@pytest.mark.parametrize("stage", ORDER)
def test_no_stage_imports_a_stage_to_its_right_or_a_system(stage):
    offenders = _stage_violations(stage)
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


def test_registry_imports_no_stage_and_no_system_by_module():
    imported = _imported_modules(ROOT / "recallkit" / "registry.py")
    bad = imported & (set(STAGE_MODULES.values()) | ORCHESTRATION | {"torch", "matplotlib", "sympy"})
    assert not bad, bad


def _system_files() -> list[tuple[str, Path]]:
    return [(p.parent.name, p) for p in sorted((ROOT / "systems").glob("*/*.py"))]


def test_every_system_file_has_a_role():
    unknown = [str(p.relative_to(ROOT)) for _, p in _system_files() if p.stem not in SYSTEM_ROLES]
    assert not unknown, f"give these files a role in SYSTEM_ROLES (or rename them): {unknown}"


@pytest.mark.parametrize("system,path", _system_files(), ids=lambda v: str(v).split("/systems/")[-1])
def test_system_files_obey_the_stage_their_role_names(system, path):
    assert check_file(path, f"recallkit.systems.{system}") == []


def test_a_plugin_package_is_checked_on_its_own_folder(tmp_path):
    package = tmp_path / "my_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("from recallkit.registry import hookimpl\n")
    (package / "task.py").write_text("import torch\nfrom recallkit.empirics.tasks import generator\n")
    (package / "pages.py").write_text("from recallkit.reports import figures\nfrom my_plugin import task\n")
    assert check_layering(package, "my_plugin") == []
    (package / "task.py").write_text("def f():\n    from my_plugin import pages\n")
    (package / "solver.py").write_text("import torch\n")
    found = check_layering(package, "my_plugin")
    assert len(found) == 2
    assert "solver" in found[0] and "no role" in found[0]
    assert "task.py (empirics) imports ['my_plugin.pages']" in found[1]
    assert check_layering(package, "my_plugin", roles={**SYSTEM_ROLES, "solver": "empirics"}) == found[1:]
    # the old name (the plug-in check is recallkit.check_system) still answers, with one warning naming the new one
    with pytest.warns(DeprecationWarning, match="check_layering") as warned:
        assert check_system(package, "my_plugin") == found
    assert len(warned) == 1


def test_checker_detects_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    import torch\n    from recallkit.reports import pdf\n    from recallkit import cli\n"
                   "    from recallkit.systems.x import pages\n")
    found = _imported_modules(bad)
    assert {"torch", "recallkit.reports", "recallkit.cli", "recallkit.systems"} <= found


def test_no_system_name_in_the_stages_or_the_pipeline():
    import re
    import subprocess

    names = [p.name for p in (ROOT / "systems").iterdir() if (p / "__init__.py").exists()]
    names += ["fact_bijections", "geometric"]  # a task name and the word the geometric system's files use
    listed = subprocess.run(["git", "ls-files", *ORDER, "recallkit/pipeline.py"], cwd=ROOT, capture_output=True,
                            text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    pattern = re.compile("|".join(map(re.escape, names)), re.IGNORECASE)
    hits = []
    for rel in listed.stdout.split():
        for number, line in enumerate((ROOT / rel).read_text(errors="replace").splitlines(), start=1):
            if pattern.search(line):
                hits.append(f"{rel}:{number}: {line.strip()}")
    assert not hits, "system names in the stages (they belong in systems/ and the registry):\n" + "\n".join(hits)


def _module_of(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["recallkit", *parts]) if parts[0] != "recallkit" else ".".join(parts)


@pytest.mark.parametrize("stage", ORDER + ["systems"])
def test_no_import_cycle_between_modules_of_a_stage(stage):
    """e.g. compare.fits <-> compare.verdicts once imported each other (one of them lazily); package
    __init__ files that re-export their modules are left out (a re-export is not a dependency)."""
    modules = {_module_of(p): p for p in (ROOT / stage).rglob("*.py") if p.name != "__init__.py"}
    edges = {name: {m for m in _imported_modules(path) if m in modules and m != name} for name, path in modules.items()}
    assert not _cycles(edges), _cycles(edges)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found

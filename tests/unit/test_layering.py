"""The house rules, checked statically over every module (an import inside a function counts too):

- data flows theory -> empirics -> compare -> reports, and no stage imports one to its right;
- no stage imports a system (``recallkit.systems``) or the orchestration on top (CLI, pipeline,
  assertions); stages find systems through ``recallkit.registry``, which imports no stage;
- a system's files obey the stage their role names: its config, task and runners like ``empirics``,
  its judge like ``compare``, its pages like ``reports``; its ``__init__`` only registers it;
- a system never imports another system.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ORDER = ["theory", "empirics", "compare", "reports"]
STAGE_MODULES = {stage: f"recallkit.{stage}" for stage in ORDER}
ORCHESTRATION = {"recallkit.cli", "recallkit.pipeline", "recallkit.assertions"} | {
    f"recallkit.{p.stem}" for p in (ROOT / "recallkit").glob("cli_*.py")}
# Third-party libraries a stage must not import (theory stays pure sympy/scipy).
FORBIDDEN_LIBS = {"theory": {"torch", "matplotlib", "statsmodels"}, "empirics": {"matplotlib"}}
# A system file's role, by file name: the stage whose rules it follows.
SYSTEM_ROLES = {"config": "empirics", "task": "empirics", "runners": "empirics", "reference": "empirics",
                "term_probes": "empirics", "sample_bound": "theory", "construction": "empirics",
                "judge": "compare", "pages": "reports", "steps": "orchestration", "__init__": "registration"}
# The pytest plugin is an entry point like the CLI: its marker runs a sweep (recallkit.assertions).
ALLOWED = {("compare/pytest_plugin.py", "recallkit.assertions")}


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
    role = SYSTEM_ROLES.get(path.stem)
    imported = _imported_modules(path)
    own = f"recallkit.systems.{system}"
    offenders = set()
    other_systems = {m for m in imported if m.startswith("recallkit.systems.") and not m.startswith(own)}
    offenders |= other_systems
    if role == "registration":
        offenders |= {m for m in imported if m.startswith("recallkit.") and not m.startswith("recallkit.registry")}
        offenders |= imported & {"torch", "matplotlib", "sympy", "numpy", "statsmodels"}
    elif role in ORDER:
        rank = ORDER.index(role)
        offenders |= imported & ({STAGE_MODULES[s] for s in ORDER[rank + 1:]} | ORCHESTRATION)
        offenders |= imported & FORBIDDEN_LIBS.get(role, set())
        for module in imported:  # a sibling file of a later role (e.g. a task importing the pages)
            if module.startswith(own + ".") and module.count(".") == 3:
                sibling = SYSTEM_ROLES.get(module.rsplit(".", 1)[1])
                if sibling in ORDER and ORDER.index(sibling) > rank or sibling == "orchestration":
                    offenders.add(module)
    else:  # orchestration: anything but the CLI
        offenders |= imported & {m for m in ORCHESTRATION if "cli" in m}
    assert not offenders, f"{path.relative_to(ROOT)} ({role}) imports {sorted(offenders)}"


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

"""The layering rules a system's files follow, as a check a system's own tests can run on its own folder.

Data flows theory -> empirics -> compare -> reports. Inside a system each file follows the stage its role
names (by file name, :data:`SYSTEM_ROLES`): its config, task and runners like empirics, its judge like
compare, its pages like reports, its steps like the orchestration (anything but the CLI), and its
``__init__`` only registers it (``recallkit.registry``, no torch). A system never imports another system.
Imports are read statically (``ast``), so an import inside a function counts too, and nothing is imported.

A plug-in package checks itself in one test::

    from pathlib import Path
    from recallkit.layering import check_layering
    import my_package

    def test_my_package_follows_the_layering_rules():
        assert check_layering(Path(my_package.__file__).parent, "my_package") == []

A file with a name of its own gets a role through ``roles`` (``{**SYSTEM_ROLES, "solver": "empirics"}``).
"""
from __future__ import annotations

import ast
import warnings
from pathlib import Path
from typing import Mapping

__all__ = ["FORBIDDEN_LIBS", "ORCHESTRATION", "ORDER", "STAGE_MODULES", "SYSTEM_ROLES", "check_file",
           "check_layering", "check_system", "imported_modules"]

#: the stages, in the order data flows through them
ORDER = ["theory", "empirics", "compare", "reports"]
STAGE_MODULES = {stage: f"recallkit.{stage}" for stage in ORDER}
#: the modules on top of the stages (CLI, pipeline, assertions), which no stage imports
ORCHESTRATION = frozenset({"recallkit.cli", "recallkit.pipeline", "recallkit.assertions"} | {
    f"recallkit.{p.stem}" for p in Path(__file__).resolve().parent.glob("cli_*.py")})
#: third-party libraries a stage must not import (theory stays pure sympy/scipy)
FORBIDDEN_LIBS = {"theory": frozenset({"torch", "matplotlib", "statsmodels"}), "empirics": frozenset({"matplotlib"})}
#: a system file's role, by file name: the stage whose rules it follows
SYSTEM_ROLES = {"config": "empirics", "task": "empirics", "runners": "empirics", "reference": "empirics",
                "term_probes": "empirics", "gradient_access": "empirics", "sample_bound": "theory", "construction": "empirics",
                "trainer": "empirics", "model": "empirics", "terms": "theory", "finite_size": "theory",
                "judge": "compare", "predictions": "compare", "pages": "reports",
                "steps": "orchestration",
                "__init__": "registration"}
# what the registration file may not import: it is imported whenever the registry loads
_HEAVY = frozenset({"torch", "matplotlib", "sympy", "numpy", "statsmodels"})


def imported_modules(path: Path) -> set[str]:
    """Every module a Python file imports, anywhere in it, with each dotted prefix
    (``from recallkit.reports import pdf`` gives recallkit, recallkit.reports and recallkit.reports.pdf)."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=str(path))
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
    parts = dotted.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


def check_file(path: Path, system_module: str, roles: Mapping[str, str] | None = None) -> list[str]:
    """The rule breaks of one file of a system whose package is ``system_module`` (``"my_package"``, or
    ``"recallkit.systems.NAME"`` for a shipped one): one line each, naming the file, its role and the
    modules it may not import; a file whose name has no role is one line too."""
    roles = SYSTEM_ROLES if roles is None else roles
    path = Path(path)
    role = roles.get(path.stem)
    if role is None:
        return [f"{path}: no role for a file named {path.stem!r} (known: {', '.join(sorted(roles))}); "
                f"rename it or give it one in roles"]
    imported = imported_modules(path)
    own = system_module
    offenders = {m for m in imported
                 if m.startswith("recallkit.systems.") and m != own and not m.startswith(own + ".")}
    if role == "registration":
        offenders |= {m for m in imported if m.startswith("recallkit.") and not m.startswith("recallkit.registry")}
        offenders |= imported & _HEAVY
    elif role in ORDER:
        rank = ORDER.index(role)
        offenders |= imported & ({STAGE_MODULES[s] for s in ORDER[rank + 1:]} | ORCHESTRATION)
        offenders |= imported & FORBIDDEN_LIBS.get(role, frozenset())
        for module in imported:  # a sibling file of a later role (e.g. a task importing the pages)
            if module.startswith(own + ".") and "." not in module[len(own) + 1:]:
                sibling = roles.get(module[len(own) + 1:])
                if sibling in ORDER and ORDER.index(sibling) > rank or sibling == "orchestration":
                    offenders.add(module)
    elif role == "orchestration":  # anything but the CLI
        offenders |= imported & {m for m in ORCHESTRATION if "cli" in m}
    else:
        return [f"{path}: role {role!r} is not one of {', '.join(ORDER + ['orchestration', 'registration'])}"]
    return [f"{path} ({role}) imports {sorted(offenders)}"] if offenders else []


def check_layering(folder: Path, system_module: str, roles: Mapping[str, str] | None = None) -> list[str]:
    """The rule breaks of every ``*.py`` file directly in a system's folder (see :func:`check_file`); empty
    when the system follows the rules."""
    files = sorted(Path(folder).glob("*.py"))
    if not files:
        return [f"{folder}: no Python files (expected the system's package folder)"]
    return [line for path in files for line in check_file(path, system_module, roles)]


def check_system(folder: Path, system_module: str, roles: Mapping[str, str] | None = None) -> list[str]:
    """Deprecated name of :func:`check_layering` (``recallkit.check_system`` is the plug-in check, a different
    one); kept through version 0.2 so that a plug-in's existing layering test runs, with a DeprecationWarning."""
    warnings.warn("recallkit.layering.check_system is now recallkit.layering.check_layering "
                  "(recallkit.check_system checks a plug-in's hooks)", DeprecationWarning, stacklevel=2)
    return check_layering(folder, system_module, roles)

"""What the command line imports before it needs to, and where recallkit hides imports inside functions.

- Start-up: ``recallkit --help``, ``--version``, every ``SUB --help`` and a usage error are answered from the
  typer declarations alone, so they must not import the heavy libraries (sympy, numpy, scipy, matplotlib,
  torch, statsmodels): each of them cost the command's start 0.1 to 1 s, which every CLI test paid. Checked
  through ``sys.modules`` in a fresh interpreter, not by timing (``benchmarks/cli_startup.py`` times it).
- Function-local imports of recallkit's own modules: at most :data:`MAX_LOCAL_IMPORTS`, each with its reason
  (an import cost in seconds, or a cycle) in a comment on its own line; the others belong at the top.
"""
from __future__ import annotations

import ast
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

__all__ = ["HEAVY", "MAX_LOCAL_IMPORTS", "ROOTS", "local_imports"]

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sympy", "numpy", "scipy", "matplotlib", "torch", "statsmodels")
ROOTS = ("theory", "empirics", "compare", "reports", "recallkit", "systems")
MAX_LOCAL_IMPORTS = 25  # each CLI command module has one (its command imports what it runs when it runs); the
# token-retrieval judge one, so that its pure numbers import without torch
# a reason is a measured cost ("about 0.3 s", "1 s") or a cycle
_REASON = re.compile(r"\d+(\.\d+)?\s*s\b|\bcycle\b")

# each is answered before any command body runs (typer's help, the root callback, click's parsing)
LIGHT_COMMANDS = [
    ["--help"], ["--version"], [],
    ["theory", "--help"], ["theory", "show", "--help"], ["theory", "regions", "--help"],
    ["train", "--help"], ["sweep", "--help"], ["results", "--help"], ["fit", "--help"], ["report", "--help"],
    ["figures", "--help"], ["probe", "--help"], ["diff", "--help"],
    ["sweep", "--no-such-flag"], ["fit", "x.toml", "--alpha", "not-a-number"], ["report", "--jobs", "0"],
    ["train", "tok", "--threads", "0"], ["no-such-command"],
]

_PROBE = """
import contextlib, io, json, sys
from recallkit.cli import main
heavy = {heavy!r}
first = {{name: "import recallkit.cli" for name in heavy if name in sys.modules}}
for argv in {commands!r}:
    sys.argv = ["recallkit", *argv]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            main()
        except SystemExit:
            pass
    for name in heavy:
        if name in sys.modules and name not in first:
            first[name] = " ".join(argv) or "(no arguments)"
print(json.dumps(first))
"""


def test_cli_start_and_help_import_no_heavy_library():
    """One interpreter runs every light command in turn; a heavy library loaded is named with the first
    command after which it was in ``sys.modules``, or with 'import recallkit.cli' when importing the CLI loaded it."""
    code = _PROBE.format(heavy=HEAVY, commands=LIGHT_COMMANDS)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == {}, f"heavy libraries imported (library: first command after which it was loaded): {loaded}"


def test_a_fixed_report_date_imports_no_heavy_library():
    """With SOURCE_DATE_EPOCH set (as every reproducible report sets it), the root callback checks the date before
    each command: reading it must not import matplotlib (0.4 s, most of an unchanged report answered from its
    files)."""
    import os

    code = _PROBE.format(heavy=HEAVY, commands=[["report", "--help"], ["theory", "--help"], ["diff", "--help"]])
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1764493200"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert loaded == {}, f"heavy libraries imported with a fixed date (library: first command after it): {loaded}"


def test_the_probe_sees_a_heavy_import():
    """The check above can fail: a command body that runs (theory show) imports sympy."""
    code = _PROBE.format(heavy=("sympy",), commands=[["--help"], ["theory", "show", "example"]])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"sympy": "theory show example"}


def _comments_by_line(source: str) -> dict[int, str]:
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string
    return comments


def local_imports(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(file, line, comment) of every import of a ``recallkit`` module inside a function, under :data:`ROOTS`
    (a comment on any line of the statement; '' when there is none)."""
    found = []
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source, filename=str(path))
            comments = _comments_by_line(source)
            seen: set[int] = set()
            for function in ast.walk(tree):
                if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(function):
                    if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                        continue
                    if isinstance(node, ast.ImportFrom):
                        names = ["." if node.level else (node.module or "")]
                    else:
                        names = [alias.name for alias in node.names]
                    if not any(name == "." or name.split(".")[0] == "recallkit" for name in names):
                        continue
                    seen.add(node.lineno)
                    comment = " ".join(comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments)
                    found.append((str(path.relative_to(root)), node.lineno, comment))
    return found


def test_function_local_imports_are_few_and_each_says_why():
    found = local_imports()
    listing = "\n".join(f"  {path}:{line}: {comment or '(no reason)'}" for path, line, comment in found)
    without = [f"{path}:{line}" for path, line, comment in found
               if not _REASON.search(re.sub(r"noqa\S*|type:\s*ignore\S*", "", comment))]
    assert not without, ("a function-local import needs its reason on its line (an import cost such as "
                         f"'matplotlib, about 0.3 s', or a cycle): {without}\n{listing}")
    assert len(found) <= MAX_LOCAL_IMPORTS, (f"{len(found)} function-local imports of recallkit modules, at most "
                                             f"{MAX_LOCAL_IMPORTS}: move the others to the top\n{listing}")


@pytest.mark.parametrize("text,counted,reasoned", [
    ("def f():\n    from recallkit.reports import pdf  # matplotlib, about 0.5 s\n", 1, True),
    ("def f():\n    from recallkit import cli  # a cycle: cli imports this module\n", 1, True),
    ("def f():\n    import recallkit.pipeline  # why not\n", 1, False),
    ("def f():\n    from recallkit import frames  # noqa: F401\n", 1, False),
    ("def f():\n    from . import sibling\n", 1, False),
    ("def f():\n    import torch  # about 1 s\n", 0, True),
    ("from recallkit import theory\n", 0, True),
    ("def f():\n    def g():\n        from recallkit.empirics import (\n            cost,  # sympy, about 0.3 s\n"
     "        )\n", 1, True),
])
def test_the_count_sees_what_it_should(tmp_path, text, counted, reasoned):
    (tmp_path / "recallkit").mkdir()
    (tmp_path / "recallkit" / "m.py").write_text(text)
    found = local_imports(tmp_path)
    assert len(found) == counted
    if counted:
        comment = found[0][2]
        assert bool(_REASON.search(re.sub(r"noqa\S*|type:\s*ignore\S*", "", comment))) is reasoned

"""The documentation's copied outputs and commands stay true to the code: the lists it shows are what the
commands print now, and the experiments its commands name are ones that ship."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from recallkit import registry

ROOT = Path(__file__).resolve().parents[2]
# the example system the guide builds is not shipped: its commands name its own experiment; so do the example
# packages under examples/ (installed beside recallkit, their experiments are registered names)
GUIDE_EXAMPLE = {"perm_memory_capacity", *(path.stem for path in (ROOT / "examples").glob("*/*/experiments/*.toml"))}


def _shipped_systems() -> list:
    """The systems recallkit ships (an installed example package registers one more, which the guide's list of
    what ships does not show)."""
    import recallkit.systems

    shipped = Path(recallkit.systems.__file__).resolve().parent
    return [s for s in registry.systems() if Path(s.root).resolve().is_relative_to(shipped)]


def _block_after(text: str, command: str) -> str:
    """The output printed under ``$ command`` in a console block, up to the block's end."""
    start = text.index(f"$ {command}\n") + len(f"$ {command}\n")
    return text[start:text.index("```", start)]


def test_readme_theory_list_is_the_commands_output():
    cli = shutil.which("recallkit")
    assert cli is not None
    shown = _block_after((ROOT / "README.md").read_text(encoding="utf-8"), "recallkit theory list")
    printed = subprocess.run([cli, "theory", "list"], capture_output=True, text=True, timeout=300)
    assert printed.returncode == 0, printed.stderr
    # the packs of an installed example package are not recallkit's: the README shows what recallkit ships
    others = {path.stem for s in registry.systems() if s not in _shipped_systems() for path in s.pack_paths()}
    assert shown == "".join(line for line in printed.stdout.splitlines(keepends=True) if line.split()[0] not in others)


def test_guide_lists_every_registered_system_and_experiment():
    command = ('python -c "from recallkit import registry; [print(s.name, [t.name for t in s.tasks], '
               '[p.stem for p in s.experiment_paths()]) for s in registry.systems()]"')
    shown = _block_after((ROOT / "docs" / "adding-a-system.md").read_text(encoding="utf-8"), command)
    now = "".join(f"{s.name} {[t.name for t in s.tasks]} {[p.stem for p in s.experiment_paths()]}\n"
                  for s in _shipped_systems())
    assert shown == now


def _named_experiments() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in re.finditer(r"recallkit (?:sweep|results|fit|report) ([^\s`|]+)", path.read_text(encoding="utf-8")):
            # options and placeholders (NAME, EXP.toml) name no experiment
            if not match.group(1).startswith("-") and not match.group(1).split(".")[0].isupper():
                found.append((path.name, match.group(1)))
    return found


def test_the_docs_name_experiments_that_ship():
    named = _named_experiments()
    assert named, "no experiment named in the docs: the pattern no longer matches their commands"
    shipped = set(registry.experiment_paths())
    wrong = [f"{doc}: {name}" for doc, name in named
             if name not in shipped | GUIDE_EXAMPLE and not (ROOT / name).is_file()]
    assert not wrong, "experiments the docs name that are neither shipped names nor files: " + "; ".join(wrong)



def test_no_tracked_text_file_holds_control_characters():
    # an edit that wrote "\rho" or "\approx" through a non-raw Python string left a carriage return and a bell in
    # DERIVATION.md, which renders as a broken line and no formula
    tracked = subprocess.run(["git", "ls-files", "*.md", "*.py", "*.toml", "*.sh", "*.txt", "*.cfg"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    if tracked.returncode != 0:  # not a git checkout (an installed copy): read the tree instead
        paths = [p.relative_to(ROOT) for ext in ("md", "py", "toml", "sh") for p in ROOT.rglob(f"*.{ext}")
                 if ".git" not in p.parts]
    else:
        paths = [Path(line) for line in tracked.stdout.splitlines()]
    assert paths
    bad = re.compile(r"[\x00-\x08\x0b\x0c\x0d\x0e-\x1f\x7f]")
    found = []
    for rel in paths:
        for number, line in enumerate((ROOT / rel).read_bytes().decode("utf-8").split("\n"), 1):  # keeps a lone \r
            if bad.search(line):
                found.append(f"{rel}:{number}: {line[:60]!r}")
    assert found == [], "\n".join(found)

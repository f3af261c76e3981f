"""docs/adding-a-system.md is true: its example package is built from the page's own code blocks, registered
through the entry-point group as pip would leave it, and the commands the page shows are run against it; the
output the page prints is compared with what the commands print; the blocks that quote a file of this repository
are compared with that file. A change of the plug-in interface that makes the page wrong fails here.

Which blocks are what (their first line says it):

- ``# my_package/<path>`` or ``# pyproject.toml``: a file of the example package, complete;
- ``# <name>.toml``: a file of its own (a pack the page shows), written where the page's commands run;
- ``# <path of this repository>``: an excerpt of that file (a TOML block: the whole file's table);
- a ``console`` block whose first line is ``$ <command>``: the command and the output it prints.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__: list[str] = []

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-a-system.md"
RECALLKIT = shutil.which("recallkit")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
HEADER = re.compile(r"#\s+(\S+)(?:\s.*)?")
# the files of the layout the page walks through, each of which the page must give in full
LAYOUT = ("pyproject.toml", "my_package/__init__.py", "my_package/config.py", "my_package/task.py",
          "my_package/trainer.py", "my_package/packs/perm_memory.toml",
          "my_package/experiments/perm_memory_capacity.toml")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # of the opening fence in the page, for messages

    @property
    def first(self) -> str:
        return self.text.splitlines()[0] if self.text else ""

    @property
    def path(self) -> str | None:
        """The file the block's first-line comment names (``# my_package/config.py``), or None."""
        found = HEADER.fullmatch(self.first.strip()) if self.lang != "console" else None
        name = found.group(1) if found else None
        return name if name and ("/" in name or name.endswith((".toml", ".py"))) else None

    @property
    def body(self) -> str:
        """The block without its first-line comment."""
        return self.text.split("\n", 1)[1] if "\n" in self.text else ""


def guide_blocks(text: str | None = None) -> list[Block]:
    text = GUIDE.read_text(encoding="utf-8") if text is None else text
    return [Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1) for m in FENCE.finditer(text)]


def package_files(blocks: list[Block]) -> dict[str, str]:
    """The example package's files: path (from the project folder) -> text, as the page gives them."""
    files: dict[str, str] = {}
    for block in blocks:
        if block.path and (block.path.startswith("my_package/") or block.path == "pyproject.toml"):
            assert block.path not in files, f"line {block.line}: {block.path} is given twice"
            files[block.path] = block.text
    return files


def own_files(blocks: list[Block]) -> dict[str, str]:
    """Standalone files the page shows (``# toy_law.toml``), which its commands name from the working folder."""
    return {b.path: b.text for b in blocks if b.path and "/" not in b.path and b.path != "pyproject.toml"}


def console_commands(blocks: list[Block]) -> list[tuple[Block, str, list[str]]]:
    """(block, command, printed lines) of every console block that shows a ``$ command`` and its output."""
    found = []
    for block in blocks:
        lines = block.text.splitlines()
        if block.lang == "console" and lines and lines[0].startswith("$ "):
            found.append((block, lines[0][2:], [line.rstrip() for line in lines[1:]]))
    return found


def command_lines(blocks: list[Block], program: str) -> list[str]:
    """The commands of the console blocks that list commands only (no output), starting with ``program``."""
    return [line.strip() for b in blocks if b.lang == "console" and not b.first.startswith("$ ")
            for line in b.text.splitlines() if line.strip().startswith(program + " ")]


def write_package(files: dict[str, str], project: Path) -> None:
    """The package as pip leaves an install of it: its files, and a dist-info folder with the entry points its
    pyproject.toml declares (found by importlib.metadata once ``project`` is on the path)."""
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text, encoding="utf-8")
    meta = tomllib.loads(files["pyproject.toml"])["project"]
    info = project / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n")
    groups = meta.get("entry-points", {})
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items()) for group, points in
        groups.items()), encoding="utf-8")


@pytest.fixture(scope="module")
def guide(tmp_path_factory) -> dict:
    """The page's package installed (as a dist-info on PYTHONPATH) and its own files in a working folder."""
    root = tmp_path_factory.mktemp("guide")
    blocks = guide_blocks()
    project, work = root / "project", root / "work"
    project.mkdir(), work.mkdir()
    write_package(package_files(blocks), project)
    for name, text in own_files(blocks).items():
        (work / name).write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    bin_dir = str(Path(sys.executable).parent)
    env.update(PYTHONPATH=str(project), MPLBACKEND="Agg", OMP_NUM_THREADS="1",
               PATH=bin_dir + os.pathsep + env.get("PATH", ""))
    return {"blocks": blocks, "project": project, "work": work, "env": env}


def run(command: str | list[str], guide: dict, timeout: int = 120) -> subprocess.CompletedProcess:
    args = shlex.split(command) if isinstance(command, str) else command
    if args[0] == "python":
        args[0] = sys.executable
    return subprocess.run(args, cwd=guide["work"], env=guide["env"], capture_output=True, text=True, timeout=timeout)


def test_the_guide_gives_every_file_of_its_layout_once():
    files = package_files(guide_blocks())
    assert sorted(files) == sorted(LAYOUT)
    for name, text in files.items():  # each is what its name says: Python that compiles, TOML that parses
        if name.endswith(".py"):
            compile(text, name, "exec")
        else:
            tomllib.loads(text)


def test_the_block_reader_finds_a_broken_block():
    """The reader this module relies on sees what the page says: a block dropped or broken is noticed."""
    text = GUIDE.read_text(encoding="utf-8")
    dropped = package_files(guide_blocks(text.replace("# my_package/trainer.py\n", "")))
    assert "my_package/trainer.py" not in dropped and sorted(dropped) != sorted(LAYOUT)
    broken = package_files(guide_blocks(text.replace("class PermMemory:", "class PermMemory(")))
    with pytest.raises(SyntaxError):
        compile(broken["my_package/task.py"], "task.py", "exec")


def test_the_excerpts_are_the_files_they_quote():
    blocks = guide_blocks()
    own = set(package_files(blocks)) | set(own_files(blocks))
    excerpts = [b for b in blocks if b.path and b.path not in own and (ROOT / b.path).is_file()]
    assert len(excerpts) >= 3, [b.path for b in excerpts]
    for block in excerpts:
        text = (ROOT / block.path).read_text(encoding="utf-8")
        if block.path.endswith(".toml"):  # the page may comment it; the table must be the file's
            assert tomllib.loads(block.text) == tomllib.loads(text), f"line {block.line}: {block.path}"
        else:
            assert block.body.rstrip("\n") in text, f"line {block.line}: not an excerpt of {block.path}"


def test_the_guides_system_is_registered_beside_the_shipped_ones(guide):
    ((block, command, printed),) = [c for c in console_commands(guide["blocks"]) if c[1].startswith("python ")]
    result = run(command, guide)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert lines[:len(printed)] == printed, f"line {block.line} of the guide prints something else"
    assert "perm_memory ['perm_memory'] ['perm_memory_capacity']" in lines[len(printed):], lines


def test_the_guides_package_follows_the_layering_rules_with_its_own_test(guide):
    (block,) = [b for b in guide["blocks"] if b.path == "tests/test_layering.py"]
    script = block.text + "\ntest_my_package_follows_the_layering_rules()\nprint('layering ok')\n"
    result = run(["python", "-c", script], guide)
    assert result.returncode == 0 and "layering ok" in result.stdout, result.stderr[-3000:]


def test_the_guides_package_passes_the_check_its_own_test_runs(guide):
    """The page's plug-in test (recallkit.testing.check_system, and the pytest fixture) on the page's package."""
    (block,) = [b for b in guide["blocks"] if b.path == "tests/test_plugin.py"]
    (guide["work"] / "test_plugin.py").write_text(block.text, encoding="utf-8")
    result = run(["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_plugin.py"], guide, timeout=300)
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_guides_pack_is_found_by_name(guide):
    """`recallkit theory show perm_memory` from any folder: the registered system's pack (the page's other packs are
    files its theory commands below read)."""
    result = run(["recallkit", "theory", "show", "perm_memory"], guide)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "capacity" in result.stdout and "facts" in result.stdout, result.stdout


def test_the_theory_commands_print_what_the_guide_prints(guide):
    shown = [c for c in console_commands(guide["blocks"]) if c[1].startswith("recallkit theory ")]
    assert len(shown) >= 2
    for block, command, printed in shown:
        result = run(command, guide)
        assert result.returncode == 0, f"line {block.line}: {command}: {result.stderr[-2000:]}"
        assert [line.rstrip() for line in result.stdout.splitlines()] == printed, f"line {block.line}: {command}"


def test_the_guides_train_commands_run(guide):
    commands = command_lines(guide["blocks"], "recallkit")
    trains = [c for c in commands if c.startswith("recallkit train ")]
    assert len(trains) == 2 and any("--trainer hebbian" in c for c in trains), commands
    import json

    for command in trains:
        result = run(command + " --json", guide)
        assert result.returncode == 0, f"{command}: {result.stderr[-3000:]}"
        measured = json.loads(result.stdout)
        assert 0 <= measured["accuracy"] <= 1 and measured["param_count"] > 0, measured
        if "--trainer hebbian" in command:  # the closed form: no steps, and it stores what it wrote
            assert measured["steps_run"] == 0 and "steps" not in measured["config"], measured
            assert measured["accuracy"] >= 0.9, measured  # one hidden unit per fact, d = 32: little crosstalk


PLAN = """
from recallkit.empirics.plan import plan

planned = plan("perm_memory_capacity")
print(planned.experiment.task, planned.experiment.planned_runs(), planned.predictions["m=2d"]["slope_exact"])
"""


def test_the_guides_experiment_loads_and_its_line_is_predicted(guide):
    """What `recallkit sweep perm_memory_capacity` does first (nothing trained): the experiment read and checked at the
    corners of its line against the task's config and trainer, and its line predicted by the page's pack."""
    assert "recallkit sweep perm_memory_capacity" in command_lines(guide["blocks"], "recallkit")
    result = run(["python", "-c", PLAN], guide)
    assert result.returncode == 0, result.stderr[-3000:]
    task, runs, slope = result.stdout.split()
    assert task == "perm_memory" and int(runs) > 0 and slope == "1", result.stdout  # m*d ~ N log N with N the base


@pytest.mark.slow
def test_the_guides_sweep_and_fit_run(guide):
    for command in command_lines(guide["blocks"], "recallkit"):
        if command.split()[1] in ("sweep", "fit"):
            result = run(command + " --store sweep.db", guide, timeout=900)
            assert result.returncode == 0, f"{command}: {result.stderr[-3000:]}"


def test_the_guides_law_experiment_is_predicted_as_the_guide_prints(tmp_path, monkeypatch):
    """The page's law experiment (the example package's file, see the excerpt test) loads: its metric is one its task
    declares in run_metrics, and its line is predicted at the slope the page's fit table tests, -3/2."""
    from recallkit import registry
    from recallkit.empirics.plan import plan

    monkeypatch.syspath_prepend(str(ROOT / "examples" / "rf_ridge"))
    import recallkit_rf_ridge

    added = "rf_ridge" not in [system.name for system in registry.systems()]  # else installed (an entry point)
    if added:
        registry.register(recallkit_rf_ridge)
    try:
        (block,) = [b for b in guide_blocks() if b.path and b.path.endswith("/rf_ridge_width.toml")]
        (tmp_path / "rf_ridge_width.toml").write_text(block.text, encoding="utf-8")
        planned = plan(tmp_path / "rf_ridge_width.toml")
    finally:
        if added:
            registry.unregister("rf_ridge")
    (printed,) = [c for c in console_commands(guide_blocks()) if c[1].startswith("recallkit fit rf_ridge_width")]
    tested = re.search(r"(-?\d+\.\d+) \+- (\d+(?:\.\d+)?)", "\n".join(printed[2]))
    prediction = planned.predictions["n = 2 p^2"]
    assert planned.experiment.metric == "test_error" and "test_error" in recallkit_rf_ridge.recallkit_tasks()[0].run_metrics
    assert (prediction["slope"], prediction["exponent_float"]) == (float(tested.group(1)), -1.5)
    assert planned.experiment.verdict["delta"] == float(tested.group(2))

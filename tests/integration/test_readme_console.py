"""The documentation's examples are what the commands print today.

Every ```console block of README.md, docs/anchor.md and docs/cluster.md runs here, command by command, through the
installed ``recallkit`` command in one bash process (so ``echo $?`` and ``ulimit`` mean what they mean to a reader),
in a temporary folder whose ``results/recallkit.db`` is a copy of the committed small store
(``tests/fixtures/small_store/store.sqlite``; ``make.sh`` beside it regenerates it). What a command writes to stdout
and stderr, in the order it writes it, is compared with the lines under it:

- a line that is ``...`` alone stands for any number of lines (none included);
- ``...`` inside a line stands for any text within that line;
- every other line must be printed exactly (trailing spaces aside), numbers included.

Only what must vary between machines is normalised (:data:`VARYING`). The README's ``>>>`` examples run as doctests
in the same folder. A block that cannot run here says so right before it, in a comment the reader does not see::

    <!-- console: not-checked (why) -->     not run: the reason is required
    <!-- console: slow (why) -->            run with ``pytest -m slow`` only

and a block of output with no command (```text) must say not-checked. docs/adding-a-system.md is checked by
tests/unit/test_docs.py where it is.
"""
from __future__ import annotations

import difflib
import doctest
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/anchor.md", "docs/cluster.md")
STORE = ROOT / "tests" / "fixtures" / "small_store" / "store.sqlite"
RECALLKIT = shutil.which("recallkit")
MARK = re.compile(r"<!--\s*console:\s*(not-checked|slow)\s*(?:\((.+)\))?\s*-->")
END = "@@recallkit-doc-command-end@@"

# What must vary between machines, each with why, applied to the shown and the printed text alike.
VARYING = [
    # what is left under `ulimit -v` is the limit less the address space the process has already mapped, which
    # depends on the C library and on how many threads the libraries started on this machine's cores
    (re.compile(r"more than the \d+(?:\.\d+)? GiB left under this process's memory limit"),
     "more than the <N> GiB left under this process's memory limit"),
    # the CPU-hours at the matmul rate benchmarks/paper_cost.py measures on this CPU now
    (re.compile(r"this CPU: \d+(?:\.\d+)? CPU-hours on one core \(matmul \d+ GFLOP/s"),
     "this CPU: <N> CPU-hours on one core (matmul <N> GFLOP/s"),
]


@dataclass
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    mark: str | None  # "not-checked", "slow" or None
    reason: str | None

    @property
    def id(self) -> str:
        first = next((ln for ln in self.text.splitlines() if ln.strip()), "")
        return f"{self.doc}:{self.line} {first[:60]}"

    def commands(self) -> list[tuple[str, list[str]]]:
        """``(command, shown output lines)`` for each ``$ `` line (a line ending in ``\\`` continues it)."""
        out: list[tuple[str, list[str]]] = []
        lines = self.text.splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("$ "):
                command = [lines[i][2:]]
                while command[-1].endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command.append(lines[i])
                out.append(("\n".join(command), []))
            elif out:
                out[-1][1].append(lines[i])
            else:
                raise AssertionError(f"{self.doc}:{self.line}: output before the first '$ ' command")
            i += 1
        return out


def blocks(doc: str) -> list[Block]:
    found = []
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start, lang = i, fence.group(1)
        i += 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.search(before)
        found.append(Block(doc, start + 1, lang, "\n".join(body) + "\n", mark and mark.group(1),
                           mark and mark.group(2)))
        i += 1
    return found


def shows_output(block: Block) -> bool:
    if block.lang == "console":
        return any(output for _, output in block.commands())
    if block.lang == "python":
        return ">>> " in block.text
    return block.lang == "text"


ALL = [b for doc in DOCS for b in blocks(doc) if shows_output(b)]


def _params(kind: str) -> list:
    chosen = [b for b in ALL if b.lang == kind and b.mark != "not-checked"]
    return [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if b.mark == "slow" else []) for b in chosen]


def test_every_block_of_output_is_checked_or_says_why():
    assert ALL, "no console blocks found: the parser no longer matches the documents"
    unsaid = [b.id for b in ALL if b.lang == "text" and b.mark != "not-checked"]
    assert not unsaid, "output without a command, not marked not-checked: " + "; ".join(unsaid)
    reasonless = [b.id for b in ALL if b.mark and not b.reason]
    assert not reasonless, "a not-checked or slow mark must say why: " + "; ".join(reasonless)
    # the marks are for the few blocks that cannot run here; most of the README's examples are checked
    checked = [b for b in ALL if b.mark != "not-checked"]
    assert len(checked) > len(ALL) / 2, [b.id for b in ALL if b.mark == "not-checked"]
    stray = [f"{doc}:{n}" for doc in DOCS
             for n, line in enumerate((ROOT / doc).read_text(encoding="utf-8").splitlines(), 1)
             if "<!-- console:" in line and not MARK.search(line)]
    assert not stray, "console marks this test does not understand: " + "; ".join(stray)


# --- running a block ---------------------------------------------------------------------------------------------

def _environment(home: Path) -> dict:
    assert RECALLKIT, "the recallkit console script is not installed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECALLKIT_")}
    env.update({"PATH": f"{Path(RECALLKIT).parent}{os.pathsep}{env.get('PATH', '')}", "PYTHONUNBUFFERED": "1",
                "MPLBACKEND": "Agg", "RECALLKIT_CACHE": str(home / "cache"), "OMP_NUM_THREADS": "1",
                "COLUMNS": "120", "TERM": "dumb"})
    return env


@pytest.fixture
def folder(tmp_path):
    """A folder as a reader's checkout after the trainings of the small store: results/recallkit.db holds them, and
    the scripts the README runs (``python benchmarks/...``) are where they are in the repository."""
    assert STORE.is_file(), f"{STORE} is missing: bash tests/fixtures/small_store/make.sh regenerates it"
    (tmp_path / "results").mkdir()
    shutil.copyfile(STORE, tmp_path / "results" / "recallkit.db")
    (tmp_path / "benchmarks").symlink_to(ROOT / "benchmarks", target_is_directory=True)
    return tmp_path


def run_session(commands: list[str], cwd: Path) -> list[tuple[str, int]]:
    """Run ``commands`` one after another in one bash process; what each printed (stdout and stderr in the order
    written) and its exit status. ``$?`` in a command is the previous command's status, as in a terminal."""
    script = ["__rc=0"]
    for command in commands:
        script += [f"(exit $__rc); {command}", "__rc=$?", f"printf '\\n{END} %d\\n' \"$__rc\""]
    done = subprocess.run(["bash", "--noprofile", "--norc", "-c", "\n".join(script) + "\n"], cwd=cwd,
                          env=_environment(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=900)
    parts = re.split(rf"\n{re.escape(END)} (\d+)\n", done.stdout)
    assert len(parts) == 2 * len(commands) + 1, done.stdout[-3000:]
    return [(parts[2 * i], int(parts[2 * i + 1])) for i in range(len(commands))]


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        line = line.rsplit("\r", 1)[-1].rstrip()  # a progress bar redraws its line with \r: the last draw stays
        for pattern, replacement in VARYING:
            line = pattern.sub(replacement, line)
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


def _pattern(shown: list[str]) -> re.Pattern:
    parts = []
    for line in shown:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("...")) + r"\n")
    return re.compile("".join(parts))


def output_matches(shown: list[str], printed: list[str]) -> bool:
    printed = _lines("\n".join(printed))
    return _pattern(_lines("\n".join(shown))).fullmatch("".join(f"{line}\n" for line in printed)) is not None


def _installed_elsewhere() -> set[str]:
    """Packs of installed packages other than recallkit (examples/rf_ridge): the README lists what recallkit ships."""
    import recallkit.systems
    from recallkit import registry

    shipped = Path(recallkit.systems.__file__).resolve().parent
    return {p.stem for s in registry.systems() if not Path(s.root).resolve().is_relative_to(shipped)
            for p in s.pack_paths()}


@pytest.mark.parametrize("block", _params("console"))
def test_console_block_is_what_the_commands_print(block, folder):
    commands = block.commands()
    results = run_session([command for command, _ in commands], folder)
    wrong = []
    for (command, shown), (printed, status) in zip(commands, results):
        printed_lines = _lines(printed)
        if command.strip() == "recallkit theory list":
            others = _installed_elsewhere()
            printed_lines = [ln for ln in printed_lines if ln.split()[0] not in others]
        if not output_matches(shown, printed_lines):
            diff = "\n".join(difflib.unified_diff(_lines("\n".join(shown)), printed_lines, "shown", "printed",
                                                  lineterm="", n=1))
            wrong.append(f"$ {command}\n(exit {status})\n{diff}")
    assert not wrong, f"{block.doc}:{block.line}: the output shown is not what the command prints now\n\n" + \
        "\n\n".join(wrong)


@pytest.mark.parametrize("block", _params("python"))
def test_python_examples_are_what_they_print(block, folder, monkeypatch):
    pytest.importorskip("pandas", reason="the README's DataFrame examples need the export extra (pandas)")
    monkeypatch.chdir(folder)
    for key in [k for k in os.environ if k.startswith("RECALLKIT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("RECALLKIT_CACHE", str(folder / "cache"))
    test = doctest.DocTestParser().get_doctest(block.text, {}, block.id, block.doc, block.line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda text: pytest.fail(text, pytrace=False))
    assert runner.failures == 0 and test.examples


# --- the comparison itself can fail --------------------------------------------------------------------------------

@pytest.mark.parametrize("shown, printed, same", [
    (["a 1.5", "b"], ["a 1.5", "b"], True),
    (["a 1.5", "b"], ["a 1.6", "b"], False),  # a number
    (["a 1.5"], ["a 1.5", "b"], False),  # a line more than shown
    (["a 1.5", "..."], ["a 1.5", "b", "c"], True),
    (["a 1.5", "...", "c"], ["a 1.5", "c"], True),
    (["x ... z"], ["x y y z"], True),
    (["x ... z"], ["x y y", "z"], False),  # ... inside a line stays in that line
    (["more than the 5.3 GiB left under this process's memory limit"],
     ["more than the 4.9 GiB left under this process's memory limit"], True),
    (["needs about 10.0 GiB, more than"], ["needs about 10.1 GiB, more than"], False),  # only what must vary
    (["this CPU: 8.0 CPU-hours on one core (matmul 92 GFLOP/s x efficiency 0.64)"],
     ["this CPU: 8.4 CPU-hours on one core (matmul 88 GFLOP/s x efficiency 0.64)"], True),
    (["this CPU: 8.0 CPU-hours on one core (matmul 92 GFLOP/s x efficiency 0.64)"],
     ["this CPU: 8.0 CPU-hours on one core (matmul 92 GFLOP/s x efficiency 0.65)"], False),
])
def test_output_matching(shown, printed, same):
    assert output_matches(shown, printed) is same

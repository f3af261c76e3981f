"""docs/tutorial.md runs top to bottom and prints what it shows.

Its ```python blocks are one doctest session, in order, in one namespace (the page's own temporary folder holds
everything it writes): a pack, its prediction and regions, an experiment, a tiny sweep of the associative memory,
the runs and fits as DataFrames, a matplotlib figure drawn from them and the assertions. About 10 s on one core.
"""
from __future__ import annotations

import doctest
import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the opening fence, body) of every ```python block."""
    return [(text[:m.start()].count("\n") + 1, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)]


def session(path: Path) -> doctest.DocTest:
    """The blocks as one doctest: each block's examples keep their line numbers in the page; a block's end ends
    the expected output of its last example."""
    text = path.read_text(encoding="utf-8")
    parser = doctest.DocTestParser()
    examples = []
    for line, body in python_blocks(text):
        for example in parser.get_examples(body):
            example.lineno += line  # 0-based line within the page, as doctest reports it
            examples.append(example)
    return doctest.DocTest(examples, {"__name__": "tutorial"}, path.name, str(path), 0, text)


def test_the_tutorial_runs_and_prints_what_it_shows(tmp_path, monkeypatch):
    pytest.importorskip("pandas", reason="the tutorial's DataFrames need the export extra (pandas)")
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("RECALLKIT_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("RECALLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    test = session(TUTORIAL)
    assert len(test.examples) > 30, "the tutorial's python blocks were not found"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_the_session_fails_when_an_output_is_not_what_the_code_prints(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\n>>> 1 + 1\n2\n```\n\n```python\n>>> x = 3\n>>> x * 2\n7\n```\n")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    runner.run(session(page), out=report.append)
    assert (runner.failures, runner.tries) == (1, 3)
    assert "page.md\", line 10" in "".join(report)  # the line of `>>> x * 2` in the page

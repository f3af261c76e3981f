"""The systems' steps' entries kept by the main job (``recallkit.own_steps.StepCache``): an entry computed while the
store stayed as it was is reused by the next report on the same store, with its log lines and without a worker
process; a changed store, a changed file or a damaged entry runs the step again."""
import sys
import textwrap
from pathlib import Path

import pytest

import hashlib
import json

from recallkit.empirics.cache import Cache
from recallkit.own_steps import OwnSteps, StepCache, shipped_step, store_digest
from recallkit.report_settings import ReportSettings, StepContext


@pytest.fixture
def steps_module(tmp_path, monkeypatch):
    (tmp_path / "cached_steps_probe.py").write_text(textwrap.dedent("""
        from pathlib import Path

        def runner(path, context):
            runs = Path(context.store_path).with_suffix(".runs")
            runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
            if Path(context.store_path).with_suffix(".train").exists():  # as a step that trains and stores a row
                Path(context.store_path).write_bytes(b"a store with the step's row")
            print(f"{path.name}: computed", file=context.log)
            return {"name": path.name, "text": path.read_text(), "preset": context.preset}
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "s.db"
    store.write_bytes(b"a store")
    (tmp_path / "e.toml").write_text("first")
    return tmp_path


SECRET = b"the steps test's secret"


def _run(folder: Path, background: bool = False) -> tuple[dict, str, bool]:
    """One report's step: (its entry, the log, whether a worker process was started)."""
    log = _Log()
    settings = ReportSettings(experiments=[], preset="quick", store=folder / "s.db", log=log)
    cache = StepCache(Cache(folder, SECRET), store_digest(folder / "s.db"), lambda ref, path: True)
    own = OwnSteps(settings, folder / "s.db", StepContext(settings, folder / "s.db"), background, cache)
    own.start("e", "cached_steps_probe:runner", folder / "e.toml")
    started_a_worker = getattr(own.pool, "started", False)  # (in this process: no pool of workers at all)
    entry = own.result("e")
    own.close()
    return entry, log.text, started_a_worker


class _Log:
    def __init__(self):
        self.text = ""

    def write(self, text):
        self.text += text

    def flush(self):
        pass


def _computed(folder: Path) -> int:
    runs = folder / "s.runs"
    return len(runs.read_text()) if runs.exists() else 0


def test_an_unchanged_store_reuses_the_entry_and_its_log(steps_module):
    first = _run(steps_module)
    again = _run(steps_module, background=True)
    assert _computed(steps_module) == 1
    assert again[:2] == first[:2] == ({"name": "e.toml", "text": "first", "preset": "quick"}, "e.toml: computed\n")
    assert again[2] is False  # no worker process was started for it


def test_a_changed_store_or_file_runs_the_step_again(steps_module):
    _run(steps_module)
    (steps_module / "s.db").write_bytes(b"a store with one more row")
    _run(steps_module)
    assert _computed(steps_module) == 2
    (steps_module / "e.toml").write_text("second")
    entry, _, _ = _run(steps_module)
    assert _computed(steps_module) == 3 and entry["text"] == "second"
    _run(steps_module)
    assert _computed(steps_module) == 3


def test_an_entry_made_while_the_store_changed_is_not_kept(steps_module):
    (steps_module / "s.train").write_text("")
    _run(steps_module)
    (steps_module / "s.db").write_bytes(b"a store")  # the store as it was before that report, e.g. a copy of it
    _run(steps_module)
    assert _computed(steps_module) == 2


def test_a_damaged_entry_runs_the_step_again(steps_module):
    _run(steps_module)
    (entry,) = (steps_module / "steps").glob("*.json")
    head, body = entry.read_text().split("\n", 1)
    entry.write_text(head + "\n" + body.replace("first", "frist"))
    assert _run(steps_module)[0]["text"] == "first"
    assert _computed(steps_module) == 2


def test_an_entry_rewritten_with_a_fresh_hash_is_not_believed(steps_module):
    """What anyone who can write the cache folder can do without the secret: change the entry and recompute every
    digest it carries. The report runs the step again and keeps no trace of the forgery."""
    _run(steps_module)
    (entry,) = (steps_module / "steps").glob("*.json")
    head, body = entry.read_text().split("\n", 1)
    forged = body.replace("first", "forged")
    header = json.loads(head)
    for field in header:
        if field in ("sha256", "mac"):
            header[field] = hashlib.sha256(forged.encode()).hexdigest()
    entry.write_text(json.dumps(header) + "\n" + forged)
    assert _run(steps_module)[0]["text"] == "first"
    assert _computed(steps_module) == 2
    assert "forged" not in entry.read_text()  # rewritten by the step's own result


def test_an_entry_made_under_another_secret_runs_the_step_again(steps_module):
    _run(steps_module)
    log = _Log()
    settings = ReportSettings(experiments=[], preset="quick", store=steps_module / "s.db", log=log)
    other = Cache(steps_module, b"someone else's secret")
    own = OwnSteps(settings, steps_module / "s.db", StepContext(settings, steps_module / "s.db"), False,
                   StepCache(other, store_digest(steps_module / "s.db"), lambda ref, path: True))
    own.start("e", "cached_steps_probe:runner", steps_module / "e.toml")
    assert own.result("e")["text"] == "first"
    own.close()
    assert _computed(steps_module) == 2 and other.not_ours == 1


def test_only_the_namespace_steps_are_kept_by_default(tmp_path):
    shipped = Path(sys.modules["recallkit.own_steps"].__file__).parent.parent / "systems"
    assert shipped_step("recallkit.systems.token_retrieval.steps:term_probe_entry", None)
    assert shipped_step("recallkit.systems.geometric_recall.steps:geometric_entry",
                        next(shipped.glob("geometric_recall/experiments/*.toml")))
    assert not shipped_step("recallkit.systems.geometric_recall.steps:geometric_entry", tmp_path / "mine.toml")
    assert not shipped_step("my_package.steps:entry", None)

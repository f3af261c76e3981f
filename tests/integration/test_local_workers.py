"""``--workers N``: the local executor trains a round's shape groups in N processes (that the split changes
no stored number is tested in test_batch_independence.py, whose sweep runs with --workers 2); how the
work is split, and bad values as one-line usage errors."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from recallkit.empirics.executors import LocalExecutor, split_work
from recallkit.theory.errors import InputError

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")


def test_split_work_keeps_shape_groups_whole_and_halves_the_largest_for_idle_workers():
    base = dict(task="assoc_memory", model="linear", trainer="adamw", lr=0.1, steps=10)
    configs = [dict(base, N=64, d=8, seed=s) for s in range(4)] + [dict(base, N=512, d=32, seed=0)]
    parts = split_work(configs, 2)
    assert sorted(map(sorted, parts)) == [[0, 1, 2, 3], [4]]
    assert parts[0] == [4]  # the costliest group goes first
    assert sorted(map(sorted, split_work(configs[:4], 2))) == [[0, 1], [2, 3]]
    assert split_work(configs[:1], 4) == [[0]]


def test_split_work_halves_a_group_that_would_keep_the_other_worker_waiting():
    """Two seeds of a large model next to two of a small one: the large pair is one group, and in one call it
    would take the whole round while the other worker finishes the small pair and waits; halved, the two large
    models train side by side. A group within its fair share of the round stays whole (one batched call)."""
    base = dict(task="assoc_memory", model="linear", trainer="adamw", lr=0.1, steps=10)
    configs = [dict(base, N=512, d=32, seed=s) for s in range(2)] + [dict(base, N=64, d=8, seed=s) for s in range(2)]
    assert split_work(configs, 2) == [[0], [1], [2, 3]]
    even = [dict(base, N=512, d=32, seed=s) for s in range(2)] + [dict(base, N=512, d=32, lr=0.2, seed=s) for s in range(2)]
    assert split_work(even, 2) == [[0, 1], [2, 3]]  # one shape group, two equal halves
    assert split_work(configs, 1) == [[0, 1], [2, 3]]  # one worker: nothing is split


@pytest.mark.parametrize("value", ["0", "-2"])
def test_bad_workers_is_a_one_line_usage_error(tmp_path, value):
    done = subprocess.run([RECALLKIT, "sweep", "assoc_memory_linear", "--store", str(tmp_path / "s.db"),
                           "--workers", value], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "--workers" in done.stderr, done.stderr
    with pytest.raises(InputError, match="--workers"):
        LocalExecutor(workers=0)

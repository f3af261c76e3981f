"""Tiny experiment and probe-grid files, as text, shared by the tests that write them to a temporary folder.

Each test names only what it is about (the kind, the metric, the grid, the preset's sizes); the rest is the one
small, fast setting every copy used: linear associative memory trained by AdamW at lr 1000 for 64 steps, and
token-retrieval probe grids around V = 256, N = 4000, d = 32, L = 16 on the attention-only pack.
"""
from __future__ import annotations

import pytest

from recallkit.empirics.experiment import load_experiment
from recallkit.theory.errors import InputError

__all__ = ["FAST_LINEAR_FIXED", "TINY_LINEAR_MEMORY", "TINY_THREE_STEP_BODY", "experiment_load_error", "linear_memory_experiment", "linear_memory_grid",
           "probe_grid"]

#: [fixed] of a linear memory that reaches its threshold in a few dozen steps (lr 1000: the loss is convex)
FAST_LINEAR_FIXED = "lr = 1000.0\nsteps = 64\nearly_stop = 0.9\nweight_decay = 0.0"

_LINEAR_MEMORY = """
name = "{name}"
description = "{description}"
pack = "{pack}"
task = "assoc_memory"
model = "linear"
trainer = "adamw"
kind = "{kind}"
base = "{base}"
size = "{size}"
{head}

[[lines]]
scaling = ""
theory_scaling = "{theory_scaling}"
label = "linear"

[fixed]
{fixed}
{search}
[presets.quick]
{quick}
"""


def linear_memory_experiment(name: str, description: str, *, kind: str, base: str, size: str, quick: str,
                             head: str = "thresholds = [0.9]", search: str | None = None, fixed: str = FAST_LINEAR_FIXED,
                             theory_scaling: str = "m=d", pack: str = "assoc_memory") -> str:
    """A linear associative-memory experiment with one line (``label = "linear"``): ``head`` holds the top-level
    keys after ``size`` (thresholds, metric), ``search`` the [search] table's keys (none for a grid), ``quick``
    the quick preset's."""
    return _LINEAR_MEMORY.format(name=name, description=description, pack=pack, kind=kind, base=base, size=size,
                                 head=head, theory_scaling=theory_scaling, fixed=fixed, quick=quick,
                                 search="" if search is None else f"\n[search]\n{search}\n")


def linear_memory_grid(name: str, description: str, metric: str) -> str:
    """A linear-memory grid experiment on ``metric`` over N = 8, 16 by d = 4, 8 with two seeds: eight runs of 32
    steps, so a test that sweeps and reports it takes seconds."""
    return linear_memory_experiment(name, description, kind="grid", base="N", size="d", head=f'metric = "{metric}"',
                                    fixed="lr = 1000.0\nsteps = 32\nweight_decay = 0.0",
                                    quick="N = [8, 16]\nsizes = [4, 8]\nseeds = [0, 1]")


#: the report's and the CLI's end-to-end tests' capacity experiment: four d, two seeds, a threshold of 0.99
TINY_LINEAR_MEMORY = linear_memory_experiment(
    "tiny_linear_memory", "tiny linear associative memory (test)", kind="max_capacity", base="d", size="N",
    head="thresholds = [0.99]", fixed="lr = 0.1\nsteps = 128\nearly_stop = 0.99\nweight_decay = 0.0",
    search='min = 2\nmax = 4096\nstart = "d**2/3"\nbracket = 1.4',
    quick="d = [4, 6, 8, 11]\nseeds = [0, 1]\nsearch = { resolution = 0.25 }")

_PROBE_GRID = """
name = "{name}"
[verdict]
delta = 0.25
alpha = 0.05
[schedule]
kappa = 1.0
eta = 1e-3
[packs.token_retrieval_attn.presets.quick]
base = {{ V = 256, N = 4000, d = 32, L = 16 }}
vary = {vary}
seeds = {seeds}
n_test = {n_test}
"""


def probe_grid(name: str, *, vary: str, seeds: str, n_test: int) -> str:
    """A term-probe grid file for the attention-only pack, its quick preset varying ``vary`` (an inline TOML table,
    e.g. ``{ d = [16, 32] }``) around V = 256, N = 4000, d = 32, L = 16; more presets can be appended."""
    return _PROBE_GRID.format(name=name, vary=vary, seeds=seeds, n_test=n_test)


def experiment_load_error(path: str) -> str:
    """The one-line InputError of loading the experiment file ``path``, which names that file."""
    with pytest.raises(InputError) as info:
        load_experiment(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(path), message
    return message


# a tiny attention-only three-step experiment's line, step sizes and search bounds (the top keys and presets vary)
TINY_THREE_STEP_BODY = """[[lines]]
scaling = "N=V*log(V), L=V**0.5"
[fixed]
eta = 1.0
gamma = 1e7
[search]
"""


def tiny_construction(N: list[int], R: list[int]) -> str:
    """A geometric-recall construction experiment (a system's runner, not a search) at the sizes given."""
    return f"""
[geometric]
name = "tiny_construction"
kind = "construction"
pack = "geometric_recall"
description = "tiny geometric-recall construction (test)"

[geometric.presets.quick]
N = {N}
R = {R}
seeds = [0]
codes = ["binary"]
failure_probability = 0.01
"""


def attention_only_grid(name: str, description: str, scaling: str) -> str:
    """The head of a token-retrieval grid experiment (attention-only, three-step GD, one line at threshold 0.1): the
    caller adds its own ``[fixed]`` and presets."""
    return f"""
name = "{name}"
description = "{description}"
pack = "token_retrieval_attn"
task = "token_retrieval"
model = "attention-only"
trainer = "three_step"
kind = "grid"
thresholds = [0.1]

[[lines]]
scaling = "{scaling}"
"""

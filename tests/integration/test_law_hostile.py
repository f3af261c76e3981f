"""Hostile laws through the installed ``recallkit`` command: a law's term that is not what docs/adding-a-system.md
("Laws") allows (a positive coefficient times powers and logs of the pack's variables, with no variable both in an
exponent and a power's base, and no exponential), and a law experiment whose terms go the other way than its
direction, are refused by ``theory show``, ``sweep`` and ``fit`` with exit 2 and one line naming the file and the
field. Before, all three accepted ``0``, ``-p**-1``, ``exp(p)`` and ``p**p`` (none a power law a fit recovers) and
a term rising with the base of a lower-is-better metric.

The law experiment is the toy system of tests/unit/empirics/test_law_experiment.py (test_error ~ p^-1 + n^-2 along
n = p^2), registered through the ``recallkit.systems`` entry-point group from a temporary folder; each case swaps its
``width`` term. Every command runs up front, two at a time (each takes seconds to start).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.unit.empirics.test_law_experiment import LAW_EXPERIMENT, LAW_PACK, write_registered_toy

pytestmark = pytest.mark.integration
RECALLKIT = shutil.which("recallkit")
WIDTH = 'expr = "p**-1"'


@pytest.fixture(scope="module")
def toy(tmp_path_factory) -> Path:
    return write_registered_toy(tmp_path_factory.mktemp("law_hostile"))


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECALLKIT_STORE")}
    env.update(PYTHONPATH=str(root), MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    return env


def _run(root: Path, args: list[str]) -> subprocess.CompletedProcess:
    assert RECALLKIT, "the recallkit console script is not installed"
    return subprocess.run([RECALLKIT, *args], cwd=root, env=_env(root), capture_output=True, text=True, timeout=300)


def _refusals(root: Path, commands: list[list[str]]) -> list[str]:
    """Run the ``recallkit`` commands two at a time (the machine's cores); each must exit 2 with one line on stderr:
    those lines, after 'error: '."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda args: _run(root, args), commands))
    lines = []
    for args, result in zip(commands, results):
        assert result.returncode == 2, (args, result.returncode, result.stderr[-2000:], result.stdout[-2000:])
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1, (args, result.stderr[-2000:])
        assert result.stderr.startswith("error: "), (args, result.stderr)
        lines.append(result.stderr.strip()[len("error: "):])
    return lines


def _case(toy: Path, name: str, width: str, extra: str = "") -> tuple[str, str]:
    """A pack whose width term is ``width`` and the law experiment on it (with ``extra`` top-level keys)."""
    pack, experiment = f"{name}_pack.toml", f"{name}.toml"
    assert WIDTH in LAW_PACK
    text = LAW_PACK.replace(WIDTH, f'expr = "{width}"', 1)
    (toy / pack).write_text(text, encoding="utf-8")
    (toy / experiment).write_text(LAW_EXPERIMENT.format(pack=pack, extra=extra, lines=""), encoding="utf-8")
    return pack, experiment


# -------------------------------------------------------------------------------- terms that are not power laws
# case: (the width term, what the refusal says, the commands that must refuse it: theory show and sweep for every
# case, fit for one; the three read the pack through one loader)
NOT_POWER_LAWS = {
    "zero": ("0", "'0' is 0; expected a positive coefficient times powers and logs of the pack's variables",
             ("show", "sweep")),
    "negative-coefficient": ("-p**-1", "'-p**-1' has the negative coefficient -1; expected a positive coefficient",
                             ("show", "sweep", "fit")),
    "exp-of-a-variable": ("exp(p)", "exp(p) is exponential in p, not a power law; expected a positive coefficient",
                          ("show", "sweep")),
    "variable-in-its-own-exponent": ("p**p", "p appears in an exponent (p**p); an exponent holds numbers, constants "
                                             "and declared variables the law uses in exponents only",
                                     ("show", "sweep")),
}
# ------------------------------------------------------------------------- terms against the experiment's direction
# case: (the width term, extra top-level keys, what the refusal says, the commands that must refuse it)
AGAINST_DIRECTION = {
    # test_error is lower-is-better: a term rising with p would make the metric worse as p grows
    "rising-term-lower-is-better": ("p**1", "", "term width of law test_error is ~ p^(1) along 'n=p**2', which rises "
                                                "with p; with direction = 'lower' (lower is better) expected every "
                                                "term to fall with p or stay constant", ("sweep", "fit")),
    "rising-log-lower-is-better": ("log(p)", "", "term width of law test_error is ~ p^(0) * log(p)^(1) along "
                                                 "'n=p**2', which rises", ("sweep",)),
    # direction = "higher": every term must rise, and p^-1 falls
    "falling-term-higher-is-better": ("p**-1", 'direction = "higher"\n', "term width of law test_error is ~ p^(-1) "
                                      "along 'n=p**2', which falls with p; with direction = 'higher' (higher is "
                                      "better)", ("sweep",)),
}


def _command(command: str, pack: str, experiment: str, store: str) -> list[str]:
    return {"show": ["theory", "show", pack], "sweep": ["sweep", experiment, "--store", store, "--no-progress"],
            "fit": ["fit", experiment, "--store", store, "--no-run"]}[command]


@pytest.fixture(scope="module")
def refusals(toy) -> dict[str, dict[str, str]]:
    """{case: {command: its one line}} for every case of both tables, all run up front two at a time."""
    planned = []
    for index, (case, (width, _, commands)) in enumerate(NOT_POWER_LAWS.items()):
        pack, experiment = _case(toy, f"term{index}", width)
        planned += [(case, command, _command(command, pack, experiment, f"term{index}.db")) for command in commands]
    for index, (case, (width, extra, _, commands)) in enumerate(AGAINST_DIRECTION.items()):
        pack, experiment = _case(toy, f"direction{index}", width, extra)
        store = f"direction{index}.db"
        planned += [(case, command, _command(command, pack, experiment, store)) for command in commands]
    found: dict[str, dict[str, str]] = {}
    for (case, command, _), line in zip(planned, _refusals(toy, [args for _, _, args in planned])):
        found.setdefault(case, {})[command] = line
    return found


@pytest.mark.parametrize("case", NOT_POWER_LAWS)
def test_a_term_that_is_not_a_power_law_is_refused_by_show_sweep_and_fit(toy, refusals, case):
    index = list(NOT_POWER_LAWS).index(case)
    _, expected, commands = NOT_POWER_LAWS[case]
    assert set(refusals[case]) == set(commands)
    for line in refusals[case].values():
        assert line.startswith(f"term{index}_pack.toml: laws[0].terms[0].expr: "), line
        assert expected in line, line
    assert not (toy / f"term{index}.db").exists()  # refused before a store was made


@pytest.mark.parametrize("case", AGAINST_DIRECTION)
def test_a_term_against_the_laws_direction_is_refused(refusals, case):
    index = list(AGAINST_DIRECTION).index(case)
    _, _, expected, commands = AGAINST_DIRECTION[case]
    assert set(refusals[case]) == set(commands)
    for line in refusals[case].values():
        assert line.startswith(f"direction{index}.toml: lines[0] ('n = p^2'): "), line
        assert expected in line, line


def test_the_law_the_docs_show_still_loads(toy):
    """The toy law itself (p^-1 + n^-2, lower is better) and a law exponent a line sets (p**(-alpha)) pass."""
    _, experiment = _case(toy, "alpha", "p**(-alpha)")
    pack = toy / "alpha_pack.toml"
    pack.write_text(pack.read_text().replace('[[laws]]', '[[variables]]\nname = "alpha"\nmeaning = "an exponent"\n\n'
                                             '[[laws]]', 1), encoding="utf-8")
    (toy / experiment).write_text((toy / experiment).read_text().replace('scaling = "n=p**2"',
                                                                         'scaling = "n=p**2"\ntheory_scaling = '
                                                                         '"n=p**2, alpha=1"', 1), encoding="utf-8")
    for args in (["theory", "show", "alpha_pack.toml"],
                 ["theory", "predict", "alpha_pack.toml", "--scaling", "n=p**2, alpha=1"],
                 ["sweep", experiment, "--store", "alpha.db", "--no-progress"]):
        result = _run(toy, args)
        assert result.returncode == 0, (args, result.stderr[-2000:])

"""The size symbols are written once (theory.sizes) and every stage lists the same ones, in the same order."""
import subprocess
import sys


def test_the_size_symbols_are_the_built_in_variables_but_the_step_sizes():
    from recallkit.theory.sizes import SIZE_SYMBOLS
    from recallkit.theory.symbols import VARIABLES

    assert SIZE_SYMBOLS == tuple(name for name in VARIABLES if name not in ("eta", "gamma"))
    assert SIZE_SYMBOLS == ("V", "N", "d", "L", "m", "R")


def test_every_stage_reads_the_one_list():
    from recallkit.compare.fits import X_ALIASES, X_TRANSFORMS
    from recallkit.empirics import config, experiment, records
    from recallkit.theory.sizes import SIZE_SYMBOLS

    assert records.SIZE_SYMBOLS is SIZE_SYMBOLS and experiment.SIZE_SYMBOLS is SIZE_SYMBOLS
    assert config.EXPRESSION_SYMBOLS is SIZE_SYMBOLS
    assert {f"log {s}" for s in SIZE_SYMBOLS} <= set(X_TRANSFORMS)
    assert {f"log({s})" for s in SIZE_SYMBOLS} <= set(X_ALIASES)


def test_reading_the_size_symbols_loads_no_sympy():
    code = "import sys\nimport recallkit.empirics.records, recallkit.empirics.config\nprint('sympy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"

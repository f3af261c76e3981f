"""assert_scaling on a REAL small sweep: an associative memory's capacity against the assoc_memory
pack (anchor: parameters ~ N log N, i.e. slope 1 of log(m*d) on log(N ln N)).

The default test uses the MLP memory with m = d (parameter count m*d = d^2, like the linear
memory) with a cut training budget (256 AdamW steps at lr 0.1), because it is the cheapest real
capacity sweep here: ~10 s of CPU. The linear memory of the shipped experiment file
(experiments/assoc_memory_linear.toml: lr 1000, early stop) costs ~2 CPU-minutes for a grid worth
fitting, so it is the slow test.
"""
import re

import pytest

import recallkit
from recallkit import compare
from recallkit.assertions import sweep_and_fit

pytestmark = pytest.mark.integration
pytest_plugins = ["pytester"]

EXPERIMENT = """
name = "{name}"
description = "MLP associative memory (m = d) capacity: largest N with accuracy >= 0.99 at each d"
pack = "assoc_memory"
task = "assoc_memory"
model = "mlp"
trainer = "adamw"
kind = "max_capacity"
thresholds = [0.99]

[[lines]]
scaling = "m=d"
label = "m=d"

[fixed]
lr = {lr}
steps = {steps}
early_stop = 0.99
weight_decay = 0.0

[search]
min = 4
max = 4096
resolution = 0.05

[presets.quick]
d = {d}
seeds = {seeds}
"""


@pytest.fixture(scope="module")
def small_sweep(tmp_path_factory, one_torch_thread_module):
    root = tmp_path_factory.mktemp("assert_scaling")
    path = root / "assoc_mlp_small.toml"
    path.write_text(EXPERIMENT.format(name="it_assoc_mlp_small", lr=0.1, steps=256, d=[6, 8, 11, 16], seeds=[0, 1]))
    store = root / "store.sqlite"
    first = recallkit.assert_scaling(path, "consistent", store=store)  # trains: ~56 runs, ~10 s of CPU
    return path, store, first


def test_real_sweep_is_consistent_with_the_anchor(small_sweep):
    _, _, fitted = small_sweep
    (fit,) = fitted.fits
    assert fitted.sweep["computed"] > 0 and fitted.sweep["failed"] == 0
    assert fit.x == "log(N ln N)" and fit.fit.n_points == 8 and not fit.censored
    assert fit.verdict.predicted_slope == 1.0  # from theory.predict on the assoc_memory pack
    assert fit.constant is not None and fit.constant.C_ci[0] < fit.constant.C < fit.constant.C_ci[1]
    doc = fitted.to_dict()
    assert doc["fits"][0]["verdict"] == "consistent"
    assert doc["predictions"]["m=d"]["dominant"] == "facts"


def test_rerun_reuses_the_store_and_gives_the_same_numbers(small_sweep):
    path, store, first = small_sweep
    again = sweep_and_fit(path, store=store, run=False)  # replay only: trains nothing
    assert again.sweep["computed"] == 0 and again.sweep["missing"] == 0
    assert again.fits[0].to_dict() == first.fits[0].to_dict()


def test_wrong_prediction_fails_with_the_numbers_in_the_message(small_sweep):
    path, store, first = small_sweep
    with pytest.raises(AssertionError) as info:
        recallkit.assert_scaling(path, "consistent", store=store, predicted=2.0, run=False)
    message = str(info.value)
    slope = first.fits[0].fit.slope
    assert f"fitted slope of log(param_count) on log(N ln N): {slope:.3f}" in message
    assert re.search(r"95% CI \[[0-9.]+, [0-9.]+\]; 90% CI \(TOST\) \[[0-9.]+, [0-9.]+\]; "
                     r"bootstrap 95% CI over seeds \[[0-9.]+, [0-9.]+\]", message)
    assert "tested prediction 2.000, delta 0.25, band [1.750, 2.250]" in message
    assert "verdict 'inconsistent'" in message and "below the band" in message
    assert "C = " in message


def test_marker_in_a_user_suite_runs_the_real_check(small_sweep, pytester):
    path, store, _ = small_sweep
    pytester.makepyfile(test_user=f"""
import pytest

@pytest.mark.scaling_law({str(path)!r}, expect="consistent")
def test_anchor():
    pass

@pytest.mark.scaling_law({str(path)!r}, expect="consistent", predicted=0.5)
def test_wrong_theory():
    pass
""")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--recallkit-store", str(store))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*tested prediction 0.500, delta 0.25*"])


@pytest.mark.slow
def test_shipped_linear_memory_experiment_on_a_wider_grid_is_inconclusive(tmp_path):
    # The shipped file and its quick protocol (lr 1000, early stop at 0.99) on a grid one half-octave
    # wider at the bottom than the shipped quick preset (tests/integration/test_anchor.py runs the
    # shipped grid itself in the default run): a few minutes on the shared 2-core CPU.
    from recallkit.empirics.experiment import resolve_experiment

    shipped = resolve_experiment("assoc_memory_linear")
    text = shipped.read_text()
    quick_grid = "d = [11, 16, 22, 32, 45]\nseeds = [0, 1]"
    assert quick_grid in text, "the shipped quick preset changed; update this test's grid override"
    path = tmp_path / "assoc_memory_linear.toml"
    path.write_text(text.replace(quick_grid, "d = [8, 11, 16, 22, 32, 45]\nseeds = [0, 1]", 1))
    # one thread, fixed seeds: slope 1.132, 95% CI [1.059, 1.205], across the band's edge 1.15: inconclusive
    fitted = recallkit.assert_scaling(path, "inconclusive", store=tmp_path / "store.sqlite")
    (fit,) = fitted.fits
    assert fit.verdict.predicted_slope == 1.0 and fit.verdict.delta == 0.15  # theory_scaling m=d; the file's delta
    assert fit.fit.n_points == 12 and fit.constant is not None
    assert 0.8 < fit.fit.slope < 1.3

def test_experiment_verdict_table_sets_delta(small_sweep, tmp_path):
    # The same runs (same configs, so the same store rows) judged with the file's own [verdict] delta.
    path, store, first = small_sweep
    strict = tmp_path / "strict.toml"
    strict.write_text(path.read_text() + "\n[verdict]\ndelta = 0.1\nalpha = 0.05\n")
    fitted = sweep_and_fit(strict, store=store, run=False)
    (fit,) = fitted.fits
    assert fitted.sweep["missing"] == 0 and fit.fit.slope == first.fits[0].fit.slope
    assert fit.verdict.delta == 0.1
    # slope 0.875, 95% CI [0.787, 0.963]: no longer inside 1 +- 0.1, not yet outside it
    assert fit.verdict.verdict == "inconclusive", fit.verdict.reason
    assert sweep_and_fit(strict, store=store, run=False, delta=0.3).fits[0].verdict.delta == 0.3  # flag wins


def test_reference_only_shows_the_prediction_but_decides_nothing(small_sweep, tmp_path):
    # Same stored runs; the file says its pack describes another training algorithm.
    path, store, first = small_sweep
    reference = tmp_path / "reference.toml"
    reference.write_text(path.read_text() + "\n[verdict]\nreference_only = true\n")
    fitted = sweep_and_fit(reference, store=store, run=False)
    (fit,) = fitted.fits
    assert first.fits[0].verdict.verdict == "consistent"
    assert fit.fit.slope == first.fits[0].fit.slope
    assert fit.verdict.verdict == "inconclusive"
    assert "reference_only" in fit.verdict.reason and "shown for reference" in fit.verdict.reason
    assert fitted.predictions["m=d"]["slope"] == 1.0  # the prediction itself is still reported


def test_reference_only_must_be_a_boolean(tmp_path):
    from recallkit.empirics.experiment import load_experiment
    from recallkit.theory.errors import InputError

    bad = tmp_path / "bad.toml"
    bad.write_text(EXPERIMENT.format(name="bad", lr=0.1, steps=8, d=[4, 6, 8], seeds=[0])
                   + '\n[verdict]\nreference_only = "yes"\n')
    with pytest.raises(InputError, match=r"bad.toml: verdict.reference_only: expected true or false"):
        load_experiment(bad)


def test_a_lines_reference_note_takes_only_that_line_out_of_the_verdicts(small_sweep, tmp_path):
    # The same stored runs, two lines of one scaling: the second carries a reference_note.
    path, store, first = small_sweep
    text = path.read_text().replace('label = "m=d"\n', 'label = "m=d"\n\n[[lines]]\nscaling = "m=d"\nlabel = "m=d, noted"\n'
                                    'reference_note = "the pack states its slope for the first line only"\n', 1)
    noted = tmp_path / "noted.toml"
    noted.write_text(text)
    fitted = sweep_and_fit(noted, store=store, run=False)
    by_line = {f.line: f for f in fitted.fits}
    assert by_line["m=d"].verdict.verdict == "consistent"
    assert by_line["m=d, noted"].fit.slope == by_line["m=d"].fit.slope  # the same runs, fitted alike
    assert by_line["m=d, noted"].verdict.verdict == "inconclusive"
    reason = by_line["m=d, noted"].verdict.reason
    assert "for the first line only; shown for reference" in reason
    # the reason names the file, not where it lies: a report reads the same from any checkout
    assert "noted.toml: line 'm=d, noted'" in reason and str(tmp_path) not in reason


def test_a_blank_reference_note_is_refused(tmp_path):
    from recallkit.empirics.experiment import load_experiment
    from recallkit.theory.errors import InputError

    bad = tmp_path / "bad.toml"
    bad.write_text(EXPERIMENT.format(name="bad", lr=0.1, steps=8, d=[4, 6, 8], seeds=[0])
                   .replace('label = "m=d"\n', 'label = "m=d"\nreference_note = " "\n', 1))
    with pytest.raises(InputError, match=r"bad.toml: lines\[0\].reference_note: expected a non-empty string"):
        load_experiment(bad)

"""Drawing a law's regions: ``recallkit theory regions PACK --scaling "n=d**a" --out F`` for a pack of laws draws
where each term dominates over the free exponent(s), a segment per term along one exponent (labelled with the term
and the metric's power of the base there) or a polygon per term over two, with ``--line`` marking where a line
lies; bad input is one line naming the flag."""
from __future__ import annotations

import shutil
import subprocess

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Polygon
from recallkit.reports.phase import draw_phase_diagram
from recallkit.theory.errors import InputError
from recallkit.theory.laws import law_regions
from recallkit.theory.summary import law_line_points

from tests.unit.theory.test_laws import LAW_PACK, load

__all__: list[str] = []

# error = d^-1 + n^-(1/2) + m^-1: along n = d**a, m = d**c each of the three terms dominates somewhere in [0, 4]^2
THREE_TERMS = LAW_PACK.replace('variables = ["d"]', 'variables = ["d", "m"]', 1).replace(
    "[defaults]", '[[laws.terms]]\nname = "memory"\nexpr = "m**-1"\nprovenance = "derived-here"\n\n[defaults]', 1
).replace("box = { a = [0, 4] }", "box = { a = [0, 4], c = [0, 4] }")
TWO_LAWS = LAW_PACK.replace("[defaults]", '[[laws]]\nname = "other"\nmetric = "loss"\n\n[[laws.terms]]\n'
                            'name = "width"\nexpr = "d**-2"\nprovenance = "derived-here"\n\n[[laws.terms]]\n'
                            'name = "samples"\nexpr = "n**-1"\nprovenance = "derived-here"\n\n[defaults]', 1)


def _cli(*args: str, cwd) -> subprocess.CompletedProcess:
    exe = shutil.which("recallkit")
    assert exe, "the recallkit command is not installed"
    return subprocess.run([exe, "theory", "regions", *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          check=False)


def _write(tmp_path, text: str = LAW_PACK, name: str = "toy_law.toml") -> str:
    (tmp_path / name).write_text(text)
    return f"./{name}"


def test_cli_draws_a_law_pack_regions_with_a_line(tmp_path):
    pack = _write(tmp_path)
    result = _cli(pack, "--scaling", "n=d**a", "--line", "n=3*d**3", "--out", "law.png", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "law.png").stat().st_size > 5000
    assert "region approximation, a in [2, 4]" in result.stdout
    assert "region estimation, a in [0, 2]" in result.stdout


def test_one_exponent_draws_a_labelled_segment_per_term_and_the_line_where_it_lies():
    pack = load()
    document = law_regions(pack, None, "n=d**a")
    lines = law_line_points(pack, document, [("n = 3 d^3", "n=3*d**3")])
    assert lines == ([{"label": "n = 3 d^3", "point": [3.0]}], [])
    fig = draw_phase_diagram(document, lines=lines[0])
    try:
        (ax,) = fig.axes
        texts = [t.get_text() for t in ax.texts]
        approximation = [t for t in texts if t.startswith("approximation")]
        estimation = [t for t in texts if t.startswith("estimation")]
        assert len(approximation) == 1 and "d^{-1}" in approximation[0] and "error" in approximation[0]
        assert len(estimation) == 1 and "d^{- a / 2}" in estimation[0]
        # the line: a dotted vertical at a = 3, named in the legend
        marked = [line for line in ax.get_lines() if line.get_label() == "n = 3 d^3"]
        assert len(marked) == 1 and list(marked[0].get_xdata()) == [3.0, 3.0]
        # the metric's exponent along the line: -1 where the approximation dominates, -a/2 below a = 2
        curves = {line.get_label().split(" dominant")[0]: line for line in ax.get_lines()
                  if " dominant" in line.get_label()}
        assert sorted(curves) == ["approximation", "estimation"]
        assert set(curves["approximation"].get_ydata()) == {-1.0}
        assert min(curves["estimation"].get_ydata()) == pytest.approx(-1.0)
        assert max(curves["estimation"].get_ydata()) == pytest.approx(0.0)
        assert ax.get_xlim() == (0.0, 4.0)
        assert "error" in ax.get_ylabel() and "d" in ax.get_ylabel()
    finally:
        plt.close(fig)


def test_two_exponents_draw_a_polygon_per_term_like_the_phase_diagrams():
    pack = load(THREE_TERMS)
    document = law_regions(pack, None, "n=d**a, m=d**c")
    assert document["axes"] == ["a", "c"]
    lines, notes = law_line_points(pack, document, [("n=d**2, m=d**3", "n=d**2, m=d**3")])
    assert (lines, notes) == ([{"label": "n=d**2, m=d**3", "point": [2.0, 3.0]}], [])
    fig = draw_phase_diagram(document, lines=lines)
    try:
        (ax,) = fig.axes
        regions = [p for p in ax.patches if isinstance(p, Polygon) and str(p.get_label()).split(":")[0] in
                   ("approximation", "estimation", "memory")]
        assert sorted(p.get_label().split(":")[0] for p in regions) == ["approximation", "estimation", "memory"]
        assert (ax.get_xlim(), ax.get_ylim()) == ((0.0, 4.0), (0.0, 4.0))
        (marker,) = [line for line in ax.get_lines() if line.get_label() == "n=d**2, m=d**3"]
        assert (list(marker.get_xdata()), list(marker.get_ydata())) == ([2.0], [3.0])
    finally:
        plt.close(fig)


def test_law_regions_needs_a_law_name_when_a_pack_has_several():
    with pytest.raises(InputError, match="--law: .*excess_error, other"):
        law_regions(load(TWO_LAWS), None, "n=d**a")
    assert law_regions(load(TWO_LAWS), "other", "n=d**a")["law"] == "other"


@pytest.mark.parametrize("args, flag, expected", [
    (["--scaling", "n=d**a", "--law", "nope", "--out", "x.png"], "--law", "excess_error"),
    (["--scaling", "n=d**a", "--line", "m=d**2", "--out", "x.png"], "--line", "does not set"),
    (["--scaling", "n=d**2", "--out", "x.png"], "--scaling", "free exponent"),
])
def test_bad_input_is_one_line_naming_the_flag(tmp_path, args, flag, expected):
    result = _cli(_write(tmp_path), *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert flag in lines[0] and expected in lines[0], lines[0]
    assert not (tmp_path / "x.png").exists()


def test_several_laws_without_law_is_one_line_naming_law(tmp_path):
    result = _cli(_write(tmp_path, TWO_LAWS), "--scaling", "n=d**a", "--out", "x.png", cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "--law" in result.stderr and "excess_error, other" in result.stderr


def test_a_pack_with_a_condition_draws_its_law_only_with_law(tmp_path):
    # the shipped example pack's condition, with a law in its own variables added
    from recallkit.theory.pack import resolve_pack_path

    condition = resolve_pack_path("example")[0].read_text()
    law = ('\n[[laws]]\nname = "err"\nmetric = "error"\n\n[[laws.terms]]\nname = "width"\nexpr = "V**-1"\n'
           'provenance = "derived-here"\n\n[[laws.terms]]\nname = "samples"\nexpr = "N**(-1/2)"\n'
           'provenance = "derived-here"\n')
    plain = _cli(_write(tmp_path, condition, "plain.toml"), cwd=tmp_path)
    both = _cli(_write(tmp_path, condition + law, "both.toml"), cwd=tmp_path)
    assert plain.returncode == both.returncode == 0, both.stderr
    assert both.stdout.splitlines()[1:] == plain.stdout.splitlines()[1:] and "region crosstalk" in both.stdout
    drawn = _cli("./both.toml", "--law", "err", "--scaling", "N=V**a", "--line", "N=V**3", "--out", "law.png",
                 cwd=tmp_path)
    assert drawn.returncode == 0, drawn.stderr
    assert "region width, a in [2, 3]:" in drawn.stdout and (tmp_path / "law.png").stat().st_size > 5000

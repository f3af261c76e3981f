"""The phase-diagram figure (reports.phase) from RegionDiagram.to_dict()."""
from __future__ import annotations

import pytest

from recallkit import theory
from recallkit.reports.phase import count_label, draw_phase_diagram, power_label
from recallkit.theory.errors import InputError


def test_two_axis_figure_has_one_labelled_patch_per_region(tmp_path):
    diagram = theory.compute_regions(theory.load_pack("example")).to_dict()
    lines = [{"label": "N ~ V^1.5", "points": [[1.5, 0.25], [1.5, 0.5]]}, {"label": "N ~ V log V", "point": [1, 0.5]}]
    figure = draw_phase_diagram(diagram, lines=lines)
    ax = figure.axes[0]
    labels = [patch.get_label() for patch in ax.patches]
    for region in diagram["regions"]:
        assert any(label.startswith(region["dominant"] + ":") for label in labels)
    assert ax.get_xlabel() == "a  (N = V^a)" and ax.get_ylabel() == "c  (L = V^c)"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert "N ~ V^1.5" in legend and any(text.startswith("domain:") for text in legend)
    path = tmp_path / "phase.png"
    figure.savefig(path)
    assert path.stat().st_size > 10_000


def test_one_axis_figure_draws_required_and_lower_bound_curves():
    diagram = theory.compute_regions(theory.load_pack("geometric_recall")).to_dict()
    ax = draw_phase_diagram(diagram).axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(label.startswith("required, chains_no_cot") for label in labels)
    assert any(label.startswith("lower bound on 2*N*d (counting)") for label in labels)
    required = next(line for line in ax.get_lines() if line.get_label().startswith("required"))
    ys = required.get_ydata()
    assert ys[0] == pytest.approx(1.0) and ys[-1] == pytest.approx(3.0)  # 1 + 2r on r in [0, 1]


def test_labels_fall_back_to_plain_text_when_mathtext_cannot_typeset():
    assert power_label("V", "c + 1", "c + 1", "1", "1") == r"$V^{c + 1}\,\log V$"
    assert power_label("V", "c + 1", r"\begin{cases} c \end{cases}", "0", "0") == "V^(c + 1)"
    region = {"required_param_exponent": "a", "required_param_exponent_latex": "a", "log_power": "2"}
    assert count_label({"base": "V", "param_count": "d**2", "param_count_latex": "d^{2}"}, region) == \
        r"$d^{2} \sim V^{a}\,\log^{2} V$"


def test_bad_dict_is_a_one_line_error():
    with pytest.raises(InputError, match="missing field 'regions'"):
        draw_phase_diagram({"pack": "x", "axes": ["a"], "axis_labels": ["a"], "box_float": [[0, 1]], "base": "V",
                            "param_count": "d"})

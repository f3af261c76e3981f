"""A law experiment's section shows its law's regions, with the experiment's lines where they lie, on its phase
diagram page (not "no phase diagram: --axes ..."): drawn along the pack's [defaults] scaling, else along the first
line with each entry of a law variable made the base to a free exponent ("n=2*p**2" drawn as "n=p**a", at a = 2)."""
from __future__ import annotations

import matplotlib.pyplot as plt
from recallkit.reports.layout import experiment_pages
from recallkit.theory.summary import law_scaling, pack_pieces

from tests.unit.reports.test_law_pages import law_entry
from tests.unit.theory.test_laws import LAW_PACK, load

__all__: list[str] = []


def test_a_law_packs_pieces_draw_its_regions_along_the_line_with_a_free_exponent():
    pieces = pack_pieces(load(), [("n = 3 d^3", "n=3*d**3")])
    assert not [note for note in pieces.get("notes", []) if "no phase diagram" in note], pieces.get("notes")
    regions = pieces["regions"]
    assert (regions["law"], regions["scaling"], regions["axes"]) == ("excess_error", "n=d**a", ["a"])
    assert sorted(r["dominant"] for r in regions["regions"]) == ["approximation", "estimation"]
    assert pieces["phase_lines"] == [{"label": "n = 3 d^3", "point": [3.0]}]


def test_the_base_is_the_variable_the_first_line_leaves_free():
    # a line that sets d from n: drawn as d = n**a, where this line lies at a = 1.5
    assert law_scaling(load(), [("d = 4 n^1.5", "d=4*n**1.5")]) == "d=n**a"
    pieces = pack_pieces(load(), [("d = 4 n^1.5", "d=4*n**1.5")])
    assert pieces["regions"]["base"] == "n" and pieces["phase_lines"] == [{"label": "d = 4 n^1.5", "point": [1.5]}]


def test_a_packs_defaults_scaling_wins_over_the_lines():
    pack = load(LAW_PACK.replace("[defaults]", '[defaults]\nscaling = "n=d**a"\naxes = ["a"]', 1))
    assert law_scaling(pack, [("n = 3 d^3", "n=3*d**3")]) is None
    assert pack_pieces(pack, [("n = 3 d^3", "n=3*d**3")])["regions"]["scaling"] == "n=d**a"


def test_a_law_section_has_a_phase_page_with_the_lines_marked():
    entry = law_entry()
    entry.update(pack_pieces(load(), [("n = 3 d^3", "n=3*d**3")]))
    (page,) = [p for p in experiment_pages(entry, 1) if p.stem.endswith("-phase")]
    fig = page.build()
    try:
        (ax,) = fig.axes
        assert [t.get_text().split("\n")[0] for t in ax.texts] == ["approximation", "estimation"]
        (marked,) = [line for line in ax.get_lines() if line.get_label() == "n = 3 d^3"]
        assert list(marked.get_xdata()) == [3.0, 3.0]
        assert "phase diagram with the experiment's lines" in fig.get_suptitle()
    finally:
        plt.close(fig)

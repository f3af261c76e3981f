"""Term-probe pages, drawn from a slice of a real `recallkit probe --json` document
(tests/systems/token_retrieval/probe_doc.json: 3 consistent, 3 inconclusive, 3 inconsistent rows of the quick preset)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.text import Text

from recallkit.systems.token_retrieval import pages as probes
from recallkit.reports.style import VERDICT_COLOURS
from tests.systems.geometric_recall.test_reports_geometric import assert_text_inside, table_cells
from recallkit.theory.errors import InputError

DATA = Path(__file__).parent / "probe_doc.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(DATA.read_text())


def test_table_rows_carry_prediction_fit_interval_and_coloured_verdicts(doc):
    fig = probes.probe_table_figure(doc, title="probes")
    cells = table_cells(fig)
    assert len(cells) == len(doc["table"])
    for row, e in zip(cells, doc["table"]):
        assert row[1] == e["term"].replace("_", " ") and row[2] == e["variable"]
        assert row[4] == f"{e['fitted_exponent']:+.2f}"
        assert row[5] == f"[{e['ci'][0]:+.2f}, {e['ci'][1]:+.2f}]"
        assert row[7] == e["verdict"] and row[12] == e["drift_corrected"]["verdict"]
        assert row[9] == ((e.get("finite_size") or {}).get("verdict") or "n/a")
    table = next(ax.tables[0] for ax in fig.axes if ax.tables)
    for i, e in enumerate(doc["table"], start=1):
        face = table.get_celld()[(i, 7)].get_facecolor()[:3]
        hexed = "#" + "".join(f"{round(c * 255):02X}" for c in face)
        assert hexed == VERDICT_COLOURS[e["verdict"]]
    assert any("3 consistent, 3 inconsistent, 3 inconclusive" in t.get_text().replace("\n", " ") for t in fig.findobj(Text))
    assert_text_inside(fig)


def test_predicted_shows_exact_exponent_and_finite_range(doc):
    e = dict(doc["table"][0], predicted_exponent=-0.5, predicted_exponent_exact="-1/2",
             predicted_slope_finite_range=-0.62)
    assert probes._predicted(e) == "-1/2\n(range -0.62)"
    assert probes._predicted(dict(e, predicted_slope_finite_range=-0.5)) == "-1/2"


def test_pages_split_the_table_then_give_the_notes_once(doc, monkeypatch):
    monkeypatch.setattr(probes, "ROWS_PER_PAGE", 4)
    pages = probes.probe_table_pages(doc, "6. probes")
    stems = [stem for stem, _, _ in pages]
    # every reason, raw and drift-corrected, is in the report's appendix (built from summary_rows): a
    # page of them here repeated the table; the notes the rows share are given once
    assert stems == ["probe-table-1", "probe-table-2", "probe-table-3", "probe-notes"]
    assert [label for _, _, label in pages][:2] == ["probe table (1 of 3)", "probe table (2 of 3)"]
    text = "\n".join(t.get_text() for t in pages[-1][1]().findobj(Text))
    notes = sorted({n for e in doc["table"] for n in e.get("notes", [])})
    for note in notes:
        assert " ".join(note.split()) in " ".join(text.replace("- ", "").split())
    rows = probes.summary_rows({"name": "tr_probes", "probes": doc})
    assert [r["verdict_reason"] for r in rows] == [e["verdict_reason"] for e in doc["table"]]
    assert [r["verdict_reason_drift_corrected"] for r in rows] == [e["drift_corrected"]["verdict_reason"]
                                                                   for e in doc["table"]]


def test_probe_rows_for_the_summary(doc):
    rows = probes.summary_rows({"name": "tr_probes", "probes": doc})
    assert len(rows) == len(doc["table"])
    first = rows[0]
    assert first["experiment"] == "tr_probes" and first["line"] == "signal in V"
    assert first["slope"] == doc["table"][0]["fitted_exponent"]
    assert first["predicted_slope"] == doc["table"][0]["predicted_exponent"]
    assert [r["verdict"] for r in rows] == [e["verdict"] for e in doc["table"]]
    assert [r["verdict_drift_corrected"] for r in rows] == [e["drift_corrected"]["verdict"] for e in doc["table"]]
    assert probes.summary_rows({"name": "x", "probes": {"no": "table"}}) == []


def test_a_probe_with_a_finite_size_prediction_is_judged_against_it(doc):
    table = [dict(e) for e in doc["table"]]
    table[0] = dict(table[0], verdict="inconsistent", predicted_exponent=-1.0,
                    finite_size={"predicted_exponent": -0.85, "verdict": "consistent", "verdict_reason": "inside"})
    row = probes.summary_rows({"name": "tr_probes", "probes": dict(doc, table=table)})[0]
    assert (row["verdict"], row["verdict_asymptotic"]) == ("consistent", "inconsistent")
    assert (row["predicted_slope"], row["predicted_slope_asymptotic"]) == (-0.85, -1.0)
    assert row["prediction_compared"] == "finite size" and row["verdict_reason"].endswith("inside")


def test_bad_document_is_named(doc):
    with pytest.raises(InputError, match="probes: expected compare.probe_fits.run_probe"):
        probes.probe_table_figure({"grid": {}})
    bad = dict(doc, table=[{k: v for k, v in doc["table"][0].items() if k != "verdict"}])
    with pytest.raises(InputError, match=r"probes.table\[0\]: missing field 'verdict'"):
        probes.probe_table_figure(bad)


def test_the_probe_page_says_what_explains_a_term_still_inconsistent_in_l():
    """A term in L inconsistent against the finite-size prediction but consistent drift-corrected is explained on the
    page (the finite-L normaliser formula, not the term); one that stays inconsistent drift-corrected is not."""
    from recallkit.systems.token_retrieval.pages import l_statement

    def row(term, finite, drift):
        return {"term": term, "variable": "L", "verdict": "inconsistent", "finite_size": {"verdict": finite},
                "drift_corrected": {"verdict": drift}}

    text = l_statement({"table": [row("noise_self", "inconsistent", "consistent"),
                                  row("signal", "consistent", "consistent")]})
    assert "still inconsistent: noise_self." in text
    assert "Drift-corrected, noise_self is consistent" in text and "normaliser formula" in text
    unexplained = l_statement({"table": [row("noise_self", "inconsistent", "inconsistent")]})
    assert "still inconsistent: noise_self." in unexplained and "Drift-corrected" not in unexplained

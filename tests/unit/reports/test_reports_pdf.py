"""The PDF report: structure, byte-reproducibility, standalone figures, summary.json."""
from __future__ import annotations

import json
import shutil
import subprocess

import pypdf
import pytest

from recallkit import theory
from recallkit.reports import pdf as pdf_mod
from recallkit.reports.pdf import REPORT_NAME, build_report, summary_entries, validate_summary
from recallkit.reports.text_pages import section_page, title_page
from tests.unit.reports.test_reports_figures import (
    SYNTHETIC_TERMS,
    synthetic_capacity,
    synthetic_dmin,
    synthetic_line,
)
from recallkit.theory.errors import InputError
from tests.experiment_texts import linear_memory_experiment

LINE = "N=V*log(V), L=V**0.5"


def make_summary(with_dmin: bool = True) -> dict:
    cells, points, fits = synthetic_line(line=LINE)
    lin = synthetic_capacity()
    mlp = synthetic_capacity(label="MLP m*d", C=0.5, rng_seed=3)
    exps = [
        {"name": "tr_fig2_attn", "title": "Token retrieval, attention-only (Fig 2)", "kind": "min_size",
         "pack": "token_retrieval", "reference": "Vural et al., ICLR 2026", "config_hashes": ["ab12cd34ef56ab78"],
         "terms": SYNTHETIC_TERMS,
         "lines": [{"name": LINE, "prediction": {"slope": 1.5, "slope_exact": "3/2", "dominant": "gradient_noise",
                                                 "log_power": "1"},
                    "heatmap": cells, "boundary_points": points}],
         "fits": fits},
        {"name": "assoc_linear", "title": "Associative memory (anchor)", "kind": "capacity", "pack": "assoc_memory",
         "lines": [{"name": "linear d^2", "prediction": {"slope": 1.0, "dominant": "interference"}},
                   {"name": "MLP m*d", "prediction": {"slope": 1.0, "dominant": "interference"}}],
         "fits": [lin, mlp]},
    ]
    if with_dmin:
        exps.append({"name": "geo_dmin", "title": "Geometric recall: d_min", "kind": "dmin", "pack": "geometric_recall",
                     "dmin": synthetic_dmin()})
    return {"schema": "recallkit.summary/1", "title": "recallkit report (synthetic)",
            "provenance": {"code_version": "0.1.0+gabc", "date": "2026-11-30T09:00:00Z", "device": "cpu",
                           "threads": 1, "torch_version": "2.13.0", "preset": "quick",
                           "config_hashes": {"tr_fig2_attn": ["ab12cd34ef56ab78"]}},
            "experiments": exps}


def test_summary_entries_one_row_per_fit():
    rows = summary_entries(make_summary(with_dmin=False))
    assert len(rows) == 3 + 2
    first = rows[0]
    assert first["experiment"] == "tr_fig2_attn" and first["threshold"] == 0.1
    assert first["dominant"] == "gradient_noise"  # taken from the line's prediction
    assert first["verdict"] == "consistent" and first["n_censored"] == 0
    assert rows[2]["n_censored"] == 1


@pytest.mark.parametrize("bad, match", [
    ([], "summary: expected a JSON object"),
    ({"experiments": {}}, "summary.experiments: expected a list"),
    ({"experiments": [{"name": ""}]}, r"summary.experiments\[0\].name"),
    ({"experiments": [{"name": "a", "kind": "heat"}]}, r"summary.experiments\[0\].kind: expected one of"),
    ({"experiments": [{"name": "a"}, {"name": "a"}]}, "duplicate experiment name"),
    ({"experiments": [{"name": "a", "fits": [{"slope": 1}]}]}, r"fits\[0\]: expected a FitResult dict"),
])
def test_validate_summary_names_the_field(bad, match):
    with pytest.raises(InputError, match=match):
        validate_summary(bad)


def full_summary() -> dict:
    """The synthetic summary plus a real phase diagram and the terms of a shipped pack."""
    s = make_summary()
    diagram, prediction, terms = real_theory_parts()
    exp = s["experiments"][0]
    exp.update(regions=diagram, phase_lines=[{"label": LINE, "point": [1.5, 0.5]}], terms=terms)
    exp["lines"][0]["prediction"] = prediction
    exp["fits"][0]["decided_by"] = "the quick preset (V = 64 .. 512, 4 values; 6 seeds)"
    return s


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    mp = pytest.MonkeyPatch()
    mp.setenv("SOURCE_DATE_EPOCH", "1764493200")
    try:
        path = build_report(full_summary(), out)
    finally:
        mp.undo()
    return out, path


def test_report_writes_pdf_figures_and_summary(built):
    out, path = built
    assert path == out / REPORT_NAME and path.read_bytes().startswith(b"%PDF")
    pdfs = sorted(p.name for p in (out / "figures").glob("*.pdf"))
    assert not list((out / "figures").glob("*.png"))  # PDF only, unless asked for PNG
    assert len(pdfs) >= 10
    for stem in ("00-title", "00-contents-1", "01-tr-fig2-attn-terms", "01-tr-fig2-attn-summary",
                 "02-assoc-linear-capacity", "03-geo-dmin-dmin", "99-appendix-1"):
        assert f"{stem}.pdf" in pdfs, pdfs
    assert any(n.startswith("01-tr-fig2-attn-heatmap-") for n in pdfs)
    doc = json.loads((out / "summary.json").read_text())
    assert doc["schema"] == "recallkit.summary/1"
    assert len(doc["entries"]) == 3 + 2 + 4  # 3 thresholds, 2 capacity series, 2 kinds x 2 R groups
    assert {"slope", "slope_ci", "slope_ci_bootstrap", "predicted_slope", "predicted_slope_tested", "verdict",
            "check"} <= set(doc["entries"][0])
    assert [e["check"] for e in doc["entries"]] == list(range(1, 10))
    meta = pypdf.PdfReader(path).metadata
    assert meta["/Creator"] == "recallkit"
    assert meta["/CreationDate"] == "D:20251130090000Z"  # from SOURCE_DATE_EPOCH (2025-11-30 09:00 UTC)


def test_report_is_byte_reproducible(built, tmp_path, monkeypatch):
    _, first = built
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    # drawn afresh (another folder: nothing to reuse), in two worker processes instead of one
    second = build_report(full_summary(), tmp_path, jobs=2)
    assert first.read_bytes() == second.read_bytes()
    a = (first.parent / "figures" / "00-title.pdf").read_bytes()
    assert a == (tmp_path / "figures" / "00-title.pdf").read_bytes()


def test_png_pages_only_when_asked_and_byte_reproducible(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    s = make_summary(with_dmin=False)
    build_report(s, tmp_path / "a", png=True)
    build_report(s, tmp_path / "b", png=True)
    pngs = sorted(p.name for p in (tmp_path / "a" / "figures").glob("*.png"))
    pdfs = sorted(p.name for p in (tmp_path / "a" / "figures").glob("*.pdf"))
    assert [p[:-4] for p in pngs] == [p[:-4] for p in pdfs]
    for name in pngs:
        assert (tmp_path / "a" / "figures" / name).read_bytes() == (tmp_path / "b" / "figures" / name).read_bytes()
    # the next build without --png removes the PNGs it did not redraw: a stale PNG would pass for current
    build_report(s, tmp_path / "a")
    assert not list((tmp_path / "a" / "figures").glob("*.png"))


def test_unchanged_report_redraws_nothing_and_a_change_redraws_only_its_pages(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    s = make_summary()
    first, second, third = {}, {}, {}
    path = build_report(s, tmp_path, stats=first)
    before = path.read_bytes()
    joins = []
    real_join = pdf_mod._join
    monkeypatch.setattr(pdf_mod, "_join", lambda *a, **k: (joins.append(1), real_join(*a, **k)))
    build_report(s, tmp_path, stats=second)
    assert first["drawn"] == first["pages"] and first["reused"] == 0
    assert second["drawn"] == 0 and second["reused"] == second["pages"]
    assert path.read_bytes() == before  # reused pages give the same document, byte for byte
    assert joins == []  # and the document itself is reused: nothing in it changed
    changed = make_summary()
    changed["experiments"][1]["fits"][0]["slope"] += 0.01  # one capacity fit of section 2
    build_report(changed, tmp_path, stats=third)
    drawn = {p.stem for p in (tmp_path / "figures").glob("*.pdf")}
    assert 0 < third["drawn"] < third["pages"] // 2, third
    assert path.read_bytes() != before and joins == [1]  # a changed page: joined again
    assert drawn  # every page is still there
    # the redraw flag draws everything again
    fourth = {}
    build_report(changed, tmp_path, stats=fourth, reuse=False)
    assert fourth["drawn"] == fourth["pages"]


def test_outline_has_every_section_and_page(built):
    out, path = built
    reader = pypdf.PdfReader(path)
    assert reader.trailer["/Root"]["/PageMode"] == "/UseOutlines"

    def walk(items, depth=0):
        for item in items:
            if isinstance(item, list):
                yield from walk(item, depth + 1)
            else:
                yield depth, item.title, reader.get_destination_page_number(item)

    outline = list(walk(reader.outline))
    top = [(title, page) for depth, title, page in outline if depth == 0]
    assert top[:3] == [("Title page and overview", 0), ("Contents", 1), ("Summary of verdicts", 2)]
    sections = [title for title, _ in top]
    assert sections[3:6] == ["1. Token retrieval, attention-only (Fig 2)", "2. Associative memory (anchor)",
                             "3. Geometric recall: d_min"]
    assert sections[-1] == "Appendix: verdict reasons"
    # every page of the document has an entry that points at it
    assert {page for _, _, page in outline} == set(range(len(reader.pages)))
    children = [title for depth, title, _ in outline if depth == 1]
    assert "phase diagram" in children and "overview and verdicts" in children and "d_min: log against power" in children


def test_contents_page_lists_every_section_with_its_page_and_links_to_it(built):
    _, path = built
    reader = pypdf.PdfReader(path)
    text = reader.pages[1].extract_text()
    assert "Contents" in text
    for line in ("1. Token retrieval, attention-only (Fig 2)", "2. Associative memory (anchor)", "Appendix: verdict reasons"):
        assert line in text, text
    links = [a.get_object() for a in reader.pages[1].get("/Annots", [])]
    assert len(links) >= len(reader.pages) - 1
    page_of = {page.indirect_reference.idnum: i for i, page in enumerate(reader.pages)}
    targets = {page_of[link["/Dest"][0].idnum] for link in links}
    assert targets == set(range(len(reader.pages)))


def test_appendix_has_every_reason_in_full_and_pages_cut_them(built):
    out, path = built
    doc = json.loads((out / "summary.json").read_text())
    reader = pypdf.PdfReader(path)
    appendix = " ".join(" ".join(page.extract_text().split()) for page in reader.pages
                        if "Appendix: every verdict's reason in full" in page.extract_text())
    reasoned = [entry for entry in doc["entries"] if entry.get("verdict_reason")]
    assert reasoned, "summary.json: expected entries with a verdict_reason for the appendix to show"
    for entry in reasoned:
        assert f"[{entry['check']}]" in appendix
        assert " ".join(entry["verdict_reason"].split())[-60:] in appendix
    # a verdict that names the preset deciding it says so in the appendix
    decided = [entry for entry in reasoned if entry.get("decided_by")]
    assert [entry["decided_by"] for entry in decided] == ["the quick preset (V = 64 .. 512, 4 values; 6 seeds)"]
    assert f"{decided[0]['verdict']} by the quick preset (V = 64 .. 512, 4 values; 6 seeds):" in appendix


def test_appendix_names_a_relative_threshold_as_a_fraction_of_the_ceiling():
    """The appendix headed a check at 0.25 of the ceiling 'threshold 0.25', the label of an absolute threshold."""
    from recallkit.reports.appendix import appendix_items

    rows = [{"check": 4, "experiment": "e", "line": "l", "threshold": 0.25, "threshold_relative": True,
             "verdict": "inconsistent", "verdict_reason": "r"},
            {"check": 5, "experiment": "e", "line": "l", "threshold": 0.1, "verdict": "consistent",
             "verdict_reason": "r"}]
    assert [head for head, _ in appendix_items(rows, {})] == ["[4] e: l, threshold 0.25 x ceiling",
                                                               "[5] e: l, threshold 0.1"]


def test_report_bytes_change_with_the_date(tmp_path, monkeypatch):
    # the reproducibility test can fail: a different SOURCE_DATE_EPOCH must give different bytes
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    s = {"title": "t", "experiments": []}  # title page only: the date is what differs
    a = build_report(s, tmp_path / "a").read_bytes()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764579600")
    b = build_report(s, tmp_path / "b").read_bytes()
    assert a != b


@pytest.mark.skipif(shutil.which("pdfinfo") is None or shutil.which("pdftoppm") is None,
                    reason="poppler-utils not installed")
def test_pdf_page_count_and_render(built, tmp_path):
    out, path = built
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    pages = int(next(l for l in info.splitlines() if l.startswith("Pages:")).split()[1])
    assert pages == len(list((out / "figures").glob("*.pdf")))  # one file per page
    subprocess.run(["pdftoppm", "-r", "20", "-png", "-f", "1", "-l", "2", str(path), str(tmp_path / "p")], check=True)
    assert len(list(tmp_path.glob("p-*.png"))) == 2


def test_every_joined_page_draws_from_indirect_content_streams(built):
    """A page's content streams must be indirect objects (PDF 32000-1, 7.3.8): with pypdf 7 the footer stamp put the
    drawn page's stream itself into the page's /Contents array, and pdfium, MuPDF and poppler drew every joined page
    blank, while page counts and pypdf's own text extraction still looked right."""
    from pypdf import PdfReader
    from pypdf.generic import ArrayObject, IndirectObject

    _, path = built
    for number, page in enumerate(PdfReader(path).pages, 1):
        contents = page.raw_get("/Contents")
        parts = list(contents.get_object()) if isinstance(contents.get_object(), ArrayObject) else [contents]
        assert parts and all(isinstance(part, IndirectObject) for part in parts), f"page {number}: {parts!r}"
        # the page's own drawing is wrapped in q ... Q before the footer, so its graphics state cannot leak
        assert parts[0].get_object().get_data() == b"q" and parts[-1].get_object().get_data().startswith(b"Q ")
        assert len(parts) >= 3


def real_theory_parts():
    """Regions, one predicted line and the terms of the shipped attention-only pack, as plain dicts."""
    pack = theory.load_pack("token_retrieval_attn")
    diagram = theory.compute_regions(pack, theory.parse_scaling("N=V**a, L=V**c"), axes=("a", "c")).to_dict()
    prediction = theory.predict(pack, theory.parse_scaling("N=V**1.5, L=V**0.5")).to_dict()
    return diagram, prediction, [t.to_dict() for t in pack.terms]


def test_report_with_real_phase_diagram_and_terms(built):
    out, _ = built
    assert (out / "figures" / "01-tr-fig2-attn-phase.pdf").exists()
    assert (out / "figures" / "01-tr-fig2-attn-terms.pdf").exists()


def test_experiment_entry_from_compare_fit_experiment():
    _, _, fits = synthetic_line(line=LINE)
    fitted = {"experiment": "tr_fig2_attn", "path": "experiments/x.toml", "preset": "quick", "kind": "min_size",
              "store": "s.sqlite", "sweep": {"reused": 30, "computed": 0, "missing": 0, "failed": 0},
              "predictions": {LINE: {"slope": 1.5, "dominant": "grad_noise"}}, "fits": fits}
    entry = pdf_mod.experiment_entry(fitted, title="Fig 2")
    s = {"experiments": [entry]}
    validate_summary(s)
    rows = summary_entries(s)
    assert [r["dominant"] for r in rows] == ["grad_noise"] * 3
    assert entry["notes"] == ["sweep: 30 runs, missing 0, failed 0"]
    with pytest.raises(InputError, match="fit result: expected"):
        pdf_mod.experiment_entry({"fits": []})


# ----------------------------------------------------------------------------- geometric recall and term probes
def geometric_summary() -> dict:
    """d_min (synthetic points through compare's selection, with the geometric-recall predictions), the real quick-preset
    construction and multi-hop results, a slice of a real probe document, and one failed experiment."""
    from recallkit.systems.geometric_recall.judge import d_min_report_dict
    from tests.unit.reports.test_reports_figures import synthetic_dmin
    from tests.systems.geometric_recall.test_reports_geometric import DATA as GEO_DATA
    from tests.systems.token_retrieval.test_reports_probes import DATA as PROBE_DATA

    synthetic = synthetic_dmin()
    points = ([{**p, "model": "learned"} for p in synthetic["learned"]["points"]]
              + [{**p, "model": "frozen-subjects"} for p in synthetic["frozen"]["points"]])
    dmin = d_min_report_dict({"points": points, "predicted": {"learned": "log", "frozen-subjects": "power"}},
                             n_bootstrap=0)
    geo = json.loads(GEO_DATA.read_text())
    exps = [
        {"name": "geo_dmin", "title": "Geometric recall: d_min(N)", "kind": "dmin", "pack": "geometric_recall",
         "terms": SYNTHETIC_TERMS, "dmin": dmin},
        {"name": "geometric_construction", "title": "Geometric recall: explicit construction", "kind": "geometric",
         "pack": "geometric_recall", "terms": SYNTHETIC_TERMS, "geometric": geo["construction"]},
        {"name": "geometric_multi_hop", "title": "Geometric recall: multi-hop chains", "kind": "geometric",
         "geometric": geo["multi_hop"]},
        {"name": "token_retrieval_probes", "title": "Token retrieval: term-by-term probes", "kind": "term_probes",
         "probes": json.loads(PROBE_DATA.read_text())},
        {"name": "broken_zero_shot", "kind": "geometric", "geometric": {"kind": "zero_shot", "verdict": "consistent"}},
    ]
    return {"schema": "recallkit.summary/1", "title": "recallkit report (geometric recall)",
            "provenance": {"code_version": "0.1.0+gabc", "date": "2026-11-30T09:00:00Z", "device": "cpu",
                           "threads": 1, "torch_version": "2.13.0", "preset": "quick",
                           "config_hashes": {"geometric_construction": ["geo-b97ccdbda3056356"]}},
            "experiments": exps,
            "failures": ["geometric_zero_shot.toml: geometric.presets.quick.N: expected a positive integer, got -1"]}


@pytest.fixture(scope="module")
def built_geometric(tmp_path_factory):
    import recallkit.systems.geometric_recall.pages as geometric_mod

    out = tmp_path_factory.mktemp("report_geo")
    seen = {}
    original = geometric_mod.construction_figure

    def recording(result, trained=(), **kwargs):
        seen["trained"] = list(trained)
        return original(result, trained, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setenv("SOURCE_DATE_EPOCH", "1764493200")
    mp.setattr(geometric_mod, "construction_figure", recording)
    try:
        with pytest.warns(UserWarning, match="could not be drawn"):
            path = build_report(geometric_summary(), out, jobs=1)  # in this process: the recording sees the call
    finally:
        mp.undo()
    return out, path, seen


def test_geometric_and_probe_sections(built_geometric):
    out, path, seen = built_geometric
    stems = sorted(p.stem for p in (out / "figures").glob("*.pdf"))
    for stem in ("01-geo-dmin-dmin", "02-geometric-construction-construction", "03-geometric-multi-hop-multi-hop",
                 "05-token-retrieval-probes-probe-table-1", "05-token-retrieval-probes-probe-notes"):
        assert stem in stems, stems
    assert "05-token-retrieval-probes-summary" not in stems  # a diagnostic, after the experiments; its table opens it
    assert "02-geometric-construction-terms" not in stems  # the pack's terms are shown once, in section 1
    assert "01-geo-dmin-terms" in stems
    # the construction page got the d_min experiment's trained points (both models, uncensored only)
    models = {p["model"] for p in seen["trained"]}
    assert models == {"learned", "frozen-subjects"} and all(p["d"] is not None for p in seen["trained"])


def test_geometric_verdicts_in_summary_entries(built_geometric):
    out, _, _ = built_geometric
    doc = json.loads((out / "summary.json").read_text())
    by_exp = {}
    for row in doc["entries"]:
        by_exp.setdefault(row["experiment"], []).append(row)
    assert [r["verdict"] for r in by_exp["geometric_construction"]] == ["consistent"]
    assert by_exp["geometric_multi_hop"][0]["verdict_reason"].startswith("median d_min without CoT")
    assert len(by_exp["token_retrieval_probes"]) == 9
    assert {r["verdict"] for r in by_exp["geo_dmin"]} == {"consistent"}  # log for learned, power for frozen
    assert any("broken-zero-shot" in e for e in doc["page_errors"])  # drawn as an error page, report complete
    assert doc["failures"] == geometric_summary()["failures"]


def test_title_page_overview_and_failures():
    s = geometric_summary()
    rows = summary_entries(s)
    overview = pdf_mod.overview_rows(s, rows)
    assert [o["name"] for o in overview] == [e["name"] for e in s["experiments"]]
    probes_row = next(o for o in overview if o["name"] == "token_retrieval_probes")
    assert (probes_row["consistent"], probes_row["inconclusive"], probes_row["inconsistent"], probes_row["checks"]) \
        == (3, 3, 3, 9)
    assert overview[1]["config_hashes"] == "geo-b97ccdbda3056356"
    fig = title_page(s, rows)
    from matplotlib.text import Text

    text = " ".join(t.get_text() for t in fig.findobj(Text))
    assert "1 experiment(s) failed" in text and "geometric.presets.quick.N" in text
    from tests.systems.geometric_recall.test_reports_geometric import assert_text_inside

    assert_text_inside(fig)


def test_summary_pages_fit_their_rows_on_the_page():
    from recallkit.reports import tables

    s = geometric_summary()
    rows = summary_entries(s) * 3
    budget = tables.slope_table_budget(tables.SLOPE_TABLE_AXES[3] * 8.27)
    chunks = tables.chunk_rows(rows, budget=budget)
    assert sum(len(c) for c in chunks) == len(rows) and len(chunks) > 1
    assert all(sum(tables.slope_row_lines(r) + 0.3 for r in c) <= budget for c in chunks)
    fig = tables.slope_table(chunks[0], max_rows=len(chunks[0]))
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    table = fig.axes[0].tables[0]
    bottom = min(cell.get_window_extent(canvas.get_renderer()).y0 for cell in table.get_celld().values())
    assert bottom >= 0, "the table runs off the bottom of the page"


def test_section_page_with_long_title_and_many_notes_stays_on_the_page():
    from tests.systems.geometric_recall.test_reports_geometric import assert_text_inside

    rows = summary_entries(geometric_summary())[:3]
    notes = [f"note {i}: " + "a sweep note that is long enough to wrap onto a second line of the page " * 2
             for i in range(40)]
    fig = section_page("7. " + "A very long experiment title that goes on " * 6, notes, rows)
    assert_text_inside(fig)
    from matplotlib.text import Text

    assert any("more paragraph(s) (notes) in summary.json" in t.get_text() for t in fig.findobj(Text))
    assert fig.axes and fig.axes[0].tables  # the table still gets its place


def test_rebuild_removes_stale_pages_only(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    figs = tmp_path / "figures"
    figs.mkdir()
    (figs / "07-old-experiment-fits.png").write_bytes(b"stale")
    (figs / "07-old-experiment-fits.pdf").write_bytes(b"stale")
    (figs / "my-notes.png").write_bytes(b"keep")  # not named like a report page: left alone
    build_report({"title": "t", "experiments": []}, tmp_path)
    names = sorted(p.name for p in figs.iterdir())
    assert "07-old-experiment-fits.png" not in names and "07-old-experiment-fits.pdf" not in names
    assert "my-notes.png" in names and "00-title.pdf" in names


def test_builder_draws_sections_early_and_the_result_depends_on_the_summary_alone(tmp_path, monkeypatch):
    # the main job adds each experiment as it is computed; pages drawn from an entry that changes before the
    # end are not used, and the report is byte for byte the one build_report makes from the final summary
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    summary = make_summary()
    stats = {}
    with pdf_mod.ReportBuilder(tmp_path / "early", jobs=2) as builder:
        for exp in summary["experiments"]:
            builder.add(json.loads(json.dumps(exp)))
        builder._entries[0]["fits"][0]["slope"] += 0.05  # changed after its pages were handed over
        final = json.loads(json.dumps(summary))
        final["experiments"][0]["fits"][0]["slope"] += 0.05
        path = builder.finish(final, stats=stats)
    assert stats["wasted"] >= 1 and stats["drawn"] == stats["pages"], stats
    assert not list((tmp_path / "early").glob(".recallkit-staging-*"))
    fresh = build_report(final, tmp_path / "fresh", jobs=1)
    assert path.read_bytes() == fresh.read_bytes()
    early = sorted(p.name for p in (tmp_path / "early" / "figures").iterdir())
    assert early == sorted(p.name for p in (tmp_path / "fresh" / "figures").iterdir())


def test_builder_closed_before_finish_keeps_the_previous_report(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    previous = build_report({"title": "t", "experiments": []}, tmp_path).read_bytes()
    with pytest.raises(KeyboardInterrupt):
        with pdf_mod.ReportBuilder(tmp_path, jobs=2) as builder:
            builder.add(make_summary()["experiments"][0])
            raise KeyboardInterrupt  # Ctrl-C while the job computes the next experiment
    assert (tmp_path / REPORT_NAME).read_bytes() == previous
    assert not list(tmp_path.glob(".recallkit-staging-*"))
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["00-contents-1.pdf", "00-title.pdf", "pages.json"]


def test_fit_page_shows_the_tested_prediction_of_summary_json(tmp_path, monkeypatch):
    # the prediction has a log factor: the verdict tests its finite-range slope, and the fit page (box,
    # legend), the summary table and summary.json must all give that number, the asymptotic one beside it
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764493200")
    s = make_summary(with_dmin=False)
    s["experiments"] = s["experiments"][:1]
    for fit in s["experiments"][0]["fits"]:
        fit.update(predicted_slope_asymptotic=1.5, predicted_slope_tested=1.695, band=[1.445, 1.945])
        for old in ("predicted_slope", "predicted_slope_finite_range"):  # schema 1.1 records (compare.schema)
            fit.pop(old, None)
    build_report(s, tmp_path, jobs=1)
    (page,) = (tmp_path / "figures").glob("01-tr-fig2-attn-fits-*.pdf")
    text = " ".join(pypdf.PdfReader(page).pages[0].extract_text().split())
    # each panel's title: the fitted slope against the tested prediction and its margin; the asymptotic line is
    # drawn and named in the legend as not tested
    assert "vs 1.70" in text and "asymptotic prediction (not tested)" in text
    assert "vs 1.50" not in text  # the untested asymptotic slope is never shown as the prediction
    doc = json.loads((tmp_path / "summary.json").read_text())
    entry = doc["entries"][0]
    assert entry["predicted_slope_asymptotic"] == 1.5 and entry["predicted_slope_tested"] == 1.695
    assert entry["log_power"] == "1" and entry["predicted_slope"] == 1.695  # the deprecated alias: the tested slope
    (table,) = (tmp_path / "figures").glob("00-summary-1.pdf")
    table_text = " ".join(pypdf.PdfReader(table).pages[0].extract_text().split())
    assert "1.695 (asympt. 1.50)" in table_text and "tested prediction" in table_text


# ----------------------------------------------------------------------------- a metric other than accuracy
def _train_accuracy_entry() -> dict:
    """An experiment entry whose thresholds are on train_accuracy: its runs carry no 'accuracy' field."""
    cells, points, fits = synthetic_line(line=LINE)
    cells = [{"V": c["V"], "d": c["d"], "train_accuracy": c["accuracy"]} for c in cells]
    return {"name": "tr_train", "title": "Train accuracy", "kind": "min_size", "metric": "train_accuracy",
            "lines": [{"name": LINE, "heatmap": cells, "boundary_points": points}], "fits": fits}


def test_heatmap_page_draws_the_experiments_metric():
    import matplotlib.pyplot as plt
    from recallkit.reports.layout import experiment_pages

    pages = [p for p in experiment_pages(_train_accuracy_entry(), 1) if "heatmap" in p.stem]
    assert len(pages) == 1 and "train_accuracy" in pages[0].label
    fig = pages[0].build()
    try:
        colour_bar = [ax.get_ylabel() for ax in fig.axes if "accuracy" in ax.get_ylabel()]
        assert colour_bar and "train_accuracy" in colour_bar[0]
    finally:
        plt.close(fig)


def test_a_line_judged_on_a_metric_its_cells_lack_draws_their_accuracy():
    """tr_fig5's epoch lines are judged on accuracy after 4 or 8 epochs, which the heatmap's cells (each run's
    final metrics) do not hold: the page drew nothing ("missing field 'accuracy_epoch_8'") in the main job."""
    import matplotlib.pyplot as plt
    from recallkit.reports.layout import experiment_pages

    cells, points, fits = synthetic_line(line=LINE)
    entry = {"name": "tr_epochs", "title": "Epochs", "kind": "min_size", "line_metrics": {LINE: "accuracy_epoch_8"},
             "lines": [{"name": LINE, "heatmap": cells, "boundary_points": points}], "fits": fits}
    (page,) = [p for p in experiment_pages(entry, 1) if "heatmap" in p.stem]
    assert page.label.startswith("accuracy heatmap")
    plt.close(page.build())


def test_paper_heatmap_draws_the_experiments_metric(tmp_path):
    from recallkit.reports.paper import paper_figures

    made = paper_figures(_train_accuracy_entry(), tmp_path)
    assert any("heatmap" in path.name for path in made)


_TRAIN_ACCURACY_EXPERIMENT = linear_memory_experiment(
    "linear_train_accuracy", "linear memory, largest N with train accuracy >= 0.9 at each d", kind="max_capacity",
    base="d", size="N", head='metric = "train_accuracy"\nthresholds = [0.9]',
    search='min = 2\nmax = 256\nstart = "d**2/3"\nbracket = 1.4', quick="d = [4, 6, 8]\nseeds = [0]\nsearch = { resolution = 0.2 }")


def test_fit_json_names_a_metric_other_than_accuracy_for_the_report(tmp_path):
    cli = shutil.which("recallkit")
    assert cli is not None
    experiment = tmp_path / "linear_train_accuracy.toml"
    experiment.write_text(_TRAIN_ACCURACY_EXPERIMENT, encoding="utf-8")
    store = str(tmp_path / "store.db")
    swept = subprocess.run([cli, "sweep", str(experiment), "--store", store, "--no-progress"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert swept.returncode == 0, swept.stderr
    fitted = subprocess.run([cli, "fit", str(experiment), "--store", store, "--json"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert fitted.returncode == 0, fitted.stderr
    entry = pdf_mod.experiment_entry(json.loads(fitted.stdout))
    assert entry["metric"] == "train_accuracy"


# ----------------------------------------------------------------------------- a runner entry with its own page kind
def toy_law_pages(entry, head, experiments):
    import matplotlib.pyplot as plt
    return [("toy-law", lambda: plt.figure(), "the law's own fit")]


def toy_law_rows(entry):
    return [{"experiment": entry["name"], "line": f.get("line"), "threshold": None, "slope": f.get("slope"),
             "verdict": f.get("verdict"), "verdict_reason": f.get("verdict_reason"), "x": "log width"}
            for f in entry["fits"]]


@pytest.fixture
def toy_law_kind(register_page_kind):
    register_page_kind("toy_law_system", "toy_law", pages=f"{__name__}:toy_law_pages", rows=f"{__name__}:toy_law_rows")


def test_runner_entry_with_its_own_page_kind_gets_no_generic_fit_pages_or_rows(toy_law_kind):
    from recallkit.reports.layout import experiment_pages

    _, _, fits = synthetic_line(line=LINE)
    entry = {"name": "toy_law_run", "title": "Toy law", "kind": "toy_law", "fits": fits,
             "lines": [{"name": LINE}]}
    rows = summary_entries({"experiments": [entry]})
    # once per check, from the page kind: not again as a generic row read as a parameter-count slope
    assert len(rows) == len(fits) and {r["x"] for r in rows} == {"log width"}
    stems = [p.stem for p in experiment_pages(entry, 1, [entry])]
    assert any(s.endswith("toy-law") for s in stems)
    assert not [s for s in stems if "-fits" in s or s.endswith("-capacity")]


def test_title_page_shows_whole_rows_and_names_the_experiments_it_left_out():
    """Seventeen experiments (the main job's count) hold more rows than the page: the table draws the rows that
    fit whole, and the line under it names every other experiment (the table used to run off the page)."""
    from matplotlib.table import Table
    from matplotlib.text import Text

    from tests.systems.geometric_recall.test_reports_geometric import assert_text_inside

    base = geometric_summary()
    many = [dict(base["experiments"][0], name=f"experiment_{k:02d}", title=f"experiment_{k:02d}") for k in range(17)]
    s = dict(base, experiments=many, failures=[])
    rows = summary_entries(s)
    fig = title_page(s, rows)
    (table,) = fig.findobj(Table)
    shown = max(row for row, _ in table.get_celld())  # body rows (row 0 is the header)
    assert 0 < shown < 17
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else None
    if renderer is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    for cell in table.get_celld().values():  # every drawn row lies on the page
        box = cell.get_window_extent(renderer).transformed(fig.transFigure.inverted())
        assert box.y0 >= 0.0, box
    text = " ".join(t.get_text() for t in fig.findobj(Text)).replace("\n", " ")
    assert f"and {17 - shown} more sections" in text and "experiment_16" in text
    assert_text_inside(fig)

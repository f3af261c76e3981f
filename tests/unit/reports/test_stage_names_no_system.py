"""The stages name no system's kind of entry: geometric recall's d_min entries ("dmin") are a page kind that
system registers, drawn and listed by its own pages, not a base kind of the report."""
import ast
import importlib
from pathlib import Path

from recallkit.reports import summary_rows
from recallkit.reports.summary_rows import summary_entries

STAGES = ("recallkit.theory", "recallkit.empirics", "recallkit.compare", "recallkit.reports")
SYSTEM_KINDS = ("dmin", "geometric", "geo_capacity", "term_probes", "gradient_access")


def _string_constants(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_no_stage_module_names_a_system_kind():
    folders = [Path(importlib.import_module(stage).__file__).parent for stage in STAGES]
    stage_files = [p for folder in folders for p in sorted(folder.glob("*.py"))]
    assert len(stage_files) > 60
    named = {f"{p}: {kind}" for p in stage_files for kind in SYSTEM_KINDS if kind in _string_constants(p)}
    assert not named, sorted(named)


def test_dmin_is_geometric_recalls_page_kind_with_its_rows():
    assert "dmin" not in summary_rows.BASE_KINDS
    assert summary_rows.page_kinds()["dmin"].pages.startswith("recallkit.systems.geometric_recall.")
    group = {"R": 2, "preferred": "log", "log": {"b": 1.5, "b_ci": [1.2, 1.8]}, "n_points": 4,
             "verdict": "consistent", "predicted": "log"}
    entry = {"name": "geo_dmin", "kind": "dmin",
             "dmin": {"learned": {"selection": {"group_key": "R", "groups": [group]}}}}
    rows = summary_entries({"experiments": [entry]})
    assert [(r["line"], r["slope"], r["verdict"]) for r in rows] == [
        ("learned, R = 2: b of a + b log2 N", 1.5, "consistent")]


def test_paper_figures_draw_a_system_kind_through_its_registered_pages(tmp_path):
    from recallkit.reports.paper import paper_figures
    from tests.unit.reports.test_reports_figures import synthetic_dmin

    made = paper_figures({"name": "geo_dmin", "kind": "dmin", "dmin": synthetic_dmin()}, tmp_path, fmt="png")
    assert [p.name for p in made] == ["geo-dmin-dmin.png"]
    assert made[0].stat().st_size > 10_000

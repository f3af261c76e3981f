"""A d_min(N) search (geo_dmin_learned_vs_frozen: kind min_size over d) is judged log against power by this
system, which names its "dmin" page kind on the entry: the report draws the d_min page and lists its rows
through that kind, after the search's own fits."""
from types import SimpleNamespace

import numpy as np

from recallkit.reports.layout import experiment_pages
from recallkit.reports.summary_rows import summary_entries
from recallkit.systems.geometric_recall.judge import judge_search


def _judged_entry() -> dict:
    experiment = SimpleNamespace(name="geo", kind="min_size", model="learned", lines=[
        SimpleNamespace(label="learned, R=4", overrides={}),
        SimpleNamespace(label="frozen, R=4", overrides={"model": "frozen"})])
    points = []
    for n in (64, 128, 256, 512, 1024):
        points.append({"line": "learned, R=4", "N": n, "R": 4, "d": 2 * np.log2(n) + 0.1 * (n % 3), "seed": 0,
                       "censored": False})
        points.append({"line": "frozen, R=4", "N": n, "R": 4, "d": n**0.5 * (1 + 0.01 * (n % 3)), "seed": 0,
                       "censored": False})
    entry = {"name": "geo", "kind": "min_size", "fits": []}
    judge_search(entry, experiment, SimpleNamespace(points=points))
    return entry


def test_the_judge_names_the_dmin_page_kind_and_its_rows_follow():
    entry = _judged_entry()
    assert entry["page_kinds"] == ["dmin"]
    rows = summary_entries({"experiments": [entry]})
    assert [(r["line"], r["verdict"]) for r in rows] == [("learned, R = 4: b of a + b log2 N", "consistent"),
                                                         ("frozen, R = 4: p of c N^p", "consistent")]


def test_the_report_draws_the_dmin_page_of_a_search_entry():
    stems = [page.stem for page in experiment_pages(_judged_entry(), 3)]
    assert stems[-1] == "03-geo-dmin", stems

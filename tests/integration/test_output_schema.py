"""One output schema: summary.json, ``fit --json`` and the DataFrames are validated against the JSON Schema that
``recallkit schema`` prints; a check is the same record in all of them; each predicted slope's name says which
slope it is; ``recallkit diff`` reads summaries of the previous schema version. Driven through the installed
``recallkit`` command on a committed store (tests/fixtures/schema1: a tiny linear memory, 33 runs in store.sqlite, and
the summary.json that schema 1 wrote from it)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from recallkit.compare.schema import (DEPRECATED_ALIASES, SCHEMA_VERSION, SUMMARY_SCHEMA, CheckResult, CheckRow,
                                      ClaimRow, FitDocument, Summary, flat_columns)

pytestmark = pytest.mark.integration

RECALLKIT = shutil.which("recallkit")
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "schema1"


def run(args, cwd, env=None, timeout=300):
    assert RECALLKIT, "the recallkit console script is not installed"
    env = {**os.environ, "MPLBACKEND": "Agg", "SOURCE_DATE_EPOCH": "0", "RECALLKIT_CACHE": str(cwd / "cache"),
           **(env or {})}
    return subprocess.run([RECALLKIT, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """The schema, a report's summary.json and ``fit --json`` of the committed store (nothing is trained)."""
    root = tmp_path_factory.mktemp("schema")
    for name, copy in (("tiny.toml", "tiny.toml"), ("store.sqlite", "store.db"), ("summary.json", "summary.json")):
        shutil.copyfile(FIXTURE / name, root / copy)  # (committed as .sqlite: *.db is not tracked)
    printed = run(["schema"], root)
    assert printed.returncode == 0, printed.stderr
    report = run(["report", "tiny.toml", "--store", "store.db", "--out", "out"], root)
    assert report.returncode == 0, report.stderr
    fitted = run(["fit", "tiny.toml", "--store", "store.db", "--no-run", "--json"], root)
    assert fitted.returncode == 0, fitted.stderr
    return {"root": root, "schema": json.loads(printed.stdout),
            "summary": json.loads((root / "out" / "summary.json").read_text()), "fit": json.loads(fitted.stdout)}


def _validator(schema: dict, record: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{record}"})


def _errors(schema: dict, record: str, doc) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
            for e in _validator(schema, record).iter_errors(doc)]


def test_recallkit_schema_prints_one_valid_json_schema_with_every_record_and_its_version(outputs):
    schema = outputs["schema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["version"] == SCHEMA_VERSION
    assert {"CheckResult", "CheckRow", "ClaimRow", "RunRow", "BoundaryPointRow", "FitDocument",
            "Summary"} <= set(schema["$defs"])
    for record in ("CheckResult", "CheckRow"):  # every field is documented
        undocumented = [name for name, spec in schema["$defs"][record]["properties"].items()
                        if not spec.get("description")]
        assert undocumented == [], (record, undocumented)
    for old in DEPRECATED_ALIASES:
        assert schema["$defs"]["CheckResult"]["properties"][old].get("deprecated") is True


def test_recallkit_schema_names_the_record_it_does_not_know_in_one_line(tmp_path):
    wrong = run(["schema", "CheckResults"], tmp_path)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert wrong.stderr.strip() == ("error: RECORD: expected one of CheckResult, CheckRow, ClaimRow, RunRow, "
                                    "BoundaryPointRow, FitDocument, Summary, got 'CheckResults'")
    one = run(["schema", "CheckRow"], tmp_path)
    assert one.returncode == 0 and json.loads(one.stdout)["title"] == "CheckRow"


def test_summary_json_and_fit_json_validate_and_hold_no_field_the_schema_does_not_name(outputs):
    schema, summary, fitted = outputs["schema"], outputs["summary"], outputs["fit"]
    assert summary["schema"] == SUMMARY_SCHEMA
    assert _errors(schema, "Summary", summary) == []
    assert _errors(schema, "FitDocument", fitted) == []
    assert FitDocument.model_validate(fitted).model_extra == {}
    assert Summary.model_validate(summary).model_extra == {}
    fits = fitted["fits"] + [f for e in summary["experiments"] for f in e.get("fits", [])]
    assert fits
    for fit in fits:
        assert CheckResult.model_validate(fit).model_extra == {}, sorted(CheckResult.model_validate(fit).model_extra)
    rows = [r for r in summary["entries"] if r.get("kind") in (None, "law")]
    assert rows
    for row in rows:
        assert _errors(schema, "CheckRow", row) == []
        assert CheckRow.model_validate(row).model_extra == {}
    for row in (r for r in summary["entries"] if r.get("kind") == "claim"):
        assert _errors(schema, "ClaimRow", row) == [] and ClaimRow.model_validate(row).model_extra == {}


def test_a_check_is_one_record_in_fit_json_summary_json_and_the_dataframe(outputs):
    pd = pytest.importorskip("pandas")
    root, summary, fitted = outputs["root"], outputs["summary"], outputs["fit"]
    code = ("import json, recallkit; df = recallkit.fits('tiny.toml', store='store.db');"
            "rows = df.astype(object).where(df.notna(), None).to_dict('records');"
            "print(json.dumps({'columns': list(df.columns), 'rows': rows}))")
    done = subprocess.run([shutil.which("python") or "python", "-c", code], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "RECALLKIT_CACHE": str(root / "cache")}, timeout=300)
    assert done.returncode == 0, done.stderr
    frame = json.loads(done.stdout)
    assert frame["columns"] == flat_columns(CheckRow)
    (row,) = frame["rows"]
    (entry,) = [r for r in summary["entries"] if r.get("kind") is None]
    (fit,) = fitted["fits"]
    for name in ("slope", "predicted_slope_tested", "predicted_slope_asymptotic", "p_tost", "C"):
        assert row[name] == pytest.approx(entry[name], rel=1e-12), name
        assert row[name] == pytest.approx(fit[name], rel=1e-12), name
    for name in ("verdict", "evidence", "verdict_reason", "line", "threshold", "n_points"):
        assert row[name] == entry[name] == fit[name], name
    assert [row["slope_ci_lo"], row["slope_ci_hi"]] == pytest.approx(entry["slope_ci"], rel=1e-12)
    assert entry["slope_ci"] == pytest.approx(fit["slope_ci"], rel=1e-12)
    assert pd is not None


def test_predicted_slope_means_one_thing_the_tested_slope_and_the_asymptotic_one_has_its_own_name():
    """A prediction with a log factor: the verdict compares the finite-range slope; ``predicted_slope`` once held
    the asymptotic slope here and the tested one for a system's finite-size check."""
    from recallkit.compare.assertions import fit_boundary_points
    from recallkit.empirics.records import BoundaryPoint

    points = [BoundaryPoint(experiment="e", line="l", scaling=None, threshold=0.5, seed=seed, base="V", base_value=V,
                            size="N", values={"V": V, "N": V}, param_count=V ** 1.5 * (1 + 0.01 * seed))
              for V in (64, 128, 256, 512) for seed in (0, 1)]
    (fit,) = fit_boundary_points(points, {"l": {"slope": 1.5, "log_power": "1"}}, experiment="e")
    doc = fit.to_dict()
    assert doc["predicted_slope_asymptotic"] == 1.5
    assert doc["predicted_slope_tested"] > 1.6  # the secant of V^1.5 log V over V = 64..512
    assert doc["band"] == pytest.approx([doc["predicted_slope_tested"] - 0.25, doc["predicted_slope_tested"] + 0.25])
    for old, new in DEPRECATED_ALIASES.items():  # kept for one minor version, as the number it was renamed to
        assert doc[old] == doc[new]


def test_diff_reads_a_summary_of_the_previous_schema_version(outputs):
    root = outputs["root"]
    old = json.loads((root / "summary.json").read_text())
    assert old["schema"] == "recallkit.summary/1" and "predicted_slope_tested" not in old["experiments"][0]["fits"][0]
    same = run(["diff", "summary.json", "out/summary.json", "--exit-code"], root)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.strip().splitlines()[-1] == "1 checks in 1 experiments (quick preset): 0 changed (0 verdicts), 1 the same"
    against_store = run(["diff", "store.db", "summary.json", "--exp", "tiny.toml", "--exit-code"], root)
    assert against_store.returncode == 0, against_store.stdout + against_store.stderr
    old["experiments"][0]["fits"][0]["slope"] += 1.0
    (root / "edited.json").write_text(json.dumps(old))
    changed = run(["diff", "edited.json", "out/summary.json", "--exit-code", "--json"], root)
    assert changed.returncode == 1
    (check,) = json.loads(changed.stdout)["changed"]
    assert check["fields"] == ["slope"] and check["a"]["predicted_slope_tested"] == check["b"]["predicted_slope_tested"]
    (root / "other.json").write_text(json.dumps({"schema": "recallkit.summary/9", "experiments": []}))
    refused = run(["diff", "other.json", "out/summary.json"], root)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == ("error: STORE_A other.json: schema: expected one of recallkit.summary/1, "
                                      f"{SUMMARY_SCHEMA}, got 'recallkit.summary/9'")


def test_the_schema_page_in_docs_is_what_recallkit_schema_prints_today(tmp_path):
    printed = run(["schema", "--markdown"], tmp_path)
    assert printed.returncode == 0, printed.stderr
    page = (Path(__file__).resolve().parents[2] / "docs" / "output-schema.md").read_text(encoding="utf-8")
    assert printed.stdout.strip() in page, "docs/output-schema.md is out of date: regenerate it with recallkit schema --markdown"
    assert "| `predicted_slope_tested` |" in page


@pytest.mark.slow
def test_the_main_jobs_summary_validates_and_holds_no_field_the_schema_does_not_name():
    """Every experiment kind of the main job (searches, laws, grids, the systems' own entries): its summary.json
    against the schema, its checks and their rows with no field the schema does not name."""
    where = os.environ.get("RECALLKIT_CHECK_REPORT")
    if not where:
        pytest.skip("set RECALLKIT_CHECK_REPORT to a report folder (recallkit report --out) or its summary.json")
    path = Path(where) / "summary.json" if Path(where).is_dir() else Path(where)
    summary = json.loads(path.read_text())
    schema = json.loads(run(["schema"], path.parent).stdout)
    assert summary["schema"] == SUMMARY_SCHEMA and _errors(schema, "Summary", summary) == []
    fits = [f for e in summary["experiments"] for f in e.get("fits", [])]
    assert len(fits) > 50
    extra = {name for f in fits for name in CheckResult.model_validate(f).model_extra}
    assert extra == set(), sorted(extra)
    checks = {(e["name"], f.get("line"), f.get("threshold"), bool(f.get("threshold_relative")))
              for e in summary["experiments"] for f in e.get("fits", [])}
    rows = [r for r in summary["entries"]  # a fitted check's row; a system's own rows (probes) are its own
            if (r.get("experiment"), r.get("line"), r.get("threshold"), bool(r.get("threshold_relative"))) in checks]
    assert len(rows) > 50
    assert {name for r in rows for name in CheckRow.model_validate(r).model_extra} == set()
    assert all(_errors(schema, "CheckRow", r) == [] for r in rows)
    assert all(_errors(schema, "ClaimRow", r) == [] for r in summary["entries"] if r.get("kind") == "claim")
    for fit in fits:  # one meaning: the deprecated name is the tested slope
        assert fit["predicted_slope"] == fit["predicted_slope_tested"]

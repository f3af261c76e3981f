"""The multi-page PDF report, built from the ``summary`` dict (docs/ARCHITECTURE.md, "reports: summary").

``build_report(summary, out_dir)`` writes ``out_dir/recallkit-report.pdf``, every page also alone as
PNG and PDF under ``out_dir/figures/``, and ``out_dir/summary.json`` (the input plus the flat
``entries`` table). The same summary gives the same bytes: dates come from SOURCE_DATE_EPOCH (or the
summary's own date), the Creator is fixed and figures carry no wall-clock metadata. This module is the
public entry: the rows are made in ``reports.summary_rows``, the pages chosen in ``reports.layout`` (and
drawn by ``reports.render``), joined in ``reports.pdf_writer`` and moved into place by
``reports.output_folder``; the names callers import from here are re-exported.
"""
from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from recallkit.empirics import cache as derived_cache
from recallkit.empirics.files import write_atomic
from recallkit.empirics.store import finite_json
from recallkit.reports import render
from recallkit.reports.join_cache import join_key, record_join, reuse_previous_join
from recallkit.reports.layout import experiment_pages, report_pages
from recallkit.reports.output_folder import REPORT_NAME, check_output_dir, move_into_place, new_staging
from recallkit.reports.pdf_writer import join_pages
from recallkit.reports.pdf_writer import stamp_footer as _number  # noqa: F401 - looked up by _join at call time
from recallkit.compare.evidence import evidence_counts
from recallkit.reports.summary_rows import (claim_rows, overview_rows, summary_date, summary_entries,
                                            validate_summary)
from recallkit.reports.text_pages import error_page, lower_bound_gap_page, lower_bound_gap_rows
from recallkit.theory.errors import InputError

# the report's entry points, and the names callers imported from here before the module was split by job
__all__ = ["build_report", "ReportBuilder", "experiment_entry", "summary_entries", "validate_summary", "claim_rows",
           "overview_rows", "check_output_dir", "lower_bound_gap_rows", "lower_bound_gap_page", "REPORT_NAME",
           "SCHEMA"]

SCHEMA = "recallkit.summary/1"


def experiment_entry(fitted: dict, **extra: Any) -> dict:
    """A summary experiment entry from ``compare.fit_experiment(...).to_dict()`` (= ``recallkit fit --json``).

    ``extra`` adds or overrides keys: ``title``, ``regions``, ``phase_lines``, ``terms``, ``lines`` (with
    ``heatmap`` / ``boundary_points``), ``dmin``, ``notes``. Lines named only in ``predictions`` or in a
    fit are filled in by the report itself.
    """
    if not isinstance(fitted, dict) or not fitted.get("experiment"):
        raise InputError("fit result: expected compare.fit_experiment(...).to_dict() with an 'experiment' name")
    entry = {k: v for k, v in fitted.items() if k not in ("sweep",)}
    entry["name"] = fitted["experiment"]
    if fitted.get("sweep"):
        sweep = fitted["sweep"]
        # runs in total, not reused/computed: which of them this invocation trained depends on the
        # store's state, and the PDF must be the same for the same stored results
        runs = sum(int(sweep.get(k, 0) or 0) for k in ("reused", "computed"))
        entry.setdefault("notes", []).append(
            f"sweep: {runs} runs" + "".join(f", {k} {sweep[k]}" for k in ("missing", "failed") if k in sweep))
        if sweep.get("left_out"):  # stored rows that do not validate: "N stored rows left out (rowids ...)"
            entry["notes"].append(sweep["left_out"])
    entry.update(extra)
    return entry


def _join(pages, folder: Path, path: Path, title: str, fallback_date) -> None:
    """:func:`pdf_writer.join_pages` with this module's ``_number`` as the footer stamp, looked up at call
    time: tests replace ``pdf._number`` (to stop a join half-way) and ``pdf._join`` (to count joins)."""
    join_pages(pages, folder, path, title, fallback_date, stamp=_number)


def build_report(summary: dict, out_dir, max_title_rows: int = 16, write_summary: bool = True, png: bool = False,
                 jobs: int | None = None, reuse: bool = True, stats: dict | None = None) -> Path:
    """Write the PDF report (each page also alone under ``figures/``, and summary.json) under ``out_dir``;
    return the PDF path.

    Each page is drawn once, into its own PDF (and PNG only when ``png``), by ``jobs`` worker processes
    (default: one per core, none for a handful of pages); a page whose input and code are unchanged
    since the previous build in ``out_dir`` is reused, not redrawn, and so is one any report drew before,
    kept in the cache (``empirics.cache``: ``$RECALLKIT_CACHE``, else ``~/.cache/recallkit``;
    ``RECALLKIT_CACHE=off`` for none); ``reuse=False`` redraws all. The pages are joined with an outline (bookmarks) and a contents page. ``stats``, when given, is filled
    with the counts (pages, drawn, reused, workers, seconds, line).

    Atomic: everything is drawn into a staging folder inside ``out_dir`` and moved into place with
    ``os.replace`` only once every page is drawn, so an interrupted or killed build leaves the previous
    complete report (PDF, figures, summary.json) untouched. :class:`ReportBuilder` does the same while
    the job still computes, drawing each experiment's pages as soon as the experiment is done."""
    builder = ReportBuilder(out_dir, png=png, jobs=jobs, reuse=reuse, max_title_rows=max_title_rows,
                            incremental=False)
    return builder.finish(summary, write_summary=write_summary, stats=stats)


class ReportBuilder:
    """The report, built while the job runs: :meth:`add` each experiment entry as soon as it is computed
    (its section's pages start drawing in worker processes while the job goes on), then :meth:`finish`
    with the whole summary. What :meth:`finish` writes depends on the summary alone: pages drawn early
    from an entry that then changed are not used (each page file is named by the hash of its input).
    Use as a context manager, or call :meth:`close`, so an error or Ctrl-C stops the workers and removes
    the staging folder."""

    def __init__(self, out_dir, png: bool = False, jobs: int | None = None, reuse: bool = True,
                 max_title_rows: int = 16, incremental: bool = True) -> None:
        self.out_dir = Path(out_dir)
        check_output_dir(self.out_dir)
        self.png, self.max_title_rows = png, max_title_rows
        self.cache = derived_cache.from_env()
        self.staging = new_staging(self.out_dir)
        self.drawer = render.Drawer(self.staging / "figures", self.out_dir / "figures", png, error_page, jobs=jobs,
                                    reuse=reuse, cache=self.cache)
        self.reuse = reuse
        self.incremental = incremental
        self._entries: list[dict] = []
        self._n_rows = 0
        self._terms_section: dict[str, int] = {}

    def __enter__(self) -> "ReportBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def add(self, entry: dict) -> None:
        """Start drawing the pages of the experiment ``entry`` (the next section) that depend on it alone.

        Speculative: :meth:`finish` decides what the report holds, so an entry that cannot be drawn here
        is left for it (it says what is wrong, on an error page or as an InputError)."""
        index = len(self._entries) + 1
        self._entries.append(entry)
        if not self.incremental:
            return
        try:
            rows = summary_entries({"experiments": [entry]})
            rows = [dict(r, check=self._n_rows + k) for k, r in enumerate(rows, start=1)]
            self._n_rows += len(rows)
            pack = entry.get("pack")
            shown = self._terms_section.get(pack) if pack else None
            if pack and entry.get("terms") and shown is None:
                self._terms_section[pack] = index
            pages = experiment_pages(entry, index, terms_shown_in=shown, rows=rows, system_pages=False)
            self.drawer.submit(pages)  # (a page that cannot go to a worker waits for finish)
        except Exception:  # noqa: BLE001 - speculation only; finish() validates and reports
            self.incremental = False

    def finish(self, summary: dict, write_summary: bool = True, stats: dict | None = None) -> Path:
        """Draw what is not drawn yet, join the pages, write summary.json and move it all into place."""
        try:
            validate_summary(summary)
            rows = [dict(r, check=k) for k, r in enumerate(summary_entries(summary), start=1)]
            title = summary.get("title") or "recallkit report"
            pages = report_pages(summary, rows, self.max_title_rows)
            manifest, drawn = self.drawer.finish(pages)
            for error in drawn.errors:
                warnings.warn(f"report page {error.split(':')[0]} could not be drawn: {error}", stacklevel=3)
            date = summary_date(summary)
            key = join_key(pages, manifest, title, date) if not drawn.errors else None
            pdf = self.staging / REPORT_NAME
            if not (self.reuse and reuse_previous_join(key, self.out_dir / REPORT_NAME,
                                                       self.out_dir / "figures" / render.MANIFEST, pdf)):
                self._join_or_fetch(pages, pdf, key, title, date)
            if key is not None:  # recorded with the pages; checked against the PDF's own hash when reused
                record_join(self.staging / "figures" / render.MANIFEST, key, pdf)
            if write_summary:
                doc = dict(summary, schema=summary.get("schema", SCHEMA), entries=rows,
                           evidence_counts=evidence_counts(r for r in rows if "evidence" in r))
                if drawn.errors:
                    doc["page_errors"] = drawn.errors
                # no bare NaN: a non-finite number is null, with "nonfinite" saying what it was
                write_atomic(self.staging / "summary.json",
                             json.dumps(finite_json(doc), indent=1, sort_keys=True, allow_nan=False) + "\n")
            move_into_place(self.staging, self.out_dir, {p.stem for p in pages}, write_summary, self.png)
        finally:
            self.close()
        if self.cache is not None and self.cache.stored:
            self.cache.prune()  # once the report is in place: the time it takes delays nothing
        if stats is not None:
            stats.update(pages=drawn.pages, drawn=drawn.drawn, reused=drawn.reused, cached=drawn.cached,
                         wasted=drawn.wasted, workers=drawn.workers, seconds=round(drawn.seconds, 2),
                         line=drawn.line())
        return self.out_dir / REPORT_NAME

    def _join_or_fetch(self, pages, pdf: Path, key: str | None, title: str, date) -> None:
        """Copy the joined PDF from the page cache when a report in any folder joined the same pages under
        ``key``; else join them and keep the result there."""
        cache = self.cache if key is not None else None
        if cache is not None and self.reuse and cache.fetch_files("joined", key, {".pdf": pdf}):
            return
        _join(pages, self.staging / "figures", pdf, title, date)
        if cache is not None:
            cache.store_files("joined", key, {".pdf": pdf})

    def close(self) -> None:
        """Stop the workers and remove the staging folder (the previous report stays as it was)."""
        self.drawer.close()
        shutil.rmtree(self.staging, ignore_errors=True)


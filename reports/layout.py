"""Which pages the report has, in what order, and what each is drawn from: the title page, the contents,
the summary of verdicts, one section per experiment (its overview, phase diagram, lower bounds, theory
terms, fits, heatmaps, claims, d_min and the pages its system registered) and the appendix. Every page
is a :class:`render.Page` whose builder is a ``functools.partial`` of a module function and whose
``data`` is the plain input it is drawn from: its cache key, so a page is redrawn only when that changes.
Nothing is drawn here.
"""
from __future__ import annotations

import dataclasses
import re
from functools import partial
from typing import Any, Callable, Sequence

from matplotlib.figure import Figure

from recallkit import registry
from recallkit.reports import figures, render, tables
from recallkit.reports.appendix import appendix_pages
from recallkit.reports.contents import contents_pages
from recallkit.reports.headline import diagnostics_table, ordered_experiments, result_sentence, split_notes
from recallkit.reports.law_pages import law_fit_page
from recallkit.reports.mathexpr import line_mathtext
from recallkit.reports.phase import phase_page
from recallkit.reports.style import PAGE_LANDSCAPE, VERDICT_COLOURS, cut_lines, source_date
from recallkit.reports.summary_rows import (entry_page_kinds, generic_fits, metric_direction, overview_rows, page_kinds,
                                            summary_entries)
from recallkit.reports.text_pages import diagnostics_page, lower_bound_gap_page, section_page, title_page

__all__ = ["report_pages", "experiment_pages", "section_intro", "lines_of", "heatmap_axes", "line_metric", "as_pages", "slug"]


def slug(text: str) -> str:
    """``text`` as a file-name part: lower-case letters, digits and dashes, at most 60 characters."""
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text)).strip("-").lower()[:60] or "x"


def lines_of(exp: dict) -> list[dict]:
    """The experiment's lines in order: ``lines`` first, then any line named only by a fit or a prediction."""
    lines = [dict(line) for line in exp.get("lines", [])]
    known = {line.get("name") for line in lines}
    predictions = exp.get("predictions") or {}
    for name in [f.get("line") for f in exp.get("fits", [])] + list(predictions):
        if name not in known:
            known.add(name)
            lines.append({"name": name})
    for line in lines:
        if "prediction" not in line and line.get("name") in predictions:
            line["prediction"] = predictions[line["name"]]
    return lines


def line_metric(exp: dict, line: dict) -> str:
    """The metric a line's heatmap shows: the line's own (``line_metrics``, or the line's ``metric``), else the
    experiment's ``metric`` (what its thresholds are on), else accuracy."""
    return str(line.get("metric") or (exp.get("line_metrics") or {}).get(line.get("name"))
               or exp.get("metric") or "accuracy")


def heatmap_axes(exp: dict, cells: list[dict]) -> tuple[str, str]:
    """(base, size) keys of an experiment's heatmap cells: the entry's own ``base``/``size`` when given,
    else the fits' regressor ("log N" -> N), else the first of V, N present in the cells; size d."""
    base = exp.get("base")
    if not base:
        x = next((f.get("x") for f in exp.get("fits", []) if f.get("x")), "")
        name = str(x).removeprefix("log").strip(" ()")
        base = name if name and all(name in c for c in cells[:1]) else None
    if not base:
        base = next((k for k in ("V", "N") if cells and k in cells[0]), "V")
    return base, exp.get("size") or "d"


def as_pages(items, section: str, default_data: Any) -> list[render.Page]:
    """A system's page list (``(stem, builder)``, ``(stem, builder, label)`` or :class:`render.Page`) as
    Pages of ``section``; a page that names no data of its own is keyed by ``default_data``."""
    out = []
    for item in items:
        if isinstance(item, render.Page):
            out.append(item if item.section else render.Page(item.stem, item.build, item.label, section,
                                                             item.data if item.data is not None else default_data,
                                                             item.cacheable))
            continue
        stem, build, *rest = item
        label = rest[0] if rest else str(stem).replace("-", " ")
        out.append(render.Page(stem, build, label, section, default_data))
    return out


def _cut_reason(reason: str | None, check: int | None, width: int, lines: int = 2) -> str:
    """A verdict reason cut to ``lines`` lines on a page; the full text is in the appendix and summary.json."""
    where = f" [in full: appendix, check {check}]" if check else " [in full: appendix and summary.json]"
    return cut_lines(str(reason or ""), width, max_lines=lines, more=" ..." + where)


@dataclasses.dataclass
class _Section:
    """The pages of one experiment's section as they are added, each keyed by the section head and its data."""

    head: str
    pages: list[render.Page] = dataclasses.field(default_factory=list)

    def add(self, stem: str, build: Callable[[], Figure], label: str, data: Any) -> None:
        self.pages.append(render.Page(stem, build, label, self.head, [self.head, data]))


def section_intro(exp: dict, lines: Sequence[dict], rows: Sequence[dict], system_kinds: Sequence[registry.PageKind],
                  terms_shown_in: int | None) -> list[str]:
    """The paragraphs on a section's first page: what the experiment is, each line's prediction, its config
    hashes and notes, and (for a system that asks for it) each verdict with its reason."""
    intro = [result_sentence(exp, rows),
             f"experiment: {exp['name']}   kind: {exp.get('kind', 'min_size')}"
             + (f"   pack: {exp['pack']}" if exp.get("pack") else "")
             + (f"   preset: {exp['preset']}" if exp.get("preset") else "")]
    if exp.get("reference"):
        intro.append(f"reference: {exp['reference']}")
    if exp.get("description"):
        intro.append(exp["description"])
    for line in lines:
        pred = line.get("prediction") or {}
        if pred.get("error"):
            intro.append(f"line {line_mathtext(line.get('name'))}: no prediction ({pred['error']})")
        elif pred:
            intro.append(f"line {line_mathtext(line.get('name'))}: predicted slope "
                         f"{pred.get('slope_exact', pred.get('slope'))}"
                         f" (dominant: {pred.get('dominant', 'n/a')}, log power {pred.get('log_power', '0')})"
                         + ("; tested over the fitted range as its finite-range slope (see the fits)"
                            if str(pred.get("log_power", "0")) not in ("0", "0.0") else ""))
    intro += split_notes(exp.get("notes", []))  # the diagnostic counts and hashes are on the diagnostics page
    if any(k.intro_reasons for k in system_kinds):  # verdicts that rest on numbers in words
        intro += [f"verdict on '{r['line']}': {r['verdict']}. " + _cut_reason(r.get("verdict_reason"), r.get("check"), 120)
                  for r in rows]
    if terms_shown_in:
        intro.append(f"theory terms of pack {exp.get('pack')}: see section {terms_shown_in}")
    return intro


def _add_theory_pages(section: _Section, exp: dict, terms_shown_in: int | None) -> None:
    """The phase diagram, the required count against the lower bounds, and the pack's theory terms (unless
    an earlier section, ``terms_shown_in``, showed them)."""
    head = section.head
    if exp.get("regions"):
        section.add("phase", partial(phase_page, exp["regions"], exp.get("phase_lines") or [], head), "phase diagram",
                    [exp["regions"], exp.get("phase_lines")])
        if any(region.get("lower_bound_gaps") for region in exp["regions"].get("regions", [])):
            section.add("bounds", partial(lower_bound_gap_page, exp["regions"],
                                          f"{head}: required count against the lower bounds"),
                        "required count against the lower bounds", exp["regions"])
    terms = [] if terms_shown_in else exp.get("terms") or []
    # two-level fractions need about a tenth of a landscape page each; pages balanced, no lone last row
    per_page = -(-len(terms) // -(-len(terms) // 11)) if terms else 1
    for k in range(0, len(terms), per_page):
        part = f" ({k // per_page + 1} of {-(-len(terms) // per_page)})" if len(terms) > per_page else ""
        section.add("terms" + (f"-{k // per_page + 1}" if k else ""),
                    partial(tables.term_table, terms[k:k + per_page], title=f"{head}: theory terms{part}"),
                    f"theory terms{part}", [terms[k:k + per_page], part])


def _numbered_fits(exp: dict, rows: Sequence[dict], lines: Sequence[dict]) -> list[dict]:
    """The entry's fits, each with its check number and, when it names none, its line's log power."""
    # each fit carries its check number: its reason is cut on the page and given in full in the appendix
    fits = [dict(f, check=r.get("check")) for f, r in zip(generic_fits(exp), rows)]
    predictions = {line.get("name"): line.get("prediction") for line in lines if line.get("prediction")}
    for f in fits:
        pred = predictions.get(f.get("line")) or {}
        if f.get("log_power") is None and pred.get("log_power") is not None:
            f["log_power"] = pred.get("log_power")
    return fits


def _add_fit_pages(section: _Section, exp: dict, fits: list[dict], lines: Sequence[dict]) -> None:
    """The capacity law, the lines together (when claims compare them), and each line's heatmap and fits."""
    head = section.head
    if exp.get("kind") == "law":
        # one page of every line's log(metric) against log(base): its points are the runs, so no heatmap
        if fits:
            section.add("law", partial(law_fit_page, fits, title=_law_title(exp, head), size=PAGE_LANDSCAPE),
                        "law fits, " + ", ".join(str(f.get("line")) for f in fits), [fits, _law_title(exp, head)])
        return
    capacity = exp.get("kind") in ("capacity", "max_capacity")
    if capacity and fits:
        labels = [str(f.get("line") or f.get("experiment")) for f in fits]
        section.add("capacity", partial(figures.capacity_plot, fits, labels=labels, size=PAGE_LANDSCAPE,
                                        title=f"{head}: capacity"), "capacity", [fits, labels])
        # one series per line: all on one page
        section.add("fits", partial(figures.fit_grid, fits, title=f"{head}: fits", size=PAGE_LANDSCAPE), "fits", fits)
    fitted_lines = {f.get("line") for f in fits if f.get("slope") is not None}
    if not capacity and exp.get("claims") and len(fitted_lines) > 1:
        # the lines against one another, with the claims under each threshold's panel: what the claims compare
        together = [f for f in fits if f.get("line") in fitted_lines]
        section.add("lines", partial(figures.lines_plot, together, exp["claims"], title=f"{head}: the lines together",
                                     size=PAGE_LANDSCAPE), "the lines together", [together, exp["claims"]])
    for j, line in enumerate(lines):
        lname = line.get("name", f"line {j + 1}")
        line_fits = [] if capacity else [f for f in fits if f.get("line") == lname]
        if line.get("heatmap"):
            x_key, y_key = heatmap_axes(exp, line["heatmap"])
            metric = line_metric(exp, line)
            if any(metric not in cell for cell in line["heatmap"]):
                # a line judged on another metric whose cells do not hold it (tr_fig5's accuracy after 4 or 8
                # epochs: the cells are the runs' final metrics): their accuracy, as before
                metric = "accuracy"
            # accuracy pages keep their cache key: only another metric adds itself to the drawn data
            data = [line, line_fits, x_key, y_key, exp.get("kind")] + ([metric] if metric != "accuracy" else [])
            title, direction = f"{head}: {metric}, {line_mathtext(lname)}", None
            if exp.get("kind") == "grid":
                # the grid's picture is its result: which way is better and that the tiles are seed means
                direction = metric_direction(exp, metric)
                title = f"{head}: {metric} over {x_key} x {y_key}, mean over seeds, {line_mathtext(lname)}"
                data += [direction, title]
            section.add(f"heatmap-{slug(lname)}",
                        partial(figures.accuracy_heatmap, line["heatmap"], line.get("boundary_points") or [], line_fits,
                                x_key=x_key, y_key=y_key, title=title, size=PAGE_LANDSCAPE,
                                metric=metric, search=exp.get("kind"), direction=direction),
                        f"{metric} heatmap, {lname}", data)
        if line_fits:
            section.add(f"fits-{slug(lname)}", partial(figures.fit_grid, line_fits,
                                                       title=f"{head}: fits along {line_mathtext(lname)}",
                                                       size=PAGE_LANDSCAPE),
                        f"fits along {lname}", [line_fits, lname])


def _law_title(exp: dict, head: str) -> str:
    law = exp.get("law") if isinstance(exp.get("law"), dict) else {}
    metric = law.get("metric") or exp.get("metric") or "metric"
    return (f"{head}: law {law.get('name') or '?'}, log({metric}) against log({law.get('variable') or 'base'}) "
            "per line (residuals below each)")


def _claim_checks(claims: Sequence[dict], rows: Sequence[dict]) -> list[tuple[dict, dict | None]]:
    """Each claim with its summary row (None for a claim not run in this preset), in order."""
    mine = iter([r for r in rows if r.get("kind") == "claim"])
    return [(c, next(mine, None) if c.get("verdict") in VERDICT_COLOURS else None) for c in claims]


def _add_claim_pages(section: _Section, exp: dict, rows: Sequence[dict]) -> None:
    """The comparative claims, each with its check number."""
    head = section.head
    if exp.get("claims"):
        claims = [dict(c, check=r.get("check")) if r else dict(c) for c, r in _claim_checks(exp["claims"], rows)]
        section.add("claims", partial(tables.claim_table, claims, title=f"{head}: comparative claims"),
                    "comparative claims", claims)


def experiment_pages(exp: dict, index: int, experiments: Sequence[dict] = (),
                     terms_shown_in: int | None = None, rows: Sequence[dict] | None = None,
                     experiments_digest: str = "", system_pages: bool = True) -> list[render.Page]:
    """The pages of one experiment's section, in reading order.

    ``experiments``: every entry of the report, handed to a system's pages (one may draw what another
    produced). ``terms_shown_in``: the section that already showed this pack's terms (not repeated).
    ``rows``: this experiment's rows of the summary table (numbered by ``check``); made here if not given.
    ``system_pages=False``: leave out the pages a system draws (they may read every entry of the report)."""
    page_kind = page_kinds().get(exp.get("kind", ""))
    system_kinds = entry_page_kinds(exp)
    section = _Section(f"{index}. {exp.get('title') or exp['name']}")
    lines = lines_of(exp)
    if rows is None:
        rows = [dict(r, check=None) for r in summary_entries({"experiments": [exp]})]
    rows = list(rows)
    intro = section_intro(exp, lines, rows, system_kinds, terms_shown_in)
    if not (page_kind is not None and page_kind.own_intro):  # else the system's first page introduces it
        section.add("summary", partial(section_page, section.head, intro, rows), "overview and verdicts", [intro, rows])
    _add_theory_pages(section, exp, terms_shown_in)
    _add_fit_pages(section, exp, _numbered_fits(exp, rows, lines), lines)
    _add_claim_pages(section, exp, rows)
    if system_pages:
        # a system's page may read any entry of the report: keyed by all of them
        for kind in system_kinds:
            section.pages += as_pages(registry.load_object(kind.pages)(exp, section.head, experiments), section.head,
                                      [section.head, exp, experiments_digest])
    return [dataclasses.replace(p, stem=f"{index:02d}-{slug(exp['name'])}-{p.stem}") for p in section.pages]


def _summary_table_pages(rows: list[dict]) -> list[render.Page]:
    """The summary of verdicts: every numbered row, over as many pages as the table needs."""
    pages = []
    chunks = tables.chunk_rows(rows, budget=tables.slope_table_budget(tables.SLOPE_TABLE_AXES[3] * PAGE_LANDSCAPE[1]))
    for k, chunk in enumerate(chunks, start=1):
        part = f" ({k} of {len(chunks)})" if len(chunks) > 1 else ""
        pages.append(render.Page(f"00-summary-{k}", partial(
            tables.slope_table, chunk, title=f"Summary of verdicts{part}: one row per check; every reason in full in "
                                             "the appendix and in summary.json (entries)", max_rows=len(chunk)),
            f"part {k} of {len(chunks)}" if len(chunks) > 1 else "all checks", "Summary of verdicts", [chunk, part]))
    return pages


def report_pages(summary: dict, rows: list[dict], max_title_rows: int = 16) -> list[render.Page]:
    """Every page of the report in order: title, contents, summary of verdicts, one section per
    experiment, the appendix of verdict reasons. ``rows``: :func:`summary_entries`, numbered (``check``)."""
    body = _summary_table_pages(rows)
    # the experiments first, then the diagnostic entries (term probes, bound checks): a reader meets the results
    experiments = ordered_experiments(summary["experiments"], rows)
    digest = render.data_digest(summary["experiments"])
    terms_section: dict[str, int] = {}  # pack -> first section that shows its terms
    section_of = {}
    for i, exp in enumerate(experiments, start=1):
        pack = exp.get("pack")
        shown = terms_section.get(pack) if pack else None
        if pack and exp.get("terms") and shown is None:
            terms_section[pack] = i
        section_of[exp["name"]] = f"{i}. {exp.get('title') or exp['name']}"
        mine = [r for r in rows if r.get("experiment") == exp["name"]]
        body += experiment_pages(exp, i, summary["experiments"], terms_shown_in=shown, rows=mine,
                                 experiments_digest=digest)
    table = diagnostics_table(summary["experiments"], rows)
    if table:  # what the checks rest on: hashes, monotonicity counts, budget flags, the diagnostic checks
        body.append(render.Page("98-diagnostics", partial(diagnostics_page, table), "Diagnostics", "", table))
    body += appendix_pages(rows, section_of)
    title = render.Page("00-title", partial(title_page, summary, rows, max_title_rows), "Title page and overview",
                        "", [{k: v for k, v in summary.items() if k not in ("experiments", "entries", "run_wall_time_s")},
                             overview_rows(summary, rows), [r.get("verdict") for r in rows], max_title_rows,
                             str(source_date() or "")])
    return [title, *contents_pages(title, body), *body]

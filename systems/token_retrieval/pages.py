"""The token-retrieval term-probe pages: each pack term's fitted exponent against its predicted one.

Drawn from the ``compare.probe_fits.run_probe`` document (= ``recallkit probe --json``), kept under
``entry["probes"]`` of a summary entry of kind ``"probes"``:

- :func:`probe_table_pages`: the table term, variable, predicted exponent, fitted exponent with its
  interval, verdict (raw and drift-corrected), verdict cells coloured like the slope table, split
  over pages; then the notes on the verdicts (each verdict's reason is in the report's appendix);
- :func:`summary_rows`: the same verdicts as rows of the summary's flat ``entries`` table.

The gradient-access check (kind ``"gradient_access"``, ``gradient_access.check``'s document under ``entry["check"]``):
:func:`gradient_access_pages` draws each decoder's needed d against V beside the bound's d, one panel per line, and
:func:`gradient_access_rows` gives one verdict row per (line, decoder, observation).
"""
from __future__ import annotations

from functools import partial
from typing import Callable

from matplotlib.figure import Figure

from recallkit.reports.style import PAGE_LANDSCAPE, VERDICT_COLOURS, fill, new_figure, style_context, wrap_title
from recallkit.reports.tables import draw_table
from recallkit.theory.errors import InputError

__all__ = ["probe_table_figure", "probe_reasons_figure", "probe_notes_figure", "probe_table_pages", "summary_rows",
           "gradient_access_figure", "gradient_access_pages", "gradient_access_rows"]

ROWS_PER_PAGE = 24
REASON_WIDTH = 165  # characters per line of the 7.5 pt reason pages (a landscape page holds ~170)


def _table(doc: dict) -> list[dict]:
    if not isinstance(doc, dict) or not isinstance(doc.get("table"), list):
        raise InputError("probes: expected compare.probe_fits.run_probe(...) document with a 'table' list")
    for i, e in enumerate(doc["table"]):
        for key in ("term", "variable", "predicted_exponent", "verdict"):
            if key not in e:
                raise InputError(f"probes.table[{i}]: missing field '{key}'")
    return doc["table"]


def _p(v) -> str:
    return "n/a" if v is None else f"{float(v):.3f}" if float(v) >= 0.001 else "< 0.001"


def _signed(v) -> str:
    return "n/a" if v is None else f"{float(v):+.2f}"


def _interval(pair) -> str:
    if not pair or len(pair) != 2 or pair[0] is None or pair[1] is None:
        return "n/a"
    return f"[{pair[0]:+.2f}, {pair[1]:+.2f}]"


def _predicted(e: dict) -> str:
    text = e.get("predicted_exponent_exact") or _signed(e.get("predicted_exponent"))
    finite = e.get("predicted_slope_tested", e.get("predicted_slope_finite_range"))  # (an older probe document)
    if finite is not None and e.get("predicted_exponent") is not None and abs(finite - e["predicted_exponent"]) > 1e-9:
        text += f"\n(range {finite:+.2f})"
    return str(text)


def _level(doc: dict) -> str:
    alpha = (doc.get("grid") or {}).get("alpha", 0.05)
    return f"{100 * (1 - alpha):g}%"


def _describe(doc: dict) -> str:
    grid = doc.get("grid") or {}
    base = ", ".join(f"{k} = {v}" for k, v in (grid.get("base") or {}).items())
    vary = "; ".join(f"{k} in {v}" for k, v in (grid.get("vary") or {}).items())
    parts = [f"pack {grid.get('pack', '?')}, preset {grid.get('preset', '?')}; star design around {base}; {vary}; "
             f"seeds {grid.get('seeds', '?')}."]
    parts.append(f"Size = term / (gamma lambda); signal: its mean at the correct label; noise: its {doc.get('statistic', '?')} "
                 f"over the wrong labels. Fit: {doc.get('method', '?')} OLS of log size on log variable (HC3, t). "
                 f"Verdict: TOST against the pack's exponent, delta {grid.get('delta', '?')}, alpha {grid.get('alpha', '?')}. "
                 "Finite-size: the same fit judged against the pack term evaluated at the probed sizes with the exact "
                 "finite-L softmax weights (A = e^k'/(e^k' + L - 1), |r| = (1 - A)/sqrt(L - 1)) at each row's measured "
                 "informative logit k' (DERIVATION.md §8). "
                 "Drift-corrected: measured attention normalisers replaced by their asymptotic L-powers.")
    rows = doc.get("rows") or {}
    acc = doc.get("accuracy") or {}
    # the total, not reused/computed: which rows this run trained depends on the store, not on the results
    total = sum(int(rows.get(k) or 0) for k in ("reused", "computed")) if rows else "?"
    line = (f"Probe rows: {total}; threads "
            f"{doc.get('threads', '?')}; devices {doc.get('devices', '?')}")
    if acc:
        line += f"; model accuracy {acc.get('min', 0):.3f} - {acc.get('max', 0):.3f}"
    parts.append(line + ".")
    for label, key in (("raw", "summary"), ("finite-size", "summary_finite_size"),
                       ("drift-corrected", "summary_drift_corrected")):
        s = doc.get(key)
        if s:
            parts.append(f"{label}: {s.get('consistent', 0)} consistent, {s.get('inconsistent', 0)} inconsistent, "
                         f"{s.get('inconclusive', 0)} inconclusive.")
    parts.append(l_statement(doc))
    return " ".join(p for p in parts if p)


def l_statement(doc: dict) -> str:
    """One sentence on the exponents in L: raw against the asymptotic powers, and against the finite-size
    prediction (the derivation's explanation of the raw drift)."""
    table = doc.get("table") or []
    in_l = [e for e in table if e.get("variable") == "L"]
    if not in_l or not any(e.get("finite_size") for e in in_l):
        return ""
    raw_bad = [e["term"] for e in in_l if e["verdict"] == "inconsistent"]
    finite_bad = [e["term"] for e in in_l if (e.get("finite_size") or {}).get("verdict") == "inconsistent"]
    text = (f"In L: {len(raw_bad)} of {len(in_l)} terms are inconsistent with the asymptotic powers"
            + (f" ({', '.join(raw_bad)})" if raw_bad else ""))
    if finite_bad:
        # what explains each: consistent once the measured normalisers replace the asymptotic ones (the drift
        # correction) means the finite-L normaliser formula, not the term's own power, is what is off
        by_term = {e["term"]: e for e in in_l}
        explained = [t for t in finite_bad if (by_term[t].get("drift_corrected") or {}).get("verdict") == "consistent"]
        text += f"; against the finite-size prediction still inconsistent: {', '.join(finite_bad)}."
        if explained:
            text += (f" Drift-corrected, {', '.join(explained)} {'is' if len(explained) == 1 else 'are'} consistent: "
                     f"the measured attention normalisers give the power in L, so the finite-L normaliser formula at "
                     f"these L, not the term, is what is off (DERIVATION.md §11.1).")
        return text
    return text + ("; against the finite-size prediction none is inconsistent: the raw drift is the finite-L "
                   "softmax weight of the informative position.")


def probe_table_figure(doc: dict, entries: list[dict] | None = None, title: str = "Term probes",
                       first: int = 1, describe: bool = True) -> Figure:
    """One page of the probe table (``entries`` = a slice of ``doc["table"]``, numbered from ``first``)."""
    table = _table(doc)
    entries = table if entries is None else entries
    level = _level(doc)
    header = ["#", "term", "var.", "predicted\nexponent", "fitted\nexponent", f"{level} CI\n(HC3)", "TOST p",
              "verdict", "finite-size\npredicted", "verdict\n(finite-size)", "drift-corr.\nfitted", f"{level} CI",
              "verdict\n(drift-corr.)", "n"]
    cells, colours = [], []
    for i, e in enumerate(entries, start=first):
        c = e.get("drift_corrected") or {}
        f = e.get("finite_size") or {}
        cells.append([str(i), str(e["term"]).replace("_", " "), str(e["variable"]), _predicted(e),
                      _signed(e.get("fitted_exponent")), _interval(e.get("ci")), _p(e.get("p_tost")), str(e["verdict"]),
                      _signed(f.get("predicted_exponent")), str(f.get("verdict") or "n/a"),
                      _signed(c.get("fitted_exponent")), _interval(c.get("ci")),
                      str(c.get("verdict") or "n/a"), str(e.get("n_points", ""))])
        colours.append([None] * 7 + [VERDICT_COLOURS.get(e["verdict"]), None, VERDICT_COLOURS.get(f.get("verdict")),
                                     None, None, VERDICT_COLOURS.get(c.get("verdict")), None])
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.03, 0.975, fill(title, 95), fontsize=14, fontweight="bold", va="top")
        top = 0.92
        if describe:
            text = fill(_describe(doc), 150)
            fig.text(0.03, top, text, fontsize=8.5, va="top", color="0.25")
            top -= 0.022 * (text.count("\n") + 1) + 0.02
        ax = fig.add_axes((0.03, 0.04, 0.94, top - 0.05))
        draw_table(ax, header, cells, [0.03, 0.14, 0.035, 0.075, 0.065, 0.11, 0.055, 0.08, 0.07, 0.08, 0.065, 0.11,
                                       0.08, 0.03],
                   fontsize=8, cell_colours=colours, wrap=[0, 22] + [0] * 12)
    return fig


def probe_reasons_figure(doc: dict, entries: list[dict], title: str, first: int = 1,
                         notes: list[str] | None = None) -> Figure:
    """The verdict reasons of ``entries`` (numbered as in the table), and the notes, in small type."""
    lines = []
    for i, e in enumerate(entries, start=first):
        i = e.get("_index", i)
        c = e.get("drift_corrected") or {}
        lines.append(fill(f"[{i}] {e['term']} in {e['variable']}: {e['verdict']}: {e.get('verdict_reason', '')}",
                                   REASON_WIDTH, subsequent_indent="      "))
        f = e.get("finite_size") or {}
        if f.get("verdict") and f["verdict"] != "consistent":
            lines.append(fill(f"finite-size: {f['verdict']}: {f.get('verdict_reason', '')}", REASON_WIDTH - 6,
                                       initial_indent="      ", subsequent_indent="      "))
        if c.get("verdict"):
            lines.append(fill(f"drift-corrected: {c['verdict']}: {c.get('verdict_reason', '')}", REASON_WIDTH - 6,
                                       initial_indent="      ", subsequent_indent="      "))
    if notes:
        lines.append("")
        lines.append("Which rows these notes concern is in each row's reason: the report's appendix of reasons and "
                     "summary.json (experiments[].probes.table[].notes and verdict_reason).")
    for note in notes or []:
        lines.append(fill(f"note: {note}", REASON_WIDTH, subsequent_indent="      "))
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.03, 0.975, fill(title, 95), fontsize=14, fontweight="bold", va="top")
        fig.text(0.03, 0.92, "\n".join(lines), fontsize=7.5, va="top", family="DejaVu Sans")
    return fig


def probe_notes_figure(notes: list[str], title: str) -> Figure:
    """The notes the probe fits attach to their rows (which terms cannot be told apart, which log factors
    are compared without), once each."""
    text = "\n".join(fill(f"- {note}", 140, subsequent_indent="  ") for note in notes)
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE, layout=None)
        fig.text(0.03, 0.975, fill(title, 95), fontsize=14, fontweight="bold", va="top")
        fig.text(0.03, 0.90, text, fontsize=10, va="top", linespacing=1.4)
        fig.text(0.03, 0.90 - (text.count("\n") + 2) * 14 / 72 / PAGE_LANDSCAPE[1],
                 fill("Which rows each note concerns is in that row's reason: the report's appendix of verdict "
                      "reasons, and summary.json (experiments[].probes.table[].notes).", 140),
                 fontsize=9, va="top", color="0.3")
    return fig


def probe_table_pages(doc: dict, head: str) -> list[tuple[str, Callable[[], Figure], str]]:
    """(stem, builder, label) pages: the table (split every ``ROWS_PER_PAGE`` rows), then the notes on the
    verdicts, if any. Each verdict's reason (raw and drift-corrected) is in the report's appendix of
    reasons and in summary.json; a page of them here repeated what the table already shows."""
    table = _table(doc)
    pages: list[tuple[str, Callable[[], Figure], str]] = []
    n_pages = max(1, -(-len(table) // ROWS_PER_PAGE))
    for k in range(n_pages):
        chunk = table[k * ROWS_PER_PAGE:(k + 1) * ROWS_PER_PAGE]
        part = f" ({k + 1} of {n_pages})" if n_pages > 1 else ""
        pages.append((f"probe-table-{k + 1}", partial(
            probe_table_figure, doc, chunk, title=f"{head}: fitted against predicted exponents{part}",
            first=k * ROWS_PER_PAGE + 1, describe=k == 0), f"probe table{part}"))
    notes = sorted({n for e in table for n in e.get("notes", [])})
    if notes:
        pages.append(("probe-notes", partial(probe_notes_figure, notes, title=f"{head}: notes on the verdicts"),
                      "notes on the verdicts"))
    return pages


def probe_pages(exp: dict, head: str, experiments=()) -> list[tuple[str, Callable[[], Figure], str]]:
    """(stem, builder) pages of one summary entry of kind "term_probes" (the registry's page hook)."""
    return probe_table_pages(exp["probes"], head) if exp.get("probes") else []


def summary_rows(exp: dict) -> list[dict]:
    """Summary rows (the ``entries`` shape) of a "probes" entry: one per (term, variable). The verdict is the
    one against the finite-size prediction where the probe has one (the pack's term at the probed sizes, the
    attention at its exact finite-L softmax value), with the asymptotic verdict beside it
    (``verdict_asymptotic``), as the fits do; plus ``verdict_drift_corrected`` and its reason."""
    doc = exp.get("probes") or {}
    try:
        table = _table(doc)
    except InputError:
        return []
    grid = doc.get("grid") or {}
    rows = []
    for e in table:
        c = e.get("drift_corrected") or {}
        f = e.get("finite_size") or {}
        finite = f.get("verdict") is not None and f.get("predicted_exponent") is not None
        rows.append({"experiment": exp["name"], "line": f"{e['term']} in {e['variable']}", "threshold": None,
                     "x": f"log {e['variable']}", "slope": e.get("fitted_exponent"), "slope_ci": e.get("ci"),
                     "slope_ci_bootstrap": e.get("ci_bootstrap"),
                     "predicted_slope_tested": f["predicted_exponent"] if finite else e.get("predicted_exponent"),
                     "predicted_slope": f["predicted_exponent"] if finite else e.get("predicted_exponent"),
                     "predicted_slope_asymptotic": e.get("predicted_exponent"),
                     "prediction_compared": "finite size" if finite else None,
                     "delta": grid.get("delta"), "alpha": grid.get("alpha"),
                     "dominant": f"{e.get('role', '')} term",
                     "verdict": f["verdict"] if finite else e["verdict"],
                     "verdict_reason": (f"against the finite-size prediction: {f.get('verdict_reason')}" if finite
                                        else e.get("verdict_reason")),
                     "verdict_asymptotic": e["verdict"], "verdict_reason_asymptotic": e.get("verdict_reason"),
                     "verdict_drift_corrected": c.get("verdict"), "verdict_reason_drift_corrected": c.get("verdict_reason"),
                     "verdict_finite_size": f.get("verdict"),
                     "predicted_slope_finite_size": f.get("predicted_exponent"),
                     "n_points": e.get("n_points"), "n_censored": 0, "C": None, "C_ci": None,
                     "diagnostic": True})  # a probe of the theory's terms, not the experiment's prediction
    return rows


# ----------------------------------------------------------------------------- gradient access (kind "gradient_access")
OBSERVATION_LABELS = {"surrogate": "S + W (the bound's class)", "noisy_gradient": "G + W", "exact data": "exact data"}


def _gradient_access_groups(doc: dict) -> dict[tuple[str, str, str], list[dict]]:
    """(line, decoder, observation) -> its rows by V, from ``gradient_access.check``'s document."""
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise InputError("check: expected gradient_access.check(...) document with a 'rows' list")
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for i, row in enumerate(doc["rows"]):
        for key in ("line", "V", "decoder", "observation", "needed_d", "bound_d", "holds"):
            if key not in row:
                raise InputError(f"check.rows[{i}]: missing field '{key}'")
        groups.setdefault((row["line"], row["decoder"], row["observation"]), []).append(row)
    return groups


def gradient_access_figure(doc: dict, title: str) -> Figure:
    """One panel per line: each decoder's needed d against V (log-log), and the bound's d."""
    groups = _gradient_access_groups(doc)
    lines = list(dict.fromkeys(line for line, _, _ in groups))
    with style_context():
        fig = new_figure(PAGE_LANDSCAPE)
        axes = fig.subplots(1, max(1, len(lines)), squeeze=False)[0]
        for ax, line in zip(axes, lines):
            bound_drawn = False
            for (group_line, decoder, observation), rows in groups.items():
                if group_line != line:
                    continue
                reached = [r for r in rows if r["needed_d"] is not None]
                ax.plot([r["V"] for r in reached], [r["needed_d"] for r in reached], marker="o",
                        linestyle="-" if observation == "surrogate" else "--",
                        label=f"{decoder}, {OBSERVATION_LABELS.get(observation, observation)}")
                if not bound_drawn and observation == "surrogate":
                    ax.plot([r["V"] for r in reached], [r["bound_d"] for r in reached], color="black", linewidth=2,
                            label="bound's d (Fano, §7.4)")
                    bound_drawn = True
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_xlabel("V")
            ax.set_ylabel(f"smallest d reaching accuracy {doc.get('alpha')}")
            ax.set_title(line)
            ax.legend(fontsize=7)
        fig.suptitle(wrap_title(f"{title}: every decoder must need at least the bound's d", fig.get_figwidth() * 0.95))
        judged = [r for r in doc.get("rows") or [] if r.get("holds") is not None]
        verdict = ("consistent: every decoder that reached the accuracy needed at least the bound's d"
                   if doc.get("holds") else "inconsistent: below the bound at " + ", ".join(doc.get("violated") or [])
                   if judged else "inconclusive: no decoder reached the accuracy")
        fig.supxlabel(wrap_title(f"verdict {verdict} ({len(judged)} of {len(doc.get('rows') or [])} decoder runs "
                                 f"reached it); solid: the bound's class (S + W), dashed: the real gradient plus noise",
                                 fig.get_figwidth() * 0.95, 9), fontsize=9)
    return fig


def gradient_access_pages(exp: dict, head: str, experiments=()) -> list[tuple[str, Callable[[], Figure], str]]:
    """(stem, builder, label) of an entry of kind "gradient_access" (the registry's page hook)."""
    if not exp.get("check"):
        return []
    return [("gradient-access", partial(gradient_access_figure, exp["check"], title=head),
             "gradient-access bound: needed d against the bound's d")]


def gradient_access_rows(exp: dict) -> list[dict]:
    """One summary row per (line, decoder, observation): consistent when the decoder needs at least the bound's d at
    every V, inconsistent when it needs less at some V (the bound is violated), inconclusive when it never reached
    the accuracy. The comparison is of levels (the bound's constant is explicit), not a slope test."""
    try:
        groups = _gradient_access_groups(exp.get("check") or {})
    except InputError:
        return []
    rows = []
    for (line, decoder, observation), group in groups.items():
        judged = [r for r in group if r["holds"] is not None]
        below = [r for r in judged if not r["holds"]]
        verdict = "inconsistent" if below else "consistent" if judged and len(judged) == len(group) else "inconclusive"
        pairs = ", ".join(f"V={r['V']}: {r['needed_d']} vs {r['bound_d']:.1f}" for r in group)
        reason = (f"needed d vs the bound's d: {pairs}"
                  + (f"; below the bound at {', '.join('V=' + str(r['V']) for r in below)}" if below else "")
                  + ("; some V never reached the accuracy" if len(judged) < len(group) else ""))
        rows.append({"experiment": exp["name"], "line": f"{line}: {decoder}, {OBSERVATION_LABELS.get(observation, observation)}",
                     "threshold": (exp.get("check") or {}).get("alpha"), "x": "needed d against the bound's d",
                     "slope": None, "slope_ci": None, "slope_ci_bootstrap": None, "predicted_slope": None,
                     "delta": None, "alpha": None, "dominant": "gradient-access lower bound (DERIVATION.md §7.4)",
                     "verdict": verdict, "verdict_reason": reason, "n_points": len(group), "n_censored":
                     len(group) - len(judged), "C": None, "C_ci": None, "diagnostic": True})
    return rows

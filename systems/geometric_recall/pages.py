"""Geometric factual recall pages: construction vs trained vs bound, probes, zero-shot, multi-hop.

Each figure is drawn from the plain result dict of ``runners.run_geometric_experiment`` (the
``"geometric"`` key of a summary entry of kind ``"geometric"``), so a report can be rebuilt
from ``summary.json`` alone. The experiment's own verdict and its reason (the numbers that decided
it) go on every page; the d_min(N) log-versus-power page is ``reports.figures.dmin_plot``.

- :func:`construction_figure`: smallest working construction against the counting bound, with the
  trained d_min of the same (N, R) when a d_min experiment is in the same report;
- :func:`probe_figure`: linear readout accuracy per model (table and per-relation strip plot);
- :func:`zero_shot_figure`: zero-shot accuracy table and the embedding-only training curves;
- :func:`multi_hop_figure`: d_min and accuracy at fixed d against the number of hops, CoT vs no-CoT;
- :func:`geometric_pages` dispatches on the result's kind; :func:`geometric_rows` gives the summary rows.
"""
from __future__ import annotations

import math
from collections import defaultdict
from functools import partial
from typing import Callable, Sequence

import numpy as np
from matplotlib.figure import Figure

from recallkit.reports.style import CYCLE, MARKERS, PAGE_LANDSCAPE, PALETTE, VERDICT_COLOURS, cut_lines, fill, new_figure, style_context, wrap_title
from recallkit.reports.tables import draw_table
from recallkit.theory.errors import InputError

__all__ = ["construction_figure", "probe_figure", "zero_shot_figure", "multi_hop_figure", "geometric_pages",
           "geometric_rows", "geometric_kind", "trained_dmin_points"]

GEOMETRIC_KINDS = ("construction", "probes", "zero_shot", "multi_hop", "d_min")
MODEL_NAMES = {"learned": "learned subjects", "frozen-subjects": "frozen random subjects",
               "construction": "construction (no training)"}
# What each experiment checks against geometric recall, for the summary table's "line" column.
CHECKS = {
    "construction": "construction: 100% at predicted k, < 100% at k = ceil(log2 N) - 2",
    "probes": "linear readout from learned subject embeddings near perfect (held-out subjects)",
    "zero_shot": "smart init, no training: learned MLP high, frozen-random MLP not",
    "multi_hop": "d_min grows with hops without CoT, flat with CoT",
}


def geometric_kind(result: dict) -> str:
    """The experiment kind of a geometric result dict ("construction", "probes", ...)."""
    kind = result.get("kind") or str(result.get("experiment", "")).removeprefix("geometric_")
    if kind not in GEOMETRIC_KINDS:
        raise InputError(f"geometric.kind: expected one of {', '.join(GEOMETRIC_KINDS)}, got {kind!r}")
    return kind


def _need(d: dict, key: str, where: str):
    if key not in d:
        raise InputError(f"{where}: missing field '{key}'")
    return d[key]


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def _verdict_caption(fig: Figure, result: dict, width: int = 150) -> None:
    """The verdict and the numbers behind it, under the figure, in the verdict's colour: at most two
    lines; the reason in full is in the report's appendix of verdict reasons and in summary.json."""
    verdict = result.get("verdict")
    if not verdict:
        return
    text = f"verdict: {verdict}. " + str(result.get("verdict_reason") or "")
    fig.text(0.015, 0.012, cut_lines(text, width, max_lines=2, more=" ... [in full: appendix and summary.json]"),
             fontsize=8.5, ha="left", va="bottom",
             bbox=dict(boxstyle="round", facecolor=VERDICT_COLOURS.get(verdict, "white"), edgecolor="0.5"))


def page_title(fig: Figure, title: str, y: float = 0.975) -> float:
    """A page title that never runs off the page: shrunk and wrapped (at most 2 lines) when long.
    Returns the y (figure fraction) just below it."""
    width_in = fig.get_figwidth() * 0.94
    size = 14 if "\n" not in wrap_title(title, width_in, 14, bold=True) else 12
    wrapped = wrap_title(title, width_in, size, max_lines=2, bold=True)
    fig.text(0.03, y, wrapped, fontsize=size, fontweight="bold", va="top")
    return y - (wrapped.count("\n") + 1) * size * 1.35 / 72 / fig.get_figheight() - 0.012


def _page(title: str) -> tuple[Figure, float]:
    fig = new_figure(PAGE_LANDSCAPE, layout=None)
    return fig, page_title(fig, title)


def _settings_line(result: dict, skip: Sequence[str] = ()) -> str:
    settings = result.get("settings") or {}
    return "settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items() if k not in skip)


# ----------------------------------------------------------------------------- construction
def trained_dmin_points(dmin: dict | None) -> list[dict]:
    """Boundary points of a summary entry's ``dmin`` ({"learned"|"frozen": {"points"}}) with the
    ``model`` key that ``runners.construction_gap_table`` reads."""
    out = []
    for kind, model in (("learned", "learned"), ("frozen", "frozen-subjects")):
        for p in ((dmin or {}).get(kind) or {}).get("points", []):
            if p.get("censored") or p.get("d") is None or p.get("R") is None:
                continue
            out.append({**p, "model": model})
    return out


def construction_figure(result: dict, trained: Sequence[dict] = (), title: str | None = None,
                        size=PAGE_LANDSCAPE) -> Figure:
    """Smallest working construction (binary and random codes) against the counting lower bound, per R.

    ``result``: ``run_construction_experiment`` dict (``points`` with N, R, seed, codes, k_min,
    d_blocks_min, k_predicted, counting_bound_d). ``trained``: d_min boundary points (model, N, R, d)
    of trained models, drawn on the same axes when their (N, R) meet the construction's.
    """
    from recallkit.systems.geometric_recall.runners import construction_gap_table

    points = _need(result, "points", "construction")
    if not points:
        raise InputError("construction.points: expected a non-empty list")
    for i, p in enumerate(points):
        for key in ("N", "R", "codes", "counting_bound_d"):
            _need(p, key, f"construction.points[{i}]")
    rows = construction_gap_table(result, {"points": list(trained)} if trained else None)
    any_trained = any(r.get("learned_d_min") is not None or r.get("frozen_d_min") is not None for r in rows)
    Rs = sorted({r["R"] for r in rows})
    with style_context():
        fig, y_text = _page(title or "Geometric-recall construction against the counting bound")
        fig.text(0.03, y_text, fill(
            "Dimension of the subject blocks (R k; the construction's R relation coordinates are not counted, as in "
            "the bound) at the smallest k where the construction gets all N R facts right, median over seeds (bars: "
            "seed range). Bound: N d p >= R log2(N!) with p = 1 bit per coordinate and no other parameters."
            + (" Trained d_min (100% of the facts) is the full d of a trained model at the same (N, R); its float "
               "parameters carry more than 1 bit each, so it may lie below this 1-bit bound." if any_trained else
               " No d_min experiment in this report shares these (N, R), so no trained d_min is drawn."), 145),
            fontsize=8.5, va="top", color="0.25")
        n_panels = len(Rs)
        gs = fig.add_gridspec(1, n_panels, left=0.06, right=0.985, top=0.80, bottom=0.25, wspace=0.22)
        handles = {}
        for j, R in enumerate(Rs):
            ax = fig.add_subplot(gs[0, j])
            here = [r for r in rows if r["R"] == R]
            Ns = np.array([r["N"] for r in here], dtype=float)
            h = ax.plot(Ns, [r["counting_bound_d"] for r in here], color=PALETTE["black"], ls="--", lw=1.5,
                        label="counting bound R log2(N!) / N")[0]
            handles[h.get_label()] = h
            for i, codes in enumerate(("binary", "random")):
                pts = [p for p in points if p["R"] == R and p["codes"] == codes]
                if not pts:
                    continue
                by_n = defaultdict(list)
                for p in pts:
                    by_n[p["N"]].append(p.get("d_blocks_min"))
                nn = sorted(by_n)
                med = [_median(by_n[n]) for n in nn]
                lo = [min((v for v in by_n[n] if v is not None), default=np.nan) for n in nn]
                hi = [max((v for v in by_n[n] if v is not None), default=np.nan) for n in nn]
                med_a = np.array([np.nan if m is None else m for m in med])
                colour = CYCLE[i]
                eb = ax.errorbar(nn, med_a, yerr=[med_a - np.array(lo), np.array(hi) - med_a], color=colour,
                                 marker=MARKERS[i], ms=5, lw=1.4, capsize=2,
                                 label=f"construction, {codes} codes: R k$_{{min}}$")
                handles[eb.get_label()] = eb
                if codes == "random" and all("k_predicted" in p for p in pts):
                    k_pred = {p["N"]: p["k_predicted"] for p in pts}
                    h = ax.plot(nn, [R * k_pred[n] for n in nn], color=colour, ls=":", lw=1.4,
                                label=f"random codes, predicted R k (collision prob. <= "
                                      f"{result.get('failure_probability', 0.01):g})")[0]
                    handles[h.get_label()] = h
            for i, (key, name) in enumerate((("learned_d_min", "trained d_min, learned subjects"),
                                             ("frozen_d_min", "trained d_min, frozen random subjects"))):
                tr = [(r["N"], r[key]) for r in here if r.get(key) is not None]
                if tr:
                    h = ax.plot(*zip(*tr), ls="none", marker="*" if i == 0 else "X", ms=10, mec="black",
                                color=CYCLE[2 + i], label=name)[0]
                    handles[name] = h
            ax.set_xscale("log", base=2)
            ax.set_xlabel("subjects N")
            ax.set_title(f"R = {R}")
            ax.set_ylim(bottom=0)
            if j == 0:
                ax.set_ylabel("dimension (subject blocks)")
            ax.grid(alpha=0.25)
        fig.legend(list(handles.values()), list(handles), loc="lower center", bbox_to_anchor=(0.5, 0.10),
                   ncol=3, fontsize=8.5, frameon=False)
        _verdict_caption(fig, result)
    return fig


# ----------------------------------------------------------------------------- probes
def probe_figure(result: dict, title: str | None = None, size=PAGE_LANDSCAPE) -> Figure:
    """Linear readout probes: a table per model (mean over seeds) and per-relation held-out accuracy."""
    rows = _need(result, "rows", "probes")
    if not rows:
        raise InputError("probes.rows: expected a non-empty list")
    models = [m for m in ("learned", "frozen-subjects", "construction") if any(r.get("model") == m for r in rows)]
    models += sorted({r.get("model") for r in rows} - set(models))
    chance = rows[0].get("chance")
    cells, colours = [], []
    for m in models:
        mine = [r for r in rows if r.get("model") == m]
        test = [r["probe_test_accuracy"] for r in mine]
        cells.append([MODEL_NAMES.get(m, m), str(len(mine)),
                      f"{np.mean([r['train_accuracy_model'] for r in mine]):.3f}",
                      f"{np.mean(test):.3f}", f"{min(test):.3f} - {max(test):.3f}",
                      f"{np.mean([r['probe_train_accuracy'] for r in mine]):.3f}",
                      "n/a" if chance is None else f"{chance:.4f}"])
        colours.append(None)
    header = ["model", "seeds", "model accuracy\non its facts", "probe accuracy,\nheld-out subjects",
              "held-out range\nover seeds", "probe accuracy,\ntraining subjects", "chance (1/N)"]
    with style_context():
        fig, y_text = _page(title or "Linear readout probes")
        fig.text(0.03, y_text, fill(
            "Per relation r, a linear map W_r from subject embeddings to attribute vectors (unembedding rows) "
            "fitted by least squares on the training subjects; readout = nearest attribute vector to E_s W_r. "
            + _settings_line(result), 145), fontsize=8.5, va="top", color="0.25")
        ax_t = fig.add_axes((0.03, 0.60, 0.94, 0.25))
        draw_table(ax_t, header, cells, [0.22, 0.06, 0.13, 0.15, 0.14, 0.15, 0.10], fontsize=9)
        ax = fig.add_axes((0.09, 0.16, 0.86, 0.38))
        rng = np.random.default_rng(0)  # fixed jitter: the same figure every build
        for i, m in enumerate(models):
            vals = [pr["test_accuracy"] for r in rows if r.get("model") == m for pr in r.get("per_relation", [])]
            if not vals:
                vals = [r["probe_test_accuracy"] for r in rows if r.get("model") == m]
            ax.scatter(rng.uniform(-0.15, 0.15, len(vals)) + i, vals, s=18, alpha=0.7, color=CYCLE[i],
                       edgecolors="none")
            ax.hlines(np.mean(vals), i - 0.3, i + 0.3, color=CYCLE[i], lw=2.2)
        if chance is not None:
            ax.axhline(chance, color="0.4", ls=":", lw=1.2)
            ax.text(len(models) - 0.5, chance, " chance", va="bottom", ha="right", fontsize=8, color="0.3")
        ax.set_xticks(range(len(models)), [MODEL_NAMES.get(m, m) for m in models])
        ax.set_xlim(-0.5, len(models) - 0.5)
        ax.set_ylim(-0.02, 1.04)
        ax.set_ylabel("held-out readout accuracy")
        ax.set_title("per relation and seed (dots), mean (bar)", fontsize=10)
        ax.grid(axis="y", alpha=0.25)
        _verdict_caption(fig, result)
    return fig


# ----------------------------------------------------------------------------- zero-shot
def zero_shot_figure(result: dict, title: str | None = None, size=PAGE_LANDSCAPE) -> Figure:
    """Zero-shot transfer: accuracy with no training and after embedding-only training, and the curves."""
    rows = _need(result, "rows", "zero_shot")
    if not rows:
        raise InputError("zero_shot.rows: expected a non-empty list")
    models = [m for m in ("learned", "frozen-subjects") if any(r.get("model") == m for r in rows)]
    steps = rows[0].get("steps", (result.get("settings") or {}).get("transfer_steps"))
    header = ["model", "subject init", "seeds", "no training", "no training,\nMLP removed",
              f"after {steps} embedding-\nonly steps"]
    cells = []
    for m in models:
        mine = [r for r in rows if r.get("model") == m]
        for init in ("random", "smart"):
            got = [r[init] for r in mine if init in r]
            if not got:
                continue
            def mean(key):
                vals = [g.get(key) for g in got if g.get(key) is not None]
                return "n/a" if not vals else f"{np.mean(vals):.3f}"
            cells.append([MODEL_NAMES.get(m, m), init, str(len(got)), mean("accuracy_no_training"),
                          mean("accuracy_no_training_without_mlp"), mean("accuracy_after")])
    with style_context():
        fig, y_text = _page(title or "Zero-shot transfer to new bijections")
        fig.text(0.03, y_text, fill(
            "The trained MLP, relation embeddings and unembedding are frozen; R new random bijections; new subject "
            "embeddings start random or 'smart' (superposition of the new attributes' vectors through per-relation "
            "maps fitted on the trained model), then only they are trained. Accuracy over all N R new facts, mean "
            "over seeds. 'MLP removed': the same start read through the residual path alone. "
            + _settings_line(result), 145), fontsize=8.5, va="top", color="0.25")
        ax_t = fig.add_axes((0.03, y_text - 0.30, 0.94, 0.22))
        draw_table(ax_t, header, cells, [0.24, 0.12, 0.08, 0.14, 0.18, 0.20], fontsize=9)
        ax = fig.add_axes((0.08, 0.17, 0.55, y_text - 0.52))
        for i, m in enumerate(models):
            for init, ls in (("smart", "-"), ("random", "--")):
                curves = [r[init]["curve"] for r in rows if r.get("model") == m and init in r and r[init].get("curve")]
                if not curves:
                    continue
                steps_at = np.array([c[0] for c in curves[0]], dtype=float)
                acc = np.mean([[c[1] for c in curve] for curve in curves if len(curve) == len(curves[0])], axis=0)
                ax.plot(steps_at, acc, ls=ls, marker=MARKERS[i], ms=4, color=CYCLE[i],
                        label=f"{MODEL_NAMES.get(m, m)}, {init} init")
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("embedding-only training steps (0 = zero-shot)")
        ax.set_ylabel("accuracy on the new facts")
        ax.set_ylim(-0.02, 1.04)
        ax.grid(alpha=0.25)
        ax.legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="mean over seeds",
                  title_fontsize=9)
        _verdict_caption(fig, result)
    return fig


# ----------------------------------------------------------------------------- multi-hop
def multi_hop_figure(result: dict, title: str | None = None, size=PAGE_LANDSCAPE) -> Figure:
    """d_min (left) and accuracy at the fixed d (right) against hops k, without and with chain-of-thought."""
    rows = _need(result, "rows", "multi_hop")
    if not rows:
        raise InputError("multi_hop.rows: expected a non-empty list")
    settings = result.get("settings") or {}
    grid = settings.get("d_grid") or []
    d_top = max(grid) if grid else max((r.get("d_min_no_cot") or 0) for r in rows)
    hops = sorted({r["hops"] for r in rows})
    R = settings.get("R")
    with style_context():
        fig, y_text = _page(title or "Multi-hop chains: with and without chain-of-thought")
        fig.text(0.03, y_text, fill(
            "No CoT: one model answers each k-hop query in one pass (R^k composite relations). CoT: the one-hop "
            "model applied k times, each intermediate entity emitted; a chain counts only if every hop is right. "
            "d_min = smallest d on the grid reaching 100% of the N R^k chains. " + _settings_line(result), 145),
            fontsize=8.5, va="top", color="0.25")
        gs = fig.add_gridspec(1, 2, left=0.07, right=0.98, top=0.80, bottom=0.24, wspace=0.22)
        ax_d, ax_a = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1])
        rng = np.random.default_rng(1)
        censored_any = False
        for i, (key, acc_key, name) in enumerate((("d_min_no_cot", "accuracy_no_cot_at_d_fixed", "no CoT (one pass)"),
                                                  ("d_min_cot", "accuracy_cot_at_d_fixed", "CoT (k one-hop passes)"))):
            colour, offset = CYCLE[i], (i - 0.5) * 0.12
            ok = [(r["hops"], r[key]) for r in rows if r.get(key) is not None]
            cens = [r["hops"] for r in rows if r.get(key) is None]
            if ok:
                x = np.array([h for h, _ in ok], dtype=float) + offset + rng.uniform(-0.03, 0.03, len(ok))
                ax_d.scatter(x, [d for _, d in ok], s=22, alpha=0.6, color=colour, edgecolors="none")
            med = [(k, _median([r[key] for r in rows if r["hops"] == k])) for k in hops]
            med = [(k, m) for k, m in med if m is not None]
            if med:
                ax_d.plot([k + offset for k, _ in med], [m for _, m in med], color=colour, marker=MARKERS[i], lw=1.8,
                          label=f"{name}: median d_min over seeds")
            if cens:
                censored_any = True
                ax_d.scatter(np.array(cens, dtype=float) + offset, [d_top] * len(cens), s=40, facecolors="white",
                             edgecolors=colour, linewidths=1.4, marker="^")
            acc = [(k, float(np.mean([r[acc_key] for r in rows if r["hops"] == k and r.get(acc_key) is not None])))
                   for k in hops if any(r["hops"] == k and r.get(acc_key) is not None for r in rows)]
            if acc:
                ax_a.plot([k for k, _ in acc], [a for _, a in acc], color=colour, marker=MARKERS[i], lw=1.8,
                          label=name)
        if censored_any:
            ax_d.scatter([], [], s=40, facecolors="white", edgecolors="0.3", marker="^",
                         label=f"censored: no d <= {d_top} reached 100%")
        labels = [f"{k}\n({R ** k} rel.)" if R else str(k) for k in hops]
        for ax in (ax_d, ax_a):
            ax.set_xticks(hops, labels)
            ax.set_xlabel("hops k (composite relations R$^k$)")
            ax.grid(alpha=0.25)
        from matplotlib.ticker import MaxNLocator

        # linear with integer ticks: d_min here spans a few grid steps, a log axis would show one tick
        ax_d.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax_d.set_ylim(bottom=0)
        if settings.get("d_fixed"):
            ax_d.axhline(settings["d_fixed"], color="0.5", ls=":", lw=1.2, label=f"d = {settings['d_fixed']} (right panel)")
        ax_d.set_ylabel("d$_{min}$ (100% of the chains)")
        ax_d.set_title("minimal dimension against hops", fontsize=11)
        ax_d.legend(fontsize=8, loc="upper left")
        ax_a.set_ylim(-0.02, 1.04)
        ax_a.set_ylabel(f"accuracy over all chains at d = {settings.get('d_fixed', '?')}")
        ax_a.set_title(f"accuracy at fixed d = {settings.get('d_fixed', '?')} (mean over seeds)", fontsize=11)
        ax_a.legend(fontsize=8, loc="lower left")
        _verdict_caption(fig, result)
    return fig


# ----------------------------------------------------------------------------- dispatch
def geometric_pages(exp: dict, head: str, experiments: Sequence[dict] = ()) -> list[tuple[str, Callable[[], Figure], str]]:
    """(stem, builder, label) pages of one summary entry of kind "geometric". ``experiments``: every entry of the
    report; the construction page draws the trained d_min of any d_min experiment among them."""
    result = exp.get("geometric") or {}
    if not result:
        return []
    trained = [p for other in experiments for p in trained_dmin_points(other.get("dmin"))]
    kind = geometric_kind(result)
    if kind == "construction":
        return [("construction", partial(construction_figure, result, trained,
                                          title=f"{head}: against trained d_min and the counting bound"
                                          if trained else f"{head}: against the counting bound"),
                 "construction against the counting bound")]
    if kind == "probes":
        return [("probes", partial(probe_figure, result, title=head), "linear readout probes")]
    if kind == "zero_shot":
        return [("zero-shot", partial(zero_shot_figure, result, title=head), "zero-shot transfer")]
    if kind == "multi_hop":
        return [("multi-hop", partial(multi_hop_figure, result, title=f"{head}: with and without chain-of-thought"),
                 "multi-hop: with and without chain-of-thought")]
    return []  # d_min results are drawn from the entry's "dmin" key by reports.figures.dmin_plot


def geometric_rows(exp: dict) -> list[dict]:
    """Summary rows (the ``entries`` shape) of a "geometric" entry: one per experiment verdict."""
    result = exp.get("geometric") or {}
    try:
        kind = geometric_kind(result)
    except InputError:
        return []
    if kind == "d_min" or not result.get("verdict"):
        return []
    n_points = len(result.get("points") or result.get("rows") or [])
    return [{"experiment": exp["name"], "line": CHECKS.get(kind, kind), "threshold": None, "x": None,
             "slope": None, "slope_ci": None, "slope_ci_bootstrap": None, "predicted_slope": None,
             "delta": None, "alpha": None, "dominant": "geometric recall (paper-reported)",
             "verdict": result.get("verdict"),
             "verdict_reason": result.get("verdict_reason"), "n_points": n_points, "n_censored": 0,
             "C": None, "C_ci": None}]

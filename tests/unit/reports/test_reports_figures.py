"""Figures of the reports stage, built from synthetic dicts of the contract shapes (docs/ARCHITECTURE.md).

The synthetic builders here are also used by test_reports_pdf.py.
"""
from __future__ import annotations

import math

import matplotlib
import matplotlib.colors
import numpy as np
import pytest
import sympy

from matplotlib.legend import Legend

from recallkit.compare import results as fits_mod
from recallkit.reports import figures, tables
from recallkit.reports.style import save_figure
from recallkit.theory.errors import InputError

THRESHOLDS = (0.1, 0.125, 0.15)


def synthetic_line(line="N=V*log(V), L=V**0.5", true_slope=1.5, seeds=3, rng_seed=0, experiment="tr_fig2_attn",
                   censor_last=True):
    """Heatmap cells, boundary points and fit dicts for one experiment line (attention-only, param = d^2)."""
    rng = np.random.default_rng(rng_seed)
    Vs = [64, 128, 256, 512, 1024]
    ds = [8, 11, 16, 23, 32, 45, 64, 91, 128]
    cells, points, fits = [], [], []
    for V in Vs:
        d_star = math.sqrt(0.5 * V ** true_slope)
        for d in ds:
            acc = 0.2 / (1 + (d_star / d) ** 3)
            cells.append({"V": V, "d": d, "accuracy": acc})
    for j, thr in enumerate(THRESHOLDS):
        pts = []
        for seed in range(seeds):
            for V in Vs:
                d = math.sqrt(0.5 * V ** true_slope) * (1 + 0.25 * j) * math.exp(rng.normal(0, 0.08))
                censored = censor_last and V == Vs[-1] and seed == 0 and j == 2
                d = 128 if censored else d
                pts.append({"experiment": experiment, "line": line, "threshold": thr, "seed": seed, "V": V,
                            "d": d, "m": d, "param_count": d * d, "censored": censored,
                            "censor_reason": "no d <= 128 reached the threshold" if censored else None})
        points += pts
        used = [p for p in pts if not p["censored"]]
        x = np.log([p["V"] for p in used])
        y = np.log([p["param_count"] for p in used])
        slope, intercept = np.polyfit(x, y, 1)
        fits.append({
            "experiment": experiment, "line": line, "threshold": thr, "x": "log V", "y": "log(param_count)",
            "slope": slope, "slope_ci": [slope - 0.12, slope + 0.12], "slope_ci_bootstrap": [slope - 0.1, slope + 0.14],
            "intercept": intercept, "intercept_ci": [intercept - 0.5, intercept + 0.5], "r2": 0.98,
            "n_points": len(used), "n_seeds": seeds,
            "censored": [{k: p[k] for k in ("line", "threshold", "seed", "V", "d", "m", "censor_reason")}
                         for p in pts if p["censored"]],
            "points": [{"x": float(a), "y": float(b), "seed": p["seed"]} for a, b, p in zip(x, y, used)],
            "predicted_slope": true_slope, "predicted_slope_finite_range": true_slope, "delta": 0.25,
            "alpha": 0.05, "band": [true_slope - 0.25, true_slope + 0.25], "p_tost": 0.01,
            "verdict": ["consistent", "inconclusive", "inconsistent"][j],
            "verdict_reason": "HC3 90% interval lies inside the equivalence band (synthetic data)",
            "C": None, "C_ci": None,
        })
    return cells, points, fits


def synthetic_capacity(label="linear d^2", C=0.8, seeds=3, rng_seed=1):
    rng = np.random.default_rng(rng_seed)
    pts = []
    for d in [8, 11, 16, 23, 32, 45]:
        for seed in range(seeds):
            target = d * d / C
            # solve N ln N = target by bisection, then perturb per seed
            lo, hi = 2.0, target
            for _ in range(60):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if mid * math.log(mid) < target else (lo, mid)
            N = lo * math.exp(rng.normal(0, 0.1))
            pts.append({"x": math.log(N * math.log(N)), "y": math.log(d * d), "seed": seed})
    x = np.array([p["x"] for p in pts])
    y = np.array([p["y"] for p in pts])
    slope, intercept = np.polyfit(x, y, 1)
    return {"experiment": f"assoc_{label}", "line": label, "threshold": 0.99, "x": "log(N ln N)", "slope": slope,
            "slope_ci": [slope - 0.05, slope + 0.05], "slope_ci_bootstrap": [slope - 0.06, slope + 0.05],
            "intercept": intercept, "r2": 0.99, "n_points": len(pts), "censored": [], "points": pts,
            "predicted_slope": 1.0, "delta": 0.15, "alpha": 0.05, "band": [0.85, 1.15], "verdict": "consistent",
            "verdict_reason": "synthetic", "C": float(np.exp(np.mean(y - x))), "C_ci": [0.7, 0.9]}


def synthetic_dmin(rng_seed=2):
    """Boundary points for learned (log) and frozen (power) d_min, run through compare's model selection."""
    from recallkit.compare.model_selection import select_by_group

    rng = np.random.default_rng(rng_seed)
    out = {}
    for kind in ("learned", "frozen"):
        points = []
        for R in (1, 4):
            for N in (16, 64, 256, 1024, 4096):
                for seed in range(3):
                    if kind == "learned":
                        d = (4 + 3 * R * math.log2(N)) * math.exp(rng.normal(0, 0.02))
                    else:
                        d = 2 * R ** 0.5 * N ** 0.9 * math.exp(rng.normal(0, 0.05))
                    points.append({"N": N, "d": d, "seed": seed, "R": R,
                                   "censored": kind == "frozen" and N == 4096 and seed == 1})
        out[kind] = {"points": points, "selection": select_by_group(points, "R", n_bootstrap=0)}
    return out


SYNTHETIC_TERMS = [
    {"name": "signal", "role": "signal", "expr": "eta*gamma*N*d/V", "latex": r"\frac{N d \eta \gamma}{V}",
     "provenance": "derived-here", "reference": "derivation, reconstructed model"},
    {"name": "mean_bias", "role": "noise", "expr": "L*log(V)", "latex": r"L \log{\left(V \right)}",
     "provenance": "paper-reported", "reference": "Vural et al. 2026, Theorem 1 (named term)"},
    {"name": "gradient_noise", "role": "noise", "expr": "sqrt(L*V/N)",
     "latex": r"\sqrt{\frac{L V}{N}}", "provenance": "derived-here", "reference": "derivation in docs"},
    {"name": "mlp_noise", "role": "noise", "expr": "Max(V/m, 1)",
     "latex": r"\max\left(1, \frac{V}{m}\right)", "provenance": "derived-here", "reference": ""},
    {"name": "piecewise", "role": "noise", "expr": "(piecewise)",
     "latex": r"\begin{cases} V & \text{for}\: L > 1 \\ 1 & \text{otherwise} \end{cases}",
     "provenance": "anchor", "reference": "Nichani et al. 2025"},
]


def _look(fig, tmp_path, stem):
    paths = save_figure(fig, tmp_path / stem, close=True)
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000, p
    return paths


def _n_cells(ax):
    from matplotlib.collections import QuadMesh

    return sum(np.ma.masked_invalid(c.get_array()).count() for c in ax.collections if isinstance(c, QuadMesh))


def test_heatmap_columns_keep_their_own_probed_sizes():
    # bisection probes different d at each V: every probed cell is drawn, none is split by another column's d
    cells = [{"V": 64, "d": 8, "accuracy": 0.0}, {"V": 64, "d": 32, "accuracy": 0.2},
             {"V": 128, "d": 11, "accuracy": 0.0}, {"V": 128, "d": 45, "accuracy": 0.2}]
    fig = figures.accuracy_heatmap(cells)
    assert _n_cells(fig.axes[0]) == 4


def test_heatmap_draws_cells_markers_and_fit_lines(tmp_path):
    cells, points, fits = synthetic_line()
    fig = figures.accuracy_heatmap(cells, points, fits, title="synthetic")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]  # legend sits outside the axes
    # one marker series and one fitted line per threshold, the slope in the fit's label
    for thr, fit in zip(THRESHOLDS, fits):
        assert any(f"accuracy {thr:g}" in lab and f"slope {fit['slope']:.2f}" in lab for lab in labels), labels
    # each element drawn has its legend entry, and the grey of the cells never trained is explained
    assert any(lab.startswith("smallest d with accuracy >= 0.1") for lab in labels), labels
    assert any("not trained" in t.get_text() for legend in ax.findobj(Legend) for t in legend.get_texts())
    assert _n_cells(ax) == 5 * 9  # every (V, d) cell present
    _look(fig, tmp_path, "heatmap")


def test_heatmap_names_relative_thresholds_and_the_interval_of_curve_fits():
    cells, points, fits = synthetic_line()
    relative = [dict(p, threshold_relative=True) for p in points]
    curve_fits = [dict(f, method="curve") for f in fits]
    fig = figures.accuracy_heatmap(cells, relative, curve_fits)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(lab.startswith("smallest d with accuracy >= 0.1 x ceiling") for lab in labels), labels
    assert any(lab.startswith("fit, accuracy 0.1 x ceiling: slope") for lab in labels), labels
    assert fig.legends[0].get_title().get_text().endswith("95% CI (seed curves)")
    plain = figures.accuracy_heatmap(cells, points, fits)
    assert plain.legends[0].get_title().get_text().endswith("95% CI (HC3)")
    assert not any("x ceiling" in t.get_text() for t in plain.legends[0].get_texts())


def test_heatmap_fit_line_passes_through_boundary_points(tmp_path):
    # param = d^2, so the fitted param-count line maps to d = sqrt(exp(intercept) V^slope)
    cells, points, fits = synthetic_line(censor_last=False)
    fig = figures.accuracy_heatmap(cells, points, fits)
    line = next(l for l in fig.axes[0].lines if "fit, accuracy 0.1" in l.get_label())
    V, d = line.get_data()
    expected = np.sqrt(np.exp(fits[0]["intercept"]) * np.asarray(V) ** fits[0]["slope"])
    np.testing.assert_allclose(d, expected, rtol=1e-6)


def test_heatmap_rejects_missing_field():
    with pytest.raises(InputError, match=r"heatmap.cells\[0\]: missing field 'accuracy'"):
        figures.accuracy_heatmap([{"V": 1, "d": 2}])


def test_fit_plot_has_band_prediction_and_censored(tmp_path):
    _, _, fits = synthetic_line()
    fit = fits[2]  # the threshold with one censored point
    fig = figures.fit_plot(fit)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(lab.startswith("tested prediction: slope 1.500") for lab in labels), labels
    assert any(lab.startswith("fit: slope") for lab in labels)
    assert any("censored" in lab for lab in labels)
    assert any("CI" in lab and "pivot" in lab for lab in labels)  # no confidence_band given -> slope band
    arrows = [c for c in ax.texts if getattr(c, "arrow_patch", None) is not None]
    assert len(arrows) == len(fit["censored"]) == 1
    # the censored marker sits at the search bound d = 128 -> param 128^2
    open_pts = [c for c in ax.collections if "censored" in str(c.get_label())][0].get_offsets()
    np.testing.assert_allclose(open_pts[0], [1024, 128 * 128])
    _look(fig, tmp_path, "fit")


def test_fit_plot_draws_the_tested_prediction_not_the_asymptotic_one():
    # with a log factor compare tests the finite-range slope: the dashed line, the legend and the box
    # must all show that number, with the asymptotic slope beside it and labelled so
    _, _, fits = synthetic_line()
    fit = dict(fits[0], predicted_slope=1.5, predicted_slope_finite_range=1.695, log_power="1",
               band=[1.445, 1.945], delta=0.25)
    fig = figures.fit_plot(fit)
    ax = fig.axes[0]
    dashed = next(l for l in ax.lines if l.get_label().startswith("tested prediction"))
    x, y = (np.log(np.asarray(v, dtype=float)) for v in dashed.get_data())
    assert (y[-1] - y[0]) / (x[-1] - x[0]) == pytest.approx(1.695)
    assert dashed.get_label() == "tested prediction: slope 1.695 (finite-range; asymptotic 1.500, log power 1)"
    box = " ".join(fig._supxlabel.get_text().split())  # the caption (wrapped), not a box over the data
    assert "tested prediction 1.695 +- 0.25" in box and "asymptotic 1.500" in box
    assert "equivalence band [1.45, 1.95]" in box  # the band is around the tested slope


def test_fit_grid_cuts_reasons_to_two_lines_and_points_to_the_appendix():
    _, _, fits = synthetic_line()
    long = "the 90% interval is not inside the band " * 30
    fig = figures.fit_grid([dict(f, verdict_reason=long, check=7 + i) for i, f in enumerate(fits)], title="t")
    text = next(t.get_text() for t in fig.texts if t.get_text().startswith("(1)"))
    assert len(text.splitlines()) == 2 * len(fits)
    assert "[in full: appendix, check 7]" in text and "[in full: appendix, check 9]" in text
    assert not fig.get_layout_engine()  # placed by hand: no layout engine pass
    assert len(fig.legends) == 1  # one legend for all panels


def test_fit_grid_names_the_within_ceiling_reading_next_to_the_verdict():
    """A check read within the instance's ceiling too says so next to its verdict."""
    _, _, fits = synthetic_line()
    fits = [dict(fits[0], verdict_reason="r", predicted_slope_within_ceiling=2.294, verdict_within_ceiling="consistent"),
            *[dict(f, verdict_reason="r") for f in fits[1:]]]
    fig = figures.fit_grid(fits, title="t")
    text = next(t.get_text() for t in fig.texts if t.get_text().startswith("(1)"))
    assert text.splitlines()[0].startswith("(1) ") and "(within the ceiling: 2.29, consistent): r" in text
    assert "within the ceiling" not in text.splitlines()[1]


def test_fit_grid_and_caption_name_the_binding_terms_verdict_beside_the_all_terms_one():
    """A check tested against every term at once keeps the binding terms' prediction and verdict beside it."""
    _, _, fits = synthetic_line()
    first = dict(fits[0], verdict_reason="r", prediction_compared="all terms", predicted_slope_finite_size=1.763,
                 verdict_binding_terms="inconclusive", predicted_slope_within_ceiling=1.477,
                 verdict_within_ceiling="consistent")
    fig = figures.fit_grid([first, *[dict(f, verdict_reason="r") for f in fits[1:]]], title="t")
    text = next(t.get_text() for t in fig.texts if t.get_text().startswith("(1)"))
    assert "(binding terms alone: 1.76, inconclusive; within the ceiling: 1.48, consistent): r" in text.splitlines()[0]
    assert "binding terms" not in text.splitlines()[1]
    single = figures.fit_plot(first)
    caption = single._supxlabel.get_text()
    assert "the binding terms alone" in caption and "1.76, inconclusive" in caption
    assert "note:" not in caption
    # the caption names the tested prediction's kind (it said "finite-range" for every kind)
    boxed = figures.fit_plot(dict(first, predicted_slope=1.606, predicted_slope_finite_range=None,
                                  predicted_slope_asymptotic=1.5))
    box = " ".join(boxed._supxlabel.get_text().split())
    assert "tested prediction 1.606" in box and "(all terms; asymptotic 1.500" in box and "finite-range" not in box


def test_fit_grid_and_caption_set_a_censored_point_against_the_form():
    """A censored point compare set against the all-terms form is named next to its verdict, with the form's d there
    and the base values the runs did not reach (the tested prediction keeps them)."""
    _, _, fits = synthetic_line()
    bound = {"base": "V", "base_value": 1024, "size": "d", "bound": 8192, "past": True, "predicted": 9886.3,
             "agrees": True}
    first = dict(fits[0], verdict_reason="r", prediction_compared="all terms", censored_against_all_terms=[bound],
                 unreached=[1024])
    fig = figures.fit_grid([first, *[dict(f, verdict_reason="r") for f in fits[1:]]], title="t")
    text = next(t.get_text() for t in fig.texts if t.get_text().startswith("(1)"))
    assert ("(censored V=1024: past d=8192, all terms 9886 (same side); unreached V: 1024 (kept in the prediction)): r"
            in text.splitlines()[0])
    against = dict(first, censored_against_all_terms=[dict(bound, predicted=5000.0, agrees=False)])
    caption = figures.fit_plot(against)._supxlabel.get_text()
    assert "censored V=1024: past d=8192, all terms 5000 (other side: against the form)" in caption


def test_a_note_the_system_attaches_to_a_line_is_on_its_page_once():
    _, _, fits = synthetic_line()
    noted = [dict(f, verdict_reason="r", prediction_note="the counts cap this line") for f in fits]
    fig = figures.fit_grid(noted, title="t")
    texts = "\n".join(t.get_text() for t in fig.texts)
    assert texts.count("note: the counts cap this line") == 1
    assert "note: the counts cap this line" in figures.fit_plot(noted[0])._supxlabel.get_text()


def test_fit_plot_without_slope_shows_reason():
    _, _, fits = synthetic_line()
    fit = dict(fits[0], slope=None, intercept=None, verdict="inconclusive", verdict_reason="only 2 distinct x")
    fig = figures.fit_plot(fit)
    assert "only 2 distinct x" in fig._supxlabel.get_text()
    assert not any(l.get_label().startswith("fit:") for l in fig.axes[0].lines)


def test_fit_plot_uses_compare_confidence_band():
    _, _, fits = synthetic_line()
    fit = dict(fits[0], confidence_band={"x": [4.0, 7.0], "lo": [5.0, 9.0], "hi": [6.0, 11.0]})
    fig = figures.fit_plot(fit)
    band = [c for c in fig.axes[0].collections if c.get_label() == "95% confidence band"]
    assert len(band) == 1


def test_fit_plot_from_real_compare_fit(tmp_path):
    _, points, _ = synthetic_line()
    pts = [p for p in points if p["threshold"] == 0.15]
    fit = fits_mod.fit_points(pts, predicted_slope=1.5, experiment="tr", line="l", threshold=0.15,
                              n_bootstrap=200).to_dict()
    fig = figures.fit_plot(fit)
    assert fig.axes and fit["verdict"] in fig.axes[0].get_title()
    _look(fig, tmp_path, "fit_real")


def test_capacity_plot_annotates_C_and_inverts_n_log_n(tmp_path):
    lin = synthetic_capacity()
    mlp = synthetic_capacity(label="MLP m*d, m=2d", C=0.5, rng_seed=3)
    fig = figures.capacity_plot([lin, mlp], labels=["linear, d$^2$", "MLP, m$\\cdot$d"])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(f"C = {lin['C']:.3g}" in lab for lab in labels)
    # the x of each plotted point is N, recovered from x = log(N ln N)
    N = figures._invert_n_log_n(np.array([lin["points"][0]["x"]]))[0]
    assert abs(N * math.log(N) - math.exp(lin["points"][0]["x"])) < 1e-6 * N * math.log(N)
    _look(fig, tmp_path, "capacity")


def test_dmin_plot_panels_and_fits(tmp_path):
    fig = figures.dmin_plot(synthetic_dmin())
    assert [ax.get_title() for ax in fig.axes] == ["learned subject embeddings", "frozen subject embeddings"]
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("log2 N" in lab for lab in labels) and any("N$^p$" in lab for lab in labels)
    assert any(lab.startswith("R = 1: prefers log") for lab in labels), labels
    frozen = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert any(lab.startswith("R = 4: prefers power") for lab in frozen), frozen
    _look(fig, tmp_path, "dmin")


def test_slope_table_colours_verdicts(tmp_path):
    _, _, fits = synthetic_line()
    rows = tables.slope_rows(fits, dominant_of={"N=V*log(V), L=V**0.5": "gradient_noise"})
    fig = tables.slope_table(rows)
    cells = fig.axes[0].tables[0].get_celld()
    from recallkit.reports.style import VERDICT_COLOURS

    verdict_col = 8
    for i, r in enumerate(rows, start=1):
        assert cells[(i, verdict_col)].get_text().get_text() == r["verdict"]
        assert matplotlib.colors.same_color(cells[(i, verdict_col)].get_facecolor(), VERDICT_COLOURS[r["verdict"]])
    assert cells[(1, 7)].get_text().get_text() == "gradient_noise"
    _look(fig, tmp_path, "slopes")


def test_slope_table_names_the_interval_its_rows_carry():
    """The interval column's heading says what was computed: HC3 for regression fits, the seed-curve bootstrap for
    curve fits (it read "HC3" over seed-curve intervals on every Fig 2 page)."""
    _, _, fits = synthetic_line()

    def heading(rows):
        return tables.slope_table(rows).axes[0].tables[0].get_celld()[(0, 4)].get_text().get_text()

    regression = tables.slope_rows(fits)
    curves = tables.slope_rows([{**f, "method": "curve"} for f in fits])
    assert heading(regression) == "95% CI\n(HC3)"
    assert heading(curves) == "95% CI\n(seed curves)"
    assert heading(regression + curves) == "95% CI (HC3 or\nseed curves)"
    # the report's summary pages draw the rows of summary.json, which carry the method too
    from recallkit.reports.summary_rows import summary_entries

    entry = {"name": "tr_fig2_attention_only", "kind": "min_size", "fits": [{**f, "method": "curve"} for f in fits]}
    assert heading(summary_entries({"experiments": [entry]})) == "95% CI\n(seed curves)"


def test_mathtext_accepts_what_sympy_latex_emits():
    V, N, L, d, m = sympy.symbols("V N L d m", positive=True)
    for expr in [N * d / V, L * sympy.log(V), sympy.sqrt(L * V / N), sympy.Max(V / m, 1), sympy.Min(d, N),
                 V ** sympy.Rational(3, 2) * sympy.log(V) ** 2, sympy.exp(-d / V)]:
        text, ok = tables.mathtext_or_plain(sympy.latex(expr))
        assert ok, (expr, sympy.latex(expr))
        assert text.startswith("$") and text.endswith("$")


def test_mathtext_falls_back_to_plain_text_for_unsupported_constructs():
    V, L = sympy.symbols("V L", positive=True)
    latex = sympy.latex(sympy.Piecewise((V, L > 1), (1, True)))
    assert "cases" in latex
    text, ok = tables.mathtext_or_plain(latex, plain="Piecewise(...)")
    assert not ok and text == "Piecewise(...)"


def test_term_table_renders_and_notes_fallback(tmp_path):
    fig = tables.term_table(SYNTHETIC_TERMS, title="token retrieval terms")
    texts = [t.get_text() for t in fig.texts]
    assert r"$\frac{N d \eta \gamma}{V}$" in texts
    assert any("(piecewise)  *" == t for t in texts)
    assert any("mathtext cannot draw" in t for t in texts)
    assert sum(t in ("derived-here", "paper-reported", "anchor") for t in texts) == len(SYNTHETIC_TERMS)
    _look(fig, tmp_path, "terms")


def test_term_table_without_latex_uses_theory_parser():
    # no 'latex' field: the expression goes through theory's whitelist parser, never sympify
    text = tables.term_latex({"name": "t", "role": "noise", "expr": "sqrt(L*V/N)", "provenance": "derived-here"})
    assert text is not None and "sqrt" in text
    hostile = tables.term_latex({"name": "t", "role": "noise", "expr": "__import__('os').system('x')",
                                 "provenance": "derived-here"})
    assert hostile is None


def test_heatmap_skips_failed_runs_and_rejects_all_failed():
    cells, points, fits = synthetic_line()
    broken = cells + [{"V": 64, "d": 8, "error": "nan loss", "line": "l", "seed": 0}]
    fig = figures.accuracy_heatmap(broken, points, fits)
    assert _n_cells(fig.axes[0]) == 5 * 9
    with pytest.raises(InputError, match="no cell has a value for 'accuracy'"):
        figures.accuracy_heatmap([{"V": 64, "d": 8, "error": "boom"}])


def test_fit_plot_keeps_points_in_view_when_band_is_wide():
    _, _, fits = synthetic_line()
    fit = dict(fits[0], confidence_band={"x": [4.0, 7.0], "lo": [-5.0, -5.0], "hi": [30.0, 30.0]})
    ax = figures.fit_plot(fit).axes[0]
    lo, hi = ax.get_ylim()
    ys = np.exp([p["y"] for p in fit["points"]])
    assert lo <= ys.min() and hi >= ys.max()
    assert hi / lo < 1e4  # the e^35-wide band does not set the scale


def test_the_verdict_is_in_the_panel_title_and_nothing_covers_the_data():
    """No box over the data: the verdict and its numbers are the panel's title, in the verdict's colour, and the
    legend sits outside the axes."""
    from recallkit.reports.overlap import find_overlaps
    from recallkit.reports.style import VERDICT_COLOURS

    _, _, fits = synthetic_line()
    fig = figures.fit_plot(dict(fits[0], verdict="consistent", delta=0.25))
    ax = fig.axes[0]
    assert not ax.texts or all(t.get_bbox_patch() is None for t in ax.texts)
    assert "consistent" in ax.get_title() and "slope" in ax.get_title()
    assert ax.title.get_bbox_patch().get_facecolor()[:3] == pytest.approx(
        matplotlib.colors.to_rgb(VERDICT_COLOURS["consistent"]))
    assert find_overlaps(fig) == []


def test_the_capacity_plot_draws_the_constant_in_the_fits_own_form():
    """The capacity plot drew C N ln N whatever the fit's x; a pack of params ~ N is fitted on log N (C N)."""
    import math

    from recallkit.compare.assertions import fit_boundary_points
    from recallkit.empirics.records import BoundaryPoint
    from recallkit.reports.figures import capacity_plot

    points = [BoundaryPoint(experiment="e", line="l", scaling=None, threshold=0.99, seed=s, base="d", base_value=d,
                            size="N", values={"d": d, "N": n}, param_count=3.0 * n * (1 + 0.01 * s), largest=True)
              for s in (0, 1) for d, n in ((8, 40), (16, 150), (32, 600), (64, 2400))]
    for log_power, form in (("0", ": C N, C = 3."), ("1", ": C N ln N, C = ")):
        (fit,) = fit_boundary_points(points, {"l": {"slope": 1.0, "log_power": log_power}}, kind="max_capacity",
                                     base="d")
        fig = capacity_plot([fit.to_dict()], labels=["l"])
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert any(form in text for text in labels), labels
        xmin, xmax = fig.axes[0].get_xlim()
        assert xmin < 40 * 1.2 and xmax > 2400 / 1.2  # N on the axis, whichever x was fitted
        assert math.isfinite(xmin)

"""CLI: ``recallkit fit EXPERIMENT.toml`` - fitted exponents with both intervals, predictions, verdicts."""
from __future__ import annotations

from typing import Any, List, Optional

import typer

from recallkit.empirics.overrides import SET_HELP, parse_settings
from recallkit.empirics.records import CheckKey
from recallkit.fail_on import fail_on_verdicts, required_evidence
from recallkit.theory.errors import InputError

__all__ = ["format_table", "register", "threshold_text"]


def _interval(pair: Any) -> str:
    if not pair or pair[0] is None or pair[1] is None:
        return "-"
    return f"[{pair[0]:.3f}, {pair[1]:.3f}]"


def _number(value: Any, fmt: str = ".3f") -> str:
    return "-" if value is None else format(value, fmt)


def threshold_text(fit: dict) -> str:
    """A fit's threshold as written: ``0.1``, or ``0.5 x ceiling`` for a fraction of the instance's ceiling; for a
    law's check (no threshold) its metric against its variable, ``test_error against p``."""
    if fit.get("threshold") is None and fit.get("variable"):
        return f"{fit.get('metric')} against {fit['variable']}"
    return CheckKey.of(fit).threshold_text if fit.get("threshold") is not None else "-"


def _prediction_lines(f: dict) -> list[str]:
    """What a check was tested against, beside its verdict: every prediction, the base values it is taken over
    where a point is censored, each censored bound against the form, the system's note and the other readings."""
    compared = f.get("prediction_compared")
    if not compared:
        return []
    lines: list[str] = []
    parts = [f"{name} {f[key]:.3f}" for name, key in (("all terms", "predicted_slope_all_terms"),
                                                        ("all terms with Gaussian counts",
                                                         "predicted_slope_all_terms_gaussian_counts"),
                                                        ("finite-size", "predicted_slope_finite_size"),
                                                        ("realised grid", "predicted_slope_realised"),
                                                        ("asymptotic", "predicted_slope_asymptotic"))
             if f.get(key) is not None]
    lines.append(f"    predictions: {', '.join(parts)}; the verdict is against the {compared} one; against "
                 f"the asymptotic one: {f.get('verdict_asymptotic')}")
    if f.get("unreached"):
        reached = f.get("predicted_slope_all_terms_reached_bases")
        lines.append(f"    unreached by the runs: {', '.join(map(str, f['unreached']))} (the prediction keeps them"
                     + (f"; over the reached ones alone it would be {reached:.3f}" if reached is not None else "")
                     + ")")
    for b in f.get("censored_against_all_terms") or []:
        lines.append(f"    censored at {b['base']}={b['base_value']}: the boundary is "
                     f"{'past' if b['past'] else 'below'} {b['size']}={b['bound']:g}; all terms put it at "
                     f"{b['size']}={b['predicted']:.4g}, "
                     + ("the same side" if b["agrees"] else "the other side (against the form)"))
    if f.get("prediction_note"):
        lines.append(f"    note: {f['prediction_note']}")
    if f.get("verdict_binding_terms") is not None:
        lines.append(f"    against the finite-size one (the binding terms alone): {f['verdict_binding_terms']}")
    if f.get("predicted_slope_within_ceiling") is not None:
        lines.append(f"    within the ceiling (the level as a fraction of each instance's ceiling, as if the "
                     f"ceiling were a cap): {f['predicted_slope_within_ceiling']:.3f}, "
                     f"{f.get('verdict_within_ceiling')}")
    if f.get("predicted_slope_conditional") is not None:
        read = " and ".join(f.get("conditional_reading_on") or ["measured quantities"])
        lines.append(f"    conditional reading (the same form on the judged runs' own {read}): "
                     f"{f['predicted_slope_conditional']:.3f}, {f.get('verdict_conditional')}")
    constants = f.get("finite_size_constants")
    if constants:
        lines.append("    finite-size constants: " + "; ".join(
            f"L={c['L']}: kappa' {c['kappa_prime']:.2f}, A {c['A']:.3f} ({c['source']})" for c in constants if c))
    return lines


def format_table(doc: dict) -> str:
    """The fits of one experiment as an aligned text table, with each verdict's reason below."""
    fits = doc["fits"]
    capacity = any(f.get("C") is not None for f in fits)
    alpha = fits[0]["alpha"] if fits else 0.05
    level = f"{100 * (1 - alpha):g}%"
    curve = any(f.get("method") == "curve" for f in fits)
    law = any(f.get("kind") == "law" for f in fits)
    header = ["line", "check" if law else "threshold", "points", "slope",
              f"{level} CI" + (" (seed curves)" if curve else " (HC3)"), f"{level} CI (bootstrap)", "tested prediction",
              "verdict", "evidence"]
    if capacity:
        header[-2:-2] = ["C", f"C {level} CI"]
    rows = []
    for f in fits:
        tested, asymptotic = f.get("predicted_slope_tested"), f.get("predicted_slope_asymptotic")
        predicted = "-" if tested is None else f"{tested:.3f} +- {f['delta']:g}"
        if tested is not None and asymptotic is not None and abs(tested - asymptotic) > 5e-4:
            predicted += f" (asymptotic {asymptotic:.3f})"
        row = [str(f["line"]), threshold_text(f),
               f"{f['n_points']}" + (f" (+{len(f['censored'])} cens.)" if f["censored"] else ""),
               _number(f["slope"]), _interval(f["slope_ci"]), _interval(f["slope_ci_bootstrap"]), predicted,
               f["verdict"], str(f.get("evidence") or "-")]
        if capacity:
            row[-2:-2] = [_number(f.get("C"), ".4g"), _interval(f.get("C_ci"))]
        rows.append(row)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = [f"{doc['experiment']} ({doc['preset']} preset, {doc['kind']}; x = {fits[0]['x'] if fits else '-'}, "
             f"y = {fits[0].get('y', 'log(param_count)') if fits else 'log(param_count)'}; store {doc['store']})"]
    sweep = doc.get("sweep") or {}
    if sweep.get("stored_runs"):
        listed = lambda key: ", ".join(f"{k} x{v}" for k, v in sweep.get(key, {}).items())  # noqa: E731
        lines.append(f"runs: {sweep['stored_runs']} stored; devices {listed('devices')}; threads {listed('threads')}; "
                     f"math path {listed('math_paths')}; torch {listed('torch_versions')}")
    if sweep.get("left_out"):  # stored rows that do not validate, left out of the fits
        lines.append(sweep["left_out"])
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)
    lines.append("")
    for index, f in enumerate(fits, 1):
        check = threshold_text(f) if f.get("kind") == "law" else f"threshold {threshold_text(f)}"
        lines.append(f"[{index}] {f['line']}, {check}: {f['verdict']}"
                     + (f" by {f['decided_by']}" if f.get("decided_by") else "") + f": {f['verdict_reason']}")
        if f.get("evidence"):
            lines.append(f"    evidence: {f['evidence']}: {f.get('evidence_reason')}")
        lines.extend(_prediction_lines(f))
        note = (f.get("bootstrap") or {}).get("note")
        if note:
            lines.append(f"    note: {note}")
        if f["censored"]:
            reasons = sorted({str(c.get("censor_reason")) for c in f["censored"]})
            lines.append(f"    censored ({len(f['censored'])} points, not fitted): {'; '.join(reasons)}")
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add ``recallkit fit`` to the root app."""

    @app.command("fit")
    def fit_command(
        experiment: str = typer.Argument(..., help="Experiment file (TOML) or a shipped experiment's name, e.g. assoc_memory_linear."),
        preset: str = typer.Option("quick", "--preset", help="Preset of the experiment file (quick | paper | ...)."),
        store: Optional[str] = typer.Option(
            None, "--store", help="Results store (SQLite). Default: $RECALLKIT_STORE or results/recallkit.db."),
        run: bool = typer.Option(
            True, "--run/--no-run",
            help="Train the runs the store lacks (default), or only replay what it holds (missing runs -> censored)."),
        threshold: Optional[List[float]] = typer.Option(
            None, "--threshold", help="Fit only this threshold (repeatable). Default: all of the preset's."),
        delta: Optional[float] = typer.Option(
            None, "--delta", help="Equivalence margin on the slope. Default: verdict.delta in the experiment file, else 0.25."),
        alpha: Optional[float] = typer.Option(
            None, "--alpha", help="Test level. Default: verdict.alpha in the experiment file, else 0.05."),
        device: str = typer.Option("auto", "--device", help="Device for runs the store lacks: auto | cpu | cuda | cuda:N."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout and nothing else."),
        set_fields: Optional[List[str]] = typer.Option(None, "--set", help=SET_HELP),
        fail_on: Optional[List[str]] = typer.Option(
            None, "--fail-on", help="Exit 1 when any fit's or claim's verdict is this (inconsistent | inconclusive; repeatable or "
                                    "comma-separated), after printing the table: for CI."),
        require: Optional[str] = typer.Option(
            None, "--require", help="Exit 1 when any check's evidence is weaker than this (confirmatory | "
                                    "conditional), after printing the table: see recallkit freeze."),
    ) -> None:
        """Fit log(param_count) against log(base) - or, for capacity experiments, against log(N ln N) where the pack
        predicts N log N parameters (else log N) -
        for every line and threshold; print slope, HC3 and bootstrap intervals, prediction and verdict
        (consistent / inconsistent / inconclusive, with the numbers that decided it). Capacity
        experiments also get C in param_count = C * N ln N (or C * N) with its interval."""
        wanted = fail_on_verdicts(fail_on)  # a bad value is one line before the fits are imported
        required = required_evidence(require)
        fields = parse_settings(set_fields)
        if delta is not None and not delta > 0:
            raise InputError(f"--delta: expected a positive number (margin on the slope), got {delta}")
        if alpha is not None and not 0 < alpha < 0.5:
            raise InputError(f"--alpha: expected a number in (0, 0.5), got {alpha}")
        from recallkit.cli_fit_run import fit  # the fits and the pipeline: scipy, matplotlib and sympy, about 1.5 s

        fit(experiment, preset=preset, store=store, run=run, threshold=threshold, delta=delta, alpha=alpha,
            device=device, as_json=as_json, wanted=wanted, required=required, settings=fields)

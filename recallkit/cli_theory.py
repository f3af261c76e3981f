"""``recallkit theory list|show|regions|bounds|predict``: the symbolic theory engine on the command line.

PACK is a registered pack's name (``recallkit theory list``) or a path to your own TOML file (:data:`PACK_HELP`).
``--json`` prints exactly one JSON document on stdout. matplotlib is imported only when a figure
is written (``regions --out``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

# the package loads its submodules on first use: sympy (about 0.3 s) only when a command computes, not for --help
from recallkit import theory
from recallkit.cli_output import json_text
from recallkit.empirics.files import check_writable
from recallkit.theory.errors import InputError

__all__ = ["bounds_command", "list_command", "PACK_HELP", "predict_command", "regions_command", "register",
           "show_command"]

# A plugin's root holds its package folder, named like its pack: the name must still mean the registered pack
# (theory.pack.resolve_pack_path decides; this says how).
PACK_HELP = ("A registered pack's name (see 'recallkit theory list') or a path to a TOML file: a registered pack's "
             "name wins over a file or folder of that name in the working directory; ./NAME, DIR/NAME or NAME.toml "
             "is a path; a name no pack is registered by is a file of that name.")


theory_app = typer.Typer(
    name="theory",
    help=(
        "Theorem packs: terms with provenance, phase regions of the dominant noise term, required "
        "parameter counts and predicted slopes. PACK is a registered pack's name (see 'list'), which wins over a file "
        "or folder of that name here, or a path to a TOML file (./NAME, DIR/NAME or NAME.toml)."
    ),
    no_args_is_help=True,
)


def _echo_json(document: dict) -> None:
    typer.echo(json_text(document, indent=2, sort_keys=False))


@theory_app.command("list")
def list_command(json_output: bool = typer.Option(False, "--json", help="Print one JSON document.")) -> None:
    """List the shipped packs with their titles."""
    rows = []
    for name in theory.list_packs():
        try:
            pack = theory.load_pack(name)
            rows.append({"name": name, "title": pack.title, "reference": pack.reference,
                         "terms": len(pack.terms), "error": None})
        except theory.RecallkitError as exc:  # one broken pack must not hide the others
            rows.append({"name": name, "title": "", "reference": "", "terms": 0, "error": str(exc)})
    if json_output:
        _echo_json({"packs": rows})
        return
    width = max((len(row["name"]) for row in rows), default=4)
    for row in rows:
        text = f"(invalid: {row['error']})" if row["error"] else row["title"]
        typer.echo(f"{row['name']:<{width}}  {text}")


@theory_app.command("show")
def show_command(
    pack_name: str = typer.Argument(..., metavar="PACK", help=PACK_HELP),
    latex: bool = typer.Option(False, "--latex", help="Print expressions as LaTeX."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Show a pack: variables, parameter count, terms with provenance, lower bounds, facts."""
    pack = theory.load_pack(pack_name)
    if json_output:
        _echo_json(pack.to_dict())
        return

    import sympy as sp  # the pack above loaded it; here so that --help does not

    def render(expr: sp.Expr) -> str:
        return sp.latex(expr) if latex else sp.sstr(expr)

    typer.echo(f"{pack.name}: {pack.title}")
    if pack.reference:
        typer.echo(f"  reference: {pack.reference}")
    if pack.description:
        typer.echo(f"  {pack.description}")
    typer.echo(f"  variables: {', '.join(pack.variables)}"
               + (f"; constants: {', '.join(pack.constants)}" if pack.constants else ""))
    for variable in pack.declared_variables:  # the pack's own, beside the built-in vocabulary
        typer.echo(f"    {variable.name} ({variable.domain}): {variable.meaning}")
    if pack.terms:  # a pack of laws only has no condition, nor a size to solve it for
        typer.echo(f"  base: {pack.base}   size: {pack.size}   param_count: {render(pack.param_count)}")
    if pack.domain:
        typer.echo(f"  domain: {'; '.join(pack.domain)}")
    if pack.terms:
        typer.echo("  success: signal >= C * noise for every noise term")
        typer.echo("terms:")
    width = max((len(term.name) for term in pack.terms), default=0)
    for term in pack.terms:
        _echo_term(f"{term.name:<{width}}  {term.role:<6}  {render(term.expr):<28}", term, width)
    lower = [bound for bound in pack.lower_bounds if bound.is_lower_bound]
    failures = [bound for bound in pack.lower_bounds if not bound.is_lower_bound]
    if lower:
        typer.echo(f"lower bounds on {render(pack.param_count)}, each over the class it names:")
    for heading, bounds in ((None, lower), ("failure conditions of one estimator (not lower bounds: each bounds "
                                            f"{render(pack.param_count)} for its estimator only):", failures)):
        if heading and bounds:
            typer.echo(heading)
        for bound in bounds:
            typer.echo(f"  {bound.name}  {render(bound.expr)}  [{bound.provenance}]")
            typer.echo(f"    class: {bound.bound_class}" if bound.is_lower_bound else f"    estimator: {bound.estimator}")
            if bound.reference:
                typer.echo(f"    ref: {bound.reference}")
            if bound.note:
                typer.echo(f"    note: {bound.note}")
    for law in pack.laws:
        _echo_law(law, render)
    if pack.facts:
        typer.echo("facts:")
        for fact in pack.facts:
            typer.echo(f"  - [{fact.provenance}] {fact.text}")
    if pack.default_scaling is not None:
        typer.echo(f"defaults: --scaling \"{pack.default_scaling}\" --axes {','.join(pack.default_axes or [])}")


def _echo_law(law, render) -> None:
    typer.echo(f"law {law.name}: {law.metric} ~ {law.combine} of")
    if law.reference:
        typer.echo(f"  ref: {law.reference}")
    if law.note:
        typer.echo(f"  note: {law.note}")
    width = max(len(term.name) for term in law.terms)
    for term in law.terms:
        _echo_term(f"{term.name:<{width}}  {render(term.expr):<28}", term, width)


def _echo_term(head: str, term, width: int) -> None:
    """A written term's line (``head``, then its provenance) and its reference and note under it."""
    typer.echo(f"  {head}  [{term.provenance}]")
    for label, text in (("ref", term.reference), ("note", term.note)):
        if text:
            typer.echo(f"  {'':<{width}}  {label}: {text}")


def _law_text(law: dict) -> list[str]:
    """A law along a line: per region its dominant term, the metric's power of the base, and its exponent against
    each variable of the law (the others fixed), which is what a measurement against that variable tests."""
    if "error" in law:
        return [f"law {law['law']} ({law['metric']}): no exponents along this line: {law['error']}"]
    base, axes = law["base"], law["axes"]
    lines = [f"law {law['law']} ({law['metric']}, {law['combine']}) along {law['scaling']}, base {base}:"]
    for region in law["regions"]:
        tied = f" (tied with {', '.join(region['tied_with'])})" if region["tied_with"] else ""
        if len(axes) == 1:
            (low,), (high,) = region["vertices"][0], region["vertices"][-1]
            lines.append(f"  region {region['dominant']}{tied}, {axes[0]} in [{low}, {high}]:")
        elif axes:
            lines.append(f"  region {region['dominant']}{tied}, vertices "
                         + ", ".join("(" + ", ".join(v) + ")" for v in region["vertices"]) + ":")
        else:
            lines.append(f"  dominant term {region['dominant']}{tied}:")
        against = ", ".join(f"{name}: {power['exponent']}"
                            + ("" if power["log_power"] == "0" else f" (log power {power['log_power']})")
                            for name, power in region["variables"].items())
        lines.append(f"    {law['metric']} ~ {theory.power_text(base, region['exponent'], region['log_power'])}"
                     f"   against {against}")
        lines.extend(f"    where {inequality}" for inequality in region["inequalities"])
    lines.extend(f"  note: {note}" for note in law["notes"])
    return lines


def _gap_text(base: str, gap: dict) -> str:
    """A gap to one entry of lower_bounds, saying what that entry covers (a class, or one estimator only)."""
    power = theory.power_text(base, gap["gap_exponent"], gap["gap_log_power"])
    if gap.get("kind", "lower-bound") == "lower-bound":
        return f"gap to lower bound {gap['name']}: {power}  (holds for {gap.get('class') or 'an unnamed class'})"
    return f"above the failure condition of one estimator {gap['name']} (not a lower bound): {power}"


def _diagram_text(document: dict) -> str:
    lines = [f"{document['pack']}: scaling {document['scaling']}; axes {', '.join(document['axis_labels'])}",
             f"  domain: {'; '.join(document['domain']) or '(box only)'}; box: "
             + ", ".join(f"{axis} in [{lo}, {hi}]" for axis, (lo, hi) in zip(document["axes"], document["box"]))]
    base, count = document["base"], document["param_count"]
    for region in document["regions"]:
        tied = f" (tied with {', '.join(region['tied_with'])})" if region["tied_with"] else ""
        lines.append(f"region {region['dominant']}{tied}:")
        lines.append(f"  required {count} ~ {theory.power_text(base, region['required_param_exponent'], region['log_power'])}")
        lines.append(f"  size {document['size']} ~ {theory.power_text(base, region['size_exponent'], region['size_log_power'])}")
        lines.append(f"  vertices: {', '.join('(' + ', '.join(v) + ')' for v in region['vertices'])}")
        for inequality in region["inequalities"]:
            lines.append(f"  where {inequality}")
        lines.extend(f"  {_gap_text(base, gap)}" for gap in region["lower_bound_gaps"])
        for piece in region.get("strongest_bound_gaps", []):
            where = f" where {'; '.join(piece['where'])}" if piece["where"] else ""
            lines.append(f"  gap to the strongest lower bound{where}: {piece['name']}: "
                         f"{theory.power_text(base, piece['gap_exponent'], piece['gap_log_power'])}")
        if region.get("strongest_bound_note"):
            lines.append(f"  note: {region['strongest_bound_note']}")
    for entry in document["feasibility"]:
        lines.append(f"feasible only where {entry['condition']} (term {entry['term']} does not depend on the size)")
    for check in document["corollary_check"]:
        if check["agrees"] is None:
            lines.append(f"corollary {check['region']}: not checked ({check['reason']})")
        else:
            verdict = "agrees" if check["agrees"] else f"DISAGREES ({check['reason']})"
            lines.append(f"corollary {check['region']}: stated {check['stated']}, computed {check['computed']}: {verdict}")
    for note in document["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


@theory_app.command("regions")
def regions_command(
    pack_name: str = typer.Argument(..., metavar="PACK", help=PACK_HELP),
    scaling: Optional[str] = typer.Option(None, "--scaling", help="e.g. 'N=V**a, L=V**c, m=d**2' (default: the pack's)."),
    axes: Optional[str] = typer.Option(None, "--axes", help="One or two free exponents, e.g. 'a,c' (default: the pack's)."),
    box: Optional[str] = typer.Option(None, "--box", help="Drawing window, e.g. 'a=1:2,c=0:1'."),
    domain: Optional[list[str]] = typer.Option(None, "--domain", help="Extra constraint, e.g. 'a <= 1.5' (repeatable)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the phase diagram (.pdf, .svg or .png), cut to the drawing."),
    line: Optional[list[str]] = typer.Option(
        None, "--line", help="Draw an experiment line on the diagram, e.g. 'N=V**1.5, L=V**0.5' (repeatable; needs --out)."),
    law: Optional[str] = typer.Option(
        None, "--law", help="Draw this law's regions: where each of its terms dominates (default for a pack of laws "
                            "only: its law)."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document (RegionDiagram.to_dict)."),
) -> None:
    """Exact phase regions: where each noise term dominates and the parameter count it requires; for a law (a pack
    of laws only, or --law), where each of its terms dominates and the metric's power of the base there."""
    pack = theory.load_pack(pack_name)
    if out is not None and out.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise InputError(f"--out: expected a .pdf, .svg or .png file name, got {str(out)!r}")
    if line and out is None:
        raise InputError("--line: draws on the figure; give --out FILE.pdf|.svg|.png too")
    if scaling is None and pack.default_scaling is None:
        raise InputError(f"--scaling: pack {pack.name} has no [defaults] scaling; give one, e.g. 'N=V**a, L=V**c'")
    if out is not None:  # before the regions are computed: a figure that cannot be written is known now
        check_writable(out.parent, f"--out {out}: the folder")
    if law is not None or (pack.laws and not pack.terms):
        _law_regions(pack, law, scaling, axes, box, domain, out, line, json_output)
        return
    diagram = theory.compute_regions(pack, scaling, axes, box=theory.parse_box(box) if box else None,
                                     domain=domain or ())
    document = diagram.to_dict()
    if out is not None:
        _draw(document, theory.line_points(pack, diagram, [(text, text) for text in line or ()]), out)
    if json_output:
        _echo_json(document)
    else:
        typer.echo(_diagram_text(document))
    if diagram.corollary_agrees is False:
        typer.echo(f"warning: {pack.name}: the hand-stated corollary disagrees with the computed regions", err=True)


def _draw(document: dict, placed: tuple[list, list[str]], out: Path) -> None:
    """``regions --out``: the diagram (a condition's or a law's) with the ``--line`` lines placed on it."""
    from recallkit.reports import paper, phase  # matplotlib (about 0.5 s): only a figure needs it, not the text

    lines, notes = placed
    if notes:  # a line the diagram cannot show is a mistake in the command, not a footnote
        raise InputError(f"--line: {notes[0]}")
    paper.save_paper_figure(phase.draw_phase_diagram(document, lines=lines), out)
    typer.echo(f"wrote {out}", err=True)


def _law_regions(pack, law: str | None, scaling: str | None, axes: str | None, box: str | None,
                 domain: list[str] | None, out: Path | None, line: list[str] | None, json_output: bool) -> None:
    """``regions`` for a law: its regions over the free exponents, drawn like a phase diagram with ``--out``."""
    document = theory.law_regions(pack, law, scaling, axes, box=theory.parse_box(box) if box else None,
                                  domain=domain or ())
    if out is not None:
        _draw(document, theory.law_line_points(pack, document, [(text, text) for text in line or ()]), out)
    if json_output:
        _echo_json(document)
    else:
        typer.echo("\n".join(_law_text(document)))


def _bounds_document(pack, diagram: dict) -> dict:
    """The gap table of ``bounds``: per region the upper bound and the gap to the strongest lower bound there."""
    return {
        "pack": diagram["pack"], "scaling": diagram["scaling"], "axes": diagram["axes"],
        "axis_labels": diagram["axis_labels"], "base": diagram["base"], "param_count": diagram["param_count"],
        "regions": [{"region": region["dominant"], "tied_with": region["tied_with"],
                     "required_exponent": region["required_param_exponent"], "required_log_power": region["log_power"],
                     "vertices": region["vertices"], "strongest": region["strongest_bound_gaps"],
                     "note": region["strongest_bound_note"]} for region in diagram["regions"]],
        "lower_bounds": [bound.to_dict() for bound in pack.lower_bounds if bound.is_lower_bound],
        "failure_conditions": [bound.to_dict() for bound in pack.lower_bounds if not bound.is_lower_bound],
    }


def _bounds_text(document: dict) -> str:
    base, count = document["base"], document["param_count"]
    lines = [f"{document['pack']}: gap of the upper bound to the strongest lower bound, region by region",
             f"  scaling {document['scaling']}; axes {', '.join(document['axis_labels'])}",
             f"  columns: region (dominant noise), required {count} (upper bound), strongest lower bound over a "
             f"class there, gap = required / bound"]
    for region in document["regions"]:
        required = theory.power_text(base, region["required_exponent"], region["required_log_power"])
        if not region["strongest"]:
            lines.append(f"{region['region']}  {required}  {region['note'] or 'no lower bound over a class'}")
        for piece in region["strongest"]:
            where = f"  where {'; '.join(piece['where'])}" if piece["where"] else ""
            lines.append(f"{region['region']}  {required}  {piece['name']} "
                         f"{theory.power_text(base, piece['exponent'], piece['log_power'])}  "
                         f"gap {theory.power_text(base, piece['gap_exponent'], piece['gap_log_power'])}{where}")
    lines.append("lower bounds (the class each holds for):" if document["lower_bounds"]
                 else "lower bounds: none over a class in this pack")
    lines.extend(f"  {bound['name']}: {bound['class']}" for bound in document["lower_bounds"])
    if document["failure_conditions"]:
        lines.append("failure conditions of one estimator (not lower bounds; this table takes no gap to them):")
        lines.extend(f"  {bound['name']}: {bound['estimator']}" for bound in document["failure_conditions"])
    return "\n".join(lines)


@theory_app.command("bounds")
def bounds_command(
    pack_name: str = typer.Argument(..., metavar="PACK", help=PACK_HELP),
    scaling: Optional[str] = typer.Option(None, "--scaling", help="e.g. 'N=V**a, L=V**c' (default: the pack's)."),
    axes: Optional[str] = typer.Option(None, "--axes", help="One or two free exponents, e.g. 'a,c' (default: the pack's)."),
    box: Optional[str] = typer.Option(None, "--box", help="Window, e.g. 'a=1:2,c=0:1'."),
    domain: Optional[list[str]] = typer.Option(None, "--domain", help="Extra constraint, e.g. 'a <= 1.5' (repeatable)."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Per region: the required count (upper bound), the strongest lower bound over a class there, and the gap."""
    pack = theory.load_pack(pack_name)
    if scaling is None and pack.default_scaling is None:
        raise InputError(f"--scaling: pack {pack.name} has no [defaults] scaling; give one, e.g. 'N=V**a, L=V**c'")
    diagram = theory.compute_regions(pack, scaling, axes, box=theory.parse_box(box) if box else None,
                                     domain=domain or ())
    document = _bounds_document(pack, diagram.to_dict())
    if json_output:
        _echo_json(document)
    else:
        typer.echo(_bounds_text(document))


@theory_app.command("predict")
def predict_command(
    pack_name: str = typer.Argument(..., metavar="PACK", help=PACK_HELP),
    scaling: str = typer.Option(..., "--scaling", help="A fully specified line, e.g. 'N=V*log(V), L=V**0.5, m=d**2'."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document (Prediction.to_dict)."),
) -> None:
    """Predicted slope of log(parameter count) against log(base) along a line, with the binding term; and each law's
    dominant term and exponents (a pack of laws only takes a scaling with free exponents too: one region each)."""
    pack = theory.load_pack(pack_name)
    if not pack.terms:
        document = {"pack": pack.name, "scaling": scaling, "laws": theory.predict_laws(pack, scaling)}
        if json_output:
            _echo_json(document)
        else:
            typer.echo("\n".join(line for law in document["laws"] for line in _law_text(law)))
        return
    document = theory.predict(pack, scaling).to_dict()
    if json_output:
        _echo_json(document)
        return
    base = document["base"]
    tied = f" (tied with {', '.join(document['tied_with'])})" if document["tied_with"] else ""
    typer.echo(f"{document['pack']} along {document['scaling']}:")
    typer.echo(f"  dominant term: {document['dominant']}{tied}")
    typer.echo(f"  required {document['param_count']} ~ {theory.power_text(base, document['slope_exact'], document['log_power'])}")
    typer.echo(f"  predicted slope of log({document['param_count']}) vs log({base}): {document['slope_exact']} "
               f"(= {document['slope']:.4g}); log-power correction: {document['log_power']}")
    typer.echo(f"  size {document['size']} ~ {theory.power_text(base, document['size_exponent'], document['size_log_power'])}")
    for gap in document["lower_bounds"]:
        typer.echo(f"  {_gap_text(base, gap)}")
    strongest = document.get("strongest_bound")
    if strongest is not None:
        typer.echo(f"  gap to the strongest lower bound: {strongest['name']}: "
                   f"{theory.power_text(base, strongest['gap_exponent'], strongest['gap_log_power'])}")
    for name in document["infeasible"]:
        typer.echo(f"  warning: term {name} beats the signal at every size along this line", err=True)
    for law in document.get("laws", ()):
        typer.echo("\n".join(_law_text(law)))


def register(app: typer.Typer) -> None:
    """Add ``recallkit theory ...`` to the root app."""
    app.add_typer(theory_app, name="theory")

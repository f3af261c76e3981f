"""``recallkit report``: the main job (theory -> sweeps -> fits -> verdicts -> PDF)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, List, Mapping, Optional

import typer

from recallkit import registry
from recallkit.cli_sweep import MAX_PROCESSES, MAX_THREADS
from recallkit.empirics import cost
from recallkit.empirics.overrides import SET_HELP, parse_settings
from recallkit.fail_on import evidence_short, fail_on_verdicts, required_evidence, verdicts_matching
from recallkit.report_replay import replayed_files
from recallkit.report_settings import ReportSettings
from recallkit.theory.errors import InputError

__all__ = ["parse_system_options", "PROBES_OPTION", "register", "report"]

# --probes/--no-probes: the shorthand, kept from before report options were the systems' own
PROBES_OPTION = ("token_retrieval", "probes")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
OPTION_HELP = ("A system's own report option, SYSTEM.NAME=VALUE (repeatable), e.g. token_retrieval.probes=false; "
               "each system lists its options in docs/adding-a-system.md.")


def register(app: typer.Typer) -> None:
    app.command("report")(report)


def report(
    experiments: Optional[List[str]] = typer.Argument(
        None, help="Experiment files (or shipped names such as assoc_memory_linear); default: the shipped quick set."),
    out: Path = typer.Option(Path("reports/out"), "--out", help="Folder for the PDF, figures/ and summary.json."),
    preset: str = typer.Option("quick", "--preset", help="Preset of every experiment: quick (this CPU) or paper."),
    store: Optional[Path] = typer.Option(
        None, "--store", help="Results store (SQLite); default $RECALLKIT_STORE or results/recallkit.db. Reused runs are not retrained."),
    executor: str = typer.Option("local", "--executor", help="local (in-process batched engine) or dask."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler address tcp://HOST:PORT."),
    dask_local: Optional[int] = typer.Option(None, "--dask-local", min=1, max=MAX_PROCESSES, help="Start a Dask LocalCluster with N workers."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or cuda:N (default: cuda when present, else cpu)."),
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1, max=MAX_PROCESSES, help="local executor: processes training at once (default: one per usable core); the numbers do not depend on it."),
    threads: int = typer.Option(1, "--threads", min=1, max=MAX_THREADS, help="torch threads per process (1 is fastest for these small models on a shared CPU)."),
    set_fields: Optional[List[str]] = typer.Option(None, "--set", help=SET_HELP + "; a system's runner experiment runs "
                                                                               "as written"),
    options: Optional[List[str]] = typer.Option(None, "--option", help=OPTION_HELP),
    probes: Optional[bool] = typer.Option(None, "--probes/--no-probes", help="Shorthand for --option token_retrieval.probes=true/false: token retrieval's term probes and gradient-access check, when the report has a token-retrieval experiment. Default: in the main job (no experiment named), not in a report of named experiments."),
    png: bool = typer.Option(False, "--png", help="Also write each page as PNG under figures/ (PDF only by default)."),
    jobs: Optional[int] = typer.Option(
        None, "--jobs", min=1, max=MAX_PROCESSES, help="Processes drawing the pages (default: one per core this process may use, none for a few pages)."),
    redraw: bool = typer.Option(
        False, "--redraw", help="Draw every page, even those the previous report in --out or the page cache ($RECALLKIT_CACHE, "
                        "else ~/.cache/recallkit; off to disable) holds for the same input and code."),
    fail_on: Optional[List[str]] = typer.Option(
        None, "--fail-on", help="Exit 1 when any check's verdict is this (inconsistent | inconclusive; repeatable or "
                                "comma-separated), after writing the report: for CI."),
    require: Optional[str] = typer.Option(
        None, "--require", help="Exit 1 when any check's evidence is weaker than this (confirmatory | conditional): "
                                "a verdict is confirmatory only when its prediction was frozen (recallkit freeze) "
                                "before its runs and reads nothing measured on them."),
    max_cost: Optional[str] = typer.Option(
        None, "--max-cost", help="Refuse training estimated above this much compute over the whole report, e.g. 2h, "
                                 "30m or inf (default 2h, or $RECALLKIT_MAX_COST); searches are priced round by round."),
) -> None:
    """Run the quick preset of the shipped experiments end to end and write reports/out/recallkit-report.pdf.

    Trains only what the results store lacks, fits exponents with confidence intervals, gives a
    verdict per experiment and threshold, and writes the PDF (with an outline and a contents page),
    every page alone as PDF (and PNG with --png) under figures/, and summary.json. Pages unchanged since
    the previous report in --out are reused, not redrawn. Progress goes to stderr; the last lines say
    where the report is. With --fail-on, exit 1 when a verdict matches."""
    limit = cost.max_cost_allowed(max_cost)
    if workers is not None and workers > 1 and executor != "local":
        raise InputError("--workers: only with --executor local (a Dask cluster has its own workers)")
    wanted = fail_on_verdicts(fail_on)
    required = required_evidence(require)
    fields = parse_settings(set_fields)
    system_options = parse_system_options(options, probes)
    settings = ReportSettings(experiments=[Path(e) for e in (experiments or [])], out_dir=out, preset=preset,
                              store=store, executor=executor, scheduler=scheduler, dask_local=dask_local,
                              device=device, threads=threads, png=png, jobs=jobs, redraw=redraw, workers=workers,
                              settings=fields, system_options=system_options)
    pdf = replayed_files(settings)
    if pdf is not None:  # unchanged since the report it wrote there: nothing to compute, nothing to draw
        typer.echo("report unchanged (same settings, store, code and environment; its files as written): nothing "
                   "recomputed", err=True)
        if report_outcome(pdf, wanted, required)[1]:
            raise typer.Exit(1)
        return
    from recallkit.cli_report_run import run  # the whole pipeline: matplotlib, scipy and sympy, about 1.5 s

    run(settings, experiments or [], limit=limit, wanted=wanted, required=required)




def parse_system_options(given: Optional[List[str]], probes: Optional[bool] = None) -> dict[str, dict[str, Any]]:
    """``--option SYSTEM.NAME=VALUE`` values (and the ``--probes/--no-probes`` shorthand) as
    ``ReportSettings.system_options``, each checked against the options its system declares: one InputError line
    naming the flag and what it expects otherwise. An option given twice keeps its last value."""
    try:
        declared = registry.report_options()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    found: dict[str, dict[str, Any]] = {}
    for text in given or ():
        system, name, value = _parsed_option(text, declared)
        found.setdefault(system, {})[name] = value
    if probes is not None:
        system, name = PROBES_OPTION
        if name in found.get(system, {}) and found[system][name] is not probes:
            raise InputError(f"--{'' if probes else 'no-'}probes: it sets --option {system}.{name}="
                             f"{str(probes).lower()}, which --option gives the other value; give one of them")
        if name not in declared.get(system, {}):
            raise InputError(f"--{'' if probes else 'no-'}probes: expected a registered {system} system, which "
                             f"declares the report option {name}")
        found.setdefault(system, {})[name] = probes
    # sorted, so that the same options give the same settings (the report's step cache is keyed by them)
    return {system: dict(sorted(values.items())) for system, values in sorted(found.items())}


def _parsed_option(text: str, declared: Mapping[str, Mapping[str, registry.ReportOption]]) -> tuple[str, str, Any]:
    key, equals, raw = text.partition("=")
    system, dot, name = key.strip().partition(".")
    if not equals or not dot or not system or not name:
        raise InputError(f"--option: expected SYSTEM.NAME=VALUE (e.g. token_retrieval.probes=false), got {text!r}")
    if system not in declared:
        raise InputError(f"--option {key}: expected a system with report options "
                         f"({', '.join(declared) or 'none is registered'}), got {system!r}")
    options = declared[system]
    if name not in options:
        raise InputError(f"--option {key}: expected one of {system}'s report options ({', '.join(options)}), "
                         f"got {name!r}")
    return system, name, _option_value(key, raw.strip(), options[name].type)


def _option_value(key: str, raw: str, kind: type) -> Any:
    if kind is bool:
        if raw.lower() in _TRUE + _FALSE:
            return raw.lower() in _TRUE
        raise InputError(f"--option {key}: expected true or false, got {raw!r}")
    try:
        return kind(raw)
    except (TypeError, ValueError):
        raise InputError(f"--option {key}: expected {'an' if kind is int else 'a'} "
                         f"{getattr(kind, '__name__', kind)}, got {raw!r}") from None


def report_outcome(pdf: Path, wanted: Any, required: Any) -> tuple[dict, bool]:
    """Say where the report is, and print the --fail-on and --require lines its summary calls for: (the summary,
    whether either matched, for exit 1)."""
    typer.echo(f"report: {pdf}")
    typer.echo(f"summary: {pdf.parent / 'summary.json'}")
    summary = json.loads((pdf.parent / "summary.json").read_text())
    matching = verdicts_matching(summary.get("entries", []), wanted) if wanted else None
    if matching:
        typer.echo(matching, err=True)
    short = evidence_short(summary.get("entries", []), required)
    if short:
        typer.echo(short, err=True)
    return summary, bool(matching or short)

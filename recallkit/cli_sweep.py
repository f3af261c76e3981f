"""``recallkit sweep`` (train what an experiment's search needs) and ``recallkit results`` (what the store holds).

The store defaults to ``results/recallkit.db`` under the current directory (or ``$RECALLKIT_STORE``).
Progress goes to stderr; ``--json`` prints one JSON document on stdout and nothing else.
"""
from __future__ import annotations

import statistics
import sys
from typing import List, Optional

import typer

from recallkit.cli_output import RunFailures, json_text, raise_if_failed, run_failures
from recallkit.empirics import cost
from recallkit.empirics.device import resolve_device
from recallkit.empirics.executors import check_dask, make_executor, usable_cores
from recallkit.empirics.overrides import SET_HELP, FieldSettings, parse_settings
from recallkit.empirics.store import ResultStore, default_store_path
from recallkit.interrupts import watch_store
from recallkit.theory.errors import InputError

__all__ = ["MAX_PROCESSES", "MAX_THREADS", "register", "STORE_HELP"]


STORE_HELP = "results store (SQLite); default $RECALLKIT_STORE or results/recallkit.db"
# --threads: a fixed cap, not this machine's core count, because the count is recorded with every row and the
# float reductions may depend on it: a row trained with many threads on a large machine must stay reproducible
# on a small one. 1024 is above the hardware threads of the largest common servers (2 sockets x 192 cores x 2);
# far beyond it torch starts threads until the process dies (exit 126 or a segfault), not a usable error.
MAX_THREADS = 1024
# --workers, --jobs, --dask-local: each process imports torch (hundreds of MB) and computes on its own, so more
# than a few per usable core only share the same cores at the cost of their memory, and thousands make fork fail.
MAX_PROCESSES = 4 * usable_cores()


def _grid_cells(result) -> list[str]:
    """A grid's cells as an aligned table: line, base, size, the number of seeds with a value, and the mean
    over them of the metric each line's thresholds are on (a run that failed has none)."""
    exp = result.experiment
    metric_of = {ln.label: ln.metric or exp.metric for ln in exp.lines}
    cells: dict[tuple, list[float]] = {}
    for run in result.runs:
        key = (run.line, run.base_value, run.size_value)
        value = run.measured.get(metric_of.get(run.line, exp.metric))
        cells.setdefault(key, [])
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            cells[key].append(float(value))
    metrics = sorted(set(metric_of.values()) or {exp.metric})
    header = ["line", exp.base, exp.size, "seeds", f"mean {metrics[0] if len(metrics) == 1 else 'metric'}"]
    rows = [[str(line), f"{base:g}", f"{size:g}", str(len(values)),
             f"{statistics.fmean(values):.4f}" if values else "-"]
            for (line, base, size), values in sorted(cells.items(), key=lambda kv: (
                list(metric_of).index(kv[0][0]) if kv[0][0] in metric_of else len(metric_of), kv[0][1], kv[0][2]))]
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    out = [f"{len(result.runs)} runs stored"]
    if rows:
        out.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
        out.append("  ".join("-" * w for w in widths))
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    if len(metrics) > 1:
        out.append("metric per line: " + "; ".join(f"{k}: {v}" for k, v in metric_of.items()))
    return out


def _law_points(result) -> list[str]:
    """A law experiment's runs: per line, the metric at each base value (median over the seeds)."""
    exp = result.experiment
    out = []
    for index, line in enumerate(exp.lines):
        cells = []
        for b in exp.values_of(index):
            points = [p for p in result.points if p.line == line.label and p.base_value == b]
            values = [p.metric_value for p in points if not p.censored and p.metric_value is not None]
            censored = sum(p.censored for p in points)
            shown = f"{statistics.median(values):.4g}" if values else "-"
            cells.append(f"{exp.base}={b}: {shown}" + (f" ({censored} censored)" if censored else ""))
        out.append(f"line {line.label}")
        out.append(f"  {exp.metric_of(index)} (median over {len(exp.seeds)} seeds):  " + ";  ".join(cells))
    return out


def _size_text(value: float) -> str:
    """A found size as a reader wants it: a whole number as it is, an interpolated one (a curve's crossing) to three
    significant figures below 100 and to the unit above (45.3, 724), never six figures."""
    if float(value).is_integer():
        return f"{int(value)}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"


def _format_points(result) -> list[str]:
    """A compact table: one line per (line, threshold), the found size per base value (median over seeds)."""
    exp = result.experiment
    if exp.kind == "law":
        return _law_points(result)
    out = []
    lines = list(dict.fromkeys(p.line for p in result.points))
    # a fraction of the ceiling is its own check, even at the value of an absolute threshold
    thresholds = list(dict.fromkeys((p.threshold, bool(getattr(p, "relative", False))) for p in result.points))
    if exp.kind == "grid":
        out += _grid_cells(result)
    index_of = {ln.label: i for i, ln in enumerate(exp.lines)}
    for line in lines:
        out.append(f"line {line}")
        for t, relative in thresholds:
            cells = []
            for b in exp.values_of(index_of[line]) if line in index_of else exp.base_values:
                pts = [p for p in result.points if p.line == line and p.threshold == t and p.base_value == b
                       and bool(getattr(p, "relative", False)) == relative]
                values = [p.size_value for p in pts if not p.censored and p.size_value is not None]
                censored = sum(p.censored for p in pts)
                shown = _size_text(statistics.median(values)) if values else "-"
                cells.append(f"{exp.base}={b}: {exp.size}={shown}" + (f" ({censored} censored)" if censored else ""))
            out.append(f"  {exp.metric} >= {t:g}{' x ceiling' if relative else ''}:  " + ";  ".join(cells))
    if result.violations:
        out.append(f"monotonicity violations along {exp.size}: {len(result.violations)} (see --json)")
        for v in result.violations[:5]:
            out.append(f"  {v.line} {exp.base}={v.base_value} seed={v.seed} t={v.threshold:g}: "
                       f"reached at {v.reached_at}, missed at {v.missed_at}")
    return out


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the root app."""

    @app.command("sweep")
    def sweep(
        experiment_file: str = typer.Argument(..., metavar="EXPERIMENT.toml", help="experiment file (TOML) or a shipped experiment's name, e.g. tr_fig2_attention_only (shipped ones live in systems/<name>/experiments/)"),
        preset: str = typer.Option("quick", "--preset", help="quick (this CPU, minutes) | paper (GPU/cluster) | any preset in the file"),
        store_path: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        executor_name: str = typer.Option("local", "--executor", help="local (in-process batched engine) | dask"),
        scheduler: Optional[str] = typer.Option(None, "--scheduler", help="dask scheduler address, tcp://HOST:PORT"),
        dask_local: Optional[int] = typer.Option(None, "--dask-local", min=1, max=MAX_PROCESSES, help="start a LocalCluster with N single-threaded worker processes"),
        device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
        max_runs: Optional[int] = typer.Option(None, "--max-runs", help="refuse an experiment that plans more trained models than this (default 200000, or $RECALLKIT_MAX_RUNS)"),
        workers: int = typer.Option(1, "--workers", min=1, max=MAX_PROCESSES, help="local executor: processes training at once (each with --threads threads); the numbers do not depend on it"),
        threads: int = typer.Option(1, "--threads", min=1, max=MAX_THREADS, help="torch CPU threads per engine call (default 1, as train and report use, so a stored row does not depend on which command trained it); recorded per row"),
        progress: bool = typer.Option(True, "--progress/--no-progress", help="tqdm progress over cells on stderr"),
        as_json: bool = typer.Option(False, "--json", help="print one JSON document (boundary points, probes, counts) on stdout"),
        max_cost: Optional[str] = typer.Option(None, "--max-cost", help=cost.MAX_COST_HELP + "; a search is priced round by round"),
        set_fields: Optional[List[str]] = typer.Option(None, "--set", help=SET_HELP),
    ) -> None:
        """Train the probes an experiment's search needs, reusing every result already in the store."""
        _sweep(experiment_file, preset, store_path, executor_name, scheduler, dask_local, device, max_runs, workers,
               threads, progress, as_json, max_cost, parse_settings(set_fields))

    @app.command("results")
    def results(
        experiment_file: str = typer.Argument(..., metavar="EXPERIMENT.toml", help="experiment file (TOML) or a shipped experiment's name"),
        preset: str = typer.Option("quick", "--preset", help="preset whose search is replayed from the store"),
        store_path: Optional[str] = typer.Option(None, "--store", help=STORE_HELP),
        as_json: bool = typer.Option(False, "--json", help="one JSON document: boundary points, probes, violations"),
        as_csv: bool = typer.Option(False, "--csv", help="CSV of every stored row of this experiment on stdout"),
        parquet: Optional[str] = typer.Option(None, "--parquet", help="write the rows to this Parquet file (needs pandas+pyarrow)"),
    ) -> None:
        """What the store holds for an experiment: its boundary points (replayed, nothing trained) and rows."""
        _results(experiment_file, preset, store_path, as_json, as_csv, parquet)


def _price_grid(planned, limit: float, device) -> None:
    """A grid's every cell is known before it starts: refuse it whole (the cells already stored counted too)
    before building 10**5 configs takes a minute, or say what it will cost when that is long."""
    work = cost.plan_estimate(planned, device)
    if work is None:
        return
    cost.refuse_above(work, limit, str(planned.path))
    if work.seconds >= cost.NOTE_SECONDS:
        print(f"{planned.path}: estimated {work.describe()}, under the {cost.format_duration(limit)} limit",
              file=sys.stderr)


def _sweep(experiment_file: str, preset: str, store_path: str | None, executor_name: str, scheduler: str | None,
           dask_local: int | None, device: str, max_runs: int | None, workers: int, threads: int, progress: bool,
           as_json: bool, max_cost: str | None = None, settings: FieldSettings = ()) -> None:
    """``recallkit sweep``: plan the experiment, train what its search needs (reusing the store), print points."""
    from recallkit.empirics.plan import plan  # experiments and packs: sympy, about 0.3 s, which --help must not load
    from recallkit.empirics.search import MISSING, run_sweep  # sympy through plan (about 0.3 s), as above
    if executor_name == "dask":
        check_dask()  # the extra not installed: one line before anything is planned
    limit = cost.max_cost_allowed(max_cost)
    if workers > 1 and executor_name != "local":
        raise InputError("--workers: only with --executor local (a Dask cluster has its own workers)")
    if max_runs is not None and max_runs < 1:
        raise InputError(f"--max-runs: expected a positive integer, got {max_runs}")
    planned = plan(experiment_file, preset, max_runs=max_runs, settings=settings)
    planned.search_experiment(" (its system runs it: recallkit report)")
    if executor_name == "local":
        resolve_device(device)  # fail now on --device cuda without CUDA, not after the first round
    _price_grid(planned, limit, resolve_device(device) if executor_name == "local" else device)
    executor = make_executor(executor_name, device=None if device == "auto" else device, threads=threads,
                             scheduler=scheduler, local_workers=dask_local, workers=workers)
    try:
        watch_store(store_path or default_store_path())
        with ResultStore(store_path or default_store_path()) as store, cost.budget(limit):
            result = run_sweep(planned, store, executor, progress=progress)
            failures = _run_failures(result, store, MISSING.message)
    except cost.CostTooHigh as exc:  # a round refused: name the file (the runs before it are in the store)
        raise cost.CostTooHigh(f"{planned.path}: {exc}") from None
    finally:
        executor.close()
    given = "".join(f" --set {field}={value!r}" for field, value in settings)
    summary = f"{planned.name} [{preset}{given}] on {result.executor}: {result.summary_line()}" + (
        f", {failures.failed} failed" if failures.failed else "") + f" in {result.wall_time_s:.1f} s"
    if as_json:
        doc = result.to_dict()
        if settings:
            doc["set"] = dict(settings)
        typer.echo(json_text(doc, sort_keys=True))
        print(summary, file=sys.stderr)  # after the document: when it cannot be written, the error is the one line
    else:
        for line in _format_points(result):
            typer.echo(line)
        typer.echo(summary)
    raise_if_failed(failures, f"{planned.name}: ")  # exit 3, after the points the other runs gave


def _run_failures(result, store: ResultStore, missing: str) -> RunFailures:
    """The sweep's runs that raised, or whose stored metrics hold a NaN or an infinity, of all its runs (a run not
    trained, whose error is ``missing``, is neither)."""
    runs = [(run.config_hash, run.error) for run in result.runs if run.error != missing]
    extra = max(0, int(result.failed or 0) - sum(error is not None for _, error in runs))
    return run_failures(runs, store, extra)


def _results(experiment_file: str, preset: str, store_path: str | None, as_json: bool, as_csv: bool,
             parquet: str | None) -> None:
    """``recallkit results``: the search replayed from the store (nothing trained), or the stored rows."""
    from recallkit.empirics.plan import plan  # sympy, about 0.3 s: see _sweep
    from recallkit.empirics.search import replay  # sympy, about 0.3 s: see _sweep
    if as_json and as_csv:
        raise InputError("--json/--csv: choose one")
    planned = plan(experiment_file, preset)
    experiment = planned.search_experiment(" (its system draws its own report pages)")
    with ResultStore(store_path or default_store_path(), readonly=True) as store:
        if parquet:
            store.to_parquet(parquet, experiment.name)
        if as_csv:
            sys.stdout.write(store.to_csv(experiment.name))
            return
        result = replay(planned, store)
        rows = store.count()
        versions = store.code_versions(experiment.name)
    if as_json:
        document = result.to_dict()
        for key in ("reused", "computed", "failed", "wall_time_s", "executor"):
            document.pop(key, None)
        document["stored_rows_total"] = rows
        typer.echo(json_text(document, sort_keys=True))
        return
    for line in _format_points(result):
        typer.echo(line)
    typer.echo(f"{experiment.name} [{preset}]: {result.reused} runs in the store, {result.missing} missing; "
               f"code versions: {', '.join(f'{k} ({v})' for k, v in versions.items()) or 'none'}")

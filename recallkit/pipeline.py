"""The main job: theory -> sweeps at the predicted points (reusing the store) -> fits -> verdicts -> PDF.

``run_report`` is what ``recallkit report`` calls. It sits on top of the four stages, so it is the
one place (with the CLI) allowed to import all of them. It names no system: it loops over the
registry (``recallkit.registry``). Each experiment is one step:

- a search experiment (``empirics.experiment`` schema) is swept (training only what the results
  store lacks) and fitted by ``compare.fit_experiment``; its heatmap cells are replayed from the
  store; the system that owns its pack may add its own verdicts (``System.search_judge``);
- a file with a table a system registered in ``System.runners`` runs through that runner;
- then each system's ``report_steps`` (e.g. a term-probe table).

A failure in one experiment is recorded in the summary and the report goes on (the failing step's
message is printed), so a long run is never lost to one bad file.
"""
from __future__ import annotations

import datetime as _dt
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

from recallkit import __version__, registry, theory
from recallkit.assertions import sweep_and_fit
from recallkit.compare.assertions import default_store_path
from recallkit.compare.claims import judge_claims, other_experiment_fits
from recallkit.empirics.device import resolve_device
from recallkit.empirics.executors import _ignore_sigint, make_executor, usable_cores
from recallkit.empirics.experiment import read_experiment_file
from recallkit.empirics.experiment import resolve_experiment as resolve
from recallkit.empirics.plan import Plan, plan, runner_of
from recallkit.empirics.provenance import code_version
from recallkit.empirics.store import DEFAULT_STORE, ResultStore
from recallkit.interrupts import watch_store
from recallkit.reports.pdf import ReportBuilder, check_output_dir, experiment_entry
from recallkit.theory.errors import InputError, RecallkitError
from recallkit.theory.scaling import to_monomial

DEFAULT_OUT = Path("reports/out")


@dataclass
class ReportSettings:
    experiments: list[Path]
    out_dir: Path = DEFAULT_OUT
    preset: str = "quick"
    store: Path | None = None
    executor: str = "local"
    scheduler: str | None = None
    dask_local: int | None = None
    device: str | None = None
    threads: int | None = 1
    probes: bool = True
    png: bool = False  # also each page as PNG under figures/
    jobs: int | None = None  # processes drawing pages (None: one per free core)
    workers: int | None = None  # local executor: processes training (None: one per usable core)
    redraw: bool = False  # draw every page even when the previous report in out_dir has it unchanged
    log: TextIO = field(default=sys.stderr)


def resolve_experiment(name: str | Path) -> Path:
    """A path as given, or a shipped experiment of any registered system by name (its file stem)."""
    return resolve(name)


def default_experiments() -> list[Path]:
    """The main job: each registered system's report experiments (quick preset), systems in run order."""
    try:
        return registry.default_report()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None


@dataclass
class StepContext:
    """What a system's runner or report step gets from the main job."""

    settings: "ReportSettings"
    store_path: Path
    executor: Any = None

    @property
    def log(self) -> TextIO:
        return self.settings.log

    @property
    def preset(self) -> str:
        return self.settings.preset

    pack_pieces = staticmethod(lambda pack, lines=(): pack_pieces(pack, list(lines)))


def runner_for(path: Path) -> tuple[Any, str] | None:
    """(system, runner reference) when the file is one of a system's own experiment kinds (a top-level
    table the system registered in ``System.runners``), else None: a plain search experiment."""
    return runner_of(read_experiment_file(path))


# ----------------------------------------------------------------------------- theory pieces
_REGIONS: dict[str, Any] = {}


def _regions(pack_name: str, pack) -> Any:
    """The pack's default phase diagram, computed once per process: several experiments of one report
    share a pack, and the symbolic computation took a second or more each time."""
    path = Path(str(getattr(pack, "path", "") or ""))
    # keyed by the file and its modification time: an edited pack is computed again
    key = f"{pack_name}\0{path}\0{path.stat().st_mtime_ns if path.is_file() else ''}"
    if key not in _REGIONS:
        try:
            _REGIONS[key] = theory.compute_regions(pack)
        except RecallkitError as exc:
            _REGIONS[key] = exc
    found = _REGIONS[key]
    if isinstance(found, RecallkitError):
        raise found
    return found


def pack_pieces(pack: Any, line_scalings: list[tuple[str, str]]) -> dict[str, Any]:
    """Terms, the phase diagram from the pack's defaults, and each experiment line as a point on it.
    ``pack``: a loaded ``theory.Pack`` (a plan's), or a pack's name or path."""
    if not pack:
        return {}
    pack_name = pack if isinstance(pack, (str, Path)) else pack.name
    if isinstance(pack, (str, Path)):
        pack = theory.load_pack(pack)
    pieces: dict[str, Any] = {
        "pack": pack.name,
        "reference": pack.reference,
        "terms": [t.to_dict() for t in pack.terms],
        "lower_bounds": [lb.to_dict() for lb in pack.lower_bounds],
    }
    try:
        diagram = _regions(str(pack_name), pack)
    except RecallkitError as exc:
        pieces.setdefault("notes", []).append(f"no phase diagram: {exc}")
        return pieces
    pieces["regions"] = diagram.to_dict()
    phase_lines, notes = line_points(pack, diagram, line_scalings)
    if notes:
        pieces.setdefault("notes", []).extend(notes)
    if phase_lines:
        pieces["phase_lines"] = phase_lines
    return pieces


def line_points(pack, diagram, line_scalings: list[tuple[str, str]]) -> tuple[list[dict], list[str]]:
    """Where each experiment line (label, scaling such as "N=V**1.5, L=V**0.5") sits on a phase diagram:
    ``[{"label", "point": [exponent per axis]}]``, and a note for each line that cannot be placed."""
    axes = list(diagram.axes)
    # Which model variable each axis exponent drives, e.g. {"a": "N", "c": "L"} from "N=V**a, L=V**c".
    axis_variable: dict[str, str] = {}
    for variable, expr in theory.parse_scaling(diagram.scaling).entries:
        for symbol in expr.free_symbols:
            if symbol.name in axes:
                axis_variable[symbol.name] = variable
    phase_lines, notes = [], []
    for label, scaling_text in line_scalings:
        try:
            line = dict(theory.parse_scaling(scaling_text).entries)
            point = []
            for axis in axes:
                expr = line.get(axis_variable.get(axis, ""))
                if expr is None:
                    raise InputError(f"line {label!r} does not set the variable behind axis {axis}")
                exponent = to_monomial(expr, pack.base).exponent
                point.append(float(exponent))
            phase_lines.append({"label": label, "point": point})
        except RecallkitError as exc:
            notes.append(f"line {label!r} not drawn on the phase diagram: {exc}")
    return phase_lines, notes


# ----------------------------------------------------------------------------- experiment steps
def _search_entry(planned: Plan, settings: ReportSettings, executor, store_path: Path, run: bool = True,
                  fitted_runs: dict | None = None) -> dict:
    """The summary entry of a planned search experiment: sweep (``run=False``: replay the store, train nothing),
    fits, heatmap cells, boundary points, the pack's terms and phase diagram, the system's own verdicts,
    and its comparative claims (``claims``, ``compare.claims``). ``fitted_runs``: experiment name ->
    (loaded experiment, fits) of this report so far; this one is added, and a claim's side in another
    experiment is judged from it (or, for one not in the report, from the stored runs). The heatmap cells
    and boundary points are the search's own records, kept with the fits: nothing is replayed."""
    loaded = planned.experiment
    fitted = sweep_and_fit(planned, store=store_path, preset=settings.preset, run=run, executor=executor,
                           progress=run, log=settings.log)
    print(f"{loaded.name}: reused {fitted.sweep.get('reused', 0)} / computed {fitted.sweep.get('computed', 0)}"
          + (f" / missing {fitted.sweep['missing']}" if fitted.sweep.get("missing") else ""), file=settings.log)
    sweep = fitted.sweep_result
    lines = []
    for line in loaded.lines:
        lines.append({
            "name": line.label,
            "heatmap": [p for p in sweep.runs if p.get("line") == line.label],
            "boundary_points": [p for p in sweep.points if p.get("line") == line.label],
        })
    scalings = [(line.label, line.theory_scaling or line.scaling) for line in loaded.lines]
    pieces = pack_pieces(planned.pack, scalings)
    notes = pieces.pop("notes", [])
    pieces.pop("lower_bounds", None)
    entry = experiment_entry(fitted.to_dict(), title=loaded.name, lines=lines,
                             description=loaded.description, **pieces)
    entry["kind"] = loaded.kind
    entry.setdefault("notes", []).extend(notes)
    if sweep.violations:
        entry["notes"].append(f"{len(sweep.violations)} monotonicity violations along the searched size "
                              f"(accuracy fell as the size grew); see 'recallkit sweep' output")
    if fitted_runs is not None:
        fitted_runs[loaded.name] = (loaded, fitted)
    if loaded.claims:
        entry["claims"] = judge_entry_claims(loaded, fitted, store_path, settings.preset, fitted_runs)
    entry["config_hashes"] = sorted({p["config_hash"] for p in sweep.runs + sweep.budget_runs if p.get("config_hash")})
    flagged = [p for p in sweep.points if p.get("budget_flagged")]
    if flagged:
        entry["notes"].append(f"{len(flagged)} points flagged by the training-budget check (a larger budget moves "
                              f"the answer by at least one search step): " + "; ".join(
                                  f"{p['line']} {loaded.base}={p[loaded.base]} seed {p['seed']}" for p in flagged[:6]))
    system = registry.system_of_pack(loaded.pack)
    if system is not None and system.search_judge:
        # the system's own verdicts (e.g. log against power for a d_min search)
        registry.load_object(system.search_judge)(entry, loaded, sweep)
    return entry


def judge_loaded_claims(loaded, fitted, store_path, preset: str, fitted_runs: dict | None = None,
                        claims: list | None = None) -> list:
    """The experiment's ``[[claims]]`` (or ``claims``) judged from its fits (``compare.claims``): ClaimResults. A
    side in another experiment uses that experiment's fits from this report where it has them, else its stored
    runs (nothing is trained for a claim)."""
    claims = loaded.claims if claims is None else claims
    available = {name: pair[1] for name, pair in (fitted_runs or {}).items()}
    others = other_experiment_fits(claims, loaded.name, store=store_path, preset=preset, available=available)
    return judge_claims(fitted, claims, experiment=loaded.name, preset=preset, other_fits=others)


def judge_entry_claims(loaded, fitted, store_path: Path, preset: str, fitted_runs: dict | None = None) -> list[dict]:
    """:func:`judge_loaded_claims` as summary dicts."""
    return [result.to_dict() for result in judge_loaded_claims(loaded, fitted, store_path, preset, fitted_runs)]


def _rejudge_claims(entries: list[dict], fitted_runs: dict, store_path: Path, preset: str) -> None:
    """Claims judged before the other experiment they name was computed in this report (from its stored runs,
    or not at all) are judged again from the report's own fits; the entry changes in place (its pages are
    then drawn again from the final summary)."""
    order = list(fitted_runs)
    for entry in entries:
        name = entry.get("name")
        if not entry.get("claims") or name not in fitted_runs:
            continue
        loaded, fitted = fitted_runs[name]
        later = {c.b.experiment for c in loaded.claims} | {c.a.experiment for c in loaded.claims}
        if any(other in order and order.index(other) > order.index(name) for other in later if other):
            entry["claims"] = judge_entry_claims(loaded, fitted, store_path, preset, fitted_runs)


def search_entry(experiment: str | Path, store: str | Path | None = None, preset: str = "quick",
                 log: TextIO | None = None) -> dict:
    """The report's entry of one search experiment from what the store holds (nothing is trained): what
    ``recallkit figures`` draws."""
    planned = plan(experiment, preset=preset)
    path = planned.path
    if not planned.is_search:
        raise InputError(f"{path.name}: not a search experiment (its system draws its own report pages); "
                         "recallkit figures draws search experiments")
    store_path = Path(store) if store is not None else Path(default_store_path())
    if not store_path.is_file():
        raise InputError(f"--store {store_path}: no such results store (run 'recallkit sweep' or 'recallkit report' first)")
    settings = ReportSettings(experiments=[path], preset=preset, store=store_path, log=log or sys.stderr)
    return _search_entry(planned, settings, None, store_path, run=False)


def json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(value)


# ----------------------------------------------------------------------------- --fail-on
FAIL_ON_CHOICES = ("inconsistent", "inconclusive")


def fail_on_verdicts(values) -> tuple[str, ...]:
    """``--fail-on`` values (repeatable, each may be comma-separated) as a tuple of verdict names."""
    wanted: list[str] = []
    for value in values or ():
        for name in str(value).split(","):
            name = name.strip()
            if name not in FAIL_ON_CHOICES:
                raise InputError(f"--fail-on: expected {' or '.join(FAIL_ON_CHOICES)} (comma-separated or repeated), "
                                 f"got {name!r}")
            if name not in wanted:
                wanted.append(name)
    return tuple(wanted)


def verdicts_matching(rows, wanted) -> str | None:
    """One line naming the checks whose verdict is in ``wanted`` (None if there are none): what a CI job
    prints before it exits 1. ``rows``: summary entries or fit dicts (``experiment``, ``line``,
    ``threshold``, ``verdict``)."""
    hits = [r for r in rows if r.get("verdict") in wanted]
    if not hits:
        return None

    def name(r):
        thr = r.get("threshold")
        relative = " x ceiling" if r.get("threshold_relative") else ""
        return (f"{r.get('experiment')} [{r.get('line')}" + (f", threshold {float(thr):g}{relative}" if thr is not None else "")
                + "]")

    counts = ", ".join(f"{sum(r.get('verdict') == v for r in hits)} {v}" for v in wanted if any(r.get("verdict") == v for r in hits))
    shown = "; ".join(f"{name(r)}: {r.get('verdict')}" for r in hits[:3])
    more = f"; and {len(hits) - 3} more" if len(hits) > 3 else ""
    return f"fail-on: {counts} of {len(rows)} checks: {shown}{more} (exit 1)"


# ----------------------------------------------------------------------------- the job
def _provenance(settings: ReportSettings, entries: list[dict]) -> dict:
    import torch

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    now = (_dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc) if epoch
           else _dt.datetime.now(_dt.timezone.utc))
    return {
        "code_version": code_version(), "recallkit_version": __version__,
        "date": now.isoformat(timespec="seconds"),
        "device": str(resolve_device(settings.device)), "threads": torch.get_num_threads(),
        "torch_version": torch.__version__, "preset": settings.preset,
        "config_hashes": {e["name"]: e.get("config_hashes", []) for e in entries},
    }


def run_report(settings: ReportSettings) -> Path:
    """Run every experiment, write ``summary.json``, the figures and ``recallkit-report.pdf``."""
    import torch
    from tqdm import tqdm

    if settings.threads:
        torch.set_num_threads(settings.threads)
    store_path = Path(settings.store or os.environ.get("RECALLKIT_STORE") or DEFAULT_STORE)

    watch_store(store_path)
    try:  # a broken plug-in is one line before anything runs, not a failure of every experiment
        registry.systems()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    failures: list[str] = []
    paths = []
    for name in settings.experiments:
        try:
            paths.append(resolve_experiment(name))
        except RecallkitError as exc:
            _failed(failures, str(name), exc, None)  # said below, once it is known whether others go on
    if not settings.experiments:
        paths = default_experiments()
    if not paths:  # nothing left to report: one line, as any other bad input
        raise InputError(failures[0] if len(failures) == 1 else f"none of the experiments can run: {'; '.join(failures)}")
    for failure in failures:
        print(f"error: {failure} (continuing with the other experiments)", file=settings.log)
    # --out and --store are checked before anything is trained

    check_output_dir(Path(settings.out_dir))
    if store_path.is_dir():
        raise InputError(f"--store {store_path}: is a directory, expected a results store file (SQLite)")
    with ResultStore(store_path):
        pass
    # Read and check every file before training anything, so a typo in the last file costs no time; a
    # bad file is a failure of its own (in summary.json and on the title page) and the others go on.
    plans: dict[Path, Plan] = {}
    for path in paths:
        try:
            plans[path] = plan(path, preset=settings.preset)
        except RecallkitError as exc:
            _failed(failures, path.name, exc, settings.log)
    paths = [path for path in paths if path in plans]

    workers = settings.workers if settings.workers is not None else usable_cores() if settings.executor == "local" else 1
    executor = make_executor(settings.executor, device=settings.device, threads=settings.threads,
                             scheduler=settings.scheduler, local_workers=settings.dask_local, workers=workers)
    context = StepContext(settings, store_path, executor)
    entries: list[dict] = []
    fitted_runs: dict = {}  # experiment name -> (loaded, fits): claims may compare lines of two experiments
    started = time.perf_counter()

    steps = [step for system in registry.systems() for step in system.report_steps]
    background = (settings.executor == "local" and workers > 1 and resolve_device(settings.device).type == "cpu"
                  and (any(not plans[path].is_search for path in paths) or bool(steps)))
    own = OwnSteps(settings, store_path, context, background)
    failed = True
    # each experiment's pages are drawn (in worker processes) while the next experiment is computed
    with ReportBuilder(settings.out_dir, png=settings.png, jobs=settings.jobs, reuse=not settings.redraw) as builder:
        try:
            for path in paths:  # with a worker process they start now and run beside the searches
                if not plans[path].is_search:
                    own.start(path, plans[path].runner, path)
            for index, step in enumerate(steps):
                own.start(index, step, None)
            bar = tqdm(paths, desc="report", unit="experiment", file=settings.log, leave=True)
            for path in bar:
                bar.set_postfix_str(path.stem)
                try:
                    if not plans[path].is_search:
                        entries.append(own.result(path))
                    else:
                        entries.append(_search_entry(plans[path], settings, executor, store_path,
                                                     fitted_runs=fitted_runs))
                except RecallkitError as exc:
                    _failed(failures, path.name, exc, settings.log)
                    continue
                builder.add(entries[-1])
            for index, _ in enumerate(steps):
                entry = own.result(index)
                if entry is not None:
                    entries.append(entry)
                    builder.add(entry)
            failed = False
        finally:
            own.close(failed=failed)
            executor.close()
        _rejudge_claims(entries, fitted_runs, store_path, settings.preset)
        summary = {
            "schema": "recallkit.summary/1",
            "title": "recallkit report",
            "subtitle": f"{settings.preset} preset, {len(entries)} experiments",
            "provenance": _provenance(settings, entries),
            "experiments": entries,
            "failures": failures,
            "run_wall_time_s": round(time.perf_counter() - started, 1),
        }
        stats: dict = {}
        pdf = builder.finish(summary, stats=stats)
    print(stats["line"], file=settings.log)
    return pdf


def _call_own_step(ref: str, path: Path | None, context: StepContext) -> dict | None:
    """A system's runner, ``(path, context) -> entry``, or report step, ``(context) -> entry | None``."""
    function = registry.load_object(ref)
    return function(path, context) if path is not None else function(context)


def _own_step_in_worker(ref: str, path: Path | None, settings: ReportSettings, store_path: Path) -> tuple:
    """A runner experiment (``path``) or a report step (``path`` None) in a worker process of the main job:
    ``("entry", entry or None, log text)`` or ``("error", message, log text)``. Its numbers are those of the
    same call in the main process: one model trains on one thread from its own seeded streams either way."""
    import io

    import torch

    if settings.threads:
        torch.set_num_threads(settings.threads)
    log = io.StringIO()
    context = StepContext(replace(settings, log=log), store_path, None)
    try:
        entry = _call_own_step(ref, path, context)
    except RecallkitError as exc:
        return "error", str(exc), log.getvalue()
    return "entry", entry, log.getvalue()


class OwnSteps:
    """The main job's runner experiments and system report steps: trained in one worker process beside the
    searches when the local executor has more than one worker on the CPU (they train one model at a time, and
    the searches leave cores idle between rounds), else in this process when asked for. Results come back in
    the order asked for, whatever the order they finish in."""

    def __init__(self, settings: ReportSettings, store_path: Path, context: StepContext, background: bool):
        self.settings, self.store_path, self.context = settings, store_path, context
        self._pool = None
        self._pending: dict[Any, Any] = {}
        if background:
            import multiprocessing

            self._pool = multiprocessing.get_context("spawn").Pool(1, initializer=_ignore_sigint)

    def start(self, key: Any, ref: str, path: Path | None) -> None:
        """Queue one step (nothing happens yet without a worker process)."""
        if self._pool is None:
            self._pending[key] = (ref, path)
            return
        child_settings = replace(self.settings, log=None)
        self._pending[key] = self._pool.apply_async(_own_step_in_worker, (ref, path, child_settings, self.store_path))

    def result(self, key: Any) -> dict | None:
        """The step's entry; its log lines go to the report's log. A RecallkitError is raised here."""
        job = self._pending.pop(key)
        if self._pool is None:
            return _call_own_step(*job, self.context)
        kind, value, text = job.get()
        if text:
            self.settings.log.write(text)
        if kind == "error":
            raise RecallkitError(value)
        return value

    def close(self, failed: bool = False) -> None:
        """Stop the worker: at once after an error or Ctrl-C (what it had stored stays stored), else when done."""
        if self._pool is None:
            return
        if failed:
            self._pool.terminate()
        else:
            self._pool.close()
        self._pool.join()
        self._pool = None


def _failed(failures: list[str], name: str, exc: Exception, log: TextIO | None) -> None:
    failures.append(f"{name}: {exc}" if not str(exc).startswith(f"{name}: ") else str(exc))
    if log is not None:
        print(f"error: {failures[-1]} (continuing with the other experiments)", file=log)

"""The main job: theory -> sweeps at the predicted points (reusing the store) -> fits -> verdicts -> PDF.

``run_report`` is what ``recallkit report`` calls. It sits on top of the four stages, so it is the
one place (with the CLI) allowed to import all of them. It names no system: it loops over the
registry (``recallkit.registry``). Each experiment is one step:

- a search experiment (planned once, ``empirics.plan``) is swept (training only what the results
  store lacks) and fitted by ``compare.fit_experiment``; its heatmap cells and boundary points are the
  search's own records, kept with the fits; the system that owns its pack may add its own verdicts
  (``System.search_judge``);
- a file with a table a system registered in ``System.runners`` runs through that runner;
- then each system's ``report_steps`` (e.g. a term-probe table).

In that order: every experiment planned; the runner experiments and steps handed to the report's worker processes;
each search swept and fitted; every comparative claim judged once, from the report's every fit (a claim may name
another experiment, before or after its own); the pages drawn (each experiment's as soon as its entry is final).

A failure in one experiment is recorded in the summary and the report goes on (the failing step's
message is printed), so a long run is never lost to one bad file.
"""
from __future__ import annotations

import ast
import concurrent.futures
import contextlib
import datetime as _dt
import importlib.util
import os
import queue
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from tqdm import tqdm

from recallkit import __version__, registry
from recallkit.assertions import sweep_and_fit, sweep_and_read
from recallkit.compare.assertions import StoreReading
from recallkit.compare.assertions import fit_experiment as fit_stored
from recallkit.empirics.cache import Cache, Uncacheable, cache_key
from recallkit.empirics import cache as derived_cache
from recallkit.compare.claims import judge_claims, other_experiment_fits
from recallkit.compare.schema import SUMMARY_SCHEMA
from recallkit.empirics.device import resolve_device
from recallkit.empirics.executors import check_dask, make_executor, usable_cores
from recallkit.empirics.experiment import resolve_experiment
from recallkit.empirics.numerics import MKL_ENV, math_path
from recallkit.empirics.plan import Plan, plan
from recallkit.empirics.provenance import code_version
from recallkit.empirics.store import ResultStore, default_store_path
from recallkit.empirics.workers import WorkerPool, trace_label
from recallkit.own_steps import OwnSteps, StepCache, checked_entry, store_digest
from recallkit.report_settings import DEFAULT_OUT, ReportSettings, StepContext
from recallkit.reports.pdf import ReportBuilder, check_output_dir, experiment_entry
from recallkit.reports.output_folder import writing_report
from recallkit.reports.dates import source_date  # the one reading of SOURCE_DATE_EPOCH, as the PDF's dates
from recallkit.theory.errors import InputError, RecallkitError
from recallkit.theory.summary import pack_pieces

__all__ = ["DEFAULT_OUT", "ReportSettings", "StepContext", "default_experiments", "judge_claims_once", "judge_loaded_claims",
           "report_store", "run_report", "search_entry", "steps_for"]


def default_experiments() -> list[Path]:
    """The main job: each registered system's report experiments (quick preset), systems in run order."""
    try:
        return registry.default_report()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None


# ----------------------------------------------------------------------------- experiment steps
def _swept(planned: Plan, settings: ReportSettings, executor, store_path: Path) -> tuple[object, StoreReading]:
    """A search's sweep (training what the store lacks) and what its fit reads of the store, read through the same
    connection: the report's sweeping thread runs this while the main thread fits the experiment before it."""
    trace_label(planned.path.stem)
    sweep, reading = sweep_and_read(planned, store_path, executor, progress=True, log=settings.log)
    _say_reused(planned.experiment.name, {"reused": sweep.reused, "computed": sweep.computed,
                                          "missing": sweep.missing}, settings.log)
    return sweep, reading


def _say_reused(name: str, counts: dict, log: TextIO) -> None:
    print(f"{name}: reused {counts.get('reused', 0)} / computed {counts.get('computed', 0)}"
          + (f" / missing {counts['missing']}" if counts.get("missing") else ""), file=log)


def _search_entry(planned: Plan, settings: ReportSettings, executor, store_path: Path, run: bool = True,
                  cache: Cache | None = None, swept: tuple | None = None) -> tuple[dict, object]:
    """The summary entry of a planned search experiment, and its fits: sweep (``run=False``: replay the store, train
    nothing), fits, heatmap cells, boundary points, the pack's terms and phase diagram, and the system's own verdicts.
    Its comparative claims (``claims``, ``compare.claims``) are left to :func:`judge_claims_once`, once every
    experiment of the report is fitted: a claim may name another experiment. The heatmap cells and boundary points
    are the search's own records, kept with the fits: nothing is replayed. ``cache``: where the fits and the pack's
    pieces are kept under a hash of their inputs (``empirics.cache``; None: computed). ``swept``: its sweep and store
    reading from :func:`_swept` (then nothing is trained or read of the store here)."""
    loaded = planned.experiment
    if swept is None:
        fitted = sweep_and_fit(planned, store=store_path, preset=settings.preset, run=run, executor=executor,
                               progress=run, log=settings.log, cache=cache)
        _say_reused(loaded.name, fitted.sweep, settings.log)
    else:  # swept already (:func:`_swept`): fitted from its records and what was read of the store with them
        fitted = fit_stored(planned, store=store_path, preset=settings.preset, sweep=swept[0], cache=cache,
                            reading=swept[1])
    sweep = fitted.sweep_result
    lines = []
    for line in loaded.lines:
        lines.append({
            "name": line.label,
            # the summary's records as its JSON writes them (the search's own are typed)
            "heatmap": [r.to_dict() for r in sweep.runs if r.line == line.label],
            "boundary_points": [p.to_dict() for p in sweep.points if p.line == line.label],
        })
    scalings = [(line.label, line.theory_scaling or line.scaling) for line in loaded.lines]
    pieces = _pack_pieces(planned.pack, scalings, cache)
    notes = pieces.pop("notes", [])
    pieces.pop("lower_bounds", None)
    entry = experiment_entry(fitted.to_dict(), title=loaded.name, lines=lines,
                             description=loaded.description, **pieces)
    entry["kind"] = loaded.kind
    if loaded.kind == "grid":  # its heatmaps are its result: their axes, named on the pages and in its summary row
        entry.update(base=loaded.base, size=loaded.size)
    entry.setdefault("notes", []).extend(notes)
    if sweep.violations:
        entry["notes"].append(f"{len(sweep.violations)} monotonicity violations along the searched size "
                              f"(accuracy fell as the size grew); see 'recallkit sweep' output")
    if loaded.claims:
        entry["claims"] = None  # judged with the report's every fit (its place kept in the entry's order)
    entry["config_hashes"] = sorted({r.config_hash for r in sweep.runs if r.config_hash}
                                    | {b["config_hash"] for b in sweep.budget_runs if b.get("config_hash")})
    flagged = [p for p in sweep.points if p.budget_flagged]
    # counted once here, for the diagnostics page (reports.headline reads them before any note's text)
    entry["diagnostics"] = {"runs": len(sweep.runs), "monotonicity_violations": len(sweep.violations),
                            "budget_flagged": len(flagged)}
    if flagged:
        entry["notes"].append(f"{len(flagged)} points flagged by the training-budget check (a larger budget moves "
                              f"the answer by at least one search step): " + "; ".join(
                                  f"{p.line} {loaded.base}={p.base_value} seed {p.seed}" for p in flagged[:6]))
    system = registry.system_of_pack(loaded.pack)
    if system is not None and system.search_judge:
        # the system's own verdicts (e.g. log against power for a d_min search)
        registry.load_object(system.search_judge)(entry, loaded, sweep)
    return entry, fitted


def _pack_pieces(pack, scalings: list[tuple[str, str]], cache: Cache | None) -> dict:
    """``theory.summary.pack_pieces`` (its phase diagram is exact symbolic work, about 0.2 s a pack), kept in
    ``cache`` under the pack's full content (its repr: every field, each expression as written) and the lines."""
    if cache is None or pack is None:
        return pack_pieces(pack, scalings)
    try:
        key = cache_key("pack pieces", [repr(pack), scalings])
    except Uncacheable as exc:
        cache.decline("pack pieces", f"its inputs: {exc}")
        return pack_pieces(pack, scalings)
    found = cache.get("pieces", key)
    if isinstance(found, dict):
        return found
    pieces = pack_pieces(pack, scalings)
    cache.keep("pieces", key, pieces, what="pack pieces")  # only what JSON gives back as it was; else declined
    return pieces


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


def judge_claims_once(searched: dict, store_path: Path, preset: str) -> dict:
    """Every claim of the report judged once, from the report's fits: ``searched`` holds (entry, loaded experiment,
    fits) of every search experiment that was fitted, by any key (the report's: its place in the report); each entry with claims gets them
    (``claims``). A side in another experiment of the report is judged from its fits here, whatever the order of
    the experiments; one not in the report from its stored runs. Returns {key: RecallkitError} for the
    experiments whose claims could not be judged (a failure of that experiment)."""
    fitted_runs = {loaded.name: (loaded, fitted) for _, loaded, fitted in searched.values()}
    failed = {}
    for key, (entry, loaded, fitted) in searched.items():
        if not loaded.claims:
            continue
        try:
            entry["claims"] = judge_entry_claims(loaded, fitted, store_path, preset, fitted_runs)
        except RecallkitError as exc:
            failed[key] = exc
    return failed


def search_entry(experiment: str | Path, store: str | Path | None = None, preset: str = "quick",
                 log: TextIO | None = None) -> dict:
    """The report's entry of one search experiment from what the store holds (nothing is trained): what
    ``recallkit figures`` draws."""
    planned = plan(experiment, preset=preset)
    path = planned.path
    planned.search_experiment(" (its system draws its own report pages); recallkit figures draws search experiments",
                              where=path.name)
    store_path = Path(store) if store is not None else Path(default_store_path())
    if not store_path.is_file():
        raise InputError(f"--store {store_path}: no such results store (run 'recallkit sweep' or 'recallkit report' first)")
    settings = ReportSettings(experiments=[path], preset=preset, store=store_path, log=log or sys.stderr)
    entry, fitted = _search_entry(planned, settings, None, store_path, run=False)
    failed = judge_claims_once({0: (entry, planned.experiment, fitted)}, store_path, preset)
    if failed:
        raise next(iter(failed.values()))
    return entry


# ----------------------------------------------------------------------------- the job
def _provenance(settings: ReportSettings, entries: list[dict], cache: Cache | None = None) -> dict:
    now = source_date() or _dt.datetime.now(_dt.timezone.utc)
    torch = sys.modules.get("torch")
    build = _torch_build() if torch is None else None
    if torch is None and (build is None or not settings.threads):
        import torch  # about 1 s (and as much again at exit): only where torch's own answers are needed
    return {
        "code_version": code_version(), "recallkit_version": __version__,
        "date": now.isoformat(timespec="seconds"),
        # every model of the job trains on settings.threads (the executors and the steps fix it), else on torch's own
        "device": _device(settings), "threads": settings.threads or torch.get_num_threads(),
        "math_path": _math_path(cache), "torch_version": str(torch.__version__ if torch else build["__version__"]),
        "preset": settings.preset, "config_hashes": {e["name"]: e.get("config_hashes", []) for e in entries},
    }


def _executor(settings: ReportSettings, workers: int, pool: WorkerPool | None = None):
    """The report's executor; the local one trains in ``pool`` (the report's worker processes), which starts when a
    search first trains. Arguments that could be refused are given to ``make_executor`` now, so a bad flag is one
    line before anything runs. On the CPU the device is named: the local executor then never asks torch (about 1 s
    to import, as much again at exit) whether it is a GPU, which a report that trains nothing never needs."""
    device = settings.device
    if settings.executor == "local" and _device(settings) == "cpu":
        device = "cpu"
    return make_executor(settings.executor, device=device, threads=settings.threads, scheduler=settings.scheduler,
                         local_workers=settings.dask_local, workers=workers,
                         pool=pool if settings.executor == "local" else None)


def _torch_build() -> dict | None:
    """torch's ``torch/version.py`` (``__version__``, ``git_version``, ``cuda``, ``hip``) read without importing
    torch, or None when it cannot be read so (then torch is imported and asked)."""
    spec = importlib.util.find_spec("torch")
    try:
        tree = ast.parse((Path(spec.submodule_search_locations[0]) / "version.py").read_text(encoding="utf-8"))
    except (AttributeError, TypeError, IndexError, OSError, SyntaxError, ValueError):
        return None
    found = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and node.value is not None:
            with contextlib.suppress(ValueError, TypeError, SyntaxError):
                found[target.id] = ast.literal_eval(node.value)
    return found if {"__version__", "git_version", "cuda", "hip"} <= set(found) else None


def _device(settings: ReportSettings) -> str:
    """The device the report runs on, as ``resolve_device`` names it; without importing torch where the answer
    does not need it: ``cpu`` asked for, or the default on a torch built without CUDA and ROCm (it sees no GPU)."""
    if settings.device == "cpu":
        return "cpu"
    if settings.device in (None, "auto") and "torch" not in sys.modules:
        build = _torch_build()
        if build is not None and build["cuda"] is None and build["hip"] is None:
            return "cpu"
    return str(resolve_device(settings.device))


def _math_path(cache: Cache | None) -> str:
    """``empirics.numerics.math_path()``, kept in ``cache`` under all it reads: torch's build, the CPU (vendor,
    model, flags) and the variables that choose the code path; read back only by a process that has not imported
    torch (so torch was not imported before recallkit pinned MKL), and never kept when it says MKL is unpinned."""
    build = _torch_build() if cache is not None else None
    if build is None:
        return math_path()
    try:
        cpu = [line for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
               if line.split(":")[0].strip() in ("vendor_id", "model name", "flags")][:3]
    except OSError:
        return math_path()
    key = cache_key("math path (capability, vendor, branch)",
                    [build, cpu, {name: os.environ.get(name) for name in (MKL_ENV, "ATEN_CPU_CAPABILITY")}])
    found = cache.get("environment", key) if "torch" not in sys.modules else None
    if isinstance(found, str):
        return found
    path = math_path()
    if not path.endswith("MKL unpinned"):  # that one may also say torch was imported before recallkit pinned MKL
        cache.put("environment", key, path)
    return path


def run_report(settings: ReportSettings) -> Path:
    """Run every experiment, write ``summary.json``, the figures and ``recallkit-report.pdf``: plan every experiment,
    hand the systems' steps to the workers, sweep and fit each search, judge every claim once, draw.

    One pool of worker processes (``empirics.workers``, ``--workers`` of them, one per usable core by default) trains
    the searches' rounds, runs the systems' steps and draws the pages; it starts when first needed and is stopped at
    once on an error or Ctrl-C. At the end the log says how long each experiment and step took (``step time:``)."""
    if settings.executor == "dask":
        check_dask()  # the extra not installed: one line before anything is planned
    store_path = report_store(settings)
    failures: list[str] = []
    plans = _checked_plans(settings, store_path, failures)
    settings = with_packs(settings, plans)
    workers = (settings.workers if settings.workers is not None
               else usable_cores() if settings.executor == "local" else 1)
    # on a Dask cluster or a GPU the pool only draws the pages (and on one core, nothing)
    pool = WorkerPool(settings.workers or usable_cores())
    executor = _executor(settings, workers, pool)
    steps = steps_for(settings, plans)
    background = (settings.executor == "local" and workers > 1 and _device(settings).split(":")[0] == "cpu"
                  and (any(not planned.is_search for planned in plans) or bool(steps)))
    cache = _derived_cache(settings)
    not_ours = cache.not_ours if cache is not None else 0
    declined = len(cache.declined) if cache is not None else 0
    own = OwnSteps(settings, store_path, StepContext(settings, store_path, executor), background,
                   _step_cache(cache, store_path), pool=pool if background else None)
    started = time.perf_counter()
    # a full disk or a file that cannot be written, while the report is written: one line, the previous
    # report kept (its OSErrors only: one from training is not about --out)
    with writing_report(Path(settings.out_dir)):
        builder = ReportBuilder(settings.out_dir, png=settings.png, jobs=settings.jobs, reuse=not settings.redraw)
    builder.drawer.use_executor(pool)
    report = _Report(plans, steps, settings, executor, store_path, own, builder, cache)
    with builder, _stopped_on_error(pool):
        failed = True
        try:
            entries = report.run(failures)
            failed = False
        finally:
            own.close(failed=failed)
            executor.close()
        summary = {
            "schema": SUMMARY_SCHEMA,
            "title": "recallkit report",
            # the title page counts the experiments and the diagnostics apart (reports.headline)
            "subtitle": f"{settings.preset} preset",
            "provenance": _provenance(settings, entries, cache),
            "experiments": entries,
            "failures": failures,
            "run_wall_time_s": round(time.perf_counter() - started, 1),
        }
        stats: dict = {}
        with writing_report(Path(settings.out_dir)):
            pdf = builder.finish(summary, stats=stats)
    print(stats["line"], file=settings.log)
    if cache is not None and cache.not_ours > not_ours:
        found = cache.not_ours - not_ours  # tampered, or made under another secret: a miss, computed again
        print(f"{found} cache entr{'y' if found == 1 else 'ies'} not ours: recomputed", file=settings.log)
    if cache is not None and len(cache.declined) > declined:  # computed again by the next report: say what and why
        told = "; ".join(f"{what}: {reason}" for what, reason in cache.declined[declined:][:5])
        print(f"cache: {len(cache.declined) - declined} values not kept ({told})", file=settings.log)
    for name, seconds in report.seconds:  # read by the main job's benchmark: keep the words as they are
        print(f"step time: {name} {seconds:.1f} s wall", file=settings.log)
    return pdf


@contextlib.contextmanager
def _stopped_on_error(pool: WorkerPool):
    """``pool`` closed once at the end, its workers stopped at once (what they run not waited for) on an error or
    Ctrl-C."""
    try:
        yield pool
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.close()


def _derived_cache(settings: ReportSettings) -> Cache | None:
    """The one cache of derived data (``empirics.cache``: its folder, its switch ``off``, its size bound, its
    secret) that fits, packs' pieces, steps and pages are kept in; ``--redraw`` trusts no cache."""
    if settings.redraw:
        return None
    return derived_cache.from_env()


def verify_cache(settings: ReportSettings, fraction: float) -> tuple[derived_cache.Audit, list[str]]:
    """``recallkit cache verify``: the fits (and the documents they are made from) of every search experiment of
    ``settings`` computed again from the store for a sample of the cache's entries (``fraction`` of the keys; 1.0:
    all) and compared with what each entry holds. A differing entry is rewritten with what was computed. Returns
    the audit and the experiments that could not be planned or fitted (one line each)."""
    cache = derived_cache.from_env()
    if cache is None:
        raise InputError("RECALLKIT_CACHE: the cache is off (or has no secret): nothing to verify")
    store_path = report_store(settings)
    if not store_path.is_file():
        raise InputError(f"--store {store_path}: no results store there (the entries are verified from its runs)")
    failures: list[str] = []
    paths = []
    for name in settings.experiments:
        try:
            paths.append(resolve_experiment(name))
        except RecallkitError as exc:
            _failed(failures, str(name), exc, settings.log)
    if not settings.experiments:
        paths = default_experiments()
    audit = derived_cache.Audit(fraction=fraction)
    cache.audit = audit
    try:
        for path in paths:
            try:
                planned = _plan_with_settings(path, settings)
                if not planned.is_search:  # a system's runner: its entry is a trained step, not fits from the store
                    continue
                sweep_and_fit(planned, store=store_path, preset=settings.preset, run=False, progress=False,
                              log=settings.log, cache=cache)
            except RecallkitError as exc:
                _failed(failures, path.name, exc, settings.log)
    finally:
        cache.audit = None
    return audit, failures


def _step_cache(cache: Cache | None, store_path: Path) -> StepCache | None:
    """The systems' steps' entries, kept under the store's digest as the report begins (``recallkit.own_steps``)."""
    digest = store_digest(store_path) if cache is not None else None
    return StepCache(cache, digest) if digest is not None else None


def report_store(settings: ReportSettings) -> Path:
    """The results store a report reads and writes: ``--store``, else $RECALLKIT_STORE, else the default."""
    return Path(settings.store or default_store_path())


def _checked_plans(settings: ReportSettings, store_path: Path, failures: list[str]) -> list[Plan]:
    """Every experiment planned (read and checked) and ``--out`` / ``--store`` checked before anything trains,
    so a typo in the last file costs no time; a bad file is a failure of its own (in summary.json and on the
    title page) and the others go on. Nothing left to run is one line, as any other bad input."""
    try:  # a broken plug-in is one line before anything runs, not a failure of every experiment
        registry.systems()
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    paths = []
    for name in settings.experiments:
        try:
            paths.append(resolve_experiment(name))
        except RecallkitError as exc:
            _failed(failures, str(name), exc, None)  # said below, once it is known whether others go on
    if not settings.experiments:
        paths = default_experiments()
    if not paths:
        raise InputError(failures[0] if len(failures) == 1 else f"none of the experiments can run: {'; '.join(failures)}")
    for failure in failures:
        print(f"error: {failure} (continuing with the other experiments)", file=settings.log)
    check_output_dir(Path(settings.out_dir))
    if store_path.is_dir():
        raise InputError(f"--store {store_path}: is a directory, expected a results store file (SQLite)")
    with ResultStore(store_path):
        pass
    plans = []
    for path in paths:
        try:
            plans.append(_plan_with_settings(path, settings))
        except RecallkitError as exc:
            _failed(failures, path.name, exc, settings.log)
    return plans


def _plan_with_settings(path: Path, settings: ReportSettings) -> Plan:
    """The experiment planned with the report's --set fields where its search reads them; a system's runner reads
    its file itself, so it runs as written (said in one line)."""
    if not settings.settings:
        return plan(path, preset=settings.preset)
    planned = plan(path, preset=settings.preset)
    if not planned.is_search:
        print(f"--set: not applied to {planned.path.stem} (its system's runner reads its file as written)",
              file=settings.log)
        return planned
    return plan(path, preset=settings.preset, settings=settings.settings)


def with_packs(settings: ReportSettings, plans: list[Plan]) -> ReportSettings:
    """``settings`` with ``packs``: those the named experiments' searches test, in order (the main job names none)."""
    if not settings.experiments:
        return settings
    return replace(settings, packs=tuple(dict.fromkeys(
        planned.experiment.pack for planned in plans if planned.is_search and planned.experiment.pack)))


def steps_for(settings: ReportSettings, plans: list[Plan]) -> list[str]:
    """The systems' own report steps that apply to this report, as "module:function": each step decides through its
    ``applies(plans, settings)`` (recallkit.registry.report_steps), so a report of one associative-memory experiment,
    or of tr_fig2 alone without --probes, runs no term probes or gradient-access check."""
    try:
        return registry.report_steps(plans, settings)
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None


class _Report:
    """The experiments and steps of one report, run in order: :meth:`run`."""

    def __init__(self, plans: list[Plan], steps: list[str], settings: ReportSettings, executor, store_path: Path,
                 own: OwnSteps, builder: ReportBuilder, cache: Cache | None) -> None:
        self.plans, self.steps, self.settings, self.executor = plans, steps, settings, executor
        self.store_path, self.own, self.builder, self.cache = store_path, own, builder, cache
        self.seconds: list[tuple[str, float]] = []  # (experiment's file stem or step's entry name, wall seconds)
        self._final: list = [_PENDING] * len(plans)  # each experiment's entry once final, or its failure's line
        self._drawn = 0  # the experiments handed to the builder so far (in order)

    def run(self, failures: list[str]) -> list[dict]:
        """Submit the systems' steps, sweep and fit each search (a runner experiment's entry taken in its turn),
        judge every claim, take the steps' entries; each entry is handed to the builder, in order, once final (its
        pages start drawing while the report goes on). Returns the entries; a failed experiment's line is added
        to ``failures``, in the experiments' order."""
        for planned in self.plans:  # in the worker processes they start now and run beside the searches
            if not planned.is_search:
                self.own.start(planned.path, planned.runner, planned.path)
        for index, step in enumerate(self.steps):
            self.own.start(index, step, None)
        searched = self._fit()
        for index, exc in judge_claims_once(searched, self.store_path, self.settings.preset).items():
            self._fail(index, exc)
        for index, (entry, _, _) in searched.items():
            if not isinstance(self._final[index], str):
                self._final[index] = entry
        trace_label("after the experiments")
        self._hand_over()
        entries = [entry for entry in self._final if isinstance(entry, dict)]
        failures.extend(line for line in self._final if isinstance(line, str))
        for index, step in enumerate(self.steps):
            entry = self.own.result(index)
            self.seconds.append((entry["name"] if isinstance(entry, dict) and isinstance(entry.get("name"), str)
                                 else step, self.own.seconds[index]))
            if entry is not None:
                entries.append(checked_entry(entry, step))
                self.builder.add(entry)
        return entries

    def _fit(self) -> dict:
        """Each search swept and fitted, each runner experiment's entry taken, in order; returns {index: (entry,
        loaded experiment, fits)} of the searches fitted (the entries with claims wait for them).

        The searches are swept one after another in a thread of their own (:class:`_Sweeper`), so the workers train
        the next experiment while this thread fits the one before: a fit alone left both workers idle (tr_fig2's
        realised predictions, 10 s). The fits, and all symbolic work with them, stay in this thread, where the
        CPU-time limit on symbolic work applies; the sweeping thread reads the store for each fit as it sweeps."""
        searched: dict = {}
        seconds: dict[int, float] = {}
        sweeper = _Sweeper()
        try:
            executor = _StoppedWith(self.executor, sweeper.stopped)
            swept = {index: sweeper.submit(_swept, planned, self.settings, executor, self.store_path)
                     for index, planned in enumerate(self.plans) if planned.is_search}
            bar = tqdm(self.plans, desc="report", unit="experiment", file=self.settings.log, leave=True)
            for index, planned in enumerate(bar):
                bar.set_postfix_str(planned.path.stem)
                seconds[index] = self._one(index, planned, swept.get(index), searched)
                self._hand_over()
        finally:
            sweeper.close()
        self.seconds.extend((planned.path.stem, seconds[index]) for index, planned in enumerate(self.plans))
        return searched

    def _one(self, index: int, planned: Plan, swept, searched: dict) -> float:
        """Experiment ``index`` made final (a search fitted once swept; a runner experiment's entry taken); its
        seconds: a search's sweep (in its thread) and fit, a runner's own run."""
        began = time.perf_counter()
        try:
            if planned.is_search:
                sweep, reading, sweep_seconds = swept.result()
                fit_began = time.perf_counter()
                entry, fitted = _search_entry(planned, self.settings, self.executor, self.store_path,
                                              cache=self.cache, swept=(sweep, reading))
                searched[index] = (entry, planned.experiment, fitted)  # its fits, for every claim naming it
                if not planned.experiment.claims:
                    self._final[index] = entry
                return sweep_seconds + time.perf_counter() - fit_began
            self._final[index] = checked_entry(self.own.result(planned.path), planned.runner)
        except RecallkitError as exc:
            self._fail(index, exc)
        if planned.is_search or planned.path not in self.own.seconds:
            return time.perf_counter() - began
        return self.own.seconds[planned.path]

    def _fail(self, index: int, exc: Exception) -> None:
        name = self.plans[index].path.name
        self._final[index] = f"{name}: {exc}" if not str(exc).startswith(f"{name}: ") else str(exc)
        print(f"error: {self._final[index]} (continuing with the other experiments)", file=self.settings.log)

    def _hand_over(self) -> None:
        """The experiments final so far, in order, to the builder (pages are numbered in the report's order)."""
        while self._drawn < len(self._final) and self._final[self._drawn] is not _PENDING:
            if isinstance(self._final[self._drawn], dict):
                self.builder.add(self._final[self._drawn])
            self._drawn += 1


_PENDING = object()  # an experiment whose entry is not final yet (its claims are judged once all are fitted)


class SweepStopped(BaseException):
    """The report stopped while a sweep ran in its thread. Not an Exception: a sweep retries a failed batch one
    model at a time (``except Exception``), which after Ctrl-C would print that the stopped workers' batch failed
    and train on in this process until it exits."""


class _StoppedWith:
    """The report's executor as the sweeping thread uses it (``run`` and ``describe``, all a sweep asks of one):
    once ``stopped`` is set, a round raises :class:`SweepStopped` instead of training, and so does a round whose
    workers were stopped under it."""

    def __init__(self, executor, stopped: threading.Event) -> None:
        self._executor, self._stopped = executor, stopped

    def run(self, configs):
        if self._stopped.is_set():
            raise SweepStopped
        try:
            return self._executor.run(configs)
        except Exception:
            if self._stopped.is_set():
                raise SweepStopped from None
            raise

    def describe(self) -> str:
        return self._executor.describe()


class _Sweeper:
    """One daemon thread that runs the jobs given, in order, each future's result ``(*its result, seconds)``. A
    daemon: after Ctrl-C or an error the process does not wait for a sweep it no longer wants (the workers are
    stopped, so the sweep fails at its next round; what it stored stays stored). :meth:`close` drops the jobs not
    started."""

    def __init__(self) -> None:
        self._jobs: queue.Queue = queue.Queue()
        self.stopped = threading.Event()  # set by close: the report stops (done, an error or Ctrl-C)
        self._thread = threading.Thread(target=self._run, name="recallkit-sweeps", daemon=True)
        self._started = False

    def submit(self, fn, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._jobs.put((future, fn, args))
        if not self._started:
            self._started = True
            self._thread.start()
        return future

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:  # closed
                return
            future, fn, args = job
            if self.stopped.is_set() or not future.set_running_or_notify_cancel():
                continue
            began = time.perf_counter()
            try:
                future.set_result((*fn(*args), time.perf_counter() - began))
            except BaseException as exc:  # noqa: BLE001 - handed to the thread that asks for the result
                future.set_exception(exc)

    def close(self) -> None:
        self.stopped.set()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job[0].cancel()
        self._jobs.put(None)


def _failed(failures: list[str], name: str, exc: Exception, log: TextIO | None) -> None:
    failures.append(f"{name}: {exc}" if not str(exc).startswith(f"{name}: ") else str(exc))
    if log is not None:
        print(f"error: {failures[-1]} (continuing with the other experiments)", file=log)

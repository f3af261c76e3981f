"""The main job: theory -> sweeps at the predicted points (reusing the store) -> fits -> verdicts -> PDF.

``run_report`` is what ``recallkit report`` calls. It sits on top of the four stages, so it is the
one place (with the CLI) allowed to import all of them. Each experiment is one step:

- a search experiment (``empirics.experiment`` schema) goes through ``compare.fit_experiment``, which
  trains only what the results store lacks; its heatmap cells are replayed from the store;
- a ``[geometric]`` experiment (SPEC B construction, probes, zero-shot, multi-hop, d_min) runs through
  ``empirics.geometric``; its result dict is cached in the store as one row keyed by its settings, so
  a second report reuses it too;
- the token-retrieval term probes, when asked for, run through ``compare.probe_fits``.

A failure in one experiment is recorded in the summary and the report goes on (the failing step's
message is printed), so a long run is never lost to one bad file.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from recallkit import REPO_ROOT, __version__, code_version
from recallkit.theory.errors import InputError, RecallkitError

EXPERIMENTS_DIR = REPO_ROOT / "experiments"
DEFAULT_OUT = Path("reports/out")

# The default report: the quick preset of one experiment per shipped system, sized so that the
# whole job runs on a 2-core CPU in minutes (measured in benchmarks/report_main_job.py).
DEFAULT_EXPERIMENTS = (
    "assoc_memory_linear.toml",
    "assoc_memory_mlp.toml",
    "tr_fig2_attention_only.toml",
    "tr_fig3_attention_mlp.toml",
    "geo_dmin_learned_vs_frozen.toml",
    "geometric_construction.toml",
    "geometric_probes.toml",
    "geometric_zero_shot.toml",
    "geometric_multi_hop.toml",
)


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
    log: TextIO = field(default=sys.stderr)


def resolve_experiment(name: str | Path) -> Path:
    """A path as given, or a shipped experiment by file name or stem (``assoc_memory_linear``)."""
    path = Path(name)
    if path.exists():
        return path
    for candidate in (EXPERIMENTS_DIR / path.name, EXPERIMENTS_DIR / f"{path.name}.toml"):
        if candidate.exists():
            return candidate
    shipped = ", ".join(sorted(p.stem for p in EXPERIMENTS_DIR.glob("*.toml")))
    raise InputError(f"{name}: no such experiment file (shipped: {shipped})")


def default_experiments() -> list[Path]:
    return [EXPERIMENTS_DIR / name for name in DEFAULT_EXPERIMENTS]


def is_geometric(path: Path) -> bool:
    import tomllib

    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    return "geometric" in raw


# ----------------------------------------------------------------------------- theory pieces
def _pack_pieces(pack_name: str | None, line_scalings: list[tuple[str, str]]) -> dict[str, Any]:
    """Terms, the phase diagram from the pack's defaults, and each experiment line as a point on it."""
    from recallkit import theory
    from recallkit.theory.scaling import to_monomial

    if not pack_name:
        return {}
    pack = theory.load_pack(pack_name)
    pieces: dict[str, Any] = {
        "pack": pack.name,
        "reference": pack.reference,
        "terms": [t.to_dict() for t in pack.terms],
        "lower_bounds": [lb.to_dict() for lb in pack.lower_bounds],
    }
    try:
        diagram = theory.compute_regions(pack)
    except RecallkitError as exc:
        pieces.setdefault("notes", []).append(f"no phase diagram: {exc}")
        return pieces
    pieces["regions"] = diagram.to_dict()
    axes = list(diagram.axes)
    # Which model variable each axis exponent drives, e.g. {"a": "N", "c": "L"} from "N=V**a, L=V**c".
    axis_variable: dict[str, str] = {}
    for variable, expr in theory.parse_scaling(diagram.scaling).entries:
        for symbol in expr.free_symbols:
            if symbol.name in axes:
                axis_variable[symbol.name] = variable
    phase_lines = []
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
            pieces.setdefault("notes", []).append(f"line {label!r} not drawn on the phase diagram: {exc}")
    if phase_lines:
        pieces["phase_lines"] = phase_lines
    return pieces


# ----------------------------------------------------------------------------- experiment steps
def _search_entry(path: Path, settings: ReportSettings, executor, store_path: Path) -> dict:
    from recallkit.compare.assertions import fit_experiment
    from recallkit.empirics.experiment import load_experiment
    from recallkit.empirics.search import replay
    from recallkit.empirics.store import ResultStore
    from recallkit.reports.pdf import experiment_entry

    loaded = load_experiment(path, preset=settings.preset)
    fitted = fit_experiment(path, store=store_path, preset=settings.preset, run=True, executor=executor,
                            progress=True, log=settings.log)
    print(f"{loaded.name}: reused {fitted.sweep.get('reused', 0)} / computed {fitted.sweep.get('computed', 0)}",
          file=settings.log)
    with ResultStore(store_path, readonly=True) as store:
        sweep = replay(loaded, store)
    lines = []
    for line in loaded.lines:
        lines.append({
            "name": line.label,
            "heatmap": [p for p in sweep.probes if p.get("line") == line.label],
            "boundary_points": [p for p in sweep.points if p.get("line") == line.label],
        })
    scalings = [(line.label, line.theory_scaling or line.scaling) for line in loaded.lines]
    pieces = _pack_pieces(loaded.pack, scalings)
    notes = pieces.pop("notes", [])
    pieces.pop("lower_bounds", None)
    entry = experiment_entry(fitted.to_dict(), title=loaded.name, lines=lines,
                             description=loaded.description, **pieces)
    entry["kind"] = loaded.kind
    entry.setdefault("notes", []).extend(notes)
    if sweep.violations:
        entry["notes"].append(f"{len(sweep.violations)} monotonicity violations along the searched size "
                              f"(accuracy fell as the size grew); see 'recallkit sweep' output")
    entry["config_hashes"] = sorted({p["config_hash"] for p in sweep.probes if p.get("config_hash")})
    if loaded.pack == "geometric_recall" and loaded.kind == "min_size":
        # SPEC B's d_min(N): the question is log versus power law, not a slope against a prediction
        from recallkit.compare.model_selection import select_d_min_experiment

        entry["dmin"] = select_d_min_experiment(sweep.points, loaded)
    return entry


def _geometric_entry(path: Path, settings: ReportSettings, store_path: Path) -> dict:
    """Run (or reuse from the store) one SPEC B experiment and turn it into a summary entry."""
    import torch

    from recallkit.empirics.geometric import load_geometric_experiment, run_geometric_experiment
    from recallkit.empirics.store import ResultStore

    spec = load_geometric_experiment(path, settings.preset)
    # the row's config is the experiment's settings; its hash is the key, as for trained models
    config = {"geometric": spec["settings"], "kind": spec["kind"], "preset": settings.preset, "name": spec["name"]}
    key = "geo-" + hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
    with ResultStore(store_path) as store:
        cached = store.get([key]).get(key)
        if cached is not None:
            result = cached["metrics"]
            print(f"{spec['name']}: reused 1 / computed 0", file=settings.log)
        else:
            started = time.perf_counter()
            result = run_geometric_experiment(path, settings.preset, device=settings.device or "cpu")
            wall = time.perf_counter() - started
            metrics = json.loads(json.dumps(result, default=_json_default))
            metrics.update({"wall_time_s": wall, "device": settings.device or "cpu",
                            "threads": torch.get_num_threads()})
            store.add(spec["name"], [config], [key], [metrics], code_version(), torch.__version__)
            # read back what the store holds (keys sorted), so this run draws exactly what a rerun will
            result = store.get([key])[key]["metrics"]
            print(f"{spec['name']}: reused 0 / computed 1 ({wall:.1f} s)", file=settings.log)
    return geometric_summary_entry(spec, result, key)


def geometric_summary_entry(spec: dict, result: dict, key: str) -> dict:
    """A summary entry for a SPEC B experiment: d_min experiments become the report's 'dmin' kind."""
    pieces = _pack_pieces(spec.get("pack"), [])
    pieces.pop("regions", None)
    notes = pieces.pop("notes", [])
    titles = {"construction": "Geometric recall: explicit construction", "d_min": "Geometric recall: d_min(N)",
              "probes": "Geometric recall: linear readout probes", "zero_shot": "Geometric recall: zero-shot transfer",
              "multi_hop": "Geometric recall: multi-hop chains"}
    # a short title for page heads; the file's description (often a paragraph) goes on the section page
    entry: dict[str, Any] = {"name": spec["name"], "title": titles.get(spec["kind"], spec["name"]),
                             "description": spec.get("description", ""), "config_hashes": [key],
                             "geometric": result, "notes": notes, **pieces}
    if spec["kind"] == "d_min":
        from recallkit.compare.model_selection import d_min_report_dict

        entry["kind"] = "dmin"
        # log against power per model and R, judged against SPEC B (learned: log, frozen: power)
        try:
            entry["dmin"] = d_min_report_dict(result) if result.get("points") else {}
        except RecallkitError as exc:
            entry["dmin"] = {}
            entry["notes"].append(f"no log-versus-power selection: {exc}")
    else:
        entry["kind"] = "geometric"
    # where it ran: the experiment's own provenance, else what the pipeline stored beside it
    provenance = result.get("provenance") or {k: result[k] for k in ("device", "threads") if k in result}
    ran = ", ".join(f"{k} {v}" for k, v in provenance.items())
    if result.get("wall_time_s") is not None:
        ran += ("; " if ran else "") + f"wall time {result['wall_time_s']:.1f} s"
    if ran:
        entry["notes"].append("ran on " + ran if provenance else ran)
    return entry


def _json_default(value: Any) -> Any:
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(value)


# ----------------------------------------------------------------------------- the job
def _provenance(settings: ReportSettings, entries: list[dict]) -> dict:
    import torch

    from recallkit.empirics.device import resolve_device

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

    from recallkit.empirics.executors import make_executor
    from recallkit.empirics.store import DEFAULT_STORE
    from recallkit.reports.pdf import build_report

    if settings.threads:
        torch.set_num_threads(settings.threads)
    store_path = Path(settings.store or os.environ.get("RECALLKIT_STORE") or DEFAULT_STORE)
    paths = [resolve_experiment(p) for p in settings.experiments] or default_experiments()
    # Validate every file before training anything, so a typo in the last file costs no time.
    kinds = {path: is_geometric(path) for path in paths}
    executor = make_executor(settings.executor, device=settings.device, threads=settings.threads,
                             scheduler=settings.scheduler, local_workers=settings.dask_local)
    entries: list[dict] = []
    failures: list[str] = []
    started = time.perf_counter()
    try:
        bar = tqdm(paths, desc="report", unit="experiment", file=settings.log, leave=True)
        for path in bar:
            bar.set_postfix_str(path.stem)
            try:
                if kinds[path]:
                    entries.append(_geometric_entry(path, settings, store_path))
                else:
                    entries.append(_search_entry(path, settings, executor, store_path))
            except RecallkitError as exc:
                failures.append(f"{path.name}: {exc}")
                print(f"error: {path.name}: {exc} (continuing with the other experiments)", file=settings.log)
        if settings.probes:
            probe_entry = _probe_entry(settings, store_path)
            if probe_entry is not None:
                entries.append(probe_entry)
    finally:
        executor.close()
    summary = {
        "schema": "recallkit.summary/1",
        "title": "recallkit report",
        "subtitle": f"{settings.preset} preset, {len(entries)} experiments",
        "provenance": _provenance(settings, entries),
        "experiments": entries,
        "failures": failures,
        "run_wall_time_s": round(time.perf_counter() - started, 1),
    }
    pdf = build_report(summary, settings.out_dir)
    return pdf


def _probe_entry(settings: ReportSettings, store_path: Path) -> dict | None:
    """The token-retrieval term-probe table, if the probe stage is available."""
    try:
        from recallkit.compare.probe_fits import run_probe
    except ImportError:
        return None
    from recallkit.empirics.store import ResultStore

    try:
        with ResultStore(store_path) as store:
            doc = run_probe("token_retrieval", preset=settings.preset, store=store, code_version=code_version())
    except RecallkitError as exc:
        print(f"error: term probes: {exc} (continuing)", file=settings.log)
        return None
    return {"name": "token_retrieval_probes", "kind": "probes", "title": "Token retrieval: term-by-term probes",
            "probes": doc}

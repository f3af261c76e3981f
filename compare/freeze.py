"""Freezing: every tested prediction of an experiment's preset, computed before any run of it exists.

``recallkit freeze EXPERIMENT --preset P`` writes the prediction file (JSON: the resolved grid, every check's tested
prediction with its inputs and their evidence, hashes of the experiment file and the pack as resolved, the time) into
``frozen/`` (a file a user commits) and records it in the results store. The verdicts read the store's latest freeze
of their preset (:func:`latest_freeze`); ``compare.evidence.judge_evidence`` says what a freeze makes of them.
Earlier freezes are kept: in the store, and as files whose names carry their hash.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
from pathlib import Path
from typing import Any

from recallkit.compare.assertions import (_law_prediction, predictions_for, realised_predictions, regressor_for,
                                          tested_prediction)
from recallkit.compare.evidence import CONDITIONAL, FREEZE_FORMAT, freeze_digest, latest_freeze
from recallkit.empirics.experiment import load_experiment
from recallkit.empirics.plan import plan
from recallkit.empirics.provenance import code_version
from recallkit.empirics.records import CheckKey, threshold_text
from recallkit.empirics.store import ResultStore, default_store_path
from recallkit.theory.errors import InputError
from recallkit.theory.pack import resolve_pack_path

__all__ = ["default_store_path", "FREEZE_FORMAT", "freeze_document", "freeze_digest", "freeze_experiment",
           "latest_freeze", "show_freezes", "write_freeze"]

CHECK_KINDS = ("min_size", "max_capacity", "law")


def _sha256_of(path: str | Path | None) -> str | None:
    if not path:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _pack_path(pack: str | None) -> Path | None:
    try:
        return resolve_pack_path(pack)[0] if pack else None
    except InputError:
        return None


def freeze_document(plan: Any, created_at: str | None = None) -> dict[str, Any]:
    """The freeze of a planned experiment (``empirics.plan.Plan``): no run is read, only the plan."""
    loaded = plan.experiment
    if loaded.kind not in CHECK_KINDS:
        raise InputError(f"{loaded.path}: kind = {loaded.kind!r} has no checks to freeze (freeze takes "
                         f"{', '.join(CHECK_KINDS)})")
    predictions = predictions_for(plan)
    realised = realised_predictions(plan, None) if loaded.kind == "min_size" else {}
    x, capacity = regressor_for(loaded.kind, loaded.base, predictions)
    checks, grid = [], {}
    for index, line in enumerate(loaded.lines):
        prediction = predictions.get(line.label)
        grid[line.label] = {"base_values": list(loaded.values_of(index)), "scaling": line.scaling}
        if loaded.kind == "law":
            key = str(CheckKey(loaded.name, line.label, metric=line.metric or loaded.metric, variable=loaded.base))
            tested = _law_prediction(key, prediction)
            checks.append(tested.to_dict() if tested is not None else {"check": key, "slope": None, "form": "none"})
            continue
        for threshold, relative in loaded.threshold_targets():
            key = str(CheckKey(loaded.name, line.label, threshold=float(threshold), relative=relative))
            extra: dict[str, Any] = {}
            tested, _, _ = tested_prediction(key, prediction, realised.get(line.label) or {},
                                             threshold_text(threshold, relative), capacity, extra,
                                             experiment=loaded.name, x=x)
            doc = tested.to_dict()
            if extra.get("all_terms_d"):
                doc["all_terms_d"] = extra["all_terms_d"]
            if line.reference_note:
                doc["reference_note"] = line.reference_note
            checks.append(doc)
    return {
        "format": FREEZE_FORMAT,
        "experiment": loaded.name,
        "preset": loaded.preset,
        "created_at": created_at or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "code_version": code_version(),
        "experiment_file": Path(loaded.path).name,
        "experiment_sha256": _sha256_of(loaded.path),
        "pack": loaded.pack,
        "pack_sha256": _sha256_of(_pack_path(loaded.pack)),
        "grid": {"base": loaded.base, "seeds": list(loaded.seeds), "lines": grid,
                 "thresholds": [threshold_text(t, r) for t, r in loaded.threshold_targets()]},
        "primary": {line.label: line.primary for line in loaded.lines if line.primary},
        "checks": checks,
    }


def write_freeze(doc: dict[str, Any], store: Any, out_dir: str | Path) -> tuple[str, Path, bool]:
    """Record ``doc`` in the store and write it as ``out_dir/EXPERIMENT.PRESET.HASH12.json`` (whole or not at all).
    Returns (hash, path, whether the store did not hold it yet)."""
    digest = freeze_digest(doc)
    text = json.dumps(doc, sort_keys=True, indent=1, allow_nan=False)
    out = Path(out_dir)
    path = out / f"{doc['experiment']}.{doc['preset']}.{digest[:12]}.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.partial")
        partial.write_text(text + "\n")
        partial.replace(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the freeze ({exc.strerror or exc})") from None
    new = store.add_freeze(digest, doc["experiment"], doc["preset"], doc["created_at"], text)
    return digest, path, new


def freeze_experiment(experiment: str, preset: str, store_path: str, out_dir: str | Path) -> list[str]:
    """``recallkit freeze``: plan the preset, freeze it, record it; the lines to print (stdout), and a last line
    starting "note:" (stderr) where the store already holds runs of the experiment."""
    planned = plan(experiment, preset=preset)
    doc = freeze_document(planned)
    with ResultStore(store_path) as results_store:
        digest, path, new = write_freeze(doc, results_store, out_dir)
        stored = len(results_store.rows(doc["experiment"]))
    checks = doc["checks"]
    numbers = sum(c.get("slope") is not None for c in checks)
    conditional = sum(any(i.get("evidence") == CONDITIONAL for i in c.get("inputs") or ()) for c in checks)
    lines = [f"froze {doc['experiment']} --preset {preset}: {len(checks)} checks, {numbers} predicted numbers"
             + (f" ({conditional} of them read a measured quantity of their runs)" if conditional else ""),
             f"freeze {digest[:12]} ({doc['created_at']}): {path}" + ("" if new else " (the store already held it)")]
    if stored:
        lines.append(f"note: the store already holds {stored} runs of {doc['experiment']}; a verdict on runs stored "
                     f"before this freeze is exploratory")
    return lines


def show_freezes(experiment: str, preset: str, store_path: str, as_json: bool) -> list[str]:
    """``recallkit freeze --show``: the store's freezes of the preset, newest last, with the newest one's checks (or
    its document as JSON)."""
    name = load_experiment(experiment, preset=preset).name
    with ResultStore(store_path, readonly=True) as results_store:
        found = results_store.freezes(name, preset)
        where = results_store.path
    if as_json:
        return [json.dumps(found[-1]["document"] if found else None, allow_nan=False)]
    if not found:
        return [f"no freeze of {name} --preset {preset} in {where}"]
    lines = []
    for record in found:
        doc = record["document"]
        lines.append(f"freeze {record['hash'][:12]} {record['created_at']} code {doc.get('code_version')} pack "
                     f"{doc.get('pack')} ({str(doc.get('pack_sha256'))[:12]}): {len(doc.get('checks') or [])} checks")
    for check in found[-1]["document"].get("checks") or []:
        slope = "none" if check.get("slope") is None else f"{check['slope']:.4f}"
        said = "; ".join(f"{i['name']}: {i['evidence']}" for i in check.get("inputs") or ())
        lines.append(f"  {check['check']}: {slope} ({check.get('form')}; {said})")
    return lines

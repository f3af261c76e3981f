"""Geometric recall's own step in the main job: experiments with a ``[geometric]`` table (construction,
probes, zero-shot, multi-hop) run through :mod:`.runners` and become summary entries (the d_min(N) search
is a search experiment, judged by :func:`.judge.judge_search`)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from recallkit.empirics.config import store_key
from recallkit.empirics.provenance import code_version
from recallkit.empirics.store import ResultStore, json_default
from recallkit.systems.geometric_recall.runners import load_geometric_experiment, run_geometric_experiment
from recallkit.theory.summary import pack_pieces


def geometric_entry(path: Path, context: Any) -> dict:
    """The registry's runner for ``[geometric]`` files: run (or reuse from the store) one experiment and
    turn it into a summary entry. Its result is one store row keyed by the hash of its settings."""
    settings, store_path = context.settings, context.store_path
    import torch  # about 1 s to import: only when a geometric experiment runs

    spec = load_geometric_experiment(path, settings.preset)
    # the row's config is the experiment's settings; its hash is the key, as for trained models
    config = {"geometric": spec["settings"], "kind": spec["kind"], "preset": settings.preset, "name": spec["name"]}
    key = store_key(config, prefix="geo-")
    def run() -> dict:
        started = time.perf_counter()
        result = json.loads(json.dumps(run_geometric_experiment(path, settings.preset, device=settings.device or "cpu"),
                                       default=json_default))
        return {**result, "wall_time_s": time.perf_counter() - started, "device": settings.device or "cpu",
                "threads": torch.get_num_threads()}

    with ResultStore(store_path) as store:
        result, wall = store.get_or_compute(spec["name"], config, key, run, code_version(), torch.__version__)
    print(f"{spec['name']}: reused 1 / computed 0" if wall is None
          else f"{spec['name']}: reused 0 / computed 1 ({wall:.1f} s)", file=settings.log)
    return geometric_summary_entry(spec, result, key)


def geometric_summary_entry(spec: dict, result: dict, key: str) -> dict:
    """A summary entry of kind "geometric" for a geometric-recall experiment."""
    pieces = pack_pieces(spec.get("pack"), [])
    pieces.pop("regions", None)
    notes = pieces.pop("notes", [])
    titles = {"construction": "Geometric recall: explicit construction",
              "probes": "Geometric recall: linear readout probes", "zero_shot": "Geometric recall: zero-shot transfer",
              "multi_hop": "Geometric recall: multi-hop chains"}
    # a short title for page heads; the file's description (often a paragraph) goes on the section page
    entry: dict[str, Any] = {"name": spec["name"], "title": titles.get(spec["kind"], spec["name"]),
                             "description": spec.get("description", ""), "config_hashes": [key],
                             "geometric": result, "notes": notes, **pieces, "kind": "geometric"}
    # where it ran: the experiment's own provenance, else what the pipeline stored beside it
    provenance = result.get("provenance") or {k: result[k] for k in ("device", "threads") if k in result}
    ran = ", ".join(f"{k} {v}" for k, v in provenance.items())
    if result.get("wall_time_s") is not None:
        ran += ("; " if ran else "") + f"wall time {result['wall_time_s']:.1f} s"
    if ran:
        entry["notes"].append("ran on " + ran if provenance else ran)
    return entry

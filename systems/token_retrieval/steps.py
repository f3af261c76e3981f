"""Token retrieval's own step in the main job: the term-by-term probe table after the experiments."""
from __future__ import annotations

from typing import Any

from recallkit.empirics.provenance import code_version
from recallkit.empirics.store import ResultStore
from recallkit.systems.token_retrieval.judge import run_probe
from recallkit.theory.errors import RecallkitError


def term_probe_entry(context: Any) -> dict | None:
    """The term-probe summary entry (kind ``probes``), reusing probe rows from the store."""
    if not context.settings.probes:
        return None
    try:
        with ResultStore(context.store_path) as store:
            doc = run_probe("token_retrieval", preset=context.settings.preset, store=store,
                            code_version=code_version())
    except RecallkitError as exc:
        print(f"error: term probes: {exc} (continuing)", file=context.log)
        return None
    return {"name": "token_retrieval_probes", "kind": "term_probes", "title": "Token retrieval: term-by-term probes",
            "probes": doc}

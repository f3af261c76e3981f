"""Token retrieval's own steps in the main job: the term-by-term probe table after the experiments, and the numerical
check of the gradient-access lower bound."""
from __future__ import annotations

import json
from typing import Any

from recallkit.empirics.config import store_key
from recallkit.empirics.provenance import code_version
from recallkit.empirics.store import ResultStore
from recallkit.systems.token_retrieval import probes_wanted
from recallkit.systems.token_retrieval.gradient_access import check
from recallkit.systems.token_retrieval.judge import DEFAULT_PACK, probe_grid_packs, run_probe
from recallkit.theory.errors import RecallkitError


def probe_pack(packs: tuple[str, ...]) -> str:
    """The pack whose probe grid a report takes: the first of the report's packs (``ReportSettings.packs``, those of
    its named experiments) that the probe file has a grid for, else the default one (the main job's, unchanged)."""
    gridded = probe_grid_packs()
    return next((pack for pack in packs if pack in gridded), DEFAULT_PACK["token_retrieval"])


def term_probe_entry(context: Any) -> dict | None:
    """The term-probe summary entry (kind ``probes``), reusing probe rows from the store: the probe grid of the pack
    the report's experiments test (a report of Fig 2 alone, given --probes, probes the attention-only terms), at the
    report's preset. The registry runs it where the system's ``diagnostics_apply`` says so; the check here keeps a
    direct call to the option too."""
    if not probes_wanted(context.settings):
        return None
    pack = probe_pack(context.settings.packs)
    try:
        with ResultStore(context.store_path) as store:
            doc = run_probe("token_retrieval", pack=pack, preset=context.settings.preset, store=store,
                            code_version=code_version())
    except RecallkitError as exc:
        print(f"error: term probes: {exc} (continuing)", file=context.log)
        return None
    main = pack == DEFAULT_PACK["token_retrieval"]  # the main job's entry keeps its name and title
    return {"name": "token_retrieval_probes" if main else f"{pack}_probes", "kind": "term_probes",
            "title": "Token retrieval: term-by-term probes" + ("" if main else f" ({pack})"), "probes": doc}


# V = 32..128 on both lines, two decoders, two observations, three seeds: about 4 s on one CPU thread. Three-step GD is
# left out here (it trains models; DERIVATION.md §7.4 has its numbers from the module's command line).
GRADIENT_ACCESS_CHECK: dict[str, Any] = dict(V_values=(32, 64, 128))


def gradient_access_entry(context: Any) -> dict | None:
    """The gradient-access lower bound's numerical check (kind ``gradient_access``, DERIVATION.md §7.4): the d each
    decoder of the noisy first gradient needs against the bound's d. A check of the theory like the term probes, so
    ``--no-probes`` (``--option token_retrieval.probes=false``) leaves it out too."""
    if not probes_wanted(context.settings):
        return None
    name = "token_retrieval_gradient_access"
    # one store row keyed by the check's settings, as the geometric runners' results are: a report reuses it
    config = {"check": "gradient_access", "settings": json.loads(json.dumps(GRADIENT_ACCESS_CHECK, default=list))}
    key = store_key(config, prefix="ga-")
    with ResultStore(context.store_path) as store:
        def said(done: int, total: int) -> None:  # inner progress: minutes on a busy machine
            print(f"{name}: {done}/{total} (line, V) settled", file=context.log, flush=True)

        result, wall = store.get_or_compute(name, config, key, lambda: check(**GRADIENT_ACCESS_CHECK, progress=said),
                                            code_version())
    print(f"{name}: reused 1 / computed 0" if wall is None else f"{name}: reused 0 / computed 1 ({wall:.1f} s)",
          file=context.log)
    return {"name": name, "kind": "gradient_access",
            "title": "Token retrieval: the gradient-access lower bound against decoders of the noisy first gradient",
            "check": result, "config_hashes": [key]}

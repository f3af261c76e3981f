"""CLI: ``recallkit probe SYSTEM`` - each theorem term's measured exponents against the pack's, for a system
that implements the term-probe hooks (``recallkit_probe`` and ``recallkit_probe_table``, recallkit.hookspecs)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from recallkit import registry
from recallkit.cli_output import json_text
from recallkit.empirics import cost
from recallkit.cli_sweep import MAX_THREADS
from recallkit.empirics.provenance import code_version
from recallkit.empirics.store import ResultStore, default_store_path
from recallkit.interrupts import watch_store
from recallkit.theory.errors import InputError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``recallkit probe`` to the root app."""

    @app.command("probe")
    def probe_command(
        probe: str = typer.Argument("token_retrieval", help="A system with term probes (token_retrieval) or a probe TOML file."),
        pack: Optional[str] = typer.Option(
            None, "--pack", help="Pack whose terms are checked: token_retrieval (attention-MLP, default) or "
                                 "token_retrieval_attn (attention-only)."),
        preset: str = typer.Option("quick", "--preset", help="Grid preset of the probe file (quick | paper)."),
        store: Optional[str] = typer.Option(
            None, "--store", help="Results store (SQLite) that keeps probe rows for reuse. "
                                  "Default: $RECALLKIT_STORE or results/recallkit.db."),
        use_store: bool = typer.Option(True, "--use-store/--no-store", help="Reuse and keep probe rows in the store."),
        statistic: str = typer.Option(
            "spread", "--statistic", help="Noise-term size: spread (std over wrong labels; union-bound log factor "
                                         "left out) or max_wrong (largest over wrong labels; log factor kept)."),
        method: str = typer.Option("axis", "--method", help="axis: one fit per axis of the star grid; joint: one OLS "
                                                            "of log size on all log variables."),
        delta: Optional[float] = typer.Option(None, "--delta", help="Equivalence margin on the exponent (default: the file's, 0.25)."),
        alpha: Optional[float] = typer.Option(None, "--alpha", help="Test level (default: the file's, 0.05)."),
        threads: int = typer.Option(1, "--threads", min=1, max=MAX_THREADS, help="torch CPU threads (recorded with every row)."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON document on stdout and nothing else."),
        max_cost: Optional[str] = typer.Option(
            None, "--max-cost", help="Refuse probe rows estimated above this much compute, e.g. 2h, 30m or inf (default "
                                     "2h, or $RECALLKIT_MAX_COST); rows the store holds cost nothing."),
    ) -> None:
        """Split the logits after the three steps into the pack's terms on a grid where one of V, N, d, L, m
        moves at a time, fit each term's size against each variable (OLS, HC3, t intervals), and judge the
        fitted exponent against the pack's (TOST): term, variable, predicted, fitted with interval, verdict.
        Also shown: the same fit with the measured attention normalisers swapped for their asymptotic
        L-powers (drift-corrected), which separates finite-L transients from errors in the derivation."""
        limit = cost.max_cost_allowed(max_cost)
        import torch  # about 1 s to import: only when a probe runs, never for --help

        torch.set_num_threads(threads)
        run_probe, format_table = _probe_functions(probe)
        result_store = None
        if use_store:
            watch_store(store or default_store_path())
            result_store = ResultStore(store or default_store_path())
        log = (lambda message: typer.echo(message, err=True))  # noqa: E731
        try:
            with cost.budget(limit):  # the rows the store lacks are priced before the first is computed
                doc = run_probe(probe, pack, preset, store=result_store, code_version=code_version(),
                                statistic=statistic, method=method, delta=delta, alpha=alpha, log=log)
        finally:
            if result_store is not None:
                result_store.close()
        typer.echo(f"probe rows: reused {doc['rows']['reused']} / computed {doc['rows']['computed']}", err=True)
        if as_json:
            typer.echo(json_text(doc))
        else:
            typer.echo(format_table(doc))
        sys.stdout.flush()


def _probe_functions(probe: str):
    """(run_probe, format_table) of the system named ``probe``, or of the one system with term probes
    when ``probe`` is a probe file."""
    try:
        with_probes = [s for s in registry.systems() if s.probe]
    except registry.RegistryError as exc:
        raise InputError(str(exc)) from None
    names = ", ".join(s.name for s in with_probes) or "none"
    chosen = [s for s in with_probes if s.name == probe]
    if not chosen and Path(probe).suffix == ".toml" and len(with_probes) == 1:
        chosen = with_probes
    if not chosen:
        raise InputError(f"probe: {probe!r}: expected a system with term probes ({names}) or a probe TOML file")
    if not chosen[0].probe_table:
        raise InputError(f"probe: system {chosen[0].name} implements recallkit_probe but not recallkit_probe_table, "
                         f"which prints its document")
    return registry.load_object(chosen[0].probe), registry.load_object(chosen[0].probe_table)

"""The training-budget check (``search.budget_factor``) of a bisection search.

At each line's largest base value, the failed neighbour of each seed's answer is probed once more with
``search.budget_key`` (steps) times ``budget_factor``. If it then reaches the threshold, the answer would move
by at least one search step with the larger budget, and the point is flagged (``budget_flagged``); the check's
record is the point's ``budget_check``. The larger-budget runs are stored like any other, so a rerun or a replay
finds them.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from recallkit.empirics.config import planned_config
from recallkit.empirics.records import BoundaryPoint
from recallkit.empirics.search_types import Cell, Failure, Prober


__all__ = ["BudgetCheck"]


class BudgetCheck:
    """The checks of one sweep, by (line index, base value, seed, threshold), in the order of the cells."""

    def __init__(self, driver: Prober):
        self.driver = driver
        self.exp = driver.exp
        self.checks: dict[tuple[int, int, int, float], dict] = {}

    def run(self, cells: list[Cell]) -> None:
        """Probe every answer's failed neighbour with the larger budget (one round), then record the outcomes."""
        wanted: dict[str, dict] = {}
        for cell in cells:
            self._check(cell, wanted)
        if wanted:
            self.driver.execute(wanted)
        for check in self.checks.values():
            if check.get("config_hash") is not None:
                self._record(check)

    def annotate(self, points: list[BoundaryPoint]) -> list[BoundaryPoint]:
        """The points, each checked one with its check's record and whether the larger budget reached its
        threshold."""
        by_label = {line.label: i for i, line in enumerate(self.exp.lines)}
        out = []
        for p in points:
            check = self.checks.get((by_label[p.line], p.base_value, p.seed, p.threshold))
            if check is not None:
                p = dataclasses.replace(p, budget_check=dict(check), budget_flagged=bool(check.get("reached")))
            out.append(p)
        return out

    def runs(self) -> list[dict]:
        """The checks that trained (or looked up) a larger-budget run."""
        return [dict(check) for check in self.checks.values() if check.get("config_hash")]

    def _check(self, cell: Cell, wanted: dict[str, dict]) -> None:
        """The check of one cell at its line's largest base value (skipped, with the reason, where there is no
        answer or no failed neighbour); its larger-budget config goes into ``wanted`` unless already known."""
        exp, driver = self.exp, self.driver
        key, factor = exp.search.budget_key, exp.search.budget_factor
        r = cell.result
        if r is None or cell.base_index != len(exp.values_of(cell.line_index)) - 1:
            return
        check: dict[str, Any] = {"line": exp.lines[cell.line_index].label, exp.base: r.base_value,
                                 "seed": cell.seed, "threshold": cell.threshold, "key": key, "factor": factor}
        self.checks[(cell.line_index, r.base_value, cell.seed, cell.threshold)] = check
        if r.censored or r.size is None:
            check["skipped"] = "the point is censored"
            return
        neighbour = self._failed_neighbour(cell)
        if neighbour is None:
            check["skipped"] = f"no failed {exp.size} next to the answer was probed"
            return
        config = dict(driver.config_of[driver.key(cell.line_index, r.base_value, neighbour, cell.seed)])
        scaled = config[key] * factor
        config[key] = int(math.floor(scaled + 1e-9)) if isinstance(config[key], int) else scaled
        config = planned_config(config)
        h = config.parsed.digest
        driver.config_of[h] = config
        check.update({exp.size: neighbour, "answer": r.size, "value": config[key], "config_hash": h})
        if h not in driver.cache:
            wanted[h] = config

    def _failed_neighbour(self, cell: Cell) -> int | None:
        """The probed size next to the answer on the failing side, if one was probed."""
        r = cell.result
        known = {s: v for s, v in self.driver.known(cell.line_index, r.base_value, cell.seed).items()
                 if isinstance(v, float)}
        missed = [s for s, v in known.items() if not self.exp.reaches(v, cell.threshold)]
        if self.exp.kind == "max_capacity":
            return min((s for s in missed if s > r.size), default=None)
        return max((s for s in missed if s < r.size), default=None)

    def _record(self, check: dict) -> None:
        """The larger-budget run's metric on its check, and whether it reached the threshold (or its error)."""
        exp = self.exp
        entry = self.driver.cache.get(check["config_hash"])
        if isinstance(entry, Failure) or not isinstance(entry, dict):
            check["error"] = entry.message if isinstance(entry, Failure) else "not run"
            return
        check[exp.metric] = entry.get(exp.metric_of(check["line"]))
        check["reached"] = bool(isinstance(check[exp.metric], (int, float))
                                and exp.reaches(check[exp.metric], check["threshold"]))

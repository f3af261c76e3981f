"""The sizes a line's search may probe: its search settings (a line's own ``search`` table over the
experiment's), its bounds, and with ``search.grid`` the constant-ratio grid every probe lies on."""
from __future__ import annotations

import math

from recallkit.empirics.experiment import Experiment, SearchSettings

__all__ = ["SizeLattice"]


class SizeLattice:
    """Probe-able sizes per line of one experiment (``line_index=None``: the experiment's own settings)."""

    def __init__(self, experiment: Experiment):
        self.exp = experiment
        self._grids: dict[int | None, list[int] | None] = {}  # grid_sizes() builds a list: once per line

    def search(self, line_index: int | None) -> SearchSettings:
        """The search settings of a line (its own ``search`` overrides merged in), else the experiment's."""
        if line_index is None:
            return self.exp.search
        return self.exp.lines[line_index].search or self.exp.search

    def grid(self, line_index: int | None) -> list[int] | None:
        """The constant-ratio grid of sizes a line's bisection probes (None: every integer)."""
        if line_index not in self._grids:
            self._grids[line_index] = self.search(line_index).grid_sizes()
        return self._grids[line_index]

    def clamp(self, size: float, line_index: int | None = None) -> int:
        """The size inside the line's search bounds (on its grid: the grid size nearest in log)."""
        grid = self.grid(line_index)
        if grid is not None:
            size = max(size, 1e-9)
            return min(grid, key=lambda g: (abs(math.log(g / size)), g))
        search = self.search(line_index)
        return int(min(max(size, search.min), search.max))

    def max_name(self, line_index: int) -> str:
        """How a censoring reason names the upper search bound: the line's own cap when it has a lower one."""
        own = self.exp.lines[line_index].search
        return "the line's search.max cap" if own is not None and own.max < self.exp.search.max else "search.max"

    def below(self, size: float, li: int | None = None) -> int:
        """The largest probe-able size <= size (the smallest one if none)."""
        grid = self.grid(li)
        if grid is not None:
            return max((g for g in grid if g <= size), default=grid[0])
        return self.clamp(math.floor(size), li)

    def above(self, size: float, li: int | None = None) -> int:
        """The smallest probe-able size >= size (the largest one if none)."""
        grid = self.grid(li)
        if grid is not None:
            return min((g for g in grid if g >= size), default=grid[-1])
        return self.clamp(math.ceil(size), li)

    def expanded(self, size: int, up: bool, li: int | None = None) -> int:
        """The next size to probe when a bracket missed: ``expand`` times further (on the grid: that many
        grid steps, at least one, so no grid size is skipped by rounding)."""
        search, grid = self.search(li), self.grid(li)
        if grid is not None:
            steps = max(1, round(math.log(search.expand) / math.log(search.grid)))
            index = grid.index(size) + (steps if up else -steps)
            return grid[min(max(index, 0), len(grid) - 1)]
        return self.above(size * search.expand, li) if up else self.below(size / search.expand, li)

    def bounds(self, li: int | None = None) -> tuple[int, int]:
        """The smallest and largest probe-able size (the grid's ends, else search.min and search.max)."""
        grid = self.grid(li)
        if grid is not None:
            return grid[0], grid[-1]
        search = self.search(li)
        return search.min, search.max

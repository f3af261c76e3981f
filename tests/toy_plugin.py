"""A system plug-in for tests, declared in one call: the hooks a test system needs, as methods."""
from __future__ import annotations

from pathlib import Path

from recallkit.registry import PageKind, SystemInfo, Task, hookimpl

__all__ = ["ToySystem"]


class ToySystem:
    """A system named ``name`` whose folder is ``root``, with the tasks, trainers (``"module:attribute"``) and page
    kinds given (its hooks return them, empty where none is given)."""

    def __init__(self, name: str, root: Path, title: str = "toy", tasks: tuple[Task, ...] = (),
                 trainers: tuple[str, ...] = (), page_kinds: tuple[PageKind, ...] = ()) -> None:
        self.info = SystemInfo(name=name, title=title, root=Path(root))
        self.tasks, self.trainers, self.page_kinds = tuple(tasks), tuple(trainers), tuple(page_kinds)

    @property
    def name(self) -> str:
        return self.info.name

    @hookimpl
    def recallkit_system(self) -> SystemInfo:
        return self.info

    @hookimpl
    def recallkit_tasks(self) -> tuple[Task, ...]:
        return self.tasks

    @hookimpl
    def recallkit_trainers(self) -> tuple[str, ...]:
        return self.trainers

    @hookimpl
    def recallkit_page_kinds(self) -> tuple[PageKind, ...]:
        return self.page_kinds

    def __repr__(self) -> str:
        return f"ToySystem({self.info.name!r})"

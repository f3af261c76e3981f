"""Associative-memory capacity (Nichani, Lee, Bietti, ICLR 2025): the anchor that calibrates the toolkit.

See README.md in this folder for the model, what the paper states and what is derived here. This module is the
system's plug-in (its hooks, recallkit.hookspecs): registration only, nothing heavy.
"""
from pathlib import Path

from recallkit.registry import SystemInfo, Task, hookimpl


@hookimpl
def recallkit_system() -> SystemInfo:
    return SystemInfo(name="assoc_memory", title="Associative-memory capacity (linear and MLP memories)",
                      root=Path(__file__).resolve().parent, report=("assoc_memory_linear", "assoc_memory_mlp"))


@hookimpl
def recallkit_tasks() -> tuple[Task, ...]:
    return (Task("assoc_memory", config=f"{__name__}.config:AssocMemoryConfig", problem=f"{__name__}.task:AssocMemory"),)

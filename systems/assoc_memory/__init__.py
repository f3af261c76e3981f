"""Associative-memory capacity (Nichani, Lee, Bietti, ICLR 2025): the anchor that calibrates the toolkit.

See README.md in this folder for the model, what the paper states and what is derived here.
"""
from pathlib import Path

from recallkit.registry import System, Task

SYSTEM = System(
    name="assoc_memory",
    title="Associative-memory capacity (linear and MLP memories)",
    root=Path(__file__).resolve().parent,
    tasks=(Task("assoc_memory", config=f"{__name__}.config:AssocMemoryConfig", problem=f"{__name__}.task:AssocMemory"),),
    report=("assoc_memory_linear", "assoc_memory_mlp"),
)

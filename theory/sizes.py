"""The size symbols: the model variables a run config sets as sizes (V vocabulary, N facts or samples, d embedding
dimension, L sequence length, m MLP width, R relations), in the order they are listed everywhere.

The one list: experiment files (which sizes a line or a preset may set), boundary points (which config values a point
carries), run-config expressions (a gamma schedule) and fit regressors (``log V`` ...) all read it. It is the
built-in vocabulary of ``theory.symbols`` without the step sizes eta and gamma; a pack's own declared variables come
on top of it where a file may name them. No imports: every stage reads it at import time without loading sympy.
"""
from __future__ import annotations

__all__ = ["SIZE_SYMBOLS"]

SIZE_SYMBOLS: tuple[str, ...] = ("V", "N", "d", "L", "m", "R")

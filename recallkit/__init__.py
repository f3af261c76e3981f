"""recallkit: check the theory of factual recall in transformers against real training runs.

The four stages live in their own top-level packages, and data flows one way:
``theory`` (sympy) -> ``empirics`` (torch) -> ``compare`` (statsmodels) -> ``reports`` (matplotlib).
This package only holds the version and the command-line interface that calls them.
"""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path

__version__ = "0.1.0"

REPO_ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Version string recorded with every result: package version plus git commit (and '+dirty')."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{__version__}+g{sha}" + (".dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return __version__

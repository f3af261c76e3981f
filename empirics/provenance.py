"""Provenance recorded with every result: the code version (package version + git commit)."""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path

from recallkit import __version__

__all__ = ["code_version", "SOURCE_ROOT"]


# the checkout this package was installed from (editable installs); a wheel has no git and records
# the package version alone
SOURCE_ROOT = Path(__file__).resolve().parent.parent


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Version string recorded with every result: package version plus git commit (and '.dirty')."""
    try:
        sha = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
        return f"{__version__}+g{sha}" + (".dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return __version__

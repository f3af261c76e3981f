"""Provenance recorded with every result: the code version (package version + git commit), and the digest of the
installed namespace's source that caches key their entries by."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import subprocess
from pathlib import Path

from recallkit import __version__

__all__ = ["code_version", "namespace_digest", "namespace_roots", "SOURCE_ROOT"]


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


_NAMESPACE = ("recallkit", "recallkit.theory", "recallkit.empirics", "recallkit.compare", "recallkit.reports",
              "recallkit.systems")


def namespace_roots() -> list[Path]:
    """The folders of the installed ``recallkit`` namespace's packages."""
    roots: list[Path] = []
    for name in _NAMESPACE:
        spec = importlib.util.find_spec(name)
        roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    return roots


def namespace_digest(patterns: tuple[str, ...], head: bytes = b"") -> str:
    """SHA-256 of ``head`` and every file of the installed ``recallkit`` namespace (stages, systems, orchestration)
    matching ``patterns``, by path and bytes: the one walk behind the page keys' code fingerprint
    (``reports.render.code_fingerprint``) and the result cache's (``compare.fit_cache.source_fingerprint``)."""
    digest = hashlib.sha256(head)
    seen: set[Path] = set()
    for root in namespace_roots():
        for path in sorted(found for pattern in patterns for found in root.rglob(pattern)):
            if path not in seen:
                seen.add(path)
                digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()

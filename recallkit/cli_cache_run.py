"""What ``recallkit cache`` runs (``recallkit.cli_cache`` imports it when a command runs)."""
from __future__ import annotations

import sys
from pathlib import Path

from recallkit.empirics import cache
from recallkit.pipeline import verify_cache
from recallkit.report_settings import ReportSettings

__all__ = ["clear", "info_lines", "verify"]


def info_lines() -> list[str]:
    """Where the cache and its secret are, what it holds, and how much of its bound it uses."""
    root = cache.cache_root()
    if root is None:
        return ["cache: off (RECALLKIT_CACHE=off)"]
    opened = cache.from_env()
    lines = [f"cache: {root}", f"secret: {cache.key_path()}"]
    if opened is None:
        return lines + ["entries: none (no secret could be made: the cache is off)"]
    counts: dict[str, int] = {}
    for kind, _ in opened.entries():
        counts[kind] = counts.get(kind, 0) + 1
    size = sum(p.stat().st_size for kind in cache.KINDS if (root / kind).is_dir()
               for p in (root / kind).iterdir() if p.is_file() and not p.is_symlink())
    return lines + ["entries: " + (", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "none")
                    + f"; {size / 2**20:.1f} MB of at most {opened.limit / 2**20:.0f} MB (RECALLKIT_CACHE_MB)"]


def verify(experiments: list[str], store: Path | None, preset: str, fraction: float):
    """:func:`recallkit.pipeline.verify_cache` for these experiments (none: the main job's)."""
    settings = ReportSettings(experiments=[Path(e) for e in experiments], preset=preset, store=store, log=sys.stderr)
    return verify_cache(settings, fraction)


def clear() -> str:
    """Empty the cache; the line that says what was removed."""
    root = cache.cache_root()
    if root is None:
        return "cache: off (RECALLKIT_CACHE=off): nothing to clear"
    opened = cache.from_env(create_key=False) or cache.Cache(root, b"", cache.max_bytes())
    return f"cache clear: removed {opened.clear()} entries from {root}"

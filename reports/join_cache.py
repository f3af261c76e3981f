"""Reusing the previous build's joined PDF: the key of a joined PDF is a hash of everything it is made of
(each page's cache key, stem, label and section in order, the title and the date), recorded in
``figures/pages.json`` (signed with this user's cache secret, ``reports.render.write_manifest``) with the hash of
the PDF's bytes. When a build's key equals the recorded one and
the PDF on disk still has the recorded hash, the PDF is copied instead of joined again; a report in
another folder finds it by the same key in the cache (``empirics.cache``, kind ``joined``).
(Each page is reused the same way, by its own key, in ``reports.render``.)
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import pypdf

from recallkit.empirics.files import read_regular, write_atomic
from recallkit.reports import render
from recallkit.reports.style import source_date

__all__ = ["join_key", "reuse_previous_join", "record_join", "file_sha256"]


def file_sha256(path: Path) -> str:
    """SHA-256 of the file's bytes, in hex."""
    return hashlib.sha256(read_regular(path, 2**30)).hexdigest()


def _previous_join(manifest: Path) -> dict:
    """``{"key", "sha256"}`` of the PDF the previous build joined (see :func:`join_key`), or {} (none, or a list
    this user's secret did not sign)."""
    joined = render.read_manifest(manifest.parent).get("joined")
    return joined if isinstance(joined, dict) else {}


def reuse_previous_join(key: str | None, previous_pdf: Path, previous_manifest: Path, target: Path) -> bool:
    """Copy ``previous_pdf`` to ``target`` when it was joined under ``key`` (as ``previous_manifest`` records)
    and is unchanged since; return whether it was."""
    joined = _previous_join(previous_manifest)
    if key is None or joined.get("key") != key:
        return False
    try:
        data = read_regular(previous_pdf, 2**30)
    except OSError:
        return False
    if hashlib.sha256(data).hexdigest() != joined.get("sha256"):
        return False
    write_atomic(target, data)  # every page and its place unchanged
    return True


def record_join(manifest: Path, key: str, pdf: Path) -> None:
    """Record in ``manifest`` that ``pdf`` was joined under ``key``, with the hash of its bytes (so a PDF
    replaced or cut short since is never taken for it)."""
    pages = render.read_manifest(manifest.parent).get("pages", {})
    render.write_manifest(manifest.parent, pages, {"key": key, "sha256": file_sha256(pdf)})


def join_key(pages: Sequence[render.Page], manifest: dict, title: str, date) -> str | None:
    """A hash of everything the joined PDF is made of: each page's cache key (from the drawer's ``manifest``;
    it holds the code fingerprint), stem, label and section in order, the title, the date the PDF carries
    (SOURCE_DATE_EPOCH, else ``date``) and the pypdf version that joins. Equal keys, equal PDF bytes, so an
    unchanged report copies the PDF instead of joining it again. None when a page is not cacheable."""
    keys = [(manifest.get(p.stem) or {}).get("key") for p in pages]
    if any(k is None for k in keys):
        return None
    when = source_date() or date
    text = json.dumps([title, str(when), f"pypdf {pypdf.__version__}",
                       [[p.stem, p.label, p.section, k] for p, k in zip(pages, keys)]])
    return hashlib.sha256(text.encode()).hexdigest()

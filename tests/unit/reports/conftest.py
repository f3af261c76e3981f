"""Shared fixtures of the report tests."""
from __future__ import annotations

import pytest

from recallkit import registry
from recallkit.registry import PageKind
from tests.toy_plugin import ToySystem

__all__: list[str] = []


@pytest.fixture
def register_page_kind(tmp_path):
    """``register(system, kind, pages, rows)``: registers, for one test, a system named ``system`` whose one page
    kind ``kind`` draws its pages with ``pages`` and lists its rows with ``rows`` ("module:function" each)."""
    systems: list[str] = []

    def register(system: str, kind: str, pages: str, rows: str) -> None:
        registry.register(ToySystem(system, tmp_path, page_kinds=(PageKind(kind, pages=pages, rows=rows),)))
        systems.append(system)

    try:
        yield register
    finally:
        for system in systems:
            registry.unregister(system)

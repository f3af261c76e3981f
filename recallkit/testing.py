"""Helpers for the tests of a system plug-in (a package of one's own that plugs a system into recallkit)::

    from recallkit.testing import check_system

    def test_my_system_plugs_in():
        check_system("my_package")

The same check is the pytest fixture ``recallkit_check_system`` (recallkit's pytest plugin, installed with it).
"""
from __future__ import annotations

from recallkit.plugin_check import SystemCheckError, check_system

__all__ = ["SystemCheckError", "check_system"]

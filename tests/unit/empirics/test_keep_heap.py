"""The allocator tuning of empirics.numerics.keep_freed_heap is opt-in: without RECALLKIT_KEEP_HEAP=1 the process's
malloc is left alone (the memory model's estimates hold for the default allocator)."""
import ctypes

from recallkit.empirics import numerics
from recallkit.empirics.config import HEAP_BUFFER_MAX


def _calls(monkeypatch, value):
    seen = []

    class FakeLibc:
        def mallopt(self, option, size):
            seen.append((option, size))

    monkeypatch.setattr(numerics, "_heap_kept", False)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLibc())
    if value is None:
        monkeypatch.delenv("RECALLKIT_KEEP_HEAP", raising=False)
    else:
        monkeypatch.setenv("RECALLKIT_KEEP_HEAP", value)
    numerics.keep_freed_heap()
    numerics.keep_freed_heap()  # once per process
    return seen


def test_malloc_is_left_alone_unless_asked(monkeypatch):
    assert _calls(monkeypatch, None) == []
    assert _calls(monkeypatch, "0") == []
    assert _calls(monkeypatch, "1") == [(-3, HEAP_BUFFER_MAX), (-1, (1 << 31) - 1)]

"""pytest plugin registered through the ``pytest11`` entry point (filled in by the compare issue)."""

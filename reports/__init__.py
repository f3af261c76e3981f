"""reports stage of recallkit."""

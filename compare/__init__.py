"""compare stage of recallkit."""

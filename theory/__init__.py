"""theory stage of recallkit."""

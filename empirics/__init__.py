"""empirics stage of recallkit."""

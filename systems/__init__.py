"""The shipped systems, one folder each: its packs, task and model, experiments, runners, judge, pages.

Nothing in the stages (``theory``, ``empirics``, ``compare``, ``reports``) imports this package; each
system registers itself with :mod:`recallkit.registry` and the pipeline and CLI loop over the registry.
How to add one: docs/adding-a-system.md.
"""

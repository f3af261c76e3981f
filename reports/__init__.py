"""reports stage of recallkit: figures and the multi-page PDF, drawn from plain dicts.

- ``reports.style``: house style (Okabe-Ito palette, page sizes, deterministic metadata), ``save_figure``.
- ``reports.figures``: accuracy heatmap, fit plot / fit grid, capacity plot, d_min plot.
- ``reports.tables``: slope/verdict table, theory-term table (sympy LaTeX through mathtext).
- ``reports.phase``: the phase diagram.
- ``reports.geometric``: SPEC B pages (construction vs trained d_min vs counting bound, readout probes,
  zero-shot transfer, multi-hop), each with its verdict.
- ``reports.probes``: the token-retrieval term-probe table (predicted vs fitted exponents, verdicts).
- ``reports.pdf``: ``build_report(summary, out_dir)``; the summary shape is in docs/ARCHITECTURE.md.

Submodules import matplotlib, so this package imports none of them eagerly.
"""

"""reports stage of recallkit: figures and the multi-page PDF, drawn from plain dicts.

- ``reports.style``: house style (Okabe-Ito palette, page sizes, deterministic metadata), ``save_figure``.
- ``reports.figures``: accuracy heatmap, fit plot / fit grid, capacity plot, d_min plot.
- ``reports.tables``: slope/verdict table, theory-term table (sympy LaTeX through mathtext).
- ``reports.phase``: the phase diagram.
- a system's own pages live in its folder (``recallkit.systems.<name>.pages``) and reach the PDF
  through the kinds it registers (``recallkit.registry.PageKind``).
- ``reports.pdf``: ``build_report(summary, out_dir)`` and ``ReportBuilder``; the summary shape is in
  docs/ARCHITECTURE.md. Behind it: ``reports.summary_rows`` (validation, verdict rows), ``reports.layout``
  (which pages, in what order, from what data), ``reports.text_pages``, ``reports.contents`` and
  ``reports.appendix`` (the pages around the figures), ``reports.render`` (drawing and reusing pages),
  ``reports.pdf_writer`` (joining them), ``reports.join_cache`` (reusing the joined PDF) and
  ``reports.output_folder`` (staging and moving the build into place).

Submodules import matplotlib, so this package imports none of them eagerly.
"""

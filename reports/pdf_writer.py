"""Joining the drawn page files into the one report PDF with pypdf: the footer "title - page n of total"
stamped onto each joined page (an edit of its content stream, so the page files stay free of it and a
page that only moved is reused as it is), the outline (a bookmark per section and page), links from the
contents lines to their pages, and metadata that depends only on the inputs (dates from
SOURCE_DATE_EPOCH, else the summary's own date), so the same pages give the same bytes.
"""
from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Callable, Sequence

from pypdf import PdfReader, PdfWriter
from pypdf.annotations import Link
from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, IndirectObject, NameObject

from recallkit.reports import render
from recallkit.reports.contents import contents_links
from recallkit.reports.style import pdf_metadata

__all__ = ["join_pages", "stamp_footer", "append_content"]


def stamp_footer(page, n: int, total: int, title: str) -> None:
    """The footer "title - page n of total", stamped on the joined page (the page files stay free of it,
    so a page that only moved is reused as it is)."""
    text = f"{title} - page {n} of {total}".encode("latin-1", "replace")
    text = text.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    size = 7.0
    x = float(page.mediabox.width) * 0.995 - 0.6 * size * len(text)  # Courier: every glyph is 0.6 em wide
    append_content(page, b"q BT /RkFooter %.1f Tf 0.5 g 1 0 0 1 %.2f 3.00 Tm (%s) Tj ET Q" % (size, x, text))


def append_content(page, data: bytes) -> None:
    """Draw ``data`` (PDF content operators; font /RkFooter = Courier) over ``page``, which must already
    belong to a PdfWriter. The page's own drawing is wrapped in q/Q so its graphics state cannot leak."""
    writer = page.indirect_reference.pdf

    def stream(content: bytes):
        obj = DecodedStreamObject()
        obj.set_data(content)
        return writer._add_object(obj)

    # raw_get: the reference, not the stream it points to. A content stream must be an indirect object, and
    # page["/Contents"] resolves it (pypdf 7 then wrote the stream itself into the array, where pdfium, MuPDF and
    # poppler ignore it: every joined page rendered blank)
    contents = page.raw_get("/Contents")
    resolved = contents.get_object()
    if isinstance(resolved, ArrayObject):
        parts = [part if isinstance(part, IndirectObject) else writer._add_object(part) for part in resolved]
    else:
        parts = [contents if isinstance(contents, IndirectObject) else writer._add_object(resolved)]
    page[NameObject("/Contents")] = ArrayObject([stream(b"q"), *parts, stream(b"Q " + data)])
    resources = page["/Resources"].get_object()
    if "/Font" not in resources:
        resources[NameObject("/Font")] = DictionaryObject()
    fonts = resources["/Font"].get_object()
    font = getattr(writer, "_recallkit_footer_font", None)
    if font is None:
        font = writer._add_object(DictionaryObject({
            NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Courier"), NameObject("/Encoding"): NameObject("/WinAnsiEncoding")}))
        writer._recallkit_footer_font = font
    fonts[NameObject("/RkFooter")] = font


def _pdf_date(when: _dt.datetime | None) -> str | None:
    return None if when is None else when.astimezone(_dt.timezone.utc).strftime("D:%Y%m%d%H%M%SZ")


def join_pages(pages: Sequence[render.Page], folder: Path, path: Path, title: str, fallback_date,
               stamp: Callable[[Any, int, int, str], None] = stamp_footer) -> None:
    """One PDF from the page files in ``folder``, in order, with the footer on each page, an outline entry
    for every section and page, links from the contents lines, and metadata that depends only on the
    inputs (dates from SOURCE_DATE_EPOCH, else the summary's own date). ``stamp(page, n, total, title)``
    puts the footer on each joined page."""
    writer = PdfWriter()
    total = len(pages)
    for n, page in enumerate(pages, start=1):
        writer.add_page(PdfReader(folder / f"{page.stem}.pdf").pages[0])
        stamp(writer.pages[-1], n, total, title)
    # outline: top-level pages and sections; a section's pages under it
    parents: dict[str, Any] = {}
    for n, page in enumerate(pages):
        if not page.section:
            writer.add_outline_item(title=page.label, page_number=n)
            continue
        if page.section not in parents:
            parents[page.section] = writer.add_outline_item(title=page.section, page_number=n)
        writer.add_outline_item(title=page.label, page_number=n, parent=parents[page.section])
    for n, page in enumerate(pages):
        columns = page.data[0] if page.stem.startswith("00-contents-") else None
        for rect, target in contents_links(columns) if columns else ():
            if 0 <= target < total:
                writer.add_annotation(n, Link(rect=rect, target_page_index=target))
    meta = pdf_metadata(title=title, fallback_date=fallback_date)
    info = {"/Title": title, "/Creator": meta["Creator"], "/Producer": meta["Producer"]}
    when = _pdf_date(meta.get("CreationDate"))
    if when:
        info.update({"/CreationDate": when, "/ModDate": when})
    writer.add_metadata(info)
    writer.page_mode = "/UseOutlines"  # open with the bookmarks shown
    with open(path, "wb") as fh:
        writer.write(fh)


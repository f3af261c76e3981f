"""Does anything on a page cover anything else? The report's layout check, run on every page kind by the tests.

A figure is drawn once with the Agg renderer at :data:`CHECK_DPI` while every artist that actually draws is
recorded (an invisible or empty text, a tick outside the view, a line clipped away are not drawn, so not checked),
with what it belongs to (a legend, a table cell, an axis). Then, in display pixels, with :data:`TOLERANCE_PX`:

- ``text-text``: two texts overlap (each line of a multi-line text is its own box, so a block of headings
  interleaved with a block of bodies is judged by its glyph lines; a boxed text by its box; a legend by its
  frame). Pairs inside one legend, one table cell's neighbours' borders, and the tick labels of one axis
  (matplotlib places those) are not compared;
- ``box-data``: a legend frame or a text's box (``bbox=``) covers a plotted marker, a point of a drawn line
  (sampled every pixel along its visible part), a scatter point or a bar of any axes;
- ``off-page``: a text line or a legend leaves the figure;
- ``cell-overflow``: a table cell's text leaves its cell;
- ``unclipped``: a line or scatter drawn without clipping leaves its axes.

Each finding is an :class:`Overlap` naming the page's artists by their text or label, so a failing test says
what to move.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

import numpy as np
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.table import Cell
from matplotlib.text import Text
from matplotlib.transforms import Bbox

__all__ = ["Overlap", "CHECK_DPI", "TOLERANCE_PX", "find_overlaps", "recorded_draw", "Drawn"]

CHECK_DPI = 100  # the house figure.dpi: one pixel is 0.72 pt
TOLERANCE_PX = 1.0  # two boxes overlap when they share more than this many pixels in both directions


@dataclasses.dataclass(frozen=True)
class Overlap:
    """One finding: its ``kind`` (text-text, box-data, off-page, cell-overflow, unclipped) and what it names."""

    kind: str
    what: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.what}"


@dataclasses.dataclass
class _Item:
    artist: object
    owner: object  # the innermost Legend, Cell or Axis being drawn when it drew (None: the figure or an axes)


@dataclasses.dataclass
class Drawn:
    """What one draw drew: texts, legends, data artists (lines, collections, patches), each with its owner."""

    texts: list = dataclasses.field(default_factory=list)
    legends: list = dataclasses.field(default_factory=list)
    data: list = dataclasses.field(default_factory=list)


def _recording(cls, drawn: Drawn, stack: list, sink: str | None, owns: bool):
    original = cls.draw

    def draw(self, renderer, *args, **kwargs):
        if sink is not None and self.get_visible():
            getattr(drawn, sink).append(_Item(self, stack[-1] if stack else None))
        if owns:
            stack.append(self)
        try:
            return original(self, renderer, *args, **kwargs)
        finally:
            if owns:
                stack.pop()

    return original, draw


@contextlib.contextmanager
def recorded_draw(fig: Figure, dpi: float = CHECK_DPI) -> Iterator[tuple[Drawn, object]]:
    """Draw ``fig`` with Agg at ``dpi`` and yield (what was drawn, the renderer)."""
    drawn, stack = Drawn(), []
    hooks = [(Text, "texts", False), (Legend, "legends", True), (Cell, None, True), (Axis, None, True),
             (Line2D, "data", False), (PathCollection, "data", False), (LineCollection, "data", False),
             (Rectangle, "data", False)]
    saved = []
    old_dpi = fig.dpi
    try:
        for cls, sink, owns in hooks:
            original, draw = _recording(cls, drawn, stack, sink, owns)
            saved.append((cls, "draw" in vars(cls), original))
            cls.draw = draw
        fig.set_dpi(dpi)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
    finally:
        for cls, own, original in reversed(saved):
            if own:
                cls.draw = original
            else:
                del cls.draw
    try:
        yield drawn, canvas.get_renderer()
    finally:
        fig.set_dpi(old_dpi)


def _name(artist) -> str:
    if isinstance(artist, Text):
        text = artist.get_text().replace("\n", " / ")
        return repr(text[:70] + ("..." if len(text) > 70 else ""))
    if isinstance(artist, Legend):
        labels = [t.get_text() for t in artist.get_texts()]
        return "legend " + repr(", ".join(labels)[:70])
    label = artist.get_label() if hasattr(artist, "get_label") else ""
    return f"{type(artist).__name__} {label!r}" if label and not str(label).startswith("_") else type(artist).__name__


def _text_boxes(text: Text, renderer) -> list[Bbox]:
    """The boxes a text covers: its box patch when it has one, else one box per non-empty line (rotated text: its
    whole extent)."""
    if text.get_bbox_patch() is not None:
        return [text.get_bbox_patch().get_window_extent(renderer)]
    if text.get_rotation() % 360 != 0:
        return [text.get_window_extent(renderer)]
    _, info, _ = text._get_layout(renderer)  # (line, (width, ascent, descent), baseline xy) per line
    x0, y0 = text.get_transform().transform(text.get_unitless_position())
    return [Bbox.from_extents(x0 + x, y0 + y - d, x0 + x + w, y0 + y + a)
            for line, (w, a, d), (x, y) in info if line.strip()]


def _overlap(a: Bbox, b: Bbox, tol: float) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def _legend_of(item: _Item) -> object:
    return item.owner if isinstance(item.owner, Legend) else None


def _text_regions(drawn: Drawn, renderer) -> list[tuple[object, object, Bbox]]:
    """(artist, group, box): every drawn text's boxes and every legend's frame. ``group``: texts of one legend, of
    one axis' ticks, or of one text are never compared with each other."""
    out = []
    for item in drawn.texts:
        if not item.artist.get_text().strip():
            continue
        group = item.owner if isinstance(item.owner, (Legend, Axis)) else item.artist
        out += [(item.artist, group, box) for box in _text_boxes(item.artist, renderer)]
    for item in drawn.legends:
        out.append((item.artist, item.artist, item.artist.get_window_extent(renderer)))
    return out


def _text_overlaps(regions, tol: float) -> list[Overlap]:
    found, seen = [], set()
    for i, (a, group_a, box_a) in enumerate(regions):
        for b, group_b, box_b in regions[i + 1:]:
            if a is b or group_a is group_b or group_a is b or group_b is a:
                continue
            key = (id(a), id(b))
            if key not in seen and _overlap(box_a, box_b, tol):
                seen.add(key)
                found.append(Overlap("text-text", f"{_name(a)} overlaps {_name(b)}"))
    return found


def _off_page(regions, fig: Figure, tol: float) -> list[Overlap]:
    page = fig.bbox
    found, seen = [], set()
    for artist, _, box in regions:
        if id(artist) in seen:
            continue
        if box.x0 < page.x0 - tol or box.y0 < page.y0 - tol or box.x1 > page.x1 + tol or box.y1 > page.y1 + tol:
            seen.add(id(artist))
            found.append(Overlap("off-page", f"{_name(artist)} leaves the page ({box.x0:.0f}, {box.y0:.0f}, "
                                             f"{box.x1:.0f}, {box.y1:.0f} of {page.x1:.0f} x {page.y1:.0f} px)"))
    return found


def _cell_overflow(drawn: Drawn, renderer, tol: float) -> list[Overlap]:
    found = []
    for item in drawn.texts:
        cell = item.owner
        if not isinstance(cell, Cell) or not item.artist.get_text().strip():
            continue
        outer = cell.get_window_extent(renderer)
        for box in _text_boxes(item.artist, renderer):
            if box.x0 < outer.x0 - tol or box.x1 > outer.x1 + tol or box.y0 < outer.y0 - tol or box.y1 > outer.y1 + tol:
                found.append(Overlap("cell-overflow", f"{_name(item.artist)} leaves its table cell"))
                break
    return found


def _sampled(xy: np.ndarray, step: float = 1.0) -> np.ndarray:
    """Points every ``step`` pixels along the polyline ``xy`` (display coordinates; NaN breaks the line)."""
    out = [xy]
    for p, q in zip(xy[:-1], xy[1:]):
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(q))):
            continue
        n = int(np.hypot(*(q - p)) // step)
        if n > 1:
            t = np.linspace(0.0, 1.0, n + 1)[1:-1, None]
            out.append(p + t * (q - p))
    return np.concatenate(out) if out else np.empty((0, 2))


def _visible(points: np.ndarray, artist) -> np.ndarray:
    """The points of ``artist`` that are drawn: finite, and inside its clip box when it is clipped."""
    points = points[np.all(np.isfinite(points), axis=1)]
    clip = artist.get_clip_box() if artist.get_clip_on() else None
    if clip is not None and len(points):
        points = points[(points[:, 0] >= clip.x0) & (points[:, 0] <= clip.x1)
                        & (points[:, 1] >= clip.y0) & (points[:, 1] <= clip.y1)]
    return points


def _data_points(artist) -> np.ndarray:
    """Display-coordinate points a data artist shows: line vertices (sampled along the line when it is drawn
    as a line), scatter offsets, segment samples, a bar's corners and centre."""
    if isinstance(artist, Line2D):
        xy = artist.get_transform().transform(np.asarray(artist.get_xydata(), dtype=float).reshape(-1, 2))
        drawn_line = artist.get_linestyle() not in ("None", "none", "", " ") and artist.get_linewidth() > 0
        return _visible(_sampled(xy) if drawn_line else xy, artist)
    if isinstance(artist, PathCollection):
        offsets = np.asarray(artist.get_offsets(), dtype=float).reshape(-1, 2)
        return _visible(artist.get_offset_transform().transform(offsets), artist) if len(offsets) else offsets
    if isinstance(artist, LineCollection):
        parts = [_sampled(artist.get_transform().transform(np.asarray(seg, dtype=float)))
                 for seg in artist.get_segments() if len(seg)]
        return _visible(np.concatenate(parts), artist) if parts else np.empty((0, 2))
    box = artist.get_window_extent()
    corners = np.array([[box.x0, box.y0], [box.x1, box.y1], [box.x0, box.y1], [box.x1, box.y0],
                        [(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2]])
    return _visible(corners, artist)


def _is_data(item: _Item) -> bool:
    artist = item.artist
    if artist.axes is None or item.owner is not None:  # a legend's handles, a table's cells, an axis' ticks
        return False
    if isinstance(artist, Rectangle):  # a bar: a patch of the axes, not its background
        return artist in artist.axes.patches
    return True


def _boxes(drawn: Drawn, renderer) -> list[tuple[object, Bbox]]:
    """Legend frames and text boxes (a text with ``bbox=``) outside tables."""
    out = [(item.artist, item.artist.get_window_extent(renderer)) for item in drawn.legends]
    out += [(item.artist, item.artist.get_bbox_patch().get_window_extent(renderer)) for item in drawn.texts
            if item.artist.get_bbox_patch() is not None and item.artist.get_text().strip()
            and not isinstance(item.owner, (Cell, Legend))]
    return out


def _box_data(drawn: Drawn, renderer, tol: float) -> tuple[list[Overlap], list[Overlap]]:
    covered, unclipped = [], []
    data = [(item.artist, _data_points(item.artist)) for item in drawn.data if _is_data(item)]
    for artist, points in data:
        if not artist.get_clip_on() and len(points):
            frame = artist.axes.bbox
            out = ((points[:, 0] < frame.x0 - tol) | (points[:, 0] > frame.x1 + tol)
                   | (points[:, 1] < frame.y0 - tol) | (points[:, 1] > frame.y1 + tol))
            if out.any():
                unclipped.append(Overlap("unclipped", f"{_name(artist)} leaves its axes"))
    for box_artist, box in _boxes(drawn, renderer):
        inner = Bbox.from_extents(box.x0 + tol, box.y0 + tol, box.x1 - tol, box.y1 - tol)
        hits = [(artist, int(np.sum((points[:, 0] > inner.x0) & (points[:, 0] < inner.x1)
                                    & (points[:, 1] > inner.y0) & (points[:, 1] < inner.y1))))
                for artist, points in data if len(points)]
        hits = [(a, n) for a, n in hits if n and a is not box_artist]
        if hits:
            covered.append(Overlap("box-data", f"{_name(box_artist)} covers " + ", ".join(
                f"{_name(a)} ({n} px)" for a, n in hits[:4]) + (f" and {len(hits) - 4} more" if len(hits) > 4 else "")))
    return covered, unclipped


def find_overlaps(fig: Figure, tol: float = TOLERANCE_PX, dpi: float = CHECK_DPI) -> list[Overlap]:
    """Every overlap on ``fig`` (see the module's docstring), drawn at ``dpi`` with ``tol`` pixels of slack."""
    with recorded_draw(fig, dpi) as (drawn, renderer):
        regions = _text_regions(drawn, renderer)
        found = _text_overlaps(regions, tol)
        found += _off_page(regions, fig, tol)
        found += _cell_overflow(drawn, renderer, tol)
        covered, unclipped = _box_data(drawn, renderer, tol)
    return found + covered + unclipped

"""Drawing the report's pages: each page drawn once, in worker processes when cores are free, and not
at all when the previous build already drew it from the same input with the same code.

Why a module of its own: a warm report spent most of its time drawing every page three times (PNG,
per-page PDF, combined PDF). Here each page is drawn once into its own PDF (PNG only when asked);
``reports.pdf`` joins those files. A page is identified by a key: the SHA-256 of its input (the plain
data it is drawn from), its file stem, its label and the *code fingerprint* (a hash of every source file
of the installed ``recallkit`` namespace and the matplotlib version), so an edit to any code, even
uncommitted, redraws everything, and an unchanged report redraws nothing. The keys of the pages in
``figures/`` are kept in ``figures/pages.json``; a page whose key matches is copied from there.

Per-page PDFs carry no date (the date is the joined document's, set by ``reports.pdf``), so a page drawn
yesterday is byte-identical to one drawn today and can be reused.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import matplotlib

from recallkit.reports.style import CREATOR, png_metadata, style_context

__all__ = ["Page", "code_fingerprint", "page_keys", "draw_pages", "DrawStats", "MANIFEST", "default_jobs"]

MANIFEST = "pages.json"  # in figures/: stem -> {"key", "png"} of the pages drawn there
# the errors a page's builder may raise on a summary field it does not expect: the page is replaced by
# an error page and the report goes on (anything else is a bug that should stop the build)
PAGE_ERRORS = (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError)


@dataclass(frozen=True)
class Page:
    """One page of the report.

    ``stem``: its file name under ``figures/`` (``NN-experiment-what``); ``build``: draws it and returns
    the Figure; ``label``: its entry in the outline and on the contents page; ``section``: the outline
    entry it sits under ("" = top level); ``data``: the plain data it is drawn from (JSON-able; what its
    cache key hashes); ``cacheable``: False for a page whose drawing depends on more than ``data``."""

    stem: str
    build: Callable[[], Any]
    label: str
    section: str = ""
    data: Any = None
    cacheable: bool = True


@dataclass
class DrawStats:
    pages: int = 0
    drawn: int = 0
    reused: int = 0
    workers: int = 1
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"report pages: {self.pages} ({self.drawn} drawn, {self.reused} reused from the previous build; "
                f"{self.workers} process{'es' if self.workers > 1 else ''}) in {self.seconds:.1f} s")


_FINGERPRINT: str | None = None


def code_fingerprint() -> str:
    """SHA-256 over every ``.py`` file of the installed ``recallkit`` namespace (stages, systems,
    orchestration) and the matplotlib version: what a page's drawing can depend on besides its data."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import importlib.util

        digest = hashlib.sha256(f"matplotlib {matplotlib.__version__}\n".encode())
        roots = []
        for name in ("recallkit", "recallkit.theory", "recallkit.empirics", "recallkit.compare",
                     "recallkit.reports", "recallkit.systems"):
            spec = importlib.util.find_spec(name)
            roots += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
        seen = set()
        for root in roots:
            for path in sorted(root.rglob("*.py")):
                if path in seen:
                    continue
                seen.add(path)
                digest.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
        _FINGERPRINT = digest.hexdigest()
    return _FINGERPRINT


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return repr(value)


def data_digest(data: Any) -> str:
    """SHA-256 of ``data`` as canonical JSON (sorted keys): equal data, equal digest."""
    text = json.dumps(data, sort_keys=True, default=_json_default, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def page_keys(pages: Sequence[Page], extra: str = "") -> list[str | None]:
    """The cache key of each page (None for a page that is not cacheable)."""
    code = code_fingerprint()
    keys: list[str | None] = []
    for page in pages:
        if not page.cacheable:
            keys.append(None)
            continue
        head = f"{code}\n{extra}\n{page.stem}\n{page.label}\n"
        keys.append(hashlib.sha256(head.encode() + data_digest(page.data).encode()).hexdigest())
    return keys


def default_jobs(n_pages: int) -> int:
    """Worker processes for ``n_pages`` pages: one per core this process may run on
    (``$RECALLKIT_REPORT_JOBS`` overrides), and none for a handful of pages, where starting workers
    costs more than it saves."""
    raw = os.environ.get("RECALLKIT_REPORT_JOBS", "").strip()
    if raw:
        try:
            return max(1, int(raw))
        except ValueError:
            from recallkit.theory.errors import InputError

            raise InputError(f"RECALLKIT_REPORT_JOBS: expected a positive integer, got {raw!r}") from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_pages // 4))


def page_pdf_metadata(stem: str) -> dict:
    """A page file's metadata: no dates (the page is reused across days; the report carries the date)."""
    return {"Creator": CREATOR, "Producer": f"{CREATOR} via matplotlib {matplotlib.__version__}",
            "CreationDate": None, "ModDate": None, "Title": stem}


def draw_one(page: Page, folder: Path, png: bool, error_page: Callable[[str, str], Any]) -> str | None:
    """Draw ``page`` into ``folder/stem.pdf`` (and ``.png``); returns the error text if its builder failed
    (an error page is drawn in its place)."""
    import matplotlib.pyplot as plt

    error = None
    try:
        fig = page.build()
    except PAGE_ERRORS as exc:
        error = f"{page.stem}: {type(exc).__name__}: {exc}"
        fig = error_page(page.stem, f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # InputError and friends from the stages: same treatment
        from recallkit.theory.errors import RecallkitError

        if not isinstance(exc, RecallkitError):
            raise
        error = f"{page.stem}: {type(exc).__name__}: {exc}"
        fig = error_page(page.stem, f"{type(exc).__name__}: {exc}")
    with style_context():
        fig.savefig(folder / f"{page.stem}.pdf", metadata=page_pdf_metadata(page.stem))
        if png:
            fig.savefig(folder / f"{page.stem}.png", metadata=png_metadata())
    plt.close(fig)
    return error


# What the worker processes draw: set before the pool forks, so the builders (closures over the summary,
# which do not pickle) reach the workers by inheritance; a worker gets only a page index.
_JOB: tuple[Sequence[Page], Path, bool, Callable] | None = None


def _worker_init() -> None:
    # Ctrl-C is the parent's to handle: it stops the pool and keeps the previous report
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _draw_index(index: int) -> str | None:
    assert _JOB is not None
    pages, folder, png, error_page = _JOB
    return draw_one(pages[index], folder, png, error_page)


def read_manifest(figures: Path) -> dict:
    try:
        doc = json.loads((figures / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    return doc.get("pages", {}) if isinstance(doc, dict) else {}


def draw_pages(pages: Sequence[Page], folder: Path, previous: Path | None, png: bool,
               error_page: Callable[[str, str], Any], jobs: int | None = None, reuse: bool = True,
               key_extra: str = "") -> tuple[dict, DrawStats]:
    """Draw every page of ``pages`` into ``folder`` (``stem.pdf``, and ``stem.png`` when ``png``), reusing
    the files in ``previous`` (the last build's ``figures/``) whose key matches. Returns the manifest of
    what ``folder`` now holds ({stem: {"key", "png"}}) and the counts."""
    global _JOB
    started = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    keys = page_keys(pages, key_extra)
    old = read_manifest(previous) if (previous is not None and reuse) else {}
    manifest: dict = {}
    stats = DrawStats(pages=len(pages))
    todo: list[int] = []
    for i, (page, key) in enumerate(zip(pages, keys)):
        entry = old.get(page.stem) or {}
        source = previous / f"{page.stem}.pdf" if previous is not None else None
        if (key is not None and entry.get("key") == key and source is not None and source.is_file()
                and (not png or (previous / f"{page.stem}.png").is_file())):
            shutil.copyfile(source, folder / source.name)
            if png:
                shutil.copyfile(previous / f"{page.stem}.png", folder / f"{page.stem}.png")
            manifest[page.stem] = {"key": key, "png": bool(png)}
            stats.reused += 1
        else:
            todo.append(i)
    workers = min(jobs or default_jobs(len(todo)), max(len(todo), 1))
    errors: dict[int, str | None] = {}
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _JOB = (pages, folder, png, error_page)
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                                      initializer=_worker_init)
        try:
            with warnings.catch_warnings():  # "fork with threads running" (tqdm's monitor, torch pools)
                warnings.simplefilter("ignore", DeprecationWarning)
                futures = {i: pool.submit(_draw_index, i) for i in todo}
            for i in todo:  # in page order: the same files and messages whatever order they finish in
                errors[i] = futures[i].result()
        except concurrent.futures.process.BrokenProcessPool:
            # a worker died (out of memory, a signal): draw what is left here, one by one
            for i in todo:
                if i not in errors:
                    errors[i] = draw_one(pages[i], folder, png, error_page)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            _JOB = None
        stats.workers = workers
    else:
        for i in todo:
            errors[i] = draw_one(pages[i], folder, png, error_page)
    for i in todo:
        if errors[i] is None and keys[i] is not None:
            manifest[pages[i].stem] = {"key": keys[i], "png": bool(png)}
        elif errors[i] is not None:
            stats.errors.append(errors[i])
    stats.drawn = len(todo)
    stats.seconds = time.perf_counter() - started
    (folder / MANIFEST).write_text(json.dumps({"schema": "recallkit.pages/1", "pages": manifest}, indent=1,
                                              sort_keys=True) + "\n")
    return manifest, stats

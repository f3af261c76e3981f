"""Drawing the report's pages: each page drawn once, in worker processes when cores are free, and not
at all when an earlier build (in this folder, or any folder through the page cache) drew it from the
same input with the same code.

Why a module of its own: a warm report spent most of its time drawing every page three times (PNG,
per-page PDF, combined PDF). Here each page is drawn once into its own PDF (PNG only when asked);
``reports.pdf`` joins those files. A page is identified by a key: the SHA-256 of its input (the plain
data it is drawn from), its file stem, its label and the *code fingerprint* (a hash of every source file
of the installed ``recallkit`` namespace and the matplotlib version), so an edit to any code, even
uncommitted, redraws everything, and an unchanged report redraws nothing. The keys of the pages in
``figures/`` and the SHA-256 of each page's files are kept in ``figures/pages.json``, signed with this user's
cache secret (``empirics.cache.signed``); a page whose key matches is copied from there when the list verifies and
the file still has its hash (a list rewritten by anyone else, or a page replaced, is drawn again). A page that is
not there is looked up by the same key in the cache shared by every folder (``empirics.cache``, kind ``pages``),
and a page drawn here is added to it, so a report into a new folder copies what any earlier report drew.

Per-page PDFs carry no date (the date is the joined document's, set by ``reports.pdf``), so a page drawn
yesterday is byte-identical to one drawn today and can be reused.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import matplotlib
import matplotlib.pyplot as plt

from recallkit.empirics.executors import usable_cores
from recallkit.empirics.workers import Capped, WorkerPool
from recallkit.empirics.provenance import namespace_digest
from recallkit.empirics.cache import Cache, signed, verified
from recallkit.empirics.files import loads_json, read_regular, write_atomic
from recallkit.reports.style import CREATOR, png_metadata, style_context
from recallkit.theory.errors import InputError, RecallkitError

__all__ = ["Page", "Drawer", "code_fingerprint", "page_keys", "draw_pages", "DrawStats", "MANIFEST", "default_jobs",
           "env_jobs"]

MANIFEST = "pages.json"  # in figures/: stem -> {"key", "png", "files"} of the pages drawn there, signed
MANIFEST_SCHEMA = "recallkit.pages/2"
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
    cached: int = 0  # copied from the page cache shared by every folder
    wasted: int = 0  # drawn early from data that changed before the end
    workers: int = 1
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"report pages: {self.pages} ({self.drawn} drawn, {self.reused} reused from the previous build"
                + (f", {self.cached} from the page cache" if self.cached else "") + "; "
                f"{self.workers} worker process{'es' if self.workers > 1 else ''}"
                + (f"; {self.wasted} drawn early and not used" if self.wasted else "")
                + f") in the last {self.seconds:.1f} s")


_FINGERPRINT: str | None = None


def code_fingerprint() -> str:
    """SHA-256 over every ``.py`` file of the installed ``recallkit`` namespace (stages, systems,
    orchestration) and the matplotlib version: what a page's drawing can depend on besides its data."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = namespace_digest(("*.py",), f"matplotlib {matplotlib.__version__}\n".encode())
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
    return env_jobs() or max(1, min(_cores(), n_pages // 4))


def page_pdf_metadata(stem: str) -> dict:
    """A page file's metadata: no dates (the page is reused across days; the report carries the date)."""
    return {"Creator": CREATOR, "Producer": f"{CREATOR} via matplotlib {matplotlib.__version__}",
            "CreationDate": None, "ModDate": None, "Title": stem}


def draw_one(stem: str, build: Callable[[], Any], pdf_path: Path, png: bool,
             error_page: Callable[[str, str], Any]) -> str | None:
    """Draw one page into ``pdf_path`` (and the same name ``.png``); returns the error text if its builder
    failed (an error page is drawn in its place, so one bad field does not cost the whole report)."""
    error = None
    try:
        fig = build()
    except (RecallkitError, *PAGE_ERRORS) as exc:
        error = f"{stem}: {type(exc).__name__}: {exc}"
        fig = error_page(stem, f"{type(exc).__name__}: {exc}")
    try:
        with style_context():
            fig.savefig(pdf_path, metadata=page_pdf_metadata(stem))
            if png:
                fig.savefig(pdf_path.with_suffix(".png"), metadata=png_metadata())
    except Exception as exc:
        # matplotlib's PDF backend, when a write fails (a full disk), fails again while closing the file and
        # raises that second error (an AttributeError) with the OSError only as its context, which a worker
        # process does not send back: the OSError is what went wrong, and what the report says
        if not isinstance(exc, OSError) and isinstance(exc.__context__, OSError):
            raise exc.__context__ from None
        raise
    finally:
        plt.close(fig)
    return error


def _picklable(build: Callable) -> bool:
    """Whether a builder can be sent to a worker process (a functools.partial of module functions and
    plain data can; a lambda or a closure cannot, and is drawn in this process instead)."""
    try:
        pickle.dumps(build, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # PicklingError, AttributeError, TypeError: whatever pickle says, draw it here
        return False
    return True


def read_manifest(figures: Path) -> dict:
    """The signed list of the pages in ``figures`` (``{"pages": {stem: {...}}, "joined": {...}}``), or {} when it
    is missing, unreadable, or not signed with this user's secret."""
    try:
        doc = verified("pages", loads_json(read_regular(figures / MANIFEST, 16 * 2**20)))
    except (OSError, ValueError):
        return {}
    if doc is None or doc.get("schema") != MANIFEST_SCHEMA or not isinstance(doc.get("pages"), dict):
        return {}
    return doc


def write_manifest(figures: Path, pages: dict, joined: dict | None = None) -> None:
    """Write the signed list of the pages in ``figures`` (and the joined PDF's key and hash)."""
    doc = {"schema": MANIFEST_SCHEMA, "pages": pages}
    if joined is not None:
        doc["joined"] = joined
    write_atomic(figures / MANIFEST, json.dumps(signed("pages", doc), indent=1, sort_keys=True) + "\n")


def file_hashes(files: dict[str, Path]) -> dict[str, str]:
    """{suffix: SHA-256 of the file's bytes}."""
    return {suffix: hashlib.sha256(read_regular(path, 2**28)).hexdigest() for suffix, path in files.items()}


def _unchanged(entry: dict, files: dict[str, Path]) -> bool:
    """Whether every file of ``files`` is a regular file with the hash ``entry`` lists for it."""
    listed = entry.get("files")
    if not isinstance(listed, dict):
        return False
    try:
        return all(listed.get(suffix) == hash_ for suffix, hash_ in file_hashes(files).items())
    except OSError:
        return False


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


class Drawer:
    """Draws pages into ``folder``, each once, as soon as it is handed over (:meth:`submit`), in worker
    processes when there are cores for them, or reuses the file the previous build left in ``previous``
    (its ``figures/``) when the page's key is the same, or else the files ``cache`` keeps under that key
    (every page drawn here is added to ``cache``; ``reuse=False`` reads neither). Pages may be handed over
    early, while the job still computes the rest (their files are named by key, so a page drawn from data
    that then changed is simply not used); :meth:`finish` takes the final list, draws what is missing,
    waits, and names the files by page stem.

    ``jobs``: pages drawn at once in worker processes (None: one per core this process may use; 1: draw here).
    ``executor``: the worker processes to draw in (``empirics.workers.WorkerPool``, the report's one pool, shared
    with its training: ``jobs`` caps how many of its workers draw at once); None: a pool of ``jobs`` of its own."""

    def __init__(self, folder: Path, previous: Path | None, png: bool, error_page: Callable[[str, str], Any],
                 jobs: int | None = None, reuse: bool = True, key_extra: str = "",
                 cache: Cache | None = None, executor: WorkerPool | None = None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.previous = Path(previous) if previous is not None else None
        self.old = read_manifest(self.previous).get("pages", {}) if (self.previous is not None and reuse) else {}
        self.png, self.error_page, self.jobs, self.key_extra = png, error_page, jobs, key_extra
        self.cache, self.reuse = cache, reuse
        self.executor = executor
        self._own: WorkerPool | None = None  # the pool made here when none was handed over
        self.pool: Capped | None = None
        self.workers = 1
        self.pending: dict[str, concurrent.futures.Future] = {}  # file name (key) -> drawing in a worker
        self.errors: dict[str, str | None] = {}  # file name -> error text (None: drawn fine)
        self.reused: set[str] = set()
        self.cached: set[str] = set()
        self.drawn: set[str] = set()
        self.started: float | None = None  # when the first page was handed over

    def use_executor(self, executor: WorkerPool) -> None:
        """Draw in ``executor``'s workers from now on (before the first page goes to a worker of its own)."""
        if self.pool is None:
            self.executor = executor

    def _name(self, page: Page, key: str | None) -> str:
        return key if key is not None else f"uncached-{page.stem}"

    def _get_pool(self, n_pages: int | None) -> Capped | None:
        if self.pool is not None:
            return self.pool
        jobs = self.jobs if self.jobs is not None else (default_jobs(n_pages) if n_pages is not None else
                                                        env_jobs() or _cores())
        if self.executor is not None:
            jobs = min(jobs, self.executor.workers)
        if jobs <= 1:
            return None
        if self.executor is None:
            # Ctrl-C is the parent's to handle (it stops the pool and keeps the previous report), and a killed
            # report leaves no worker drawing for nobody (empirics.workers)
            self._own = WorkerPool(jobs)
        self.pool = Capped(self.executor or self._own, jobs)
        self.workers = jobs
        return self.pool

    def submit(self, pages: Sequence[Page], total: int | None = None) -> list[Page]:
        """Start drawing (or reuse) each page not already drawn or being drawn; return the pages that cannot
        go to a worker (not picklable), which the caller draws with :meth:`draw_here`. ``total``: how
        many pages the report has, when known (it decides whether workers are worth starting)."""
        if self.started is None:
            self.started = time.perf_counter()
        keys = page_keys(pages, self.key_extra)
        here: list[Page] = []
        for page, key in zip(pages, keys):
            name = self._name(page, key)
            if name in self.errors or name in self.pending:
                continue
            entry = self.old.get(page.stem)
            if (key is not None and isinstance(entry, dict) and entry.get("key") == key and self.previous is not None
                    and self._reuse_previous(page.stem, name, entry)):
                self.errors[name] = None
                self.reused.add(name)
                continue
            if key is not None and self.reuse and self.cache is not None and self.cache.fetch_files(
                    "pages", key, self._files(name)):
                self.errors[name] = None
                self.cached.add(name)
                continue
            pool = self._get_pool(total)
            if pool is not None and _picklable(page.build):
                self.pending[name] = pool.submit(draw_one, page.stem, page.build, self.folder / f"{name}.pdf",
                                                 self.png, self.error_page)
            else:
                here.append(page)
        return here

    def _reuse_previous(self, stem: str, name: str, entry: dict) -> bool:
        """Copy the previous build's files of page ``stem`` (its signed list says they were drawn under this key)
        when each still has the hash listed for it."""
        sources = {suffix: self.previous / f"{stem}{suffix}" for suffix in self._files(name)}
        try:
            blobs = {suffix: read_regular(path, 2**28) for suffix, path in sources.items()}
        except OSError:
            return False
        listed = entry.get("files")
        if not isinstance(listed, dict) or any(listed.get(suffix) != hashlib.sha256(data).hexdigest()
                                               for suffix, data in blobs.items()):
            return False
        for suffix, data in blobs.items():
            write_atomic(self.folder / f"{name}{suffix}", data)
        return True

    def _files(self, stem: str) -> dict[str, Path]:
        """{suffix: path} of a page's files in ``folder``."""
        return {suffix: self.folder / f"{stem}{suffix}" for suffix in ((".pdf", ".png") if self.png else (".pdf",))}

    def draw_here(self, pages: Sequence[Page]) -> None:
        for page, key in zip(pages, page_keys(pages, self.key_extra)):
            name = self._name(page, key)
            if name not in self.errors and name not in self.pending:
                self.errors[name] = draw_one(page.stem, page.build, self.folder / f"{name}.pdf", self.png,
                                             self.error_page)
                self.drawn.add(name)

    def finish(self, pages: Sequence[Page]) -> tuple[dict, DrawStats]:
        """Draw whatever of ``pages`` is not drawn yet, wait for the workers, and leave exactly one file per
        page, named ``stem.pdf`` (``.png``). Returns the manifest ({stem: {"key", "png"}}) and the counts."""
        try:
            self.draw_here(self.submit(pages, total=len(pages)))  # this process draws too, meanwhile
            keys = page_keys(pages, self.key_extra)
            names = [self._name(p, k) for p, k in zip(pages, keys)]
            for name in names:  # in page order: the same files and messages whatever order they finish in
                future = self.pending.pop(name, None)
                if future is not None:
                    try:
                        self.errors[name] = future.result()
                    except concurrent.futures.process.BrokenProcessPool:
                        self.errors[name] = None
                        self._broken()
                    self.drawn.add(name)
            for page, name in zip(pages, names):
                if not (self.folder / f"{name}.pdf").is_file():  # a worker died before drawing it
                    self.errors[name] = draw_one(page.stem, page.build, self.folder / f"{name}.pdf", self.png,
                                                 self.error_page)
            # pages handed over early whose data then changed: not needed any more
            wasted = sum(not future.cancel() for future in self.pending.values())
            self.pending.clear()
        finally:
            self.close()
        used = set(names)
        for left in self.folder.iterdir():  # drawn from data that changed before the end: not used
            if left.stem not in used:
                left.unlink()
        manifest: dict = {}
        stats = DrawStats(pages=len(pages), workers=self.workers)
        for page, key, name in zip(pages, keys, names):
            for suffix in (".pdf", ".png") if self.png else (".pdf",):
                os.replace(self.folder / f"{name}{suffix}", self.folder / f"{page.stem}{suffix}")
            if self.errors.get(name):
                stats.errors.append(self.errors[name])
            elif key is not None:
                manifest[page.stem] = {"key": key, "png": bool(self.png), "files": file_hashes(self._files(page.stem))}
                if self.cache is not None and name in self.drawn:  # (an error page is never kept)
                    self.cache.store_files("pages", key, self._files(page.stem))
        stats.reused = len(self.reused & used)
        stats.cached = len(self.cached & used)
        stats.drawn = len(self.drawn & used)
        stats.wasted = wasted + len(self.drawn - used)
        stats.seconds = time.perf_counter() - (self.started or time.perf_counter())
        write_manifest(self.folder, manifest)
        return manifest, stats

    def _broken(self) -> None:
        # a worker died (out of memory, a signal): the rest is drawn here, one by one
        self.close(stop=True)
        self.pending.clear()
        self.jobs = 1
        self.executor = None

    def close(self, stop: bool = False) -> None:
        """Stop drawing in workers: the pages not started are cancelled, those being drawn waited for (a second at
        most); a pool made here is closed (``stop``: its workers stopped at once), a shared one left to its owner."""
        pool, self.pool = self.pool, None
        own, self._own = self._own, None
        if own is not None and stop:
            own.terminate()
        if pool is not None:
            pool.close()
        if own is not None:
            own.close()


def env_jobs() -> int | None:
    """``$RECALLKIT_REPORT_JOBS`` (None when unset); public so that the command line checks it before anything
    runs, not once the pages are drawn."""
    raw = os.environ.get("RECALLKIT_REPORT_JOBS", "").strip()
    if not raw:
        return None
    most = 4 * usable_cores()
    try:
        jobs = int(raw)
    except ValueError:
        jobs = 0
    if not 1 <= jobs <= most:
        raise InputError(f"RECALLKIT_REPORT_JOBS: expected an integer from 1 to {most} (processes drawing the "
                         f"pages), got {raw!r}")
    return jobs


def draw_pages(pages: Sequence[Page], folder: Path, previous: Path | None, png: bool,
               error_page: Callable[[str, str], Any], jobs: int | None = None, reuse: bool = True,
               key_extra: str = "", cache: Cache | None = None,
               executor: WorkerPool | None = None) -> tuple[dict, DrawStats]:
    """Draw (or reuse) every page of ``pages`` into ``folder`` as ``stem.pdf``: :class:`Drawer` in one call."""
    return Drawer(folder, previous, png, error_page, jobs=jobs, reuse=reuse, key_extra=key_extra,
                  cache=cache, executor=executor).finish(pages)

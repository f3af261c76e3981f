"""Which arithmetic a run does: the math library's code path, fixed before torch first multiplies.

A stored row must not depend on which models shared its batch. torch's CPU matmuls go to MKL, and
MKL picks its kernels at run time by CPU vendor, instruction set, operand sizes and even the memory
alignment of each operand. Inside a batch, model k's matrices start at an offset that depends on k,
and on some CPUs (measured on AMD EPYC; reproduced on Intel by making MKL take its non-Intel path)
``baddbmm`` then rounds model k differently from the same model trained alone: about 6e-8 in one
gradient entry, enough after a few hundred steps to move a loss from 2.7e-6 to 3.9e-6.

MKL's conditional numerical reproducibility (CNR) fixes one code path and makes its results
independent of alignment: with ``MKL_CBWR=AVX2`` the kernels are fixed on every CPU that has AVX2 (Intel or
AMD, AVX2 or AVX-512), so a batch's models match their runs alone on each. It does not make an AMD CPU's bits
equal an Intel one's: on an AMD EPYC (AVX-512) the AVX2 and AVX512 branches gave the same bits as each other and
other bits than an Intel Xeon at AVX2, so :func:`math_path` names the CPU vendor too. MKL reads the variable
at its first call, so :func:`pin_math_library` runs when ``recallkit`` is imported, before anything here imports
torch; a value the user set is kept (and recorded), and an empty one lets MKL choose (recorded as
"MKL unpinned": then batch independence is not promised). torch's own vectorised kernels (softmax,
reductions, the optimisers) still follow the CPU's capability (``torch.backends.cpu``); each of those
code paths is a fixed function of its inputs, so results are batch-independent on every one, which
the tests check by forcing each path with ``ATEN_CPU_CAPABILITY``. Numbers may differ *between*
machines whose capability differs (AVX2 against AVX-512); :func:`math_path`, stored with every row,
says which path a number came from.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Iterator

__all__ = ["MKL_ENV", "cpu_vendor", "math_path", "one_blas_thread", "pin_math_library", "pinned_branch",
           "set_blas_threads", "keep_freed_heap", "HEAP_BUFFER_MAX"]

MKL_ENV = "MKL_CBWR"

# whether torch was imported (so MKL may have run) before recallkit could pin the branch
_TORCH_BEFORE_PIN: bool | None = None


def _cpuinfo_field(name: str) -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.split(":", 1)[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_flags() -> set[str]:
    return set((_cpuinfo_field("flags") or "").split())


def cpu_vendor() -> str:
    """``GenuineIntel``, ``AuthenticAMD``, ... (``unknown`` without /proc/cpuinfo): part of the math path, since MKL
    takes other kernels on other vendors at the same CNR branch (measured: a three-step run that sums to
    155290.45986127853 on an Intel Xeon sums to 155290.35572004318 on an AMD EPYC, both AVX-512, MKL_CBWR=AVX2)."""
    return _cpuinfo_field("vendor_id") or "unknown"


def pinned_branch() -> str:
    """The CNR branch recallkit asks MKL for: AVX2 where the CPU has it (every x86 CPU since 2013-2015,
    Intel and AMD), else COMPATIBLE (SSE2, any x86). Where /proc/cpuinfo is missing (not Linux) the
    safe COMPATIBLE."""
    return "AVX2" if "avx2" in _cpu_flags() else "COMPATIBLE"


def pin_math_library() -> None:
    """Fix MKL's code path for this process and the workers it starts (they inherit the environment),
    unless the user has set ``MKL_CBWR`` already. Touches only the environment: torch is not imported."""
    global _TORCH_BEFORE_PIN
    if _TORCH_BEFORE_PIN is None:
        _TORCH_BEFORE_PIN = "torch" in sys.modules and MKL_ENV not in os.environ
    os.environ.setdefault(MKL_ENV, pinned_branch())


@lru_cache(maxsize=8)
def math_path(device: str | None = None) -> str:
    """The code path of this process's arithmetic on ``device`` (the CPU when None), recorded with every row,
    e.g. ``"cpu AVX512 GenuineIntel, MKL_CBWR=AVX2"`` (torch's kernel capability, the CPU vendor, MKL's branch);
    ``", MKL unpinned"`` when torch was imported before recallkit and MKL may already have chosen its own path
    (then batch independence is not promised). On a CUDA device: its compute capability, the CUDA runtime torch
    was built with and whether float32 matmuls may use TF32, e.g. ``"cuda sm_90, CUDA 13.0, TF32 off"`` (the CPU's
    path does not touch a GPU run's arithmetic)."""
    import torch  # here: the caller has torch loaded already (it is training)

    if device is not None and str(device).startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        tf32 = "on" if torch.backends.cuda.matmul.allow_tf32 else "off"
        return f"cuda sm_{major}{minor}, CUDA {torch.version.cuda}, TF32 {tf32}"
    capability = f"{torch.backends.cpu.get_cpu_capability()} {cpu_vendor()}"
    if not torch.backends.mkl.is_available():
        return f"cpu {capability}, no MKL"
    branch = os.environ.get(MKL_ENV, "")
    if not branch:  # set empty by the user: MKL chooses by CPU, alignment and size
        return f"cpu {capability}, MKL unpinned"
    return f"cpu {capability}, {MKL_ENV}={branch}" + (", MKL unpinned" if _TORCH_BEFORE_PIN else "")


# OpenBLAS's thread-count functions, by the names numpy's and scipy's bundled builds give them
_BLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
                 "openblas_set_num_threads")


def _loaded_openblas() -> list:
    """(get, set) of every OpenBLAS this process has loaded (numpy's and scipy's bundle one each); [] where none
    is found or the platform has no /proc."""
    try:
        paths = sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                        if "openblas" in line.rsplit("/", 1)[-1].lower()})
    except OSError:
        return []
    found = []
    for path in paths:
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _BLAS_SETTERS:
            setter = getattr(library, name, None)
            getter = getattr(library, name.replace("set_num", "get_num"), None)
            if setter is not None and getter is not None:
                getter.restype = ctypes.c_int
                found.append((getter, setter))
                break
    return found


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's (and scipy's) BLAS on one thread for the block, then as before. The runner experiments and report
    steps that fit and decode in numpy run in one worker beside the searches' workers, one per core: there
    OpenBLAS's own threads spin against the other workers (a 512 x 129 least-squares fit took 23 times the CPU
    of one thread on two busy cores), and one thread also keeps their numbers independent of the core count.
    A no-op where no OpenBLAS is loaded; OPENBLAS_NUM_THREADS=1 in the environment does the same from the start."""
    libraries = _loaded_openblas()
    before = [get() for get, _ in libraries]
    for _, set_threads in libraries:
        set_threads(1)
    try:
        yield
    finally:
        for (_, set_threads), threads in zip(libraries, before):
            set_threads(max(1, threads))


def set_blas_threads(threads: int) -> None:
    """Every loaded OpenBLAS on ``threads`` threads from now on (the report's worker processes: one each, so the
    numpy work of a step or a fit neither spins against the other workers nor depends on the core count)."""
    for _, set_threads in _loaded_openblas():
        set_threads(max(1, threads))


# glibc's malloc (CPU) takes a buffer from its heap instead of a fresh mmap once it has freed one of that size, up to
# DEFAULT_MMAP_THRESHOLD_MAX = 32 MiB (mallopt(3)); keep_freed_heap serves every buffer up to that size from the heap
# from the start. The memory model (empirics.config.allocator_retention_bytes) counts what that reuse keeps.
HEAP_BUFFER_MAX = 32 << 20


def keep_freed_heap() -> None:
    """On the CPU with glibc: serve every buffer up to HEAP_BUFFER_MAX (32 MiB, glibc's largest heap
    buffer) from the heap from the start, and never hand freed heap memory back to the kernel. By
    default glibc maps the first buffer of each size above 128 KiB and trims the heap's free top, so a
    training that frees and allocates the same [models, items, V] tensors every pass page-faults them
    in again each time: the tr_fig2 and tr_fig5 cells of benchmarks/engine.py spent 4-14% of their CPU
    time in the kernel doing it (about 10% of their time). Freed buffers are reused rather than added, but
    they are not returned before the process ends. Once per process; a no-op without glibc.

    Opt-in (environment variable RECALLKIT_KEEP_HEAP=1), not the default: it changes the allocator of the
    whole process, a library should not do that unasked (the toolkit's own worker processes set it at their
    start, :mod:`recallkit.empirics.workers`), and with it the peak RSS of small trainings is up to
    twice what ``bytes_per_model`` estimates (the three_step bag config of tests/integration/test_memory_model.py:
    42 MiB measured against 22 estimated; without it every config there is within 25%)."""
    global _heap_kept
    if _heap_kept or os.environ.get("RECALLKIT_KEEP_HEAP", "0") != "1":
        return
    _heap_kept = True
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, HEAP_BUFFER_MAX)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, (1 << 31) - 1)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


_heap_kept = False

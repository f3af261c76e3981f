"""The math path stored with every row names the arithmetic that produced it: the CPU's code path for a CPU run, the
GPU's compute capability, CUDA build and TF32 setting for a CUDA run (a GPU run once recorded the host CPU's path)."""
from __future__ import annotations

import torch

from recallkit.empirics import numerics


def test_cpu_path_names_the_capability_and_the_mkl_branch():
    path = numerics.math_path()
    assert path.startswith(f"cpu {torch.backends.cpu.get_cpu_capability()}")


def test_cuda_path_names_the_device_not_the_host_cpu(monkeypatch):
    numerics.math_path.cache_clear()
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    matmul = torch.backends.cuda.matmul  # its settings are properties of torch's C module: set and restore by hand
    before = matmul.allow_tf32
    try:
        matmul.allow_tf32 = False
        assert numerics.math_path("cuda:0") == "cuda sm_90, CUDA 13.0, TF32 off"
        numerics.math_path.cache_clear()
        matmul.allow_tf32 = True
        assert numerics.math_path("cuda:0").endswith("TF32 on")
        assert numerics.math_path().startswith("cpu ")
    finally:
        matmul.allow_tf32 = before
        numerics.math_path.cache_clear()

"""Which torch device a run uses: CPU by default, CUDA automatically when present, or forced."""
from __future__ import annotations

from typing import TYPE_CHECKING

from recallkit.theory.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["describe", "DEVICE_CHOICES", "resolve_device"]


DEVICE_CHOICES = ("auto", "cpu", "cuda")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """``None``/``"auto"`` -> cuda if available else cpu; ``"cpu"``/``"cuda"``/``"cuda:1"`` -> that device."""
    import torch  # here, not at the top: torch takes about 1 s to import and the CLI imports this module for --help

    if isinstance(device, torch.device):
        return device
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda"):
        raise InputError(f"--device: expected one of {', '.join(DEVICE_CHOICES)} (or cuda:N), got {device!r}")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device: {device} was asked for but torch sees no CUDA device (use cpu or auto)")
    return torch.device(device)


def describe(device: torch.device) -> str:
    """A short record of the hardware for results rows, e.g. 'cpu' or 'cuda:0 (NVIDIA H200)'."""
    import torch  # see resolve_device

    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return "cpu"

"""The smallest valid pack, as text: tests of the pack reader, of hostile packs and of the theory command each
break it in one place; with the helpers they share to write a pack, read its one-line error and run the installed
``recallkit theory`` on it."""
from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from recallkit import theory
from recallkit.theory.errors import InputError

__all__ = ["MINIMAL_PACK", "SIGNAL_AND_CROSSTALK", "pack_load_error", "theory_command", "write_pack"]

#: a signal d^2 against one log noise term, in the pack's [[terms]] form (``{crosstalk}``: the noise expression)
SIGNAL_AND_CROSSTALK = """
    [[terms]]
    name = "signal"
    role = "signal"
    expr = "d**2"
    provenance = "derived-here"

    [[terms]]
    name = "crosstalk"
    role = "noise"
    expr = "{crosstalk}"
    provenance = "derived-here"
"""

MINIMAL_PACK = textwrap.dedent(
    """
    [pack]
    name = "mine"
    title = "a plain title"
    variables = ["V", "N", "L", "d"]
    base = "V"
    size = "d"
    param_count = "d**2"
    domain = ["a >= 1"]
    """ + SIGNAL_AND_CROSSTALK.format(crosstalk="V*L*log(V)")
)


def write_pack(tmp_path: Path, text: str, filename: str = "mine.toml") -> Path:
    path = tmp_path / filename
    path.write_text(text, encoding="utf-8")
    return path


def pack_load_error(tmp_path: Path, text: str, filename: str = "mine.toml") -> str:
    """The one-line InputError of reading ``text`` as a pack file, which names that file."""
    path = write_pack(tmp_path, text, filename)
    with pytest.raises(InputError) as info:
        theory.load_pack(path)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(str(path)), message
    return message


def theory_command(tmp_path: Path, filename: str, text: str, args: list[str]) -> subprocess.CompletedProcess:
    """``recallkit theory ARGS`` through the installed command, in ``tmp_path`` with ``text`` written as ``filename``."""
    command = shutil.which("recallkit")
    assert command, "the recallkit command is not installed"
    write_pack(tmp_path, text, filename)
    return subprocess.run([command, "theory", *args], cwd=tmp_path, capture_output=True, text=True, timeout=120)

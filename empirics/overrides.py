"""``--set FIELD=VALUE`` on ``sweep``, ``fit`` and ``report``: one field of an experiment file changed for one
command, without copying the file.

FIELD is the field's dotted path in the file as written: ``verdict.delta``, ``fixed.lr``, ``search.max``,
``thresholds``, ``presets.quick.seeds``. A field that the chosen preset sets is changed in the preset (its value is
the one that runs), so ``--set seeds=[0,1,2]`` and ``--set thresholds=[0.5]`` change what the preset runs, and
``preset.X`` names the chosen preset's X whatever it is called. VALUE is read as a TOML value (``0.1``,
``[0, 1, 2]``, ``true``, ``"text"``); anything that is not one is taken as text (``--set search.start=d**2/3``).
The value is data: it is checked by the same rules as the file, and nothing in it is ever run. The fields set are
recorded with the plan and written beside its results (``set`` in ``fit --json`` and summary.json).
"""
from __future__ import annotations

import copy
import re
import tomllib
from typing import Any, Sequence

from recallkit.theory.errors import InputError

__all__ = ["FieldSettings", "SET_HELP", "apply_settings", "parse_settings"]

SET_HELP = ("FIELD=VALUE, repeatable: change one field of the experiment file for this command, e.g. verdict.delta=0.1, "
            "thresholds=[0.5], seeds=[0,1,2], search.max=2048, fixed.lr=0.05 (a field the preset sets is changed in "
            "the preset; recorded beside the results as 'set')")

FieldSettings = tuple[tuple[str, Any], ...]
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_0-9][A-Za-z0-9_]*)*")
MAX_VALUE_CHARS = 1000  # a value longer than this is not a setting someone typed


def parse_settings(items: Sequence[str] | None, flag: str = "--set") -> FieldSettings:
    """``["verdict.delta=0.1", ...]`` as ``(("verdict.delta", 0.1), ...)``; every mistake a one-line error."""
    out: dict[str, Any] = {}
    for item in items or ():
        field, sep, text = item.partition("=")
        field = field.strip()
        if not sep or not _PATH.fullmatch(field):
            raise InputError(f"{flag} {item!r}: expected FIELD=VALUE with FIELD a dotted path of the experiment file, "
                             f"e.g. {flag} verdict.delta=0.1 or {flag} presets.quick.seeds=[0,1,2]")
        if field in out:
            raise InputError(f"{flag} {field}: given twice")
        if len(text) > MAX_VALUE_CHARS:
            raise InputError(f"{flag} {field}: value longer than {MAX_VALUE_CHARS} characters")
        out[field] = _value(text.strip())
    return tuple(out.items())


def _value(text: str) -> Any:
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text


def _where(raw: dict, parts: list[str], preset: str) -> list[str]:
    """The path the field is set at: the chosen preset's where it sets the field (or ``preset.X``), else as given."""
    if parts[0] == "preset":
        return ["presets", preset, *parts[1:]]
    chosen = (raw.get("presets") or {}).get(preset) if isinstance(raw.get("presets"), dict) else None
    if parts[0] != "presets" and isinstance(chosen, dict) and parts[0] in chosen:
        return ["presets", preset, *parts]
    return parts


def apply_settings(raw: dict, settings: FieldSettings, preset: str, shown: str, flag: str = "--set") -> dict:
    """A copy of the parsed experiment file ``raw`` with each field set (the file itself is never changed)."""
    if not settings:
        return raw
    out = copy.deepcopy(raw)
    for field, value in settings:
        parts = _where(out, field.split("."), preset)
        table = out
        for depth, key in enumerate(parts[:-1]):
            table = table.setdefault(key, {})
            if not isinstance(table, dict):
                raise InputError(f"{flag} {field}: {shown}: {'.'.join(parts[:depth + 1])} is not a table, so it has "
                                 f"no field {parts[depth + 1]!r}")
        table[parts[-1]] = value
    return out

"""The report's one date, from ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention). Kept apart from
``reports.style`` so that reading it imports no matplotlib: the command line checks the variable before every
command, and an unchanged report answered from its files must not pay for the plotting library."""
from __future__ import annotations

import datetime as _dt
import os

from recallkit.theory.errors import InputError

__all__ = ["source_date"]


def source_date() -> _dt.datetime | None:
    """The build date from SOURCE_DATE_EPOCH, or None if it is unset or blank."""
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw.strip() == "":
        return None
    try:
        return _dt.datetime.fromtimestamp(int(raw), tz=_dt.timezone.utc)
    except (ValueError, OverflowError, OSError):  # not an integer, or a date beyond the year 9999
        raise InputError(f"SOURCE_DATE_EPOCH: expected an integer number of seconds since 1970-01-01 (UTC), "
                         f"up to 253402300799 (the end of 9999), got {raw!r}") from None

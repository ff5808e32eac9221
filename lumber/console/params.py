"""Query parameters the pages share: moments in time and the output format.

A moment is ms since the epoch (``1795334400000``) or an ISO 8601 UTC time (``2026-11-22``,
``2026-11-22T08``, ``2026-11-22T08:30:00Z``; a time without a zone is UTC). Anything else is a
:class:`~lumber.console.errors.BadRequestError` naming the parameter and the forms it takes.
"""

from __future__ import annotations

import datetime as dt

from lumber.console.errors import BadRequestError


def parse_moment_ms(text: str, name: str) -> int:
    """``text`` (see the module docstring) as ms since the epoch."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    candidate = value[:-1] if value[-1:] in ("Z", "z") else value
    if len(candidate) == 13 and candidate[10] == "T":  # 2026-11-22T08: fromisoformat wants minutes
        candidate += ":00"
    try:
        moment = dt.datetime.fromisoformat(candidate)
    except ValueError:
        raise BadRequestError(
            f"parameter {name}={text!r}: expected ms since the epoch or an ISO 8601 UTC time "
            "(2026-11-22, 2026-11-22T08, 2026-11-22T08:30:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    ms = int(moment.timestamp() * 1000)
    if ms < 0:  # ListOffsets reads -1 and -2 as "latest" and "earliest"
        raise BadRequestError(f"parameter {name}={text!r}: a time before 1970 holds no record")
    return ms


def utc_iso(ms: int) -> str:
    """``2026-11-22T08:00:00.000Z``."""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"

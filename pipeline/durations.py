"""Durations as the command line takes them (``lumber etl schedule``, ``lumber audit verify``): ``250ms``,
``90s``, ``30m``, ``1h``, ``2h30m``, ``1d`` (parts added up), or ``0``."""

from __future__ import annotations

import re

from pipeline.errors import PipelineError

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"(?:[0-9]+(?:ms|s|m|h|d))+")
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d)")


class DurationError(PipelineError):
    """A duration that does not parse; the message names the option and the text."""


def parse_duration_ms(text: str, what: str = "duration") -> int:
    """``text`` in milliseconds; :class:`DurationError` naming ``what`` (e.g. ``--every``) otherwise."""
    value = text.strip().lower()
    if value == "0":
        return 0
    if not _DURATION.fullmatch(value):
        raise DurationError(f"{what} {text!r}: expected a duration such as 90s, 30m, 1h, 2h30m or 1d")
    return sum(int(n) * _UNITS_MS[unit] for n, unit in _DURATION_PART.findall(value))

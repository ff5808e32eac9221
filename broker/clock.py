"""The clock every part reads (the log, producers, the audit, the mirror): milliseconds since the epoch,
injectable so that tests control time."""

from __future__ import annotations

import time
from collections.abc import Callable

#: A function returning the current time in milliseconds since the Unix epoch.
Clock = Callable[[], int]


def system_clock_ms() -> int:
    """The wall clock, in milliseconds since the Unix epoch."""
    return time.time_ns() // 1_000_000

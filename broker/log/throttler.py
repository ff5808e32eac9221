"""Kafka's ``Throttler``: a cap on the bytes per second that the log cleaner's threads read and write
together (``[log] cleaner_io_max_bytes_per_second``; 0, the default, means no cap)."""

from __future__ import annotations

import threading
import time


class Throttler:
    """Kafka's ``Throttler``: callers report the bytes they handled and sleep when the rate since the window
    began exceeds ``max_bytes_per_second`` (0: never). Shared by the cleaner threads; thread-safe."""

    def __init__(self, max_bytes_per_second: float, *, check_s: float = 0.1) -> None:
        self._max = max_bytes_per_second
        self._check_s = check_s
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._bytes = 0

    def maybe_throttle(self, size_bytes: int) -> None:
        if self._max <= 0:
            return
        with self._lock:
            self._bytes += size_bytes
            now = time.monotonic()
            elapsed = now - self._window_start
            if elapsed < self._check_s:
                return
            sleep_s = self._bytes / self._max - elapsed
            self._window_start, self._bytes = now, 0
        if sleep_s > 0:
            time.sleep(sleep_s)

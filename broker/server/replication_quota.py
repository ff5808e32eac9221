"""A replication throttle's byte budget on one broker (Kafka's ``ReplicationQuotaManager``, one for the
leader side and one for the follower side).

Kafka checks the quota before it copies a throttled partition (``isQuotaExceeded``) and records the bytes
after (``record``), so a copy may overshoot by one fetch; its rate is measured over 11 one-second windows,
which lets a burst of ten seconds' worth through at the start. Lumber keeps the check-then-record contract
over a token bucket instead: the budget refills at the rate (``leader.replication.throttled.rate`` or
``follower.replication.throttled.rate``, read on every call from
:class:`~broker.cluster.replication_throttle.ReplicationThrottle`, so a change applies at once) up to
:data:`BURST_S` seconds' worth, and the quota is exceeded while the budget is below zero; a move's copy rate
then stays within a fetch of the rate from its first second on.

Thread-safe: one lock around the budget (request handler threads on the leader, fetcher threads on the
follower).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: The most the budget holds: this many seconds of the rate.
BURST_S = 0.25


class ReplicationQuota:
    """Bytes per second for throttled replication (see the module docstring)."""

    def __init__(self, rate: Callable[[], int | None], clock_s: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._clock_s = clock_s
        self._lock = threading.Lock()
        self._budget = 0.0
        self._at = clock_s()
        #: bytes recorded in all (the metrics' throttled bytes)
        self.recorded_bytes = 0

    def _refill(self, rate: int) -> None:
        now = self._clock_s()
        self._budget = min(self._budget + (now - self._at) * rate, rate * BURST_S)
        self._at = now

    def exceeded(self) -> bool:
        """Whether a throttled copy must wait now (False without a rate)."""
        rate = self._rate()
        if rate is None:
            return False
        with self._lock:
            self._refill(rate)
            return self._budget < 0

    def wait_s(self) -> float:
        """How long until the budget is back above zero (0 when not exceeded)."""
        rate = self._rate()
        if rate is None or rate <= 0:
            return 0.0 if rate is None else 0.1
        with self._lock:
            self._refill(rate)
            return max(0.0, -self._budget / rate)

    def record(self, size_bytes: int) -> None:
        """A throttled copy of ``size_bytes`` was made."""
        rate = self._rate()
        with self._lock:
            self.recorded_bytes += size_bytes
            if rate is not None:
                self._refill(rate)
                self._budget -= size_bytes

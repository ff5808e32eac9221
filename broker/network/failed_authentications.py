"""Failed SASL authentications per client host, to throttle password guessing.

A host that failed ``max_failures`` times within the last ``window_s`` seconds is throttled: its next
SaslAuthenticate requests fail at once (SASL_AUTHENTICATION_FAILED, connection closed) without the password
being looked at, until the oldest of those failures is older than the window. A success does not clear the
record (a guesser that also knows one password gains nothing). At most ``max_hosts`` hosts are remembered;
the one whose last failure is oldest is forgotten first, so memory stays bounded under a scan from many
addresses. Kafka delays each failure's answer instead (``connection.failed.authentication.delay.ms``);
Lumber refuses a host's further attempts outright for a while, which also bounds the broker's own PBKDF2
work for SASL/PLAIN.

Thread-safe: the processors of a listener share one, under a lock held for a dictionary update.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable


class FailedAuthentications:
    """Recent failures by host (see the module docstring)."""

    def __init__(
        self,
        max_failures: int = 10,
        window_s: float = 60.0,
        *,
        max_hosts: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_failures < 1 or window_s <= 0 or max_hosts < 1:
            raise ValueError("max_failures, window_s and max_hosts must be positive")
        self.max_failures = max_failures
        self.window_s = window_s
        self._max_hosts = max_hosts
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def record_failure(self, host: str) -> None:
        now = self._clock()
        with self._lock:
            times = self._failures.pop(host, None) or deque(maxlen=self.max_failures)
            times.append(now)
            self._failures[host] = times
            while len(self._failures) > self._max_hosts:
                self._failures.popitem(last=False)

    def throttled_s(self, host: str) -> float:
        """How much longer ``host`` is throttled (0: not throttled)."""
        now = self._clock()
        with self._lock:
            times = self._failures.get(host)
            if times is None or len(times) < self.max_failures:
                return 0.0
            remaining = times[0] + self.window_s - now
            if remaining <= 0:
                return 0.0
            return remaining

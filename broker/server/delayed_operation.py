"""A request that waits (a Fetch long-poll, an ``acks=-1`` Produce) until it can be answered, or its deadline.

An operation completes exactly once: :meth:`DelayedOperation.try_complete` when :meth:`ready` says so (after
a change to one of the partitions it watches), :meth:`force_complete` at its deadline or at shutdown.
Completion runs :meth:`on_complete`, which sends the response. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from broker.record.topic_partition import TopicPartition


class DelayedOperation(ABC):
    """Something to do once :meth:`ready` or at ``deadline`` (``time.monotonic()`` seconds)."""

    def __init__(self, keys: Sequence[TopicPartition], timeout_ms: int) -> None:
        self.keys = tuple(keys)
        self.deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        self._lock = threading.Lock()
        self._completed = False

    @property
    def completed(self) -> bool:
        return self._completed

    @abstractmethod
    def ready(self) -> bool:
        """Whether the operation can complete now (cheap; called after every change to its partitions)."""

    @abstractmethod
    def on_complete(self, *, expired: bool) -> None:
        """Send the response (``expired``: the deadline passed, or the broker is shutting down)."""

    def try_complete(self) -> bool:
        """Complete now if :meth:`ready`; True if this call completed it."""
        if self._completed or not self.ready():
            return False
        return self.force_complete(expired=False)

    def force_complete(self, *, expired: bool = True) -> bool:
        """Complete now whatever :meth:`ready` says; True if this call completed it (False: done before)."""
        with self._lock:
            if self._completed:
                return False
            self._completed = True
        self.on_complete(expired=expired)
        return True

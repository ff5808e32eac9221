"""Who hears of a log's changes: the listeners called after every advance of the high watermark and every
flush (the broker's purgatory, the flush metrics), the threads that wait for an offset to be flushed, and
the end listeners called after every append with the new log end offset (a leader's delayed follower
fetches wait for the log end to move, not the high watermark).

:class:`~broker.log.log.Log` calls :meth:`LogListeners.publish` on the appending or flushing thread, after
it released its append lock; listeners must be quick and must not call back into the log's append or
flush. Thread-safe: the listener tuple is replaced as a whole under the condition's lock and read without
it (a listener added during a publish hears of the next change). The appending thread reads
:attr:`LogListeners.end_listeners` once per append and calls :meth:`LogListeners.publish_end` only when it
is not empty, so end listeners cost nothing while none is registered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from broker.record.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

#: Called with the partition and its high watermark after every advance of it and after every flush.
HighWatermarkListener = Callable[[TopicPartition, int], None]
#: Called with the partition and its log end offset after every append.
EndOffsetListener = Callable[[TopicPartition, int], None]


class LogListeners:
    """The listeners and waiters of the log of ``tp``."""

    __slots__ = ("_changed", "_listeners", "_tp", "end_listeners")

    def __init__(self, tp: TopicPartition) -> None:
        self._tp = tp
        self._changed = threading.Condition(threading.Lock())
        self._listeners: tuple[HighWatermarkListener, ...] = ()
        #: The end listeners (replaced as a whole; read it, never change it).
        self.end_listeners: tuple[EndOffsetListener, ...] = ()

    def add(self, listener: HighWatermarkListener) -> None:
        with self._changed:
            self._listeners = (*self._listeners, listener)

    def remove(self, listener: HighWatermarkListener) -> None:
        with self._changed:
            self._listeners = tuple(existing for existing in self._listeners if existing is not listener)

    def add_end(self, listener: EndOffsetListener) -> None:
        with self._changed:
            self.end_listeners = (*self.end_listeners, listener)

    def remove_end(self, listener: EndOffsetListener) -> None:
        with self._changed:
            self.end_listeners = tuple(
                existing for existing in self.end_listeners if existing is not listener
            )

    def publish_end(self, log_end_offset: int) -> None:
        """Call every end listener (one that raises is logged and skipped)."""
        for listener in self.end_listeners:
            try:
                listener(self._tp, log_end_offset)
            except Exception:
                logger.exception("%s: log-end listener %r failed", self._tp, listener)

    def publish(self, high_watermark: int) -> None:
        """Wake the waiters and call every listener (one that raises is logged and skipped)."""
        self.wake()
        for listener in self._listeners:
            try:
                listener(self._tp, high_watermark)
            except Exception:
                logger.exception("%s: high-watermark listener %r failed", self._tp, listener)

    def wake(self) -> None:
        """Wake the waiters to check again (after a change, or when the log closes)."""
        with self._changed:
            self._changed.notify_all()

    def wait(self, done: Callable[[], bool], closed: Callable[[], bool], timeout_s: float) -> bool:
        """Wait until ``done()``; False at ``timeout_s`` or once ``closed()``."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while not done():
                if closed():
                    return False
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

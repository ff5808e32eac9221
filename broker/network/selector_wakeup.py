"""Waking a thread blocked in ``selector.select()`` from another thread (Java's ``Selector.wakeup``).

A non-blocking pipe: the read end is registered in the selector, :meth:`SelectorWakeup.wakeup` writes one
byte, the selecting thread sees the read end readable and calls :meth:`SelectorWakeup.drain`. Wakeups
coalesce: a full pipe already guarantees a wakeup, so a write that would block is simply skipped.

Thread safety: :meth:`wakeup` may be called from any thread, also after :meth:`close` (it then does
nothing); :meth:`drain` and :meth:`close` belong to the selecting thread's owner.
"""

from __future__ import annotations

import contextlib
import os
import threading

_DRAIN_BYTES = 4096


class SelectorWakeup:
    """A pipe whose read end wakes a selector when another thread writes to it."""

    __slots__ = ("_closed", "_lock", "_read_fd", "_write_fd")

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()
        self._closed = False

    def fileno(self) -> int:
        """The read end, to register for ``EVENT_READ``."""
        return self._read_fd

    def wakeup(self) -> None:
        with self._lock:
            if self._closed:
                return
            with contextlib.suppress(BlockingIOError):
                os.write(self._write_fd, b"\x00")

    def drain(self) -> None:
        """Consume every pending wakeup."""
        try:
            while len(os.read(self._read_fd, _DRAIN_BYTES)) == _DRAIN_BYTES:
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        """Close both ends; idempotent. Unregister :meth:`fileno` from the selector first."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._write_fd)
            os.close(self._read_fd)

"""Replaced segments dropped later, on a thread of their own (Kafka's ``asyncDeleteSegment``, which renames a
replaced segment's files to ``.deleted`` and deletes them ``file.delete.delay.ms`` later on its scheduler).

Lumber unlinks a segment's files at once when the cleaner swaps it out (the crash-safe sequence of
:mod:`broker.log.segment_swap` is unchanged), but its descriptors close only when the last reference to
the segment goes (:mod:`broker.log.file_handle`), and closing the last descriptor of an unlinked file frees
its page cache: about 9 % of a cleaning pass when the cleaning thread did it (BENCHMARKS.md, compaction).
The cleaner hands each group of segments it swapped out to :meth:`DeferredRelease.later`, which holds them
for ``delay_ms`` (``[log] file_delete_delay_ms``, Kafka's ``file.delete.delay.ms``: 60 s) and then drops
them on its own thread: by then the pass has long let go of its references, so the frees happen there,
beside the next pass rather than inside it. A reader still holding an older view of the log keeps the
segments readable as before; they close when it lets go. Like Kafka's ``.deleted`` files, a replaced
segment's disk space comes back only then.

Concurrency: ``_cond`` guards ``_held`` (groups with their deadlines, in deadline order: the delay is the
same for all) and ``_thread``. The thread is started by the first :meth:`later` after it was idle and ends
when nothing is held, so an idle cleaner keeps no thread. Items are dropped outside the lock (their
finalizers may take a while). :meth:`close` drops everything at once, on the caller's thread.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

__all__ = ["DeferredRelease"]


class DeferredRelease:
    """Holds objects for ``delay_ms``, then drops them on its own thread (see the module docstring)."""

    def __init__(
        self,
        delay_ms: int,
        *,
        name: str = "lumber-log-cleaner-release",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._delay_s = delay_ms / 1000
        self._name = name
        self._clock = clock
        self._cond = threading.Condition()
        self._held: deque[tuple[float, Sequence[object]]] = deque()
        self._thread: threading.Thread | None = None
        self._closed = False

    def later(self, items: Sequence[object]) -> None:
        """Drop ``items`` in ``delay_ms`` (at once with a delay of 0, or after :meth:`close`)."""
        if self._delay_s <= 0:
            return
        with self._cond:
            if self._closed:
                return
            self._held.append((self._clock() + self._delay_s, items))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def held(self) -> int:
        """How many objects are held now."""
        with self._cond:
            return sum(len(items) for _, items in self._held)

    def close(self) -> None:
        """Drop everything held now, and whatever :meth:`later` is given from now on."""
        with self._cond:
            self._closed = True
            dropped = list(self._held)
            self._held.clear()
            self._cond.notify_all()
        del dropped  # the finalizers run here, outside the lock

    def _run(self) -> None:
        while True:
            due: list[Sequence[object]] = []
            with self._cond:
                while not due:
                    if not self._held:
                        self._thread = None  # the next later() starts a new one
                        return
                    deadline = self._held[0][0]
                    wait_s = deadline - self._clock()
                    if wait_s > 0:
                        self._cond.wait(wait_s)
                        continue
                    while self._held and self._held[0][0] <= self._clock():
                        due.append(self._held.popleft()[1])
            del due  # outside the lock: closing unlinked files frees their page cache

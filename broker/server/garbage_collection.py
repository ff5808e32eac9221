"""How the broker keeps CPython's cyclic garbage collector from pausing it (issue 35's end-to-end tails).

CPython's collector stops every thread (it holds the GIL) while it walks a generation. A full collection
(generation 2) walks every object that survived two younger ones: in a started broker that is everything
its imports and its start-up made (the protocol schemas, the compiled kernels, the ZooKeeper client, the
loaded group metadata), hundreds of thousands of objects that live until the process ends. Measured on
the end-to-end latency bench (``bench/e2e_latency.py``, 1,000 msg/s, a busy 2-core machine), each full
collection paused the broker 75-293 ms, and each such pause was a latency episode: every record produced
meanwhile waited for it, which set the run's p99 (162 ms and 78 ms in the rounds of 2026-11-28).

:meth:`GarbageCollection.settle`, called once the broker has started (:mod:`broker.server.broker_server`),
collects once and then **freezes** what survived (``gc.freeze``: moved to a permanent generation that no
collection walks; they are still freed by reference counting if they die). From then on a full collection
walks only what was made after start-up. The young generations keep CPython's thresholds except the first
(:data:`YOUNG_THRESHOLD`), raised from 700 allocations so that a busy broker runs fewer young collections
(each one walks only the young objects, so fewer of them cost the same in all). Reference cycles made after
start-up are still collected; none of this changes what is freed, only when the collector walks.

Not thread-safe in the sense that matters: call :meth:`settle` from the thread that starts the broker, once.
Kafka, a JVM, has no equivalent setting (its collector pauses are the JVM's business, ``-XX:+UseG1GC``).
"""

from __future__ import annotations

import gc
import logging
import time

logger = logging.getLogger(__name__)

#: Allocations minus deallocations between two collections of the youngest generation (CPython: 700).
YOUNG_THRESHOLD = 10_000


class GarbageCollection:
    """The broker's collector settings (see the module docstring)."""

    @staticmethod
    def settle() -> int:
        """Collect, then freeze the survivors out of every later collection and raise the youngest
        generation's threshold; returns how many objects were frozen."""
        started = time.monotonic()
        gc.collect()
        gc.freeze()
        _, middle, oldest = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
        frozen = gc.get_freeze_count()
        logger.info(
            "froze %d objects made at start-up out of the garbage collector's walks (%.0f ms)",
            frozen,
            (time.monotonic() - started) * 1000,
        )
        return frozen

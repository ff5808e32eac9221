"""A block at whose end the thread that made changes completes the delayed operations they made ready
(:meth:`broker.server.purgatory.Purgatory.completing_here`; Kafka's action queue, ``ActionQueue.scala``).

Inside the block, :meth:`~broker.server.purgatory.Purgatory.notify` on this thread only adds the changed
partition to the thread's set (``local.changed``); at the end of the outermost block the set is handed to
``check`` (the purgatory's ``check_and_complete``), on this thread, once the body has returned (open the
block where the thread holds no lock: the checks answer requests). A block inside another adds to the
outer one. Not shared between threads: each thread's set is its own (``threading.local``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from types import TracebackType

from broker.record.topic_partition import TopicPartition


class CompletingHere:
    """The block (a class, not a generator: it wraps every Produce and Fetch)."""

    __slots__ = ("_changed", "_check", "_local")

    def __init__(self, local: threading.local, check: Callable[[Collection[TopicPartition]], None]) -> None:
        self._local = local
        self._check = check
        self._changed: set[TopicPartition] | None = None

    def __enter__(self) -> None:
        local = self._local
        if getattr(local, "changed", None) is None:  # the outermost block collects
            self._changed = local.changed = set()

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        changed = self._changed
        if changed is None:
            return
        self._changed = None
        self._local.changed = None
        if changed:
            self._check(changed)

"""Where delayed operations wait (Kafka's purgatory): watched by partition, expired by deadline.

Logs tell the purgatory about every change (:meth:`Purgatory.notify`, a high-watermark and log-end listener
called on the appending, fetching or flushing thread). Who then re-checks the operations that watch the
partition depends on that thread:

* **inside** :meth:`Purgatory.completing_here` (a Produce or a Fetch being served, Kafka's action queue):
  the partition is remembered, and the same thread checks its watchers when the block ends, outside every
  lock the change was made under (Kafka's ``tryCompleteActions`` at the end of ``KafkaApis.handle``, and
  ``Partition.updateFollowerFetchState``'s ``tryCompleteDelayedRequests``). An ``acks=-1`` Produce thus
  answers the followers' waiting fetches on the thread that appended, and a follower's fetch that moves the
  high watermark answers the waiting produces on the thread that served it: no hand-over to another
  thread on the replication path. On a network processor serving requests itself, the outermost block is
  its turn (``InlineHandler.serving``), so the checks run once the turn's answers are written: an
  ``acks=1`` Produce's answer leaves before the consumer's Fetch it wakes is read and answered, as Kafka's
  ``KafkaApis.handle`` sends the response before ``tryCompleteActions``;
* **anywhere else** (the flusher, the ISR thread, the cluster watcher, a group write): the partition is
  queued and the purgatory's own thread re-checks the operations that watch it, so no thread that holds a
  lock a response may need (a group's) ever builds a response.

The purgatory's thread also completes operations whose deadline passed. Thread-safe; an operation
completes once, whichever thread checks it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Collection

from broker.record.topic_partition import TopicPartition
from broker.server.completing_here import CompletingHere
from broker.server.delayed_operation import DelayedOperation

logger = logging.getLogger(__name__)

_IDLE_WAIT_S = 1.0


class Purgatory:
    """Delayed operations keyed by the partitions they watch; one thread completes them."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._cond = threading.Condition()
        self._watchers: dict[TopicPartition, set[DelayedOperation]] = {}
        self._deadlines: list[tuple[float, int, DelayedOperation]] = []
        self._sequence = itertools.count()
        self._changed: set[TopicPartition] = set()
        self._stopping = False
        #: per thread: the partitions changed inside its :meth:`completing_here` block (None: outside one)
        self._local = threading.local()
        self._thread = threading.Thread(target=self._run, name=f"lumber-purgatory-{name}", daemon=True)
        self._thread.start()

    def completing_here(self) -> CompletingHere:
        """A block whose changes are checked on this thread when it ends (see the module docstring); a
        block inside another adds to the outer one."""
        return CompletingHere(self._local, self.check_and_complete)

    def watch(self, operation: DelayedOperation) -> None:
        """Complete ``operation`` now if it is ready, else keep it until it is or its deadline passes."""
        if operation.try_complete():
            return
        with self._cond:
            if self._stopping:
                stopping = True
            else:
                stopping = False
                for key in operation.keys:
                    self._watchers.setdefault(key, set()).add(operation)
                entry = (operation.deadline, next(self._sequence), operation)
                heapq.heappush(self._deadlines, entry)
                if self._deadlines[0] is entry:
                    # the thread sleeps until a later deadline: wake it for this one (the others it
                    # finds when it wakes for the earlier one)
                    self._cond.notify()
        if stopping:
            operation.force_complete()
            return
        # a change between the first check and the registration would otherwise go unnoticed
        if operation.try_complete():
            self._forget(operation)

    def notify(self, tp: TopicPartition, _high_watermark: int = 0) -> None:
        """``tp``'s log changed: re-check the operations that watch it (at the end of this thread's
        :meth:`completing_here` block, else on the purgatory's thread)."""
        changed: set[TopicPartition] | None = getattr(self._local, "changed", None)
        if changed is not None:
            changed.add(tp)
            return
        with self._cond:
            if tp in self._watchers:
                self._changed.add(tp)
                self._cond.notify()

    def check_and_complete(self, keys: Collection[TopicPartition]) -> None:
        """Re-check, on this thread, the operations watching ``keys`` (Kafka's ``checkAndComplete``)."""
        watching = self._watchers
        if not any(tp in watching for tp in keys):
            # nothing watches them (a produce without followers or fetches waiting): no lock taken. An
            # operation registered after this read is checked by ``watch`` itself after registering,
            # which sees the change made before this call
            return
        with self._cond:
            watchers = self._watchers
            candidates = [op for tp in keys for op in watchers.get(tp, ())]
        if len(candidates) > 1:
            candidates = list(dict.fromkeys(candidates))  # one watching several keys is checked once
        for operation in candidates:
            self._complete(operation, force=False)

    def pending(self) -> int:
        with self._cond:
            return len(self._deadlines)

    def _forget(self, operation: DelayedOperation) -> None:
        with self._cond:
            for key in operation.keys:
                ops = self._watchers.get(key)
                if ops is not None:
                    ops.discard(operation)
                    if not ops:
                        del self._watchers[key]

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._changed and not self._stopping:
                    now = time.monotonic()
                    if self._deadlines and self._deadlines[0][0] <= now:
                        break
                    wait_s = self._deadlines[0][0] - now if self._deadlines else _IDLE_WAIT_S
                    self._cond.wait(min(wait_s, _IDLE_WAIT_S))
                if self._stopping:
                    return
                changed, self._changed = self._changed, set()
                candidates = {op for tp in changed for op in self._watchers.get(tp, ())}
                now = time.monotonic()
                expired = []
                while self._deadlines and (self._deadlines[0][0] <= now or self._deadlines[0][2].completed):
                    expired.append(heapq.heappop(self._deadlines)[2])
            for operation in candidates:
                self._complete(operation, force=False)
            for operation in expired:
                self._complete(operation, force=True)

    def _complete(self, operation: DelayedOperation, *, force: bool) -> None:
        try:
            done = operation.force_complete() if force else operation.try_complete()
        except Exception:
            logger.exception("purgatory %s: completing %r failed", self._name, operation)
            done = True
        if done or operation.completed:
            self._forget(operation)

    def shutdown(self) -> None:
        """Complete every waiting operation now (expired) and stop the thread."""
        with self._cond:
            self._stopping = True
            waiting = [entry[2] for entry in self._deadlines]
            self._deadlines.clear()
            self._watchers.clear()
            self._cond.notify_all()
        self._thread.join(timeout=10)
        for operation in waiting:
            try:
                operation.force_complete()
            except Exception:
                logger.exception("purgatory %s: completing %r at shutdown failed", self._name, operation)

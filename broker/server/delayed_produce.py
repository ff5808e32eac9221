"""An ``acks=-1`` Produce waiting in the purgatory until its batches are acknowledged (Kafka's
``DelayedProduce``).

It watches every partition it appended to and is ready once each one's
:meth:`~broker.server.partition.Partition.check_enough_replicas` says the in-sync replicas hold the end of
the batches appended there, or that it never will here: leadership moved, the replica was moved off the
broker or its log closed (NOT_LEADER_OR_FOLLOWER, retried by the producer at the new leader; never the
append's own result, which would acknowledge batches no other replica may hold). A partition whose ISR
shrank below ``min.insync.replicas`` meanwhile answers NOT_ENOUGH_REPLICAS_AFTER_APPEND. At the deadline, the
partitions still short of it answer REQUEST_TIMED_OUT (:class:`~broker.server.errors.RequestTimedOutError`,
naming what was waited for: the fsync with ``flush_on_ack``, else the in-sync replicas); the others their
append's result. The acknowledged offset is the ISR's high watermark, which advances as followers fetch;
the purgatory hears of it through the log's listeners, and of a leadership change from the replica
manager.

:func:`answer_or_watch` answers at once, with no operation built, when every partition can be answered
already (a partition without followers: its own append acknowledges it), as the purgatory's first check
would (issue 39: one operation per ``acks=-1`` request cost a lock, a deadline and two checks a partition).

Thread-safe as every :class:`~broker.server.delayed_operation.DelayedOperation`: :meth:`ready` runs on any
thread that checks it, :meth:`on_complete` exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from broker.log.append_info import AppendInfo
from broker.log.errors import LogError
from broker.record.errors import RecordError
from broker.record.topic_partition import TopicPartition
from broker.server.delayed_operation import DelayedOperation
from broker.server.errors import RequestTimedOutError, ServerError
from broker.server.partition import Partition
from broker.server.purgatory import Purgatory


class ProduceResult(NamedTuple):
    """What became of one partition's records in a Produce (Kafka's ``PartitionResponse``; a tuple: one is
    built per partition per request)."""

    #: Why nothing was appended (or the append not acknowledged in time); None on success.
    error: LogError | RecordError | ServerError | None
    #: The append's offsets (None when nothing was appended).
    info: AppendInfo | None
    #: The partition appended to, or whose append failed (None when it could not be found here).
    partition: Partition | None


#: Called once with every partition's result, keyed by partition, when the Produce can be answered.
ProduceCallback = Callable[[dict[TopicPartition, ProduceResult]], None]


class DelayedProduce(DelayedOperation):
    """Answers ``results`` once each partition in ``waiting`` acknowledges its end offset, or at the
    deadline."""

    def __init__(
        self,
        waiting: dict[TopicPartition, tuple[Partition, int]],
        results: dict[TopicPartition, ProduceResult],
        timeout_ms: int,
        respond: ProduceCallback,
    ) -> None:
        super().__init__(list(waiting), timeout_ms)
        self._waiting = waiting
        self._results = results
        self._timeout_ms = timeout_ms
        self._respond = respond

    def ready(self) -> bool:
        return all(p.check_enough_replicas(end)[0] for p, end in self._waiting.values())

    def on_complete(self, *, expired: bool) -> None:
        results = self._results
        for tp, (partition, end) in self._waiting.items():
            done, error = partition.check_enough_replicas(end)
            if not done:
                waited_for = (
                    "flushed" if partition.flush_on_ack and not partition.replicated else "replicated"
                )
                error = RequestTimedOutError(tp, waited_for, self._timeout_ms)
            if error is not None:
                results[tp] = ProduceResult(error, results[tp].info, partition)
        self._respond(results)


def answer_or_watch(
    purgatory: Purgatory,
    waiting: dict[TopicPartition, tuple[Partition, int]],
    results: dict[TopicPartition, ProduceResult],
    timeout_ms: int,
    respond: ProduceCallback,
) -> None:
    """Answer an ``acks=-1`` append now when every partition in ``waiting`` can be answered (with the
    results :meth:`DelayedProduce.on_complete` would give), else watch a :class:`DelayedProduce` for it."""
    errors: list[tuple[TopicPartition, Partition, ServerError]] = []
    for tp, (partition, end) in waiting.items():
        done, error = partition.check_enough_replicas(end)
        if not done:
            purgatory.watch(DelayedProduce(waiting, results, timeout_ms, respond))
            return
        if error is not None:
            errors.append((tp, partition, error))
    for tp, partition, error in errors:
        results[tp] = ProduceResult(error, results[tp].info, partition)
    respond(results)

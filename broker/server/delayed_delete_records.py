"""A DeleteRecords waiting in the purgatory until every live replica has deleted the records (Kafka's
``DelayedDeleteRecords``).

The leader raised its log start offset at once; each follower raises its own from the leader's fetch
responses and says it in its next fetch (the request's ``log_start_offset``), which the leader records
(:meth:`~broker.server.partition.Partition.update_follower_fetch_state`). The operation watches every
partition whose deletion succeeded on the leader and is ready once each one's
:attr:`~broker.server.partition.Partition.low_watermark` (the lowest log start offset of the leader and of
its followers on live brokers) reached the offset asked for, or the partition is no longer led here
(NOT_LEADER_OR_FOLLOWER, as Kafka answers). Then each partition answers that low watermark. At the deadline
(the request's ``timeout_ms``) the partitions still short of it answer REQUEST_TIMED_OUT with a low
watermark of -1, as Kafka's do; the deletion itself stays done. A partition with no other replica is ready at
once. A follower that has not fetched since this leadership began has said no log start yet, so the
deletion waits for its first fetch.

Thread-safe as every :class:`~broker.server.delayed_operation.DelayedOperation`: :meth:`ready` runs on any
thread that checks it, :meth:`on_complete` exactly once.
"""

from __future__ import annotations

from collections.abc import Callable

from broker.record.topic_partition import TopicPartition
from broker.server.delayed_operation import DelayedOperation
from broker.server.errors import RequestTimedOutError, ServerError
from broker.server.partition import Partition

#: One partition's answer: its low watermark (-1 with an error), or the error.
DeleteRecordsResult = tuple[int, Exception | None]
#: Called once with every waiting partition's answer.
DeleteRecordsCallback = Callable[[dict[TopicPartition, DeleteRecordsResult]], None]


class DelayedDeleteRecords(DelayedOperation):
    """Answers once each partition of ``waiting`` (partition -> (its replica here, the offset asked for))
    has its low watermark at the offset, or at the deadline."""

    def __init__(
        self,
        waiting: dict[TopicPartition, tuple[Partition, int]],
        timeout_ms: int,
        respond: DeleteRecordsCallback,
    ) -> None:
        super().__init__(list(waiting), timeout_ms)
        self._waiting = waiting
        self._timeout_ms = timeout_ms
        self._respond = respond

    def ready(self) -> bool:
        return all(self._result(p, offset) is not None for p, offset in self._waiting.values())

    def on_complete(self, *, expired: bool) -> None:
        results: dict[TopicPartition, DeleteRecordsResult] = {}
        for tp, (partition, offset) in self._waiting.items():
            found = self._result(partition, offset)
            if found is None:
                found = (
                    -1,
                    RequestTimedOutError(
                        tp, f"deleted below offset {offset} on every replica", self._timeout_ms
                    ),
                )
            results[tp] = found
        self._respond(results)

    @staticmethod
    def _result(partition: Partition, offset: int) -> DeleteRecordsResult | None:
        """The partition's answer once it has one (None: still waiting)."""
        try:
            low = partition.low_watermark
        except ServerError as exc:  # leadership moved: the new leader answers a retry
            return -1, exc
        return (low, None) if low >= offset else None

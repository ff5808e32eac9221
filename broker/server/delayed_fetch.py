"""A Fetch long-poll waiting in the purgatory (Kafka's ``DelayedFetch``): answered once ``min_bytes`` are
there to read, or at ``max_wait_ms`` with what there is.

A check first compares offsets (:meth:`ReplicaManager.nothing_to_read`; Kafka's ``DelayedFetch.tryComplete``
compares offsets too): while every partition is led here in the asked epoch and its fetch offset is its
end (the log end for a follower, the high watermark for a consumer), nothing can be read and the check
ends there, without touching the log. Otherwise it reads the partitions again
(:meth:`ReplicaManager.read_from_local_log`, a few index lookups and no copying: the records are file
regions); a read that fails (an offset out of range, the partition gone) completes the operation at once,
so the error is answered without waiting. A follower's Fetch (``replica_id`` >= 0) waits here the same
way, its reads bounded by the log end instead of the high watermark: the leader's log tells the purgatory
of every append to a replicated partition.

Thread-safe as every :class:`~broker.server.delayed_operation.DelayedOperation`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from broker.errors import BrokerError
from broker.server.delayed_operation import DelayedOperation

if TYPE_CHECKING:
    from broker.server.replica_manager import FetchPartitionResult, FetchRead, ReplicaManager

#: Called once with each asked-for partition's result, in the order of the request.
FetchCallback = Callable[[list["FetchPartitionResult"]], None]


class DelayedFetch(DelayedOperation):
    """``reads`` answered once ``min_bytes`` are there, or at ``max_wait_ms`` with what there is."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        reads: Sequence[FetchRead],
        *,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        respond: FetchCallback,
        replica_id: int = -1,
    ) -> None:
        super().__init__([read[0] for read in reads], max_wait_ms)
        self._replicas = replica_manager
        self._reads = reads
        self._max_bytes = max_bytes
        self._min_bytes = min_bytes
        self._respond = respond
        self._replica_id = replica_id
        self._ready: list[FetchPartitionResult] | None = None

    def ready(self) -> bool:
        if self._replicas.nothing_to_read(self._reads, self._replica_id):
            return False
        try:
            results, size, errors = self._replicas.read_from_local_log(
                self._reads, self._max_bytes, self._replica_id
            )
        except BrokerError:
            return True
        if size >= self._min_bytes or errors:
            self._ready = results
            return True
        return False

    def on_complete(self, *, expired: bool) -> None:
        results = self._ready
        if results is None or expired:
            results = self._replicas.read_from_local_log(self._reads, self._max_bytes, self._replica_id)[0]
        self._respond(results)

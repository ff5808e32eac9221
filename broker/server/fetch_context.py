"""The fetch context of one Fetch (Kafka's ``FetchContext`` family): which partitions to read, and once they
are read, which to answer, with which top-level error and session id.

Made by :meth:`broker.server.fetch_session_cache.FetchSessionCache.new_context` (the kinds are described
there and in :mod:`broker.server.fetch_session`). :meth:`FetchContext.answer` runs when the fetch is
answered, at once or from the purgatory: a full fetch creates its session then, with what it answered,
and an incremental one checks that no other fetch of its session was handled meanwhile (the session's
epoch moved on: INVALID_FETCH_SESSION_EPOCH, nothing answered), as Kafka's does.

Thread safety: a context belongs to one request; :meth:`FetchContext.answer` takes the cache's lock for
the session it updates.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.record.topic_partition import TopicPartition
from broker.server.errors import InvalidFetchSessionEpochError, ServerError
from broker.server.fetch_session import INVALID_SESSION_ID, CachedPartition, FetchSession

if TYPE_CHECKING:
    from broker.server.fetch_session_cache import FetchSessionCache
    from broker.server.replica_manager import FetchPartitionResult, FetchRead


class FetchContextKind(enum.Enum):
    SESSION_ERROR = "session error"
    SESSIONLESS = "sessionless"
    FULL = "full"
    INCREMENTAL = "incremental"


#: What a Fetch answers: the top-level error (None: none), the session id, and the partitions answered.
FetchAnswer = tuple[ServerError | None, int, list[tuple[TopicPartition, "FetchPartitionResult"]]]


class FetchContext:
    """What one Fetch reads and answers (see the module docstring)."""

    __slots__ = ("_cache", "_expected_epoch", "_follower", "_partitions", "_session", "error", "kind")

    def __init__(
        self,
        cache: FetchSessionCache,
        kind: FetchContextKind,
        partitions: dict[TopicPartition, CachedPartition],
        *,
        error: ServerError | None = None,
        follower: bool = False,
        session: FetchSession | None = None,
        expected_epoch: int = 0,
    ) -> None:
        self._cache = cache
        self.kind = kind
        #: The partitions to read, in reading order, with the fetch position of each.
        self._partitions = partitions
        #: The session error (SESSION_ERROR only).
        self.error = error
        self._follower = follower
        self._session = session
        self._expected_epoch = expected_epoch

    @property
    def reads(self) -> list[FetchRead]:
        """The partitions to read, as the replica manager takes them."""
        return [
            (tp, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
            for tp, p in self._partitions.items()
        ]

    def answer(self, results: Sequence[FetchPartitionResult]) -> FetchAnswer:
        """What to answer for ``results`` (one per :attr:`reads` entry, in order)."""
        kind = self.kind
        if kind is FetchContextKind.SESSION_ERROR:
            return self.error, INVALID_SESSION_ID, []
        answered = list(zip(self._partitions, results, strict=True))
        if kind is FetchContextKind.SESSIONLESS:
            return None, INVALID_SESSION_ID, answered
        if kind is FetchContextKind.FULL:
            partitions = self._partitions
            for tp, result in answered:
                full = partitions[tp]
                full.high_watermark = -1 if result.error is not None else result.high_watermark
                full.log_start_offset = result.log_start_offset
            session_id = self._cache.create(privileged=self._follower, partitions=partitions)
            return None, session_id, answered
        session = self._session
        assert session is not None
        with self._cache.lock():
            if session.epoch != self._expected_epoch:
                error = InvalidFetchSessionEpochError(session.id, self._expected_epoch, session.epoch)
                return error, session.id, []
            cached_partitions = session.partitions
            changed = []
            for tp, result in answered:
                cached = cached_partitions.get(tp)
                if cached is None:
                    continue  # forgotten by a later fetch of the session meanwhile (its epoch moved on)
                records = result.records
                has_records = records is not None and records.size_bytes > 0
                if cached.must_answer(
                    has_records, result.error is not None, result.high_watermark, result.log_start_offset
                ):
                    changed.append((tp, result))
                    if has_records:
                        session.move_to_end(tp)
            return None, session.id, changed

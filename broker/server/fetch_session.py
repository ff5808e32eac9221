"""A fetch session (KIP-227), the broker's side: the partitions a fetcher follows here, and what it was told.

A client (a follower's fetcher, or a consumer such as kafka-python) that fetches the same partitions again
and again opens a session with a *full* fetch; the broker answers with a session id, and from then on the
client sends *incremental* fetches naming only the partitions whose fetch position changed (added or
altered) and those it stops following (``forgotten_topics_data``); the broker fetches every partition of
the session and answers only those with news. What ``session_id`` and ``session_epoch`` in a Fetch mean
(Kafka's ``FetchMetadata``)::

    session_id  session_epoch        the request is
    0           -1 (FINAL_EPOCH)     sessionless: a full fetch, no session (Fetch v4-v6, librdkafka)
    0           0 (INITIAL_EPOCH)    full: opens a new session if the cache has room (else sessionless)
    id          0                    full: closes session ``id``, opens a new one
    id          -1                   full: closes session ``id``, sessionless
    id          n >= 1               incremental in session ``id``: must be the session's epoch, which
                                     then moves to next_epoch(n) (n + 1, wrapping to 1)

A session's partitions are kept in the order a fetch of the session reads them; a partition whose
answer carried records moves to the end, so that one busy partition does not starve the others of a
response's byte budget (Kafka does the same).

**When a partition is in an incremental answer** (Kafka's ``CachedPartition.maybeUpdateResponseData``):
records were read, or its high watermark or log start offset differ from what the session last answered,
or it has an error (the cached high watermark is then reset to -1, so that it is answered again once the
error is gone). Everything else is omitted: the client keeps what it knew.

Thread safety: a session's state is read and written only under its cache's lock
(:class:`~broker.server.fetch_session_cache.FetchSessionCache`), which the cache and the fetch contexts
take; no method here takes a lock.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.record.topic_partition import TopicPartition

#: ``session_id`` of no session.
INVALID_SESSION_ID = 0
#: ``session_epoch`` of a full fetch that opens a session.
INITIAL_EPOCH = 0
#: ``session_epoch`` of a sessionless fetch (and of a full fetch closing a session without a new one).
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's ``FetchMetadata.nextEpoch``): FINAL stays FINAL; the largest
    int32 wraps to 1 (0 would mean a full fetch)."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """What a session remembers of one partition (Kafka's ``CachedPartition``): the client's last
    request for it, and the high watermark and log start offset the session last answered (-1: none)."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = -1

    def must_answer(self, has_records: bool, error: bool, high_watermark: int, log_start_offset: int) -> bool:
        """Whether an incremental answer includes the partition now; records what it answers."""
        answer = has_records
        if self.high_watermark != high_watermark:
            self.high_watermark = high_watermark
            answer = True
        if self.log_start_offset != log_start_offset:
            self.log_start_offset = log_start_offset
            answer = True
        if error:
            self.high_watermark = -1
            answer = True
        return answer


class FetchSession:
    """One session: its id and epoch, the partitions it follows, and when it was created and last used
    (see the module docstring; guarded by its cache's lock)."""

    __slots__ = ("cached_size", "created_ms", "epoch", "id", "last_used_ms", "partitions", "privileged")

    def __init__(
        self,
        session_id: int,
        *,
        privileged: bool,
        partitions: dict[TopicPartition, CachedPartition],
        now_ms: int,
    ) -> None:
        self.id = session_id
        #: A follower's session: only another follower's, or an idle one, may evict it.
        self.privileged = privileged
        #: The partitions in reading order (a partition answered with records moves to the end).
        self.partitions = partitions
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        #: The epoch the next incremental fetch must carry.
        self.epoch = next_epoch(INITIAL_EPOCH)
        #: The partition count when the cache last looked (its eviction order).
        self.cached_size = len(partitions)

    def update(
        self,
        changed: dict[TopicPartition, CachedPartition],
        forgotten: list[TopicPartition],
    ) -> None:
        """Apply an incremental fetch: ``changed`` partitions are added or take the new request values
        (keeping what the session answered), ``forgotten`` ones leave."""
        partitions = self.partitions
        for tp, asked in changed.items():
            cached = partitions.get(tp)
            if cached is None:
                partitions[tp] = asked
            else:
                cached.fetch_offset = asked.fetch_offset
                cached.partition_max_bytes = asked.partition_max_bytes
                cached.current_leader_epoch = asked.current_leader_epoch
        for tp in forgotten:
            partitions.pop(tp, None)

    def move_to_end(self, tp: TopicPartition) -> None:
        """``tp`` was answered with records: read it last next time."""
        cached = self.partitions.pop(tp, None)
        if cached is not None:
            self.partitions[tp] = cached

    def __repr__(self) -> str:
        return (
            f"FetchSession(id={self.id}, epoch={self.epoch}, partitions={len(self.partitions)}, "
            f"privileged={self.privileged})"
        )

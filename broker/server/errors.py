"""Errors of the request handling layer (:mod:`broker.server`), all under :class:`broker.errors.BrokerError`.

They say why a partition or a request cannot be served here; :mod:`broker.server.error_codes` maps them, like
every other error a request can meet, to Kafka's codes.

::

    BrokerError
    └── ServerError
        ├── UnknownTopicOrPartitionError   the cluster view has no such topic or partition
        ├── NotLeaderOrFollowerError       the cluster view names another leader
        ├── FencedLeaderEpochError         a request's leader epoch is older than the partition's
        ├── UnknownLeaderEpochError        a request's leader epoch is newer than this broker has seen
        ├── NotEnoughReplicasError         an acks=-1 append while the ISR is below min.insync.replicas
        ├── NotEnoughReplicasAfterAppendError  the ISR shrank below it while the append waited
        ├── OffsetNotAvailableError        a new leader's high watermark still below its epoch's start
        ├── InvalidRequiredAcksError       acks other than 0, 1 or -1
        ├── UnsupportedMessageFormatError  Produce v0-v2 (old message sets)
        ├── InvalidRequestError            a request that is well-formed but asks for something impossible
        ├── InvalidConfigError             a per-topic config Lumber does not know, or a bad value
        ├── RequestTimedOutError           an acks=-1 append not acknowledged within the request's timeout
        ├── FetchSessionIdNotFoundError    an incremental Fetch names a session this broker does not have
        ├── InvalidFetchSessionEpochError  an incremental Fetch's session epoch is not the session's
        └── BrokerStartupError             (broker_server.py) the broker cannot start
"""

from __future__ import annotations

from broker.errors import BrokerError
from broker.record.topic_partition import TopicPartition


class ServerError(BrokerError):
    """Root of the request handling errors."""


class UnknownTopicOrPartitionError(ServerError):
    def __init__(self, tp: TopicPartition) -> None:
        self.topic_partition = tp
        super().__init__(f"{tp}: no such topic or partition")


class NotLeaderOrFollowerError(ServerError):
    def __init__(self, tp: TopicPartition, leader: int, broker_id: int) -> None:
        self.topic_partition = tp
        self.leader = leader
        if leader < 0:
            super().__init__(f"{tp}: broker {broker_id} does not lead it (no leader known here)")
        else:
            super().__init__(f"{tp}: led by broker {leader}, not by broker {broker_id}")


class InvalidRequiredAcksError(ServerError):
    def __init__(self, acks: int) -> None:
        self.acks = acks
        super().__init__(f"acks={acks} is not 0, 1 or -1")


class UnsupportedMessageFormatError(ServerError):
    """Produce v0-v2 carry the old message sets, which the log does not store."""


class InvalidRequestError(ServerError):
    """A request that decodes but asks for something that cannot be (the message says what)."""


class FencedLeaderEpochError(ServerError):
    """The request carries a leader epoch older than the partition's: its sender has old metadata."""

    def __init__(self, tp: TopicPartition, request_epoch: int, current_epoch: int) -> None:
        self.topic_partition = tp
        super().__init__(
            f"{tp}: the request's leader epoch {request_epoch} is older than the current {current_epoch}"
        )


class UnknownLeaderEpochError(ServerError):
    """The request carries a leader epoch newer than this broker knows: it has not heard of it yet."""

    def __init__(self, tp: TopicPartition, request_epoch: int, current_epoch: int) -> None:
        self.topic_partition = tp
        super().__init__(
            f"{tp}: the request's leader epoch {request_epoch} is newer than this broker's {current_epoch}"
        )


class NotEnoughReplicasError(ServerError):
    """An acks=-1 append refused, nothing appended: the ISR is smaller than ``min.insync.replicas``."""

    def __init__(self, tp: TopicPartition, isr: object, min_isr: int) -> None:
        self.topic_partition = tp
        super().__init__(
            f"{tp}: the in-sync replicas {isr} are fewer than min.insync.replicas={min_isr}; nothing appended"
        )


class NotEnoughReplicasAfterAppendError(ServerError):
    """The records were appended and replicated, but the ISR shrank below ``min.insync.replicas``."""

    def __init__(self, tp: TopicPartition, isr: object, min_isr: int) -> None:
        self.topic_partition = tp
        super().__init__(
            f"{tp}: appended, but the in-sync replicas {isr} shrank below min.insync.replicas={min_isr}"
        )


class OffsetNotAvailableError(ServerError):
    """ListOffsets on a leader whose high watermark has not yet caught up with the start of its leader epoch
    (KIP-207): the previous leader may have exposed more, so the answer waits until the followers have
    fetched from this one (a retriable error)."""

    def __init__(self, tp: TopicPartition, high_watermark: int, epoch_start_offset: int) -> None:
        self.topic_partition = tp
        super().__init__(
            f"{tp}: the high watermark {high_watermark} is still below the start of this leader's epoch "
            f"({epoch_start_offset}); try again"
        )


class InvalidConfigError(ServerError):
    """A per-topic config Lumber does not know, or a value it cannot take (the message names both)."""


class RequestTimedOutError(ServerError):
    def __init__(self, tp: TopicPartition, waited_for: str, timeout_ms: int) -> None:
        self.topic_partition = tp
        super().__init__(f"{tp}: not {waited_for} within {timeout_ms} ms")


class FetchSessionIdNotFoundError(ServerError):
    """An incremental Fetch names a fetch session this broker does not have (never had, evicted, or lost
    in a restart): the client starts again with a full fetch."""

    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        super().__init__(f"fetch session {session_id} not found")


class InvalidFetchSessionEpochError(ServerError):
    """An incremental Fetch's epoch is not the one its session expects (a duplicated or reordered request,
    or another fetch of the session answered meanwhile): the client closes the session and opens a new one."""

    def __init__(self, session_id: int, request_epoch: int, expected_epoch: int) -> None:
        self.session_id = session_id
        super().__init__(
            f"fetch session {session_id}: the request's epoch {request_epoch} is not the expected "
            f"{expected_epoch}"
        )

"""Errors of Lumber's producer and consumer, all under :class:`broker.errors.BrokerError`.

::

    BrokerError
    └── ClientError
        ├── ClientConfigError          settings that cannot work (no cluster to learn from, bad values)
        ├── BrokerConnectionError      cannot connect to a broker, or the connection was lost (retriable)
        │   ├── RequestTimeoutError    no response within request_timeout_ms; the connection is closed
        │   └── AuthenticationError    the broker refused the login (SASL) or the TLS handshake failed
        │                              (not retriable: the same settings fail the same way)
        ├── ZooKeeperUnavailableError  ZooKeeper could not be read (retriable)
        ├── UnsupportedApiError        the broker implements no version of an API that this client speaks
        ├── BrokerResponseError        the broker answered with a Kafka error code (``error_code``,
        │                              ``topic_partition``, ``retriable``)
        ├── UnknownTopicError          a topic the cluster does not know, still unknown after waiting
        ├── TopicCreationError         an internal topic (the audit's) is missing and could not be created
        ├── UnknownPartitionError      a partition number the topic does not have
        ├── ProducerError
        │   ├── BufferExhaustedError   send() waited max_block_ms for buffer space
        │   ├── RecordTooLargeError    one record is larger than max_request_size or buffer_memory
        │   ├── ProducerClosedError    send() after close()
        │   ├── DeliveryTimeoutError   a batch not delivered within delivery_timeout_ms (names the last cause)
        │   └── IllegalBatchStateError a batch asked for a change its state does not allow (a second outcome)
        └── ConsumerError
            ├── NoOffsetError          no position for a partition and auto_offset_reset is 'none'
            ├── OffsetOutOfRangeError  the position is outside the log and auto_offset_reset is 'none'
            ├── CorruptBatchError      a fetched batch fails its CRC or does not decode
            ├── FetchTooSmallError     a single batch is larger than the fetch size allows
            ├── ConsumerClosedError    the consumer was used after close()
            └── GroupError             a consumer group (ZooKeeper) could not do what was asked
                ├── CommitFailedError  offsets not committed: the member's session expired (fenced)
                └── GroupClosedError   the group consumer was used after close()

Every message names the broker (``host:port``), the topic-partition and the offsets involved.
"""

from __future__ import annotations

from broker.errors import BrokerError
from broker.protocol.error_code import ErrorCode

#: Error codes after which the same request may succeed later (Kafka's ``RetriableException`` subclasses).
RETRIABLE_ERROR_CODES: frozenset[int] = frozenset(
    int(code)
    for code in (
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    )
)

#: Error codes after which the client should learn the cluster again (the leader may have moved).
METADATA_ERROR_CODES: frozenset[int] = frozenset(
    int(code)
    for code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    )
)


class ClientError(BrokerError):
    """Root of the producer and consumer errors."""

    #: Whether the same operation may succeed if tried again later.
    retriable: bool = False


class ClientConfigError(ClientError, ValueError):
    """Client settings that cannot work, e.g. neither bootstrap servers nor a ZooKeeper connect string.

    Also a :class:`ValueError`, which :mod:`lumber.config` turns into a config error naming the file.
    """


class BrokerConnectionError(ClientError):
    """A broker could not be reached, or its connection broke; requests on it failed with this error."""

    retriable = True

    def __init__(self, broker: str, reason: str) -> None:
        self.broker = broker
        self.reason = reason
        super().__init__(f"broker {broker}: {reason}")


class RequestTimeoutError(BrokerConnectionError):
    """A request got no response within ``request_timeout_ms``; its connection was closed (as Kafka does)."""


class AuthenticationError(BrokerConnectionError):
    """The broker refused this client's SASL login, or the TLS handshake with it failed (Kafka's
    ``SaslAuthenticationException`` and ``SslAuthenticationException``): not retriable, the same settings
    fail the same way. The message names the broker, the mechanism and the user, never a password."""

    retriable = False


class ZooKeeperUnavailableError(ClientError):
    """The cluster's registry in ZooKeeper could not be read (connection lost, session expired, bad data)."""

    retriable = True


class UnsupportedApiError(ClientError):
    """The broker implements no version of an API that this client also implements."""

    def __init__(
        self, broker: str, api_name: str, ours: tuple[int, int], theirs: tuple[int, int] | None
    ) -> None:
        self.broker = broker
        self.api_name = api_name
        where = "does not implement it" if theirs is None else f"implements v{theirs[0]}-v{theirs[1]}"
        super().__init__(
            f"broker {broker}: {api_name}: this client implements v{ours[0]}-v{ours[1]}, the broker {where}"
        )


class BrokerResponseError(ClientError):
    """The broker answered a request with a Kafka error code other than NONE."""

    def __init__(
        self,
        error_code: int,
        what: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        detail: str | None = None,
    ) -> None:
        self.error_code = error_code
        self.error_name = ErrorCode.name_of(error_code)
        self.topic = topic
        self.partition = partition
        self.retriable = error_code in RETRIABLE_ERROR_CODES
        where = f"{topic}-{partition}: " if topic is not None and partition is not None else ""
        if topic is not None and partition is None:
            where = f"topic {topic!r}: "
        tail = f" ({detail})" if detail else ""
        super().__init__(f"{where}{what} failed: {self.error_name} (error code {error_code}){tail}")

    @property
    def needs_metadata(self) -> bool:
        """Whether the cluster's metadata should be learnt again before a retry."""
        return self.error_code in METADATA_ERROR_CODES


class UnknownTopicError(ClientError):
    """A topic that the cluster does not know (and did not create) within the time the caller waits."""

    def __init__(self, topic: str, waited_ms: int, detail: str = "") -> None:
        self.topic = topic
        self.waited_ms = waited_ms
        super().__init__(
            f"topic {topic!r} is not in the cluster's metadata after {waited_ms} ms"
            + (f": {detail}" if detail else "")
        )


class TopicCreationError(ClientError):
    """A topic the client creates itself when missing (:mod:`broker.client.producer.internal_topic`) could not
    be created: the cluster refused, or had no live broker to ask. Names the topic and how to create it by
    hand.
    """

    def __init__(self, topic: str, reason: str, remedy: str) -> None:
        self.topic = topic
        self.reason = reason
        super().__init__(f"topic {topic!r} does not exist and cannot be created: {reason}; {remedy}")


class UnknownPartitionError(ClientError):
    """A partition number outside the topic's partitions."""

    def __init__(self, topic: str, partition: int, partition_count: int) -> None:
        self.topic = topic
        self.partition = partition
        self.partition_count = partition_count
        super().__init__(
            f"topic {topic!r} has partitions 0-{partition_count - 1}, there is no partition {partition}"
        )


class ProducerError(ClientError):
    """Root of the errors only the producer raises."""


class BufferExhaustedError(ProducerError):
    """``send()`` waited ``max_block_ms`` for room in the ``buffer_memory`` bytes of unsent records.

    Raised by ``send_many()`` part-way, ``delivery`` is the
    :class:`~broker.client.producer.producer_batch.BulkDelivery` of the records it accepted before.
    """

    delivery: object = None


class RecordTooLargeError(ProducerError):
    """One record is larger than what the producer may send in a request or hold in its buffer."""


class ProducerClosedError(ProducerError):
    """``send()`` after ``close()``."""


class DeliveryTimeoutError(ProducerError):
    """A batch not delivered within ``delivery_timeout_ms`` of its creation; ``cause`` is the last error."""

    retriable = False

    def __init__(self, message: str, cause: BaseException | None = None) -> None:
        self.cause = cause
        super().__init__(message)


class IllegalBatchStateError(ProducerError):
    """A producer batch asked for a change its state does not allow, such as a second outcome (Kafka's
    ``IllegalStateException`` from ``ProducerBatch.done``): a bug in the producer, never the broker's."""

    retriable = False


class ConsumerError(ClientError):
    """Root of the errors only the consumer raises."""


class NoOffsetError(ConsumerError):
    """A partition has no position and ``auto_offset_reset`` is ``'none'``."""


class OffsetOutOfRangeError(ConsumerError):
    """The position of a partition is outside its log and ``auto_offset_reset`` is ``'none'``."""

    def __init__(self, topic: str, partition: int, offset: int, detail: str = "") -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(
            f"{topic}-{partition}: offset {offset} is out of range"
            + (f" ({detail})" if detail else "")
            + "; auto_offset_reset is 'none': seek() to a valid offset"
        )


class CorruptBatchError(ConsumerError):
    """A fetched record batch fails its CRC-32C check or does not decode.

    ``offset`` is the batch's base offset; the consumer's position stays there, so the caller can inspect
    the data or ``seek()`` past it. Records fetched before it are handed out first; nothing after it is
    skipped.
    """

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = reason
        super().__init__(f"{topic}-{partition}: corrupt record batch at offset {offset}: {reason}")


class FetchTooSmallError(ConsumerError):
    """The batch at a partition's position is larger than ``fetch_max_bytes`` lets a fetch return."""


class ConsumerClosedError(ConsumerError):
    """The consumer was used after ``close()``."""


class GroupError(ConsumerError):
    """Root of the consumer group's errors (see :mod:`broker.client.groups.group_consumer`)."""


class CommitFailedError(GroupError):
    """Offsets were not committed: the member's ZooKeeper session expired (its registration, which every
    commit checks in the same transaction, is gone), or ZooKeeper could not be reached. Records handed
    out since the last commit will be consumed again by the partitions' next owners."""

    retriable = True


class GroupClosedError(GroupError):
    """The group consumer (or one of its streams) was used after ``close()``."""

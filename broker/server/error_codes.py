"""The one table from exceptions to Kafka error codes (Kafka's ``Errors.forException``).

Every error a request can meet is raised by the package that finds it (the log, the cluster metadata, the
wire codec, the request handling layer) and answered by :mod:`broker.server.kafka_apis` with the code this
table gives it; no exception class carries a code of its own. :func:`error_code_of` walks the exception's
classes, most specific first, so a subclass not listed answers its parent's code. Anything else (a bug) is
UNKNOWN_SERVER_ERROR. One rule is not a class: a :class:`~broker.cluster.errors.ZooKeeperError` that is
``retriable`` (connection loss, a timeout, an expired session) answers REQUEST_TIMED_OUT, which Kafka clients
retry. The table is read only: thread-safe.
"""

from __future__ import annotations

from types import MappingProxyType

from broker.cluster.errors import (
    ClusterError,
    ControllerMovedError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicConfigError,
    NoLiveBrokersError,
    NoReassignmentInProgressError,
    ReassignmentInProgressError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperError,
)
from broker.log.errors import (
    InvalidProducerEpochError,
    LogClosedError,
    LogError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from broker.protocol import ErrorCode, ProtocolError, UnsupportedVersionError
from broker.record.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTopicError,
    RecordError,
    UnsupportedCompressionError,
)
from broker.security.errors import InvalidAclError, SecurityError
from broker.server.errors import (
    ClusterAuthorizationError,
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    GroupAuthorizationError,
    InvalidConfigError,
    InvalidFetchSessionEpochError,
    InvalidRequestError,
    InvalidRequiredAcksError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    PolicyViolationError,
    RequestTimedOutError,
    ServerError,
    TopicAuthorizationError,
    TransactionalIdAuthorizationError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
    UnsupportedMessageFormatError,
)

__all__ = ["ANSWERED_ERRORS", "ERROR_CODES", "PRODUCE_ERRORS_WITHOUT_LOG_START", "error_code_of"]

#: Exception class -> the code a response carries for it (subclasses not listed inherit their parent's).
ERROR_CODES: MappingProxyType[type[BaseException], ErrorCode] = MappingProxyType(
    {
        # the log (broker.log.errors)
        LogError: ErrorCode.KAFKA_STORAGE_ERROR,  # I/O errors, corrupt indexes and snapshots, locked dirs
        # the record format (broker.record.errors)
        RecordError: ErrorCode.CORRUPT_MESSAGE,
        CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
        UnsupportedCompressionError: ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
        InvalidRecordError: ErrorCode.INVALID_RECORD,
        RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
        OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
        OutOfOrderSequenceError: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        InvalidProducerEpochError: ErrorCode.INVALID_PRODUCER_EPOCH,
        InvalidTopicError: ErrorCode.INVALID_TOPIC_EXCEPTION,
        LogClosedError: ErrorCode.NOT_LEADER_OR_FOLLOWER,  # closed or deleted under the request
        # the cluster metadata (broker.cluster.errors)
        ClusterError: ErrorCode.UNKNOWN_SERVER_ERROR,
        TopicExistsError: ErrorCode.TOPIC_ALREADY_EXISTS,
        UnknownTopicError: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        InvalidPartitionsError: ErrorCode.INVALID_PARTITIONS,
        InvalidReplicaAssignmentError: ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        NoLiveBrokersError: ErrorCode.INVALID_REPLICATION_FACTOR,  # Kafka's answer: too few live brokers
        InvalidReplicationFactorError: ErrorCode.INVALID_REPLICATION_FACTOR,
        ControllerMovedError: ErrorCode.NOT_CONTROLLER,
        NoReassignmentInProgressError: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
        ReassignmentInProgressError: ErrorCode.REASSIGNMENT_IN_PROGRESS,
        InvalidTopicConfigError: ErrorCode.INVALID_CONFIG,
        # the wire codec (broker.protocol.errors)
        ProtocolError: ErrorCode.INVALID_REQUEST,
        UnsupportedVersionError: ErrorCode.UNSUPPORTED_VERSION,
        # the request handling layer (broker.server.errors)
        UnknownTopicOrPartitionError: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        NotLeaderOrFollowerError: ErrorCode.NOT_LEADER_OR_FOLLOWER,
        FencedLeaderEpochError: ErrorCode.FENCED_LEADER_EPOCH,
        UnknownLeaderEpochError: ErrorCode.UNKNOWN_LEADER_EPOCH,
        NotEnoughReplicasError: ErrorCode.NOT_ENOUGH_REPLICAS,
        NotEnoughReplicasAfterAppendError: ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        OffsetNotAvailableError: ErrorCode.OFFSET_NOT_AVAILABLE,
        InvalidRequiredAcksError: ErrorCode.INVALID_REQUIRED_ACKS,
        UnsupportedMessageFormatError: ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        InvalidRequestError: ErrorCode.INVALID_REQUEST,
        InvalidConfigError: ErrorCode.INVALID_CONFIG,
        PolicyViolationError: ErrorCode.POLICY_VIOLATION,
        RequestTimedOutError: ErrorCode.REQUEST_TIMED_OUT,
        FetchSessionIdNotFoundError: ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        InvalidFetchSessionEpochError: ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        TopicAuthorizationError: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        GroupAuthorizationError: ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ClusterAuthorizationError: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        TransactionalIdAuthorizationError: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        # the ACL model (broker.security.errors)
        InvalidAclError: ErrorCode.INVALID_REQUEST,
    }
)


#: What a request's handling can raise that is the client's answer, not a bug: the roots of the exceptions
#: the table maps (the protocol layer answers these with their code and logs anything else as a failure).
ANSWERED_ERRORS: tuple[type[Exception], ...] = (
    LogError,
    RecordError,
    ServerError,
    ClusterError,
    SecurityError,
)

#: The Produce errors Kafka answers with ``log_start_offset`` -1 (its ``ReplicaManager``'s expected
#: failures: no partition here, or records it never looked into); every other error of a partition this
#: broker leads carries the partition's log start offset, as a success does.
PRODUCE_ERRORS_WITHOUT_LOG_START: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
)


def error_code_of(exc: BaseException) -> ErrorCode:
    """The Kafka error code a response carries for ``exc`` (see the module docstring)."""
    if isinstance(exc, ZooKeeperError) and exc.retriable:
        return ErrorCode.REQUEST_TIMED_OUT
    for cls in type(exc).__mro__:
        code = ERROR_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.UNKNOWN_SERVER_ERROR

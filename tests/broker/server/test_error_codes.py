"""The one table from exceptions to Kafka error codes (broker/server/error_codes.py)."""

from __future__ import annotations

import pytest

from broker.cluster.errors import (
    ClusterError,
    ControllerMovedError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidTopicConfigError,
    ZooKeeperError,
)
from broker.log.errors import CorruptIndexError, LogClosedError
from broker.protocol import ErrorCode, UnsupportedVersionError
from broker.protocol.errors import MalformedMessageError
from broker.record.errors import UnsupportedCompressionError
from broker.record.topic_partition import TopicPartition
from broker.security.errors import InvalidAclError
from broker.server.error_codes import ERROR_CODES, error_code_of
from broker.server.errors import (
    ClusterAuthorizationError,
    FencedLeaderEpochError,
    FetchSessionIdNotFoundError,
    GroupAuthorizationError,
    InvalidFetchSessionEpochError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    RequestTimedOutError,
    TopicAuthorizationError,
    TransactionalIdAuthorizationError,
    UnknownLeaderEpochError,
)

TP = TopicPartition("t", 0)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        # listed classes, and subclasses that inherit their parent's code
        (UnsupportedCompressionError("t-0", "codec 7"), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
        (CorruptIndexError("00.index", "torn"), ErrorCode.KAFKA_STORAGE_ERROR),
        (LogClosedError("t-0: the log is closed"), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (InvalidReplicaAssignmentError("p0: two brokers"), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (ClusterError("boom"), ErrorCode.UNKNOWN_SERVER_ERROR),
        (MalformedMessageError("short"), ErrorCode.INVALID_REQUEST),
        (UnsupportedVersionError(0, 99, 1, 3, 9), ErrorCode.UNSUPPORTED_VERSION),
        (NotLeaderOrFollowerError(TP, 2, 1), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (RequestTimedOutError(TP, "flushed", 30), ErrorCode.REQUEST_TIMED_OUT),
        # replication
        (InvalidReplicationFactorError("t", 3, [1, 2]), ErrorCode.INVALID_REPLICATION_FACTOR),
        (ControllerMovedError(4, "5"), ErrorCode.NOT_CONTROLLER),
        (FencedLeaderEpochError(TP, 3, 4), ErrorCode.FENCED_LEADER_EPOCH),
        (FetchSessionIdNotFoundError(7), ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        (InvalidFetchSessionEpochError(7, 2, 3), ErrorCode.INVALID_FETCH_SESSION_EPOCH),
        (UnknownLeaderEpochError(TP, 5, 4), ErrorCode.UNKNOWN_LEADER_EPOCH),
        (NotEnoughReplicasError(TP, [1], 2), ErrorCode.NOT_ENOUGH_REPLICAS),
        (NotEnoughReplicasAfterAppendError(TP, [1], 2), ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
        (OffsetNotAvailableError(TP, 3, 5), ErrorCode.OFFSET_NOT_AVAILABLE),
        (InvalidTopicConfigError("t: x"), ErrorCode.INVALID_CONFIG),
        # authorization
        (TopicAuthorizationError("User:a may not Write topic 't'"), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (GroupAuthorizationError("User:a may not Read group 'g'"), ErrorCode.GROUP_AUTHORIZATION_FAILED),
        (
            ClusterAuthorizationError("User:a may not Alter the cluster"),
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ),
        (TransactionalIdAuthorizationError("x"), ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        (InvalidAclError("principal 'a' is not type:name"), ErrorCode.INVALID_REQUEST),
        # not a BrokerError at all: a bug, answered as such
        (ValueError("bug"), ErrorCode.UNKNOWN_SERVER_ERROR),
    ],
)
def test_error_code_of(error: BaseException, code: ErrorCode) -> None:
    assert error_code_of(error) is code


def test_a_retriable_zookeeper_error_asks_the_client_to_retry() -> None:
    assert (
        error_code_of(ZooKeeperError("lost", path="/brokers", retriable=True)) is ErrorCode.REQUEST_TIMED_OUT
    )
    assert error_code_of(ZooKeeperError("bad", path="/brokers")) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_no_exception_carries_a_code_of_its_own() -> None:
    assert len(ERROR_CODES) == 44
    assert [cls.__name__ for cls in ERROR_CODES if hasattr(cls, "kafka_error_code")] == []

"""Errors of the cluster metadata in ZooKeeper, all under :class:`broker.errors.BrokerError`.

The Kafka protocol error code each answers with (CreateTopics, DeleteTopics, Metadata), noted in brackets
below, comes from the broker's one table, :mod:`broker.server.error_codes`. Invalid topic names are
not here: they raise :class:`broker.record.errors.InvalidTopicError` (INVALID_TOPIC_EXCEPTION 17), the same
error the log raises, through :func:`broker.record.topic_name.validate_topic_name`.

::

    BrokerError
    └── ClusterError                        (UNKNOWN_SERVER_ERROR -1)
        ├── BrokerIdTakenError              another live session holds /brokers/ids/<id>
        ├── TopicExistsError                (TOPIC_ALREADY_EXISTS 36)
        ├── UnknownTopicError               (UNKNOWN_TOPIC_OR_PARTITION 3)
        ├── InvalidPartitionsError          (INVALID_PARTITIONS 37): a partition count out of range
        │   └── InvalidReplicaAssignmentError (INVALID_REPLICA_ASSIGNMENT 39): a bad explicit assignment
        ├── NoLiveBrokersError              (INVALID_REPLICATION_FACTOR 38, Kafka's answer when there are
        │                                    fewer live brokers than replicas)
        ├── InvalidReplicationFactorError   (INVALID_REPLICATION_FACTOR 38): a factor below 1 or above the
        │                                    live brokers
        ├── InvalidTopicConfigError         (INVALID_CONFIG 40): a topic config Lumber does not read, or
        │                                    a value it does not take
        ├── ControllerMovedError            (NOT_CONTROLLER 41): a controller write whose
        │                                    check(/controller_epoch, version) failed: another controller
        │                                    was elected since
        │   └── NotControllerError          (NOT_CONTROLLER 41): a request only the controller answers
        │                                    (AlterPartitionReassignments) reached another broker
        ├── NoReassignmentInProgressError   (NO_REASSIGNMENT_IN_PROGRESS 85): a cancel of a partition
        │                                    that is not moving
        ├── ReassignmentInProgressError     (REASSIGNMENT_IN_PROGRESS 60): a plan moving a partition that
        │                                    is moving already (``lumber cluster reassign`` without
        │                                    ``--additional``, as Kafka's tool refuses it)
        └── ZooKeeperError                  (REQUEST_TIMED_OUT 7 if retriable, else UNKNOWN_SERVER_ERROR -1):
                                             a kazoo failure or unreadable data, naming the path
"""

from __future__ import annotations

from kazoo.exceptions import (
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,
    SessionMovedError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import RetryFailedError

from broker.errors import BrokerError

#: kazoo failures that go away by themselves once the session is connected again.
_RETRIABLE = (
    ConnectionLoss,
    OperationTimeoutError,
    SessionExpiredError,  # includes ConnectionClosedError
    SessionMovedError,
    RetryFailedError,
    KazooTimeoutError,
)


class ClusterError(BrokerError):
    """Root of the cluster metadata errors."""


class BrokerIdTakenError(ClusterError):
    """``/brokers/ids/<id>`` is held by another live ZooKeeper session: two brokers share one id."""

    def __init__(self, broker_id: int, holder: str, owner_session_id: int) -> None:
        self.broker_id = broker_id
        self.holder = holder
        self.owner_session_id = owner_session_id
        super().__init__(
            f"broker id {broker_id} is taken: /brokers/ids/{broker_id} is registered by a live broker at "
            f"{holder} (session 0x{owner_session_id:x}); give this broker another broker id"
        )


class TopicExistsError(ClusterError):
    def __init__(self, topic: str) -> None:
        self.topic = topic
        super().__init__(f"topic {topic!r} already exists")


class UnknownTopicError(ClusterError):
    def __init__(self, topic: str, message: str | None = None) -> None:
        self.topic = topic
        super().__init__(message or f"topic {topic!r} does not exist")


class InvalidPartitionsError(ClusterError):
    """A partition count outside ``[1, MAX_PARTITIONS]``; the message names the topic and the count."""


class InvalidReplicaAssignmentError(InvalidPartitionsError):
    """An explicit assignment that is not ``0..n-1 -> one live broker``; the message names what is wrong."""


class NoLiveBrokersError(ClusterError):
    """No broker is registered, so a topic's partitions cannot be placed."""


class InvalidReplicationFactorError(ClusterError):
    """A replication factor below 1 or above the live brokers; the message names the factor and brokers."""

    def __init__(self, topic: str, replication_factor: int, live_brokers: list[int]) -> None:
        self.topic = topic
        self.replication_factor = replication_factor
        self.live_brokers = live_brokers
        if replication_factor < 1:
            why = "it must be at least 1"
        else:
            why = f"it exceeds the {len(live_brokers)} live brokers {live_brokers}"
        super().__init__(f"topic {topic!r}: replication factor {replication_factor} is invalid: {why}")


class InvalidTopicConfigError(ClusterError):
    """A per-topic config Lumber does not read, or a value it does not take (the message names both)."""


class ControllerMovedError(ClusterError):
    """A controller's write was refused: ``/controller_epoch`` is no longer at the version it was elected
    with, so another controller was elected since. The controller must resign."""

    def __init__(self, expected_zk_version: int, found: str = "another version") -> None:
        self.expected_zk_version = expected_zk_version
        super().__init__(
            f"controller moved: /controller_epoch expected at znode version {expected_zk_version}, "
            f"found {found}"
        )


class NotControllerError(ControllerMovedError):
    """A request only the active controller answers reached a broker that is not it."""

    def __init__(self, broker_id: int, controller_id: int) -> None:
        ClusterError.__init__(
            self,
            f"broker {broker_id} is not the controller (the controller is broker {controller_id}); ask it",
        )
        self.expected_zk_version = -1


class NoReassignmentInProgressError(ClusterError):
    """A reassignment was cancelled for a partition that is not being reassigned (names the partition)."""


class ReassignmentInProgressError(ClusterError):
    """A new reassignment of a partition that is moving already (the message names it)."""


class ZooKeeperError(ClusterError):
    """ZooKeeper failed or holds something unreadable; the message names the path and the cause.

    ``retriable`` is true for connection loss, timeouts and session expiry (the request may succeed once the
    session is back); such errors answer REQUEST_TIMED_OUT (:mod:`broker.server.error_codes`), which Kafka
    clients retry.
    """

    def __init__(self, message: str, *, path: str, retriable: bool = False) -> None:
        self.path = path
        self.retriable = retriable
        super().__init__(message)


def zookeeper_error(action: str, path: str, exc: Exception) -> ZooKeeperError:
    """Map a kazoo failure (or a :class:`~broker.cluster.zk_paths.ZkDataError`) at the boundary.

    Use as ``raise zookeeper_error("read", path, exc) from exc``.
    """
    return ZooKeeperError(
        f"zookeeper: cannot {action} {path}: {exc!r}", path=path, retriable=isinstance(exc, _RETRIABLE)
    )

"""Errors of the request handling layer (:mod:`broker.server`), all under :class:`broker.errors.BrokerError`.

They say why a partition or a request cannot be served here; :mod:`broker.server.error_codes` maps them, like
every other error a request can meet, to Kafka's codes.

::

    BrokerError
    └── ServerError
        ├── UnknownTopicOrPartitionError   the cluster view has no such topic or partition
        ├── NotLeaderOrFollowerError       the cluster view names another leader
        ├── InvalidRequiredAcksError       acks other than 0, 1 or -1
        ├── UnsupportedMessageFormatError  Produce v0-v2 (old message sets)
        ├── InvalidRequestError            a request that is well-formed but asks for something impossible
        ├── InvalidReplicationFactorError  a replication factor other than 1 (one replica per partition)
        ├── InvalidConfigError             per-topic configs in CreateTopics
        ├── RequestTimedOutError           an acks=-1 append not acknowledged within the request's timeout
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
        super().__init__(f"{tp}: led by broker {leader}, not by broker {broker_id}")


class InvalidRequiredAcksError(ServerError):
    def __init__(self, acks: int) -> None:
        self.acks = acks
        super().__init__(f"acks={acks} is not 0, 1 or -1")


class UnsupportedMessageFormatError(ServerError):
    """Produce v0-v2 carry the old message sets, which the log does not store."""


class InvalidRequestError(ServerError):
    """A request that decodes but asks for something that cannot be (the message says what)."""


class InvalidReplicationFactorError(ServerError):
    """Lumber keeps one replica per partition."""


class InvalidConfigError(ServerError):
    """Per-topic configs are not supported."""


class RequestTimedOutError(ServerError):
    def __init__(self, tp: TopicPartition, waited_for: str, timeout_ms: int) -> None:
        self.topic_partition = tp
        super().__init__(f"{tp}: not {waited_for} within {timeout_ms} ms")

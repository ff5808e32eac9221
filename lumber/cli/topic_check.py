"""Whether the topic a console command names exists: asked once, answered at once.

A client waits for a topic it does not know yet, up to its timeout (``request_timeout_ms``,
``max_block_ms``): the topic may be being created, its leader not elected. A person typing ``lumber consume
page_veiw`` wants to hear at once that there is no such topic, and how to create it. So ``consume`` and
``produce`` ask the cluster (ZooKeeper or the bootstrap brokers, as the client will) once before they start:

* the topic has partitions: go on;
* the cluster answers UNKNOWN_TOPIC_OR_PARTITION (after the brokers' own auto-creation, when the client
  may ask for it and ``[broker] auto_create_topics`` allows it) or INVALID_TOPIC_EXCEPTION:
  :class:`MissingTopicError` at once, naming the command that creates the topic;
* any other answer (LEADER_NOT_AVAILABLE: a topic being created): go on; the client waits as usual.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.client.client_security import PLAINTEXT, ClientSecurity
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import metadata_source
from broker.client.metadata.cluster_snapshot import ClusterSnapshot
from broker.protocol.error_code import ErrorCode
from pipeline.errors import PipelineError

#: Answers that mean the topic is not there and will not appear by waiting.
_MISSING = (int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), int(ErrorCode.INVALID_TOPIC_EXCEPTION))


class MissingTopicError(PipelineError):
    """The cluster has no such topic (the message says how to create it): a bad name typed, exit code 2 as
    for ``lumber topics describe`` of one (:mod:`lumber.cli`'s table)."""

    exit_code = 2

    def __init__(self, topic: str, where: str, answer: str, create_command: str) -> None:
        self.topic = topic
        super().__init__(
            f"topic {topic!r} does not exist ({where} answers {answer}); create it with:  {create_command}"
        )


def require_topic(
    topic: str,
    *,
    bootstrap_servers: Sequence[str],
    zookeeper_connect: str | None,
    allow_auto_create: bool,
    client_id: str,
    timeout_ms: int,
    section: str,
    create_command: str,
    security: ClientSecurity = PLAINTEXT,
) -> None:
    """Raise :class:`MissingTopicError` when the cluster answers that ``topic`` does not exist (see the
    module docstring); a cluster that cannot be reached raises the client's error."""
    pool = BrokerPool(
        client_id=client_id,
        request_timeout_ms=timeout_ms,
        connect_timeout_ms=timeout_ms,
        retry_backoff_ms=100,
        security=security,
    )
    try:
        source = metadata_source(
            bootstrap_servers, zookeeper_connect, pool, section=section, timeout_ms=timeout_ms
        )
        try:
            snapshot = source.fetch([topic], allow_auto_create, ClusterSnapshot())
        finally:
            source.close()
    finally:
        pool.close()
    if snapshot.partitions(topic):
        return
    code = snapshot.topic_errors.get(topic)
    if code in _MISSING:
        raise MissingTopicError(topic, source.describe(), snapshot.topic_error(topic), create_command)

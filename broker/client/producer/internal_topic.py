"""Topics that Lumber's own clients create when they are missing, as Kafka creates ``__consumer_offsets``.

Kafka's brokers create their internal topics (``__consumer_offsets``, ``__transaction_state``) themselves
the first time they are needed, with partition counts from their own settings, whatever
``auto.create.topics.enable`` says. Lumber's one such topic is the audit topic (``_audit``), and its
publishers create it: the audit's emitters (:class:`~audit.audit_emitter.AuditEmitter`, for producers
and mirrors) and publisher (:class:`~audit.audit_publisher.AuditPublisher`, for the load) call
:func:`ensure_producer_topic` with the producer they publish through before they publish, with
``[audit] topic_partitions`` partitions. So a cluster whose brokers create no topic on demand
(``[broker] auto_create_topics = false``, the default) still gets its audit trail, and a publisher never
waits ``max_block_ms`` for a topic that nobody will create.

:func:`ensure_topic` takes the client's cluster view and connections (those of the producer that will
publish, :func:`ensure_producer_topic`) and:

1. asks the cluster once about the topic, without auto-creation (a Metadata request to a broker, or a
   ZooKeeper read, whichever way the client learns the cluster). A topic that exists is used as it is,
   whatever its partition count (it is never changed), and so is one whose leaders are down
   (LEADER_NOT_AVAILABLE): sending to it is the producer's business, with its own retries and timeouts;
2. if it is missing, sends CreateTopics (the count, replication factor "broker default") to a live broker,
   the controller first. NONE and TOPIC_ALREADY_EXISTS (another publisher created it meanwhile: two
   creators race) are both success; a broker that cannot be reached is skipped for the next one;
3. refreshes the client's view until it serves the topic (bounded by ``timeout_ms``), so that the first
   send finds it at once.

Anything else fails at once with :class:`~broker.client.errors.TopicCreationError`, which names the topic,
why (the error code and message of the refusal, no live broker, no broker answering) and the command that
creates it by hand (``lumber topics create _audit --partitions N``): the cluster refused, the same request
would be refused again, so waiting out ``max_block_ms`` would only hide it.

Thread-safe as the client's :class:`~broker.client.metadata.cluster_metadata.ClusterMetadata` and
:class:`~broker.client.metadata.broker_pool.BrokerPool` are; concurrent calls for one topic both succeed (step
2).
"""

from __future__ import annotations

import logging
import shlex
from typing import TYPE_CHECKING

from broker.client.errors import (
    BrokerConnectionError,
    ClientError,
    TopicCreationError,
    UnknownTopicError,
    UnsupportedApiError,
)
from broker.client.metadata.cluster_snapshot import BrokerAddress, ClusterSnapshot
from broker.protocol.api_key import ApiKey
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest, CreateTopicsResponse

if TYPE_CHECKING:
    from broker.client.metadata.broker_pool import BrokerPool
    from broker.client.metadata.cluster_metadata import ClusterMetadata
    from broker.client.producer.producer import Producer

log = logging.getLogger(__name__)

#: The first CreateTopics version whose replication factor may be -1 ("the broker's default", KIP-464).
_DEFAULT_REPLICATION_FROM = 4


def create_command(topic: str, partitions: int) -> str:
    """The command that creates ``topic`` by hand (shell-quoted)."""
    return f"lumber topics create {shlex.quote(topic)} --partitions {partitions}"


def ensure_topic(
    metadata: ClusterMetadata, pool: BrokerPool, topic: str, partitions: int, *, timeout_ms: int
) -> None:
    """Make sure ``topic`` exists, creating it with ``partitions`` partitions if it does not (see the module
    docstring). Raises :class:`TopicCreationError`."""
    if partitions < 1:
        raise ValueError(f"ensure_topic({topic!r}): partitions must be at least 1, got {partitions}")
    remedy = f"create it with `{create_command(topic, partitions)}`"
    source = metadata.source
    try:  # 1. ask once, never auto-creating (that would take the brokers' partition count)
        snapshot = source.fetch([topic], False, metadata.snapshot)
    except ClientError as exc:
        raise TopicCreationError(topic, f"cannot ask {source.describe()} about it ({exc})", remedy) from exc
    code = snapshot.topic_errors.get(topic, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if snapshot.partitions(topic) or code == int(ErrorCode.LEADER_NOT_AVAILABLE):
        return
    if code != int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        raise TopicCreationError(
            topic, f"{source.describe()} answers {snapshot.topic_error(topic)} about it", remedy
        )
    _create(snapshot, pool, topic, partitions, timeout_ms, remedy)  # 2.
    try:  # 3. the client's own view, so that the first send finds it
        metadata.wait_for_topic(topic, timeout_ms)
    except UnknownTopicError as exc:
        raise TopicCreationError(
            topic, f"it was created but the cluster does not serve it yet ({exc})", remedy
        ) from exc


def ensure_producer_topic(producer: Producer, topic: str, partitions: int) -> None:
    """:func:`ensure_topic` through ``producer``'s own cluster view and connections (the producer that
    will publish to ``topic``), within its ``request_timeout_ms``."""
    # The producer's own cluster view and connections: same package, the producer that will publish.
    ensure_topic(
        producer._metadata,
        producer._pool,
        topic,
        partitions,
        timeout_ms=producer.config.request_timeout_ms,
    )


def _create(
    snapshot: ClusterSnapshot, pool: BrokerPool, topic: str, partitions: int, timeout_ms: int, remedy: str
) -> None:
    """Step 2: CreateTopics to the controller, else to each live broker in turn, until one answers."""
    brokers = sorted(
        snapshot.brokers.values(), key=lambda b: (b.node_id != snapshot.controller_id, b.node_id)
    )
    if not brokers:
        raise TopicCreationError(topic, "the cluster has no live broker to create it", remedy)
    failures: list[str] = []
    for address in brokers:
        try:
            response = _request(pool, address, topic, partitions, timeout_ms)
        except (BrokerConnectionError, UnsupportedApiError) as exc:
            failures.append(str(exc))
            continue
        result = next((r for r in response.topics if r.name == topic), None)
        if result is None:
            raise TopicCreationError(topic, f"broker {address}: CreateTopics did not answer for it", remedy)
        if result.error_code == int(ErrorCode.NONE):
            log.info("created topic %r with %d partitions (broker %s)", topic, partitions, address)
            return
        if result.error_code == int(ErrorCode.TOPIC_ALREADY_EXISTS):
            log.debug("topic %r was created meanwhile by another client", topic)
            return
        detail = f": {result.error_message}" if result.error_message else ""
        raise TopicCreationError(
            topic,
            f"broker {address} refused CreateTopics ({partitions} partitions): "
            f"{ErrorCode.name_of(result.error_code)} (error code {result.error_code}){detail}",
            remedy,
        )
    raise TopicCreationError(topic, "no live broker answered CreateTopics: " + "; ".join(failures), remedy)


def _request(
    pool: BrokerPool, address: BrokerAddress, topic: str, partitions: int, timeout_ms: int
) -> CreateTopicsResponse:
    connection = pool.get(address)
    version = connection.api_version(int(ApiKey.CREATE_TOPICS))
    replication_factor = -1 if version >= _DEFAULT_REPLICATION_FROM else 1
    body = CreateTopicsRequest(
        topics=[CreatableTopic(name=topic, num_partitions=partitions, replication_factor=replication_factor)],
        timeout_ms=timeout_ms,
    )
    response: CreateTopicsResponse = connection.request(body, version=version)
    return response

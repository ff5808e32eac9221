"""Learn the cluster from brokers: a Metadata request to a known broker, or else to a bootstrap server.

The brokers of the last snapshot are asked first (in turn, starting after the last one that answered), then
the configured bootstrap servers; the first answer wins. Lumber brokers answer Metadata from ZooKeeper, so
this sees the same state as :mod:`broker.client.metadata.zookeeper_metadata_source`, one hop later. With
``allow_auto_create`` the request asks the broker to create missing topics (the broker applies its own
switch and answers UNKNOWN_TOPIC_OR_PARTITION when it is off).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from broker.client.errors import BrokerConnectionError, ClientError
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_snapshot import NO_LEADER, BrokerAddress, ClusterSnapshot, PartitionInfo
from broker.protocol.api_key import ApiKey
from broker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic, MetadataResponse

log = logging.getLogger(__name__)


def metadata_request(
    topics: Collection[str] | None, allow_auto_create: bool, version: int
) -> MetadataRequest:
    """A Metadata request for ``topics`` (``None``: every topic) at ``version``."""
    if topics is None:
        listed: Sequence[MetadataRequestTopic] | None = () if version == 0 else None
    else:
        listed = [MetadataRequestTopic(name=topic) for topic in sorted(topics)]
    return MetadataRequest(topics=listed, allow_auto_topic_creation=allow_auto_create)


def snapshot_from_response(response: MetadataResponse) -> ClusterSnapshot:
    """The snapshot a Metadata response describes (topics with an error go to ``topic_errors``)."""
    brokers = {b.node_id: BrokerAddress(b.node_id, b.host, b.port) for b in response.brokers}
    topics: dict[str, tuple[PartitionInfo, ...]] = {}
    errors: dict[str, int] = {}
    for topic in response.topics:
        name = topic.name or ""
        if topic.error_code or not topic.partitions:
            errors[name] = topic.error_code
            continue
        partitions = sorted(topic.partitions, key=lambda p: p.partition_index)
        if [p.partition_index for p in partitions] != list(range(len(partitions))):
            log.warning(
                "metadata of topic %r lists partitions %s", name, [p.partition_index for p in partitions]
            )
        topics[name] = tuple(
            PartitionInfo(
                name,
                p.partition_index,
                p.leader_id if p.leader_id in brokers else NO_LEADER,
                tuple(p.replica_nodes),
                p.error_code,
                p.leader_epoch,
                tuple(p.isr_nodes),
            )
            for p in partitions
        )
    return ClusterSnapshot(brokers, topics, errors, response.controller_id)


class BootstrapMetadataSource:
    """Metadata requests to brokers (see the module docstring)."""

    def __init__(self, bootstrap: Sequence[tuple[str, int]], pool: BrokerPool) -> None:
        if not bootstrap:
            raise ValueError("BootstrapMetadataSource needs at least one bootstrap server")
        self._bootstrap = [BrokerAddress(-1, host, port) for host, port in bootstrap]
        self._pool = pool
        self._turn = 0

    def describe(self) -> str:
        return "bootstrap servers " + ", ".join(f"{a.host}:{a.port}" for a in self._bootstrap)

    def fetch(
        self, topics: Collection[str] | None, allow_auto_create: bool, previous: ClusterSnapshot
    ) -> ClusterSnapshot:
        """Ask one broker after another until one answers; raise the last failure if none does."""
        known = sorted(previous.brokers.values(), key=lambda b: b.node_id)
        if known:
            shift = self._turn % len(known)
            known = known[shift:] + known[:shift]
        candidates = known + [
            b for b in self._bootstrap if (b.host, b.port) not in {(k.host, k.port) for k in known}
        ]
        last: ClientError | None = None
        for index, address in enumerate(candidates):
            try:
                connection = self._pool.get(address)
                version = connection.api_version(int(ApiKey.METADATA))
                response: MetadataResponse = connection.request(
                    metadata_request(topics, allow_auto_create, version), version=version
                )
            except BrokerConnectionError as exc:
                last = exc
                continue
            self._turn += index + 1
            return snapshot_from_response(response)
        raise last or BrokerConnectionError(self.describe(), "no broker to ask")

    def close(self) -> None:
        """The pool belongs to the client, which closes it."""

"""Which broker coordinates a Kafka-protocol consumer group: FindCoordinator, as Kafka's clients send it.

Any broker answers (key type group): the coordinator is the leader of the group's ``__consumer_offsets``
partition. Each live broker the metadata names is asked in random order until one answers; an error
code (COORDINATOR_NOT_AVAILABLE while the offsets topic has no leader yet) or no broker reachable raises
:class:`CoordinatorNotFoundError`, which callers retry after their backoff. Used by the group member
(:mod:`broker.client.groups.kafka.kafka_group_membership`) and the admin
(:mod:`broker.client.groups.kafka.kafka_group_admin`).
"""

from __future__ import annotations

import random

from broker.client.errors import BrokerConnectionError, ClientError
from broker.client.metadata.broker_pool import BrokerPool
from broker.client.metadata.cluster_metadata import ClusterMetadata
from broker.client.metadata.cluster_snapshot import BrokerAddress
from broker.protocol import ErrorCode
from broker.protocol.messages.find_coordinator import GROUP_KEY_TYPE, FindCoordinatorRequest


class CoordinatorNotFoundError(ClientError):
    """No broker named a coordinator for the group (the message says what each answered)."""


def find_group_coordinator(pool: BrokerPool, metadata: ClusterMetadata, group: str) -> BrokerAddress:
    """The coordinator of ``group`` (see the module docstring)."""
    snapshot = metadata.snapshot
    if not snapshot.brokers or metadata.needs_update():
        snapshot = metadata.update()
    brokers = list(snapshot.brokers.values())
    random.shuffle(brokers)
    failures: list[str] = []
    for broker in brokers:
        try:
            response = pool.get(broker).request(FindCoordinatorRequest(key=group, key_type=GROUP_KEY_TYPE))
        except BrokerConnectionError as exc:
            failures.append(str(exc))
            metadata.request_update()
            continue
        if response.error_code != ErrorCode.NONE:
            name = ErrorCode.name_of(response.error_code)
            raise CoordinatorNotFoundError(
                f"group {group}: FindCoordinator at {broker}: {name} (error code {response.error_code})"
            )
        return BrokerAddress(response.node_id, response.host, response.port)
    raise CoordinatorNotFoundError(
        f"group {group}: no broker answered FindCoordinator: {'; '.join(failures) or 'no live broker known'}"
    )

"""A raw classic-group client for the group coordinator's wire tests (test_group_coordinator*.py), built from
Lumber's protocol codecs so that the tests see Kafka's exact error codes, which the third-party clients hide:
the coordinator as FindCoordinator answers it, JoinGroup, SyncGroup, Heartbeat, OffsetCommit and
OffsetFetch."""

from __future__ import annotations

import struct
from typing import Any

from broker.client.network.connection import BrokerConnection
from broker.protocol import ErrorCode
from broker.protocol.messages.find_coordinator import FindCoordinatorRequest
from broker.protocol.messages.heartbeat import HeartbeatRequest
from broker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from tests.broker.server.helpers import connect
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, wait_for

GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}
#: A ConsumerProtocolSubscription v0 of topic "t".
SUBSCRIPTION = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)


def coordinator(cluster: BrokerCluster, group: str) -> BrokerProcess:
    """The group's coordinator, as FindCoordinator answers once the offsets topic has its leaders."""
    conn = connect(next(b for b in cluster.brokers if b.running))
    found: list[Any] = []

    def answered() -> bool:
        response = conn.request(FindCoordinatorRequest(key=group, key_type=0))
        found[:] = [response]
        return bool(response.error_code == 0)

    try:
        wait_for(answered, 30, f"a coordinator for {group}")
    finally:
        conn.close()
    home: BrokerProcess = cluster.brokers[found[0].node_id]
    conn = connect(home)
    try:  # and until it has loaded the group's partition (COORDINATOR_LOAD_IN_PROGRESS meanwhile)
        wait_for(
            lambda: committed_or_none(conn, group) is not None, 30, f"{home} to load {group}'s partition"
        )
    finally:
        conn.close()
    return home


def join(
    conn: BrokerConnection, group: str, member_id: str = "", instance: str | None = None, **kw: Any
) -> Any:
    return conn.send(
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=kw.pop("session_timeout_ms", 10_000),
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 10_000),
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)],
        ),
        **kw,
    )


def sync(
    conn: BrokerConnection,
    group: str,
    generation: int,
    member: str,
    assignments: dict[str, bytes],
    instance: str | None = None,
) -> Any:
    return conn.send(
        SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
            assignments=[SyncGroupRequestAssignment(m, a) for m, a in assignments.items()],
        )
    )


def heartbeat(
    conn: BrokerConnection, group: str, generation: int, member: str, instance: str | None = None
) -> int:
    body = HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member, group_instance_id=instance
    )
    return int(conn.request(body).error_code)


def commit(
    conn: BrokerConnection,
    group: str,
    generation: int,
    member: str,
    offset: int,
    *,
    instance: str | None = None,
    metadata: str = "m",
) -> int:
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, offset, 3, metadata)])],
    )
    return int(conn.request(body).topics[0].partitions[0].error_code)


def committed(conn: BrokerConnection, group: str) -> tuple[int, str | None]:
    response = conn.request(
        OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", [0])]), version=7
    )
    assert response.error_code == 0
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.metadata


def committed_or_none(conn: BrokerConnection, group: str) -> tuple[int, str | None] | None:
    response = conn.request(
        OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", [0])]), version=7
    )
    if response.error_code != 0:
        assert response.error_code in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.NOT_COORDINATOR,  # also from a broker that has not yet seen the new offsets topic
        )
        return None
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.metadata

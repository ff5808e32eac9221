"""Authorized operations (KIP-430) on the wire, version by version, from a real broker with the ACL
authorizer (broker/server/metadata_apis.py, cluster_apis.py, group_apis.py through auth_helper.py): Metadata
v7 (no field), v10 (topics and the cluster), v11 (topics only), DescribeCluster, DescribeGroups v2 and v3,
asked and not asked. One broker, a PLAINTEXT listener (``User:ANONYMOUS``, no super user), ACLs written to
ZooKeeper as ``lumber acls`` writes them. The comparison with Kafka is tests/conformance/test_acls.py's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from broker.client.network.connection import BrokerConnection
from broker.cluster.acl_store import AclStore
from broker.protocol.messages.describe_cluster import DescribeClusterRequest
from broker.protocol.messages.describe_groups import DescribeGroupsRequest
from broker.protocol.messages.find_coordinator import FindCoordinatorRequest
from broker.protocol.messages.metadata import MetadataRequest, MetadataRequestTopic
from broker.security.acl_binding import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.broker.server.helpers import connect
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster
from tests.support.zookeeper import make_chroot

pytestmark = [pytest.mark.zookeeper]

Op = AclOperation
NOT_ASKED = -(2**31)
TOPIC_OPS = (1 << Op.READ) | (1 << Op.DESCRIBE)
CLUSTER_OPS = (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)
GROUP_OPS = (1 << Op.READ) | (1 << Op.DESCRIBE)


def _allow(resource_type: ResourceType, name: str, operation: AclOperation) -> AclBinding:
    entry = AccessControlEntry("User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW)
    return AclBinding(ResourcePattern(resource_type, name), entry)


def _metadata(conn: BrokerConnection, version: int, *, ask: bool) -> tuple[dict[str, tuple[int, int]], int]:
    body = MetadataRequest(
        topics=[MetadataRequestTopic(name="ao-t"), MetadataRequestTopic(name="ao-hidden")],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=ask,
        include_topic_authorized_operations=ask,
    )
    answer = conn.request(body, version=version)
    topics = {t.name: (t.error_code, t.topic_authorized_operations) for t in answer.topics}
    return topics, answer.cluster_authorized_operations


@pytest.fixture(scope="module")
def conn(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerConnection]:
    cluster = BrokerCluster(
        make_chroot(zookeeper_server.connect, "authorized_operations"), tmp_path_factory.mktemp("ao")
    )
    try:
        broker = cluster.add_broker(
            {"authorizer": "acl", "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS}
        )
        for topic in ("ao-t", "ao-hidden"):
            cluster.create_topic(topic, 1, {0: [0]})
        AclStore(cluster.zk).add(
            [
                _allow(ResourceType.TOPIC, "ao-t", Op.READ),  # implies DESCRIBE
                _allow(ResourceType.GROUP, "ao-g", Op.READ),
                _allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.DESCRIBE),
                _allow(ResourceType.CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS),  # implies DESCRIBE_CONFIGS
            ]
        )
        connection = connect(broker)
        deadline = time.monotonic() + 30
        while _metadata(connection, 10, ask=True)[1] != CLUSTER_OPS:  # the broker follows ZooKeeper
            assert time.monotonic() < deadline, "the broker has not seen the ACLs after 30 s"
            time.sleep(0.1)
        yield connection
        connection.close()
    finally:
        cluster.stop()


def test_metadata_answers_topic_and_cluster_operations_by_version(conn: BrokerConnection) -> None:
    assert _metadata(conn, 10, ask=True) == (
        {"ao-t": (0, TOPIC_OPS), "ao-hidden": (29, NOT_ASKED)},
        CLUSTER_OPS,
    )
    assert _metadata(conn, 10, ask=False) == (
        {"ao-t": (0, NOT_ASKED), "ao-hidden": (29, NOT_ASKED)},
        NOT_ASKED,
    )
    # v11 dropped the cluster's field (the decoder's default is "not given"); v7 has neither
    assert _metadata(conn, 11, ask=True) == (
        {"ao-t": (0, TOPIC_OPS), "ao-hidden": (29, NOT_ASKED)},
        NOT_ASKED,
    )
    assert _metadata(conn, 7, ask=True) == ({"ao-t": (0, NOT_ASKED), "ao-hidden": (29, NOT_ASKED)}, NOT_ASKED)


def test_describe_cluster_answers_the_clusters_operations(conn: BrokerConnection) -> None:
    asked = conn.request(DescribeClusterRequest(include_cluster_authorized_operations=True), version=0)
    not_asked = conn.request(DescribeClusterRequest(), version=0)
    assert (asked.error_code, asked.cluster_authorized_operations) == (0, CLUSTER_OPS)
    assert (not_asked.error_code, not_asked.cluster_authorized_operations) == (0, NOT_ASKED)


def test_describe_groups_answers_each_described_groups_operations(conn: BrokerConnection) -> None:
    deadline = time.monotonic() + 30  # the first FindCoordinator creates __consumer_offsets
    while conn.request(FindCoordinatorRequest(key="ao-g"), version=1).error_code != 0:
        assert time.monotonic() < deadline, "no coordinator for ao-g after 30 s"
        time.sleep(0.2)
    body = DescribeGroupsRequest(groups=["ao-g", "ao-refused"], include_authorized_operations=True)
    while True:  # COORDINATOR_LOAD_IN_PROGRESS (14, no operations) while the new partition loads
        described = {
            g.group_id: (g.error_code, g.group_state, g.authorized_operations)
            for g in conn.request(body, version=3).groups
        }
        if described["ao-g"][0] != 14:
            break
        assert described["ao-g"] == (14, "", NOT_ASKED)
        assert time.monotonic() < deadline, "ao-g's coordinator still loading after 30 s"
        time.sleep(0.2)
    assert described == {"ao-g": (0, "Dead", GROUP_OPS), "ao-refused": (30, "", NOT_ASKED)}
    not_asked = conn.request(body._replace(include_authorized_operations=False), version=3).groups
    assert [g.authorized_operations for g in not_asked] == [NOT_ASKED, NOT_ASKED]
    assert [g.authorized_operations for g in conn.request(body, version=2).groups] == [NOT_ASKED, NOT_ASKED]

"""Real Kafka admin clients against the broker: kafka-python's and confluent-kafka's create, list, delete."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KafkaNewPartitions
    from kafka.admin import NewTopic as KafkaNewTopic

pytestmark = pytest.mark.interop


def test_confluent_kafka_admin_creates_lists_and_deletes(start_cluster: object) -> None:
    cluster: BrokerCluster = start_cluster(3)  # type: ignore[operator]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic("by-confluent", num_partitions=6, replication_factor=1)])
    futures["by-confluent"].result(30)
    metadata = admin.list_topics(timeout=30)
    assert sorted(metadata.brokers) == [0, 1, 2]
    topic = metadata.topics["by-confluent"]
    leaders = {p.id: p.leader for p in topic.partitions.values()}
    assert sorted(leaders) == list(range(6))
    assert sorted(list(leaders.values()).count(b) for b in range(3)) == [2, 2, 2]
    assert cluster.admin.describe_topic("by-confluent") == {p: (leaders[p],) for p in range(6)}
    with pytest.raises(Exception, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topics([NewTopic("by-confluent", num_partitions=1, replication_factor=1)])[
            "by-confluent"
        ].result(30)
    admin.delete_topics(["by-confluent"])["by-confluent"].result(30)
    wait_for(lambda: "by-confluent" not in cluster.admin.list_topics(), 10, "the topic to go")


def test_kafka_python_admin_creates_lists_and_deletes(broker_cluster: BrokerCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker_cluster.bootstrap_servers, request_timeout_ms=30_000)
    try:
        admin.create_topics([KafkaNewTopic("by-kafka-python", num_partitions=3, replication_factor=1)])
        assert "by-kafka-python" in admin.list_topics()
        (described,) = admin.describe_topics(["by-kafka-python"])
        assert sorted(p["partition_index"] for p in described["partitions"]) == [0, 1, 2]
        assert {p["leader_id"] for p in described["partitions"]} == {0}
        admin.delete_topics(["by-kafka-python"])
        wait_for(lambda: "by-kafka-python" not in broker_cluster.admin.list_topics(), 10, "the topic to go")
    finally:
        admin.close()


def test_create_partitions_from_confluent_kafka_and_kafka_python(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2)
    cluster.create_topic("growing", 2, {0: [0, 1], 1: [1, 0]})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_partitions([NewPartitions("growing", 3)])["growing"].result(30)
    assert cluster.admin.describe_topic("growing")[2] in {(0, 1), (1, 0)}
    placed = admin.create_partitions([NewPartitions("growing", 4, [[1, 0]])])
    placed["growing"].result(30)
    assert cluster.admin.describe_topic("growing")[3] == (1, 0)
    with pytest.raises(KafkaException) as raised:
        admin.create_partitions([NewPartitions("growing", 4)])["growing"].result(30)
    assert raised.value.args[0].name() == "INVALID_PARTITIONS"
    assert "has 4 partitions: 4 is not an increase" in raised.value.args[0].str()
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30_000)
    try:
        refused = kafka_admin.create_partitions(
            {"growing": KafkaNewPartitions(5, [[1, 1]])}, raise_errors=False
        )
        assert [(r.error_code, r.error_message) for r in refused.results] == [
            (
                39,
                (
                    "topic 'growing': new partition 4's replicas [1, 1]: expected 2 distinct brokers (as "
                    "partition 0)"
                ),
            )
        ]
        validated = kafka_admin.create_partitions({"growing": KafkaNewPartitions(9)}, validate_only=True)
        assert [r.error_code for r in validated.results] == [0]
        assert len(cluster.admin.describe_topic("growing")) == 4
        kafka_admin.create_partitions({"growing": KafkaNewPartitions(6)})
    finally:
        kafka_admin.close()
    wait_for(lambda: len(cluster.admin.describe_topic("growing")) == 6, 10, "6 partitions")
    wait_for(lambda: len(cluster.admin.describe_states("growing")) == 6, 10, "6 partition states")

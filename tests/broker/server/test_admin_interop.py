"""Real Kafka admin clients against the broker: kafka-python's and confluent-kafka's create, list, delete."""

from __future__ import annotations

import warnings

import pytest

from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kafka.admin import KafkaAdminClient
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

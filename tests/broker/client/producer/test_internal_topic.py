"""Creating the audit topic when it is missing, on real brokers whose auto-creation is off (their default):
two creators at once, a creator that lost the race, and clusters that cannot create it (an error at once)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from broker.client.errors import TopicCreationError
from broker.client.producer.internal_topic import _create, ensure_producer_topic
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from tests.support.broker_cluster import BrokerCluster, servers


def producer_of(cluster: BrokerCluster) -> Producer:
    return Producer(ProducerConfig(bootstrap_servers=servers(cluster)))


def test_two_creators_at_once_both_succeed_and_the_topic_has_exactly_the_configured_partitions(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2)
    producers = [producer_of(cluster), Producer(zookeeper_connect=cluster.zk_connect)]
    start = threading.Barrier(len(producers))
    done: list[Producer] = []
    failures: list[BaseException] = []

    def create(producer: Producer) -> None:
        start.wait()
        try:
            ensure_producer_topic(producer, "_audit", 5)
            done.append(producer)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=create, args=(p,)) for p in producers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert failures == []
        assert len(done) == 2
        assignment = cluster.admin.describe_topic("_audit")
        assert sorted(assignment) == [0, 1, 2, 3, 4]
        assert {replicas[0] for replicas in assignment.values()} == {0, 1}  # spread over both brokers
        # both producers can write to it at once: it is served
        for producer in producers:
            assert producer.send("_audit", b"x", partition=4).result(10).offset in (0, 1)
        # an existing topic is used as it is, whatever count is asked for
        ensure_producer_topic(producers[0], "_audit", 9)
        assert len(cluster.admin.describe_topic("_audit")) == 5
    finally:
        for producer in producers:
            producer.close()


def test_a_creator_that_asked_before_the_other_created_it_takes_topic_already_exists_as_success(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1)
    with producer_of(cluster) as producer:
        missing = producer._metadata.source.fetch(["_audit"], False, producer._metadata.snapshot)
        assert missing.partitions("_audit") is None
        cluster.create_topic("_audit", 2)  # the other creator wins between the question and CreateTopics
        _create(missing, producer._pool, "_audit", 3, 10_000, "create it")  # answered TOPIC_ALREADY_EXISTS
        assert len(cluster.admin.describe_topic("_audit")) == 2
        ensure_producer_topic(producer, "_audit", 3)
        assert len(cluster.admin.describe_topic("_audit")) == 2


def test_a_cluster_without_live_brokers_fails_at_once_naming_the_topic_and_the_command(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1)
    cluster.broker(0).stop()
    with Producer(ProducerConfig(max_block_ms=60_000), zookeeper_connect=cluster.zk_connect) as producer:
        started = time.monotonic()
        with pytest.raises(TopicCreationError) as caught:
            ensure_producer_topic(producer, "_audit", 3)
        assert time.monotonic() - started < 2.0
    assert str(caught.value) == (
        "topic '_audit' does not exist and cannot be created: the cluster has no live broker to create "
        "it; create it with `lumber topics create _audit --partitions 3`"
    )
    assert cluster.admin.list_topics() == []


def test_a_broker_that_refuses_gives_its_error_code_and_message_at_once(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(1)
    bad = "audit topic"  # not a topic name: the broker refuses to create it
    with Producer(ProducerConfig(max_block_ms=60_000), zookeeper_connect=cluster.zk_connect) as producer:
        started = time.monotonic()
        with pytest.raises(TopicCreationError) as caught:
            ensure_producer_topic(producer, bad, 1)
        assert time.monotonic() - started < 2.0
    message = str(caught.value)
    assert message.startswith(
        f"topic {bad!r} does not exist and cannot be created: broker {cluster.broker(0).address} (broker 0) "
        "refused CreateTopics (1 partitions): INVALID_TOPIC_EXCEPTION (error code 17): "
    )
    assert message.endswith("; create it with `lumber topics create 'audit topic' --partitions 1`")
    assert cluster.admin.list_topics() == []

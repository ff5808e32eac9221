"""A broker with several listeners (broker/server/broker_server.py, issue 37's first layer): real broker
processes, unmodified clients.

Each broker listens on INTERNAL (advertised as 127.0.0.1, the brokers' replication listener) and EXTERNAL
(advertised as ``localhost``); both are PLAINTEXT listeners of names of their own. A client is told the
addresses of the listener it came in on, ZooKeeper holds every endpoint, and the followers replicate over
INTERNAL.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from broker.cluster import zk_paths
from lumber.dev.process import free_port
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster, BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def add_two_listener_broker(cluster: BrokerCluster) -> tuple[BrokerProcess, int]:
    """A broker on INTERNAL (127.0.0.1) and EXTERNAL (advertised as localhost); returns it and EXTERNAL's
    port."""
    internal, external = free_port(), free_port()
    broker = cluster.add_broker(
        {
            "listeners": [f"INTERNAL://127.0.0.1:{internal}", f"EXTERNAL://127.0.0.1:{external}"],
            "advertised_listeners": [f"EXTERNAL://localhost:{external}"],
            "listener_security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "PLAINTEXT"},
            "inter_broker_listener_name": "INTERNAL",
            "flush_on_ack": True,
            "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
            "default_replication_factor": 2,
        },
        port=internal,
    )
    return broker, external


def metadata_brokers(bootstrap: str) -> dict[int, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=10)
    return {b.id: f"{b.host}:{b.port}" for b in metadata.brokers.values()}


def test_metadata_advertises_the_listener_the_client_came_in_on(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(0)
    first, first_external = add_two_listener_broker(cluster)
    second, second_external = add_two_listener_broker(cluster)

    # ZooKeeper: every endpoint, and host/port the first PLAINTEXT one
    data, _ = cluster.zk.get(zk_paths.broker_path(1))
    node = json.loads(data)
    assert node["endpoints"] == [
        f"INTERNAL://127.0.0.1:{second.port}",
        f"EXTERNAL://localhost:{second_external}",
    ]
    assert node["listener_security_protocol_map"] == {"EXTERNAL": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}
    assert (node["host"], node["port"]) == ("127.0.0.1", second.port)

    internal = {0: f"127.0.0.1:{first.port}", 1: f"127.0.0.1:{second.port}"}
    external = {0: f"localhost:{first_external}", 1: f"localhost:{second_external}"}
    assert metadata_brokers(f"127.0.0.1:{first.port}") == internal
    assert metadata_brokers(f"127.0.0.1:{first_external}") == external
    assert metadata_brokers(f"127.0.0.1:{second_external}") == external
    listed = subprocess.run(
        ["kcat", "-b", f"127.0.0.1:{second_external}", "-L", "-J"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert {b["id"]: b["name"] for b in json.loads(listed.stdout)["brokers"]} == external

    # the followers replicate over INTERNAL: an acks=all produce through EXTERNAL needs both replicas
    cluster.create_topic("listened", 1, {0: [0, 1]}, replication_factor=2)
    producer = ConfluentProducer({"bootstrap.servers": f"localhost:{first_external}", "acks": "all"})
    delivered: list[Any] = []
    for i in range(20):
        producer.produce(
            "listened", f"v{i}".encode(), partition=0, on_delivery=lambda e, m: delivered.append((e, m))
        )
    assert producer.flush(30) == 0
    assert [e for e, _ in delivered] == [None] * 20
    assert sorted(m.offset() for _, m in delivered) == list(range(20))
    assert sorted(cluster.state_of("listened", 0).isr) == [0, 1]

    # a consumer through EXTERNAL finds its coordinator at the EXTERNAL address too (FindCoordinator)
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": f"localhost:{second_external}",
            "group.id": "listeners",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["listened"])
        values: list[bytes] = []
        for _ in range(300):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
                if len(values) == 20:
                    break
        assert values == [f"v{i}".encode() for i in range(20)]
        consumer.commit(asynchronous=False)
        committed = consumer.committed(
            [__import__("confluent_kafka").TopicPartition("listened", 0)], timeout=10
        )
        assert committed[0].offset == 20
    finally:
        consumer.close()

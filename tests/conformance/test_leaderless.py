"""A Produce to a partition without a leader, on two-broker clusters (:mod:`.cluster_target`): Kafka's first
node is a combined controller and broker, its second a broker only, so the quorum survives the second;
Lumber's two brokers share the suite's ZooKeeper.

* ``produce_without_leader``: a 1-partition topic created by confluent-kafka's AdminClient with its only
  replica on broker 1, one record written to it (acks=all), then broker 1 killed with SIGKILL. Once the
  surviving broker's Metadata names no leader: that Metadata (its error, leader, replicas, ISR, as broker
  indexes), kafka-python's Produce v9 of one record with acks=1 and acks=all and a Fetch v12 on one
  connection to the survivor, acks=0's Produce on a second connection (is it closed?), and confluent-kafka's
  producer (``message.timeout.ms`` 3000) writing one record through the survivor: its delivery report.
"""

from __future__ import annotations

import socket
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.conformance.cluster_target import (
    ClusterTarget,
    kafka_cluster_target,
    lumber_cluster_target,
    started_together,
)
from tests.conformance.conformance import Transcript, conform
from tests.conformance.raw_requests import exchange, fetch_frame, produce_answer, produce_frame, read_response
from tests.support.zookeeper import make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
    from kafka.protocol.consumer import FetchResponse

#: slow: two clusters of two brokers started, a kill noticed on each (about 45 s in all)
pytestmark = [pytest.mark.interop, pytest.mark.zookeeper, pytest.mark.slow]

NOT_LEADER_OR_FOLLOWER = 6


@pytest.fixture(scope="module")
def two_brokers(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterTarget, ClusterTarget]]:
    """Kafka (node 1 combined, node 2 a broker only), then Lumber: two brokers each."""
    with started_together(
        kafka_cluster_target(tmp_path_factory.mktemp("kafka-two"), 2, controllers=1),
        lumber_cluster_target(
            make_chroot(zookeeper_server.connect, "conformance-leaderless"),
            tmp_path_factory.mktemp("lumber-two"),
            2,
        ),
    ) as (kafka, lumber):
        yield kafka, lumber


def _partition_metadata(target: ClusterTarget, address: str, topic: str) -> dict[str, Any]:
    found = AdminClient({"bootstrap.servers": address}).list_topics(topic, timeout=10).topics[topic]
    partition = found.partitions[0]
    return {
        "topic_error": found.error.name() if found.error is not None else None,
        "error": partition.error.name() if partition.error is not None else None,
        "leader": target.index_of(partition.leader),
        "replicas": [target.index_of(r) for r in partition.replicas],
        "isr": [target.index_of(r) for r in partition.isrs],
    }


def _delivery(address: str, topic: str, config: dict[str, Any]) -> list[str | None]:
    reports: list[str | None] = []

    def delivered(err: KafkaError | None, _msg: Any) -> None:
        reports.append(err.name() if err else None)

    producer = Producer({"bootstrap.servers": address, "linger.ms": 0, **config})
    producer.produce(topic, b"v", partition=0, on_delivery=delivered)
    remaining = producer.flush(30)
    if remaining:
        raise AssertionError(f"{remaining} records to {topic} neither delivered nor failed after 30 s")
    return reports


def produce_without_leader(target: ClusterTarget, topic: str) -> Transcript:
    survivor, doomed = target.addresses[0], 1
    admin = AdminClient({"bootstrap.servers": survivor})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[[target.broker_ids[doomed]]])
    admin.create_topics([new], operation_timeout=30)[topic].result(timeout=60)
    deadline = time.monotonic() + 30
    while _partition_metadata(target, survivor, topic)["leader"] != doomed and time.monotonic() < deadline:
        time.sleep(0.1)
    before = _partition_metadata(target, survivor, topic)
    written = _delivery(target.bootstrap, topic, {"acks": "all"})
    target.kill(doomed)
    deadline = time.monotonic() + 40
    while _partition_metadata(target, survivor, topic)["leader"] != -1 and time.monotonic() < deadline:
        time.sleep(0.2)
    after = _partition_metadata(target, survivor, topic)
    acks_1, acks_all, fetched = exchange(
        survivor,
        [produce_frame(topic, 0, 1, 31), produce_frame(topic, 0, -1, 32), fetch_frame(topic, 0, 33)],
    )
    fetch: Any = None
    if fetched is not None:
        answer = FetchResponse.decode(fetched, version=12, header=True, framed=True)
        fetch = [[p.error_code, p.high_watermark] for t in answer.responses for p in t.partitions]
    host, port = survivor.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(produce_frame(topic, 0, 0, 34))
        acks_0_answer, acks_0_closed = read_response(sock)
    return {
        "before": before,
        "written": written,
        "after": after,
        "produce_acks_1": produce_answer(acks_1) if acks_1 is not None else None,
        "produce_acks_all": produce_answer(acks_all) if acks_all is not None else None,
        "fetch": fetch,
        "acks_0_answer": acks_0_answer,
        "acks_0_closed": acks_0_closed,
        "producer": _delivery(survivor, topic, {"message.timeout.ms": 3000}),
    }


def test_produce_without_leader(two_brokers: tuple[ClusterTarget, ClusterTarget]) -> None:
    transcript = conform(produce_without_leader, two_brokers)
    assert transcript["before"]["leader"] == 1
    assert transcript["written"] == [None]
    assert transcript["after"]["error"] == "LEADER_NOT_AVAILABLE"
    assert transcript["after"]["leader"] == -1
    for acks in ("produce_acks_1", "produce_acks_all"):
        [answer] = transcript[acks]
        assert (answer["error_code"], answer["base_offset"]) == (NOT_LEADER_OR_FOLLOWER, -1)
    assert transcript["fetch"] == [[NOT_LEADER_OR_FOLLOWER, -1]]
    assert transcript["acks_0_closed"] is True
    assert transcript["producer"] == ["_MSG_TIMED_OUT"]

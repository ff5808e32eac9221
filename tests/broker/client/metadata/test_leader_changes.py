"""Lumber's clients when a partition's leader goes away and comes back, against real broker processes.

With one replica per partition a leader change is the broker's death (its registration expires: no leader,
LEADER_NOT_AVAILABLE) and its return on the same id. The multi-replica failover tests (a new leader on
another broker, FENCED_LEADER_EPOCH from the old one) live with the server's tests.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from broker.client.metadata.bootstrap_metadata_source import snapshot_from_response
from broker.client.metadata.cluster_snapshot import NO_LEADER_EPOCH, PartitionInfo
from broker.protocol.api_key import ApiKey
from broker.protocol.codec import decode_response, encode_response
from broker.protocol.messages.metadata import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import consumer, producer, read_records
from tests.support.broker_cluster import wait_for

TP = TopicPartition("events", 0)


def test_the_snapshot_keeps_the_leader_epoch_and_isr_that_metadata_answers() -> None:
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(1, "127.0.0.1", 9091), MetadataResponseBroker(2, "127.0.0.1", 9092)],
        controller_id=2,
        topics=[
            MetadataResponseTopic(
                name="events",
                partitions=[
                    MetadataResponsePartition(0, 1, 2, 7, [2, 1, 3], [2, 1]),
                    MetadataResponsePartition(0, 0, 1, 3, [1, 2, 3], [1, 2, 3]),
                ],
            )
        ],
    )
    frame = encode_response(12, 5, response)
    decoded = decode_response(int(ApiKey.METADATA), 12, frame[4:])
    assert isinstance(decoded.body, MetadataResponse)
    snapshot = snapshot_from_response(decoded.body)
    assert snapshot.topics["events"] == (
        PartitionInfo("events", 0, 1, (1, 2, 3), 0, 3, (1, 2, 3)),
        PartitionInfo("events", 1, 2, (2, 1, 3), 0, 7, (2, 1)),
    )
    assert (snapshot.leader_epoch("events", 1), snapshot.leader_epoch("events", 0)) == (7, 3)
    assert snapshot.leader_epoch("events", 2) == NO_LEADER_EPOCH  # no such partition
    assert snapshot.leader_epoch("other", 0) == NO_LEADER_EPOCH  # no such topic


def test_clients_ride_out_the_leader_going_away_and_coming_back(start_cluster: Any) -> None:
    """Broker 1, the only replica, is killed and stays down until its registration expired (no leader):
    a ListOffsets and an idempotent acks=all send made meanwhile wait and complete once it is back; the
    consumer resumes at the exact offset, and every record is stored once, in order."""
    cluster = start_cluster(2)
    cluster.create_topic("events", 1, assignment={0: [1]})
    leader = cluster.brokers[1]
    with producer(cluster, retry_backoff_ms=50) as p:
        first = p.send_many("events", [b"m%05d" % i for i in range(200)], partition=0).result(10)
        assert [(r.base_offset, r.record_count) for r in first] == [(0, 200)]
    with (
        consumer(cluster, TP, retry_backoff_ms=50, request_timeout_ms=60_000, max_prefetch_bytes=4096) as c,
        producer(cluster, retry_backoff_ms=50, delivery_timeout_ms=60_000, request_timeout_ms=5_000) as p,
    ):
        assert [r.offset for r in read_records(c, 100)] == list(range(100))
        leader.kill()
        wait_for(lambda: not leader.registered(), 30, "broker 1's registration to expire")
        ended: dict[TopicPartition, int] = {}
        lookup = threading.Thread(target=lambda: ended.update(c.end_offsets([TP])))
        lookup.start()
        sent = p.send_many("events", [b"m%05d" % i for i in range(200, 250)], partition=0)
        time.sleep(1.0)  # both now wait for a leader
        assert lookup.is_alive()
        assert not sent.wait(0)
        leader.start()
        ranges = sent.result(60)
        lookup.join(60)
        assert [(r.base_offset, r.record_count) for r in ranges] == [(200, 50)]
        assert ended[TP] in (200, 250)  # the end before or after the send landed, both exact
        rest = read_records(c, 150, timeout_s=60)
        assert [r.offset for r in rest] == list(range(100, 250))
        assert [r.value for r in rest] == [b"m%05d" % i for i in range(100, 250)]
        assert c.end_offsets([TP]) == {TP: 250}

"""DeleteRecords (broker/server/log_admin_apis.py) on two real brokers and a real ZooKeeper: the leader raises
its log start offset, the follower raises its own from the leader's fetch responses (seen in its
``log-start-offset-checkpoint``), and after the leader stops the new leader answers the same earliest
offset and a consumer reads from it. The single-broker answers are compared with Kafka's in
tests/conformance/test_admin_apis.py."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest

from tests.broker.server.helpers import batch, connect, produce
from tests.support.broker_cluster import BrokerCluster, wait_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def test_a_follower_takes_the_leaders_raised_log_start_offset(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2, recovery_checkpoint_interval_ms=100, replica_lag_time_max_ms=3000)
    cluster.create_topic("trimmed", 1, {0: [0, 1]})
    cluster.wait_for_isr("trimmed", 0, [0, 1])
    leader, follower = cluster.broker(0), cluster.broker(1)
    conn = connect(leader)
    try:
        for first in range(0, 100, 10):
            response = produce(conn, "trimmed", 0, batch(first, 10), acks=-1)
            assert response.error_code == 0
    finally:
        conn.close()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    (future,) = admin.delete_records([TopicPartition("trimmed", 0, 40)]).values()
    assert future.result(timeout=60).low_watermark == 40
    checkpoint = follower.log_dir / "log-start-offset-checkpoint"
    wait_for(
        lambda: checkpoint.exists() and "trimmed 0 40" in checkpoint.read_text(),
        30,
        "the follower's log-start-offset-checkpoint to hold trimmed 0 40",
    )
    leader.stop()  # leadership moves to the follower first (controlled shutdown)
    cluster.wait_for_leader("trimmed", 0, lambda s: s.leader == 1)
    consumer = Consumer(
        {"bootstrap.servers": follower.address, "group.id": "trimmed", "auto.offset.reset": "earliest"}
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition("trimmed", 0), timeout=30) == (40, 100)
        consumer.assign([TopicPartition("trimmed", 0, 0)])  # out of range: reset to the earliest
        message = consumer.poll(30)
        assert message is not None
        assert message.error() is None
        assert message.offset() == 40
    finally:
        consumer.close()

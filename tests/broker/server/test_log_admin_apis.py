"""DeleteRecords (broker/server/log_admin_apis.py) on two real brokers and a real ZooKeeper: the leader raises
its log start offset, the follower raises its own from the leader's fetch responses (seen in its
``log-start-offset-checkpoint``), and after the leader stops the new leader answers the same earliest
offset and a consumer reads from it; the answer waits for the followers' log starts, as Kafka's does. The
single-broker answers are compared with Kafka's in
tests/conformance/test_admin_apis.py."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import pytest

from broker.client.network.connection import BrokerConnection
from broker.protocol import ErrorCode
from broker.protocol.messages.delete_records import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from broker.protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.broker.server.helpers import batch, connect, produce
from tests.support.broker_cluster import BrokerCluster, wait_for
from tests.support.sigstop import paused

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


def delete_below(conn: BrokerConnection, offset: int, timeout_ms: int) -> tuple[int, int, float]:
    """DeleteRecords of ``waited-0`` below ``offset``: (error code, low watermark, seconds it took)."""
    started = time.monotonic()
    request = DeleteRecordsRequest(
        topics=[DeleteRecordsTopic("waited", [DeleteRecordsPartition(0, offset)])], timeout_ms=timeout_ms
    )
    answer = conn.request(request).topics[0].partitions[0]
    return answer.error_code, answer.low_watermark, time.monotonic() - started


def test_the_answer_waits_for_every_live_replica_to_delete(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """As Kafka's DelayedDeleteRecords: answered once the followers' fetches say their log start offsets
    reached the offset; with a follower paused (alive: its ZooKeeper session lasts 4 s), a short timeout
    answers REQUEST_TIMED_OUT; once its session expired it is not waited for."""
    cluster = start_cluster(3, replica_lag_time_max_ms=3000)
    cluster.create_topic("waited", 1, {0: [0, 1, 2]})
    cluster.wait_for_isr("waited", 0, [0, 1, 2])
    conn = connect(cluster.broker(0), request_timeout_ms=60_000)
    try:
        for first in range(0, 100, 10):
            assert produce(conn, "waited", 0, batch(first, 10), acks=-1).error_code == 0
        code, low, _took = delete_below(conn, 20, 30_000)
        assert (code, low) == (ErrorCode.NONE, 20)
        with paused(cluster.broker(2).popen.pid):  # type: ignore[union-attr]
            code, low, took = delete_below(conn, 40, 1000)
            assert (code, low) == (ErrorCode.REQUEST_TIMED_OUT, -1)
            assert 0.9 <= took < 3.5, took
            # the deletion itself is done on the leader
            assert fetch_earliest(conn) == 40
            # once broker 2's session expired it is no longer live: not waited for
            code, low, took = delete_below(conn, 50, 30_000)
            assert (code, low) == (ErrorCode.NONE, 50)
        cluster.wait_for_isr("waited", 0, [0, 1, 2], timeout_s=60)
        code, low, _took = delete_below(conn, 60, 30_000)
        assert (code, low) == (ErrorCode.NONE, 60)
    finally:
        conn.close()


def fetch_earliest(conn: BrokerConnection) -> int:
    request = ListOffsetsRequest(
        replica_id=-1, topics=[ListOffsetsTopic("waited", [ListOffsetsPartition(0, timestamp=-2)])]
    )
    return int(conn.request(request).topics[0].partitions[0].offset)

"""Partition reassignment end to end (issue 38): real broker processes on a real ZooKeeper, a steady
idempotent acks=all confluent-kafka producer, and faults as faults (kill -9 of the controller and of a
target broker mid-move).

Each test counts what the producer was told was stored and reads it all back after the move: every
acknowledged record at the partition and offset it was acknowledged with, none twice; the replicas moved
away have no folder left on their broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import pytest

from broker.cluster import reassignment_store
from broker.record.topic_partition import TopicPartition
from tests.support.acked_producer import (
    REPLICATION,
    AckedProducer,
    check_every_acknowledged_record,
    read_partitions,
    wait_for_identical_replicas,
)
from tests.support.broker_cluster import BrokerCluster, wait_for

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def wait_for_assignment(
    cluster: BrokerCluster, topic: str, wanted: Mapping[int, Sequence[int]], timeout_s: float = 60.0
) -> None:
    """Wait until the topic's replicas are ``wanted`` and nothing of it is moving any more."""

    def done() -> bool:
        data, _ = cluster.zk.get(f"/brokers/topics/{topic}")
        return all(cluster.admin.describe_topic(topic)[p] == tuple(r) for p, r in wanted.items()) and (
            b"adding_replicas" not in data and b"removing_replicas" not in data
        )

    wait_for(done, timeout_s, f"{topic} to be reassigned to {dict(wanted)}")


def test_reassignment_moves_replicas_under_load_and_deletes_the_old_ones(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("moves", 2, {0: [0, 1], 1: [0, 1]})
    load = AckedProducer(cluster, "moves", 2).start()
    wait_for(lambda: len(load.acknowledged) >= 500, 60, "500 acknowledged records before the move")
    targets = {TopicPartition("moves", 0): (1, 2), TopicPartition("moves", 1): (2,)}
    reassignment_store.request_reassignment(cluster.zk, targets)
    wait_for_assignment(cluster, "moves", {0: [1, 2], 1: [2]})
    wait_for(lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 30, "the request's deletion")
    acked_at_move = len(load.acknowledged)
    wait_for(lambda: len(load.acknowledged) >= acked_at_move + 500, 60, "500 more records after the move")
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    assert cluster.state_of("moves", 0).leader == 1
    assert cluster.state_of("moves", 1).leader == 2
    wait_for(
        lambda: (
            not (cluster.broker(0).log_dir / "moves-0").exists()
            and not (cluster.broker(0).log_dir / "moves-1").exists()
            and not (cluster.broker(1).log_dir / "moves-1").exists()
        ),
        30,
        "the moved-away replicas' folders to be deleted",
    )
    check_every_acknowledged_record(read_partitions(cluster, "moves", 2), load, exactly_once=True)
    wait_for_identical_replicas(cluster, "moves", 0)


def test_reassignment_resumes_after_kill_9_of_the_controller_and_of_a_target(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    controller = cluster.controller_id()
    others = [b for b in range(3) if b != controller]
    source, target = others
    cluster.create_topic("resume", 1, {0: [source]})
    load = AckedProducer(cluster, "resume", 1).start()
    wait_for(lambda: len(load.acknowledged) >= 300, 60, "300 acknowledged records")
    cluster.broker(target).kill()
    wait_for(
        lambda: cluster.zk.exists(f"/brokers/ids/{target}") is None, 30, f"broker {target}'s session to end"
    )
    # the target is down: the move is refused (nothing changes) until it is back
    reassignment_store.request_reassignment(cluster.zk, {TopicPartition("resume", 0): (target, controller)})
    wait_for(
        lambda: cluster.zk.exists("/admin/reassign_partitions") is None, 30, "the refused request's removal"
    )
    assert cluster.admin.describe_topic("resume") == {0: (source,)}
    cluster.broker(target).restart()

    def started() -> bool:
        # asked again while refused: the controller may not have seen the restarted target register yet
        # (once on a busy CI machine it refused the request as it had the first)
        if b"adding_replicas" in cluster.zk.get("/brokers/topics/resume")[0]:
            return True
        if cluster.zk.exists("/admin/reassign_partitions") is None:
            reassignment_store.request_reassignment(
                cluster.zk, {TopicPartition("resume", 0): (target, controller)}
            )
        return False

    wait_for(started, 30, "the move to start")
    cluster.broker(controller).kill()
    cluster.broker(target).kill()
    time.sleep(1.0)
    cluster.broker(target).restart()
    cluster.broker(controller).restart()
    wait_for_assignment(cluster, "resume", {0: [target, controller]}, 90)
    assert load.stop() == 0
    assert load.fatal == []
    check_every_acknowledged_record(read_partitions(cluster, "resume", 1), load, exactly_once=True)
    wait_for(
        lambda: not (cluster.broker(source).log_dir / "resume-0").exists(), 30, "the old replica's deletion"
    )

"""kill -9 of the leader under an idempotent acks=all load (issue 19), three real broker processes on a real
ZooKeeper and unmodified confluent-kafka clients, once and twenty times (slow; a file of its own so that the
suite's workers spread it): each round waits for a new leader, restarts the killed broker and waits for the
full ISR (the brokers' ZooKeeper sessions are 2 s: each round waits one out); then every acknowledged record
is read back once, at its partition and offset, in order, and the replicas' segments are byte-identical."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import pytest

from tests.support.acked_producer import (
    REPLICATION,
    AckedProducer,
    check_every_acknowledged_record,
    new_leader,
    read_partitions,
    wait_for_identical_replicas,
)
from tests.support.broker_cluster import KILL_LOOP_SESSION_TIMEOUT_MS, BrokerCluster, wait_for

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def kill_leader_rounds(
    cluster: BrokerCluster, topic: str, rounds: int, rng: random.Random, producing: Callable[[], bool]
) -> list[tuple[int, int, float]]:
    """kill -9 partition 0's leader ``rounds`` times under load; each time wait for a new leader, restart
    the killed broker and wait for the full ISR. Returns (killed, elected, seconds to elect) per round."""
    rounds_seen = []
    for _ in range(rounds):
        time.sleep(rng.uniform(0.3, 1.0))
        assert producing(), "the producer stopped before the kill rounds ended"
        leader = cluster.leader_of(topic, 0)
        killed_at = time.monotonic()
        leader.kill()
        elected = new_leader(cluster, topic, 0, leader.broker_id)
        rounds_seen.append((leader.broker_id, elected.leader, time.monotonic() - killed_at))
        leader.start()
        cluster.wait_for_isr(topic, 0, [0, 1, 2], timeout_s=60)
    return rounds_seen


def _kill_the_leader(start_cluster: Callable[..., BrokerCluster], rounds: int, seed: int) -> None:
    cluster = start_cluster(
        3, min_insync_replicas=2, session_timeout_ms=KILL_LOOP_SESSION_TIMEOUT_MS, **REPLICATION
    )
    cluster.create_topic("ha", 3, replication_factor=3)
    load = AckedProducer(cluster, "ha", 3).start()
    wait_for(lambda: len(load.acknowledged) >= 500, 60, "500 acknowledged records before the first kill")
    try:
        seen = kill_leader_rounds(cluster, "ha", rounds, random.Random(seed), lambda: load.running)
    finally:
        unsent = load.stop()
    assert unsent == 0
    assert load.fatal == []
    assert load.errors == []
    assert len(seen) == rounds
    assert all(elected != killed for killed, elected, _s in seen)
    records = read_partitions(cluster, "ha", 3)
    check_every_acknowledged_record(records, load, exactly_once=True)
    assert len(load.acknowledged) == load.sent
    for p in range(3):
        cluster.wait_for_isr("ha", p, [0, 1, 2], timeout_s=60)
        wait_for_identical_replicas(cluster, "ha", p)


def test_kill_9_of_the_leader_loses_no_acknowledged_record(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    _kill_the_leader(start_cluster, rounds=2, seed=19)


@pytest.mark.slow
def test_twenty_kill_9s_of_the_leader_lose_and_duplicate_no_acknowledged_record(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    _kill_the_leader(start_cluster, rounds=20, seed=20)

"""Replication under faults as faults (issue 19), three real broker processes on a real ZooKeeper and
unmodified confluent-kafka clients: a leader paused past its session (SIGSTOP), a killed controller, SIGTERM
moving leadership first, a stopped follower not holding acks=all writes, preferred leader election putting
leadership back, and an ISR lost whole. kill -9 of the leader under load: test_replication_kill_leader.py.
After every fault every acknowledged record is read back, at the partition and offset it was acknowledged
with, in order, and with idempotence none twice; the replicas' segment files are byte-identical up to the high
watermark."""

from __future__ import annotations

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
from tests.support.broker_cluster import BROKER_SESSION_TIMEOUT_MS, BrokerCluster, wait_for
from tests.support.sigstop import pause, resume

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


def test_a_leader_paused_past_its_session_is_replaced_and_rejoins_as_a_follower(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, min_insync_replicas=2, **REPLICATION)
    cluster.create_topic("paused", 1, replication_factor=3)
    # a paused broker answers nothing and resets nothing: requests in flight to it wait out librdkafka's
    # socket.timeout.ms (60 s by default) before the producer moves on to the new leader
    load = AckedProducer(
        cluster, "paused", 1, settings={"socket.timeout.ms": 5000, "request.timeout.ms": 5000}
    ).start()
    wait_for(lambda: len(load.acknowledged) >= 300, 60, "300 acknowledged records")
    old = cluster.leader_of("paused", 0)
    pid = old.popen.pid if old.popen is not None else 0
    pause(pid)
    try:
        elected = new_leader(cluster, "paused", 0, old.broker_id)
        acked_at_election = len(load.acknowledged)
        wait_for(
            lambda: len(load.acknowledged) >= acked_at_election + 300, 60, "300 records on the new leader"
        )
    finally:
        resume(pid)
    cluster.wait_for_isr("paused", 0, [0, 1, 2], timeout_s=60)
    assert cluster.state_of("paused", 0).leader_epoch >= elected.leader_epoch
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    wait_for_identical_replicas(cluster, "paused", 0)
    check_every_acknowledged_record(read_partitions(cluster, "paused", 1), load, exactly_once=True)


def test_a_killed_controller_is_replaced_and_elections_keep_working(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("ctl", 3, replication_factor=3)
    controller = cluster.controller_id()
    assert controller in (0, 1, 2)
    started = time.monotonic()
    cluster.brokers[controller].kill()
    wait_for(
        lambda: cluster.controller_id() not in (-1, controller),
        BROKER_SESSION_TIMEOUT_MS / 1000 + 5,
        "a new controller within one session timeout",
    )
    assert time.monotonic() - started < BROKER_SESSION_TIMEOUT_MS / 1000 + 5
    for p in range(3):
        # a partition the dead controller only followed keeps its leader: the new controller takes the
        # dead broker out of its ISR a moment later (Kafka's onReplicasBecomeOffline), so wait for both
        state = cluster.wait_for_leader(
            "ctl", p, lambda s: s.leader not in (-1, controller) and controller not in s.isr
        )
        assert set(state.isr) == {0, 1, 2} - {controller}
    # the new controller elects too: kill another leader
    survivor = cluster.leader_of("ctl", 0)
    survivor.kill()
    last = cluster.wait_for_leader(
        "ctl", 0, lambda s: s.leader not in (-1, controller, survivor.broker_id), timeout_s=20
    )
    assert last.leader == ({0, 1, 2} - {controller, survivor.broker_id}).pop()


def test_sigterm_moves_leadership_first_so_no_request_fails(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("calm", 3, replication_factor=3)
    load = AckedProducer(cluster, "calm", 3).start()
    wait_for(lambda: len(load.acknowledged) >= 500, 60, "500 acknowledged records")
    leader = cluster.leader_of("calm", 0)
    leader.stop()  # SIGTERM: a controlled shutdown
    text = leader.log()
    assert "leadership moved to other replicas in" in text, text[-2000:]
    moved_ms = float(text.split("leadership moved to other replicas in ")[1].split(" ms")[0])
    assert moved_ms < 1000
    for p in range(3):
        assert cluster.state_of("calm", p).leader != leader.broker_id
    acked = len(load.acknowledged)
    wait_for(lambda: len(load.acknowledged) >= acked + 300, 60, "300 more records after the shutdown")
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    check_every_acknowledged_record(read_partitions(cluster, "calm", 3), load, exactly_once=True)


def test_a_stopped_follower_does_not_hold_acks_all_writes_until_its_lag_runs_out(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    # a follower that had caught up counts for the high watermark for replica_lag_time_max_ms (Kafka's
    # rule), but only while its broker may be in the ISR: stopped, it must not hold writes for 60 s
    cluster = start_cluster(3, **{**REPLICATION, "replica_lag_time_max_ms": 60_000})
    cluster.create_topic("held", 1, replication_factor=3)
    cluster.wait_for_isr("held", 0, [0, 1, 2])
    load = AckedProducer(
        cluster, "held", 1, settings={"message.timeout.ms": 20_000, "request.timeout.ms": 8_000}
    ).start()
    wait_for(lambda: len(load.acknowledged) >= 300, 60, "300 acknowledged records")
    leader = cluster.leader_of("held", 0)
    follower = next(b for b in cluster.brokers if b is not leader)
    follower.stop()  # SIGTERM: the controller takes it out of the ISR, then it deregisters
    acked = len(load.acknowledged)
    wait_for(lambda: len(load.acknowledged) >= acked + 300, 30, "300 more records after the follower stopped")
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    assert follower.broker_id not in cluster.state_of("held", 0).isr
    check_every_acknowledged_record(read_partitions(cluster, "held", 1), load, exactly_once=True)


def test_preferred_leader_election_puts_leadership_back(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(3, **REPLICATION)
    assignment = cluster.create_topic("pref", 1, replication_factor=3)
    preferred = assignment[0][0]
    cluster.brokers[preferred].stop()
    moved = cluster.wait_for_leader("pref", 0, lambda s: s.leader not in (-1, preferred))
    cluster.brokers[preferred].start()
    cluster.wait_for_isr("pref", 0, [0, 1, 2], timeout_s=60)
    assert cluster.state_of("pref", 0).leader == moved.leader
    cluster.admin.request_preferred_election(None)
    back = cluster.wait_for_leader("pref", 0, lambda s: s.leader == preferred, timeout_s=20)
    assert back.leader_epoch == moved.leader_epoch + 1


def test_an_isr_lost_whole_leaves_the_partition_offline_without_unclean_election(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("clean", 1, replication_factor=3)
    leader = cluster.leader_of("clean", 0)
    followers = [b for b in cluster.brokers if b is not leader]
    for b in followers:
        b.kill()
    cluster.wait_for_isr("clean", 0, [leader.broker_id], timeout_s=30)
    leader.kill()
    for b in followers:  # one of them becomes the controller (the leader may have been it)
        b.start()
    offline = cluster.wait_for_leader("clean", 0, lambda s: s.leader == -1, timeout_s=30)
    assert list(offline.isr) == [leader.broker_id]
    time.sleep(2)
    # the live replicas were not in the ISR: no unclean election
    assert cluster.state_of("clean", 0) == offline
    leader.start()
    back = cluster.wait_for_leader("clean", 0, lambda s: s.leader == leader.broker_id, timeout_s=30)
    assert back.leader_epoch == offline.leader_epoch + 1
    cluster.wait_for_isr("clean", 0, [0, 1, 2], timeout_s=30)

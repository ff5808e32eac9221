"""Replication end to end (issue 19): three real broker processes on a real ZooKeeper, unmodified
confluent-kafka clients: byte-identical replicas, a restarted follower catching up, min.insync.replicas,
acks=all waiting for the ISR, followers fetching through sessions, the metrics, and what a new leader answers
for the latest offset (KIP-207). The faults (kill -9, SIGSTOP past the session, SIGTERM, a lost ISR):
test_replication_faults.py. Every test counts what the producers were told was stored and what comes back; the
load and the checks: tests/support/acked_producer.py."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.protocol import ErrorCode
from broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.record.topic_partition import TopicPartition
from lumber.dev.process import free_port
from tests.broker.server.helpers import answered, batch, connect, offsets_in, produce, session_fetch
from tests.broker.server.test_broker_metrics import scrape
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

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


# ------------------------------------------------------------------------------------------------ tests


def test_three_replicas_hold_byte_identical_batches_and_metadata_reports_them(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    assignment = cluster.create_topic("orders", 2, replication_factor=3)
    assert all(sorted(replicas) == [0, 1, 2] for replicas in assignment.values())
    load = AckedProducer(cluster, "orders", 2).start()
    wait_for(lambda: len(load.acknowledged) >= 2000, 60, "2,000 acknowledged records")
    assert load.stop() == 0
    assert load.errors == []
    assert load.fatal == []
    for p in range(2):
        state = cluster.wait_for_isr("orders", p, [0, 1, 2])
        assert state.leader == assignment[p][0]
        stored = wait_for_identical_replicas(cluster, "orders", p)
        assert len(stored) > 0
    records = read_partitions(cluster, "orders", 2)
    assert len(records) == load.sent
    check_every_acknowledged_record(records, load, exactly_once=True)
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics("orders", timeout=10)
    for p in range(2):
        reported = metadata.topics["orders"].partitions[p]
        assert (reported.leader, list(reported.replicas), sorted(reported.isrs)) == (
            assignment[p][0],
            list(assignment[p]),
            [0, 1, 2],
        )
    assert metadata.controller_id in (0, 1, 2)


def test_too_few_live_brokers_for_the_replication_factor_is_refused_clearly(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic("wide", 1, 3)])
    with pytest.raises(Exception, match=r"INVALID_REPLICATION_FACTOR|replication factor") as info:
        futures["wide"].result(15)
    assert "3" in str(info.value)
    assert "wide" not in admin.list_topics(timeout=10).topics


def test_a_restarted_follower_catches_up_and_rejoins_the_isr_byte_for_byte(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("follow", 1, replication_factor=3)
    leader = cluster.leader_of("follow", 0).broker_id
    follower = cluster.brokers[(leader + 1) % 3]
    load = AckedProducer(cluster, "follow", 1).start()
    wait_for(lambda: len(load.acknowledged) >= 300, 60, "300 acknowledged records")
    follower.kill()
    shrunk = cluster.wait_for_isr("follow", 0, sorted({0, 1, 2} - {follower.broker_id}), timeout_s=30)
    assert shrunk.leader == leader
    acked_while_down = len(load.acknowledged)
    wait_for(
        lambda: len(load.acknowledged) >= acked_while_down + 500, 60, "500 more records with a follower down"
    )
    follower.start()
    cluster.wait_for_isr("follow", 0, [0, 1, 2], timeout_s=60)
    assert load.stop() == 0
    assert load.errors == []
    wait_for_identical_replicas(cluster, "follow", 0)
    check_every_acknowledged_record(read_partitions(cluster, "follow", 1), load, exactly_once=True)


def test_min_insync_replicas_refuses_acks_all_writes_with_nothing_appended(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(3, **REPLICATION)
    cluster.create_topic("strict", 1, replication_factor=3, configs={"min.insync.replicas": "2"})
    leader = cluster.leader_of("strict", 0)
    others = [b for b in cluster.brokers if b is not leader]
    for broker in others:
        broker.kill()
    cluster.wait_for_isr("strict", 0, [leader.broker_id], timeout_s=30)
    log_end_before = cluster.high_watermark("strict", 0)
    delivered: list[Any] = []
    p = ConfluentProducer(
        {
            "bootstrap.servers": leader.address,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "message.timeout.ms": 5000,
        }
    )
    p.produce("strict", b"refused", partition=0, on_delivery=lambda error, message: delivered.append(error))
    p.flush(15)
    assert len(delivered) == 1
    assert delivered[0] is not None
    assert delivered[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, delivered[0]
    assert cluster.high_watermark("strict", 0) == log_end_before
    # acks=1 still goes through: min.insync.replicas binds acks=all only
    ok: list[Any] = []
    p1 = ConfluentProducer({"bootstrap.servers": leader.address, "acks": 1, "enable.idempotence": False})
    p1.produce("strict", b"accepted", partition=0, on_delivery=lambda error, message: ok.append(error))
    p1.flush(15)
    assert ok == [None]
    wait_for(
        lambda: cluster.high_watermark("strict", 0) == log_end_before + 1, 10, "the acks=1 record exposed"
    )


def test_metrics_count_under_replicated_partitions_isr_expansions_and_the_controller(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(0)
    ports = [free_port() for _ in range(3)]
    for port in ports:
        cluster.add_broker({**REPLICATION, "metrics_port": port, "flush_on_ack": True})
    cluster.create_topic("metered", 1, replication_factor=3)
    leader = cluster.leader_of("metered", 0).broker_id
    follower = cluster.brokers[(leader + 1) % 3]
    load = AckedProducer(cluster, "metered", 1)
    load.start()
    wait_for(lambda: len(load.acknowledged) >= 100, 60, "100 acknowledged records")
    assert load.stop() == 0
    sent = load.sent
    scrapes = [scrape(port) for port in ports]
    messages_in = [
        s.get(("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "metered"),)), 0)
        for s in scrapes
    ]
    assert messages_in[leader] == sent
    assert sum(messages_in) == sent  # followers' copies are not messages in
    assert sum(s[("kafka_controller_kafkacontroller_activecontrollercount", ())] for s in scrapes) == 1
    assert scrapes[leader][("kafka_server_replicamanager_leadercount", ())] == 1
    assert scrapes[leader][("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    follower.kill()
    cluster.wait_for_isr("metered", 0, sorted({0, 1, 2} - {follower.broker_id}))
    assert scrape(ports[leader])[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 1
    expands_before = scrape(ports[leader])[("kafka_server_replicamanager_isrexpands_total", ())]
    follower.start()
    cluster.wait_for_isr("metered", 0, [0, 1, 2])
    after = scrape(ports[leader])
    assert after[("kafka_server_replicamanager_underreplicatedpartitions", ())] == 0
    assert after[("kafka_server_replicamanager_isrexpands_total", ())] == expands_before + 1


def test_followers_fetch_through_sessions_and_a_fetch_after_leadership_moved_is_told_so(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """Lumber's followers use fetch sessions (the leader's cache holds one per follower, with its
    partitions, idle ones included, and the records replicate byte for byte); after a preferred election
    moves one partition's leadership, a consumer's incremental fetch at the old leader answers
    NOT_LEADER_OR_FOLLOWER for that partition only, the followers' sessions follow the move, and acks=all
    writes on both partitions keep every replica identical."""
    cluster = start_cluster(0)
    ports = [free_port() for _ in range(2)]
    for port in ports:
        cluster.add_broker({**REPLICATION, "metrics_port": port, "flush_on_ack": True})
    cluster.create_topic("idle", 3, {0: [0, 1], 1: [0, 1], 2: [0, 1]}, replication_factor=2)
    cluster.create_topic("moving", 2, {0: [0, 1], 1: [1, 0]}, replication_factor=2)
    # moving-1 is led by broker 0 until its preferred replica, broker 1, is elected
    cluster.brokers[1].stop()
    cluster.wait_for_leader("moving", 1, lambda st: st.leader == 0)
    cluster.brokers[1].start()
    for topic, count in (("idle", 3), ("moving", 2)):
        for p in range(count):
            cluster.wait_for_isr(topic, p, [0, 1], timeout_s=60)
    sessions = ("kafka_server_fetchsessioncache_numincrementalfetchsessions", ())
    cached = ("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached", ())
    # broker 1's new fetcher holds its 5 partitions in a session at broker 0 (beside the session its
    # stopped fetcher left, which stays until evicted, as in Kafka); broker 1's cache is fresh
    wait_for(lambda: scrape(ports[0])[cached] >= 5, 30, "broker 1's session at broker 0")
    assert (scrape(ports[1])[sessions], scrape(ports[1])[cached]) == (0, 0)  # broker 0 follows nothing

    conn = connect(cluster.brokers[0])
    try:
        for p in range(2):
            assert produce(conn, "moving", p, batch(0, 20), acks=-1).base_offset == 0
        consumer = session_fetch(conn, 0, 0, {("moving", 0): 0, ("moving", 1): 0})
        got = answered(consumer)
        assert [offsets_in(got["moving", p].records) for p in range(2)] == [list(range(20))] * 2
        step = session_fetch(conn, consumer.session_id, 1, {("moving", 0): 20, ("moving", 1): 20})
        assert answered(step) == {}

        cluster.admin.request_preferred_election(None)
        cluster.wait_for_leader("moving", 1, lambda st: st.leader == 1, timeout_s=20)
        epoch = 2
        seen: dict[tuple[str, int], Any] = {}

        def told() -> bool:
            nonlocal epoch, seen
            seen = answered(session_fetch(conn, consumer.session_id, epoch))
            epoch += 1
            return bool(seen)

        wait_for(told, 20, "broker 0's incremental answer to change once it no longer leads moving-1")
        assert list(seen) == [("moving", 1)]
        assert seen["moving", 1].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        # the consumer forgets it here (and fetches it from broker 1)
        step = session_fetch(conn, consumer.session_id, epoch, forgotten={"moving": [1]})
        assert (step.error_code, answered(step)) == (0, {})
        epoch += 1
        # acks=all on both partitions after the move: at broker 0 for 0, at broker 1 for 1
        assert produce(conn, "moving", 0, batch(20, 30), acks=-1).base_offset == 20
        other = connect(cluster.brokers[1])
        try:
            # broker 1's own view may have the election a moment after broker 0's (and ZooKeeper's): until
            # then it answers NOT_LEADER_OR_FOLLOWER with nothing appended, and a client sends again
            deadline = time.monotonic() + 20
            while (moved_to := produce(other, "moving", 1, batch(20, 30), acks=-1)).error_code == int(
                ErrorCode.NOT_LEADER_OR_FOLLOWER
            ) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert moved_to.base_offset == 20
            moved = answered(session_fetch(other, 0, -1, {("moving", 1): 20}))
            assert offsets_in(moved["moving", 1].records) == list(range(20, 50))
        finally:
            other.close()
        step = session_fetch(conn, consumer.session_id, epoch)
        assert offsets_in(answered(step)["moving", 0].records) == list(range(20, 50))
    finally:
        conn.close()
    for p in range(2):
        wait_for_identical_replicas(cluster, "moving", p)
    # broker 0 follows moving-1 from broker 1 now, in a session
    wait_for(
        lambda: (scrape(ports[1])[sessions], scrape(ports[1])[cached]) == (1, 1),
        30,
        "broker 0's session at broker 1, holding moving-1",
    )


def test_acks_all_waits_for_the_isr_never_for_the_flush_timer(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """With the paper's exposure (``expose = "flushed"``) and a 10 s flush interval, acks=all on three
    replicas is answered once the followers have the batches, in milliseconds, not at the next flush."""
    cluster = start_cluster(3, flush_ms=10_000, flush_on_ack=False, expose="flushed", **REPLICATION)
    cluster.create_topic("prompt", 1, replication_factor=3)
    cluster.wait_for_isr("prompt", 0, [0, 1, 2])
    p = ConfluentProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    delivered: list[Any] = []
    started = time.monotonic()
    for i in range(20):
        p.produce(
            "prompt", b"r%d" % i, partition=0, on_delivery=lambda error, message: delivered.append(error)
        )
        assert p.flush(5) == 0
    took = time.monotonic() - started
    assert delivered == [None] * 20
    assert took < 5, f"20 acks=all writes took {took:.1f} s: they waited for the 10 s flush"


def test_a_new_leader_never_answers_a_latest_offset_below_what_was_acknowledged(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """KIP-207: followers learn the high watermark one fetch late (here up to 5 s: their fetches wait at the
    leader), so a follower elected leader may hold a high watermark below what the old leader exposed. Until
    its followers have fetched from it (here: the other follower is paused), it answers ListOffsets
    OFFSET_NOT_AVAILABLE rather than a latest offset that went back; then the acknowledged end."""
    cluster = start_cluster(3, replica_fetch_wait_max_ms=5000, replica_lag_time_max_ms=30_000)
    cluster.create_topic("kip207", 1, replication_factor=3)
    cluster.wait_for_isr("kip207", 0, [0, 1, 2])
    acked: list[Any] = []
    p = ConfluentProducer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
    for i in range(50):
        p.produce("kip207", b"r%d" % i, partition=0, on_delivery=lambda error, message: acked.append(error))
    assert p.flush(30) == 0
    assert acked == [None] * 50
    old = cluster.leader_of("kip207", 0)
    # the controller elects the first live ISR replica in assignment order: pause the other one
    first, second = (
        cluster.brokers[r] for r in cluster.admin.describe_topic("kip207")[0] if r != old.broker_id
    )
    paused = second.popen.pid if second.popen is not None else 0
    old.kill()  # at once: the followers' last fetch answers still carry an older high watermark
    time.sleep(BROKER_SESSION_TIMEOUT_MS / 1000 - 1.5)
    pause(paused)  # paused less than its session: it stays in the ISR, fetching nothing
    try:
        elected = new_leader(cluster, "kip207", 0, old.broker_id)
        assert elected.leader == first.broker_id
        leader = cluster.brokers[elected.leader]
        conn = connect(leader)
        try:
            # ZooKeeper names the new leader a moment before the broker's own view has it: until then it
            # answers NOT_LEADER_OR_FOLLOWER, and a client asks again (for at most 10 s here)
            deadline = time.monotonic() + 10
            latest = ListOffsetsTopic("kip207", [ListOffsetsPartition(partition_index=0, timestamp=-1)])
            while True:
                answer = conn.request(ListOffsetsRequest(replica_id=-1, topics=[latest]), version=6)
                found = answer.topics[0].partitions[0]
                if found.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        finally:
            conn.close()
    finally:
        resume(paused)
    # (0, 0) here was a ListOffsets read while the new leader's make_leader was half done (see
    # tests/broker/server/test_partition.py); the new leader's own account is printed if it comes back
    answer_of = (found.error_code, found.offset)
    if answer_of not in ((int(ErrorCode.OFFSET_NOT_AVAILABLE), -1), (0, 50)):
        story = [line for line in leader.log().splitlines() if "kip207" in line or "ERROR" in line]
        pytest.fail(f"latest offset {answer_of}; the new leader's log:\n" + "\n".join(story))
    tp = TopicPartition("kip207", 0)
    with Consumer(ConsumerConfig(bootstrap_servers=[first.address, second.address])) as consumer:
        assert consumer.end_offsets([tp])[tp] == 50

"""Replication end to end (issue 19): three real broker processes on a real ZooKeeper, unmodified
confluent-kafka clients, and faults as faults (kill -9, SIGSTOP past the session, SIGTERM).

After every fault the test counts what the producers were told was stored and what comes back: every
acknowledged record is read back, at the partition and offset it was acknowledged with, in order, and with
idempotence none twice; the replicas' segment files are byte-identical up to the high watermark.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.cluster.partition_state import PartitionState
from broker.protocol import ErrorCode
from broker.protocol.messages.list_offsets import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from broker.record.topic_partition import TopicPartition
from lumber.dev.process import free_port
from tests.broker.server.helpers import answered, batch, connect, offsets_in, produce, session_fetch
from tests.broker.server.test_broker_metrics import scrape
from tests.support.broker_cluster import BROKER_SESSION_TIMEOUT_MS, BrokerCluster, wait_for
from tests.support.sigstop import pause, resume

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import KafkaError
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

#: Short lag and fetch waits, so that ISR changes happen within a test's patience.
REPLICATION = {
    "replica_lag_time_max_ms": 3000,
    "replica_fetch_wait_max_ms": 200,
    "replica_fetch_backoff_ms": 200,
}


class AckedProducer:
    """An idempotent acks=all confluent-kafka producer on a thread, remembering each acknowledged value
    with its partition and offset."""

    def __init__(
        self,
        cluster: BrokerCluster,
        topic: str,
        partitions: int,
        *,
        idempotent: bool = True,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acknowledged: dict[bytes, tuple[int, int]] = {}
        self.errors: list[str] = []
        self.fatal: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = ConfluentProducer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "retry.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 1000,
                "error_cb": lambda error: self.fatal.append(str(error)) if error.fatal() else None,
                **(settings or {}),
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.errors.append(str(error))
        else:
            self.acknowledged[message.value()] = (message.partition(), message.offset())

    def _run(self) -> None:
        p = self._producer
        while not self._stop.is_set():
            value = b"v%07d" % self.sent
            try:
                p.produce(
                    self.topic, value, partition=self.sent % self.partitions, on_delivery=self._delivered
                )
            except BufferError:
                p.poll(0.05)
                continue
            self.sent += 1
            if self.sent % 20 == 0:
                p.poll(0.005)

    def start(self) -> AckedProducer:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self, flush_s: float = 120.0) -> int:
        """Stop producing; returns how many messages are still undelivered after the flush."""
        self._stop.set()
        self._thread.join(10)
        return int(self._producer.flush(flush_s))


def read_partitions(
    cluster: BrokerCluster, topic: str, partitions: int, timeout_s: float = 60.0
) -> list[Any]:
    """Every record of ``topic`` below each partition's high watermark, with confluent-kafka."""
    consumer = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": "replication-test-reader",  # librdkafka needs one; offsets are never committed
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        ends = {}
        for p in range(partitions):
            _low, high = consumer.get_watermark_offsets(ConfluentPartition(topic, p), timeout=10)
            ends[p] = high
        consumer.assign([ConfluentPartition(topic, p, 0) for p in range(partitions)])
        records: list[Any] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < partitions:
            assert time.monotonic() < deadline, (
                f"read {len(records)} records; partitions done: {sorted(done)}"
            )
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            partition, offset = int(message.partition() or 0), int(message.offset() or 0)
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if offset >= ends[partition]:
                        done.add(partition)
                    continue
                raise AssertionError(f"consumer error: {error}")
            records.append(message)
            if offset + 1 >= ends[partition]:
                done.add(partition)
        return records
    finally:
        consumer.close()


def check_every_acknowledged_record(records: list[Any], load: AckedProducer, *, exactly_once: bool) -> None:
    """Every acknowledged value is read back at its acknowledged partition and offset, in order per
    partition; with ``exactly_once`` no value is stored twice."""
    counts = Counter(r.value() for r in records)
    if exactly_once:
        duplicated = {v: n for v, n in counts.items() if n > 1}
        assert duplicated == {}, f"{len(duplicated)} values stored twice, e.g. {list(duplicated)[:5]}"
    where = {r.value(): (r.partition(), r.offset()) for r in records}
    lost = sorted(v for v in load.acknowledged if v not in where)
    assert lost == [], f"{len(lost)} of {len(load.acknowledged)} acknowledged records lost, e.g. {lost[:5]}"
    moved = {
        v: (load.acknowledged[v], where[v]) for v in load.acknowledged if load.acknowledged[v] != where[v]
    }
    assert moved == {}, (
        f"{len(moved)} records not where they were acknowledged, e.g. {list(moved.items())[:5]}"
    )
    for p in range(load.partitions):
        acked = sorted((offset, value) for value, (part, offset) in load.acknowledged.items() if part == p)
        assert [v for _o, v in acked] == sorted(v for _o, v in acked), f"partition {p}: out of order"


def segment_bytes(log_dir: Path, topic: str, partition: int) -> bytes:
    """Every ``.log`` segment of the partition, concatenated in offset order."""
    folder = log_dir / f"{topic}-{partition}"
    return b"".join(path.read_bytes() for path in sorted(folder.glob("*.log")))


def wait_for_identical_replicas(
    cluster: BrokerCluster, topic: str, partition: int, timeout_s: float = 30.0
) -> bytes:
    """Wait until every replica's segments are byte-identical; returns them."""
    replicas = cluster.admin.describe_topic(topic)[partition]
    seen: list[int] = []

    def identical() -> bool:
        contents = [segment_bytes(cluster.brokers[r].log_dir, topic, partition) for r in replicas]
        seen[:] = [len(c) for c in contents]
        return len(set(contents)) == 1

    wait_for(
        identical,
        timeout_s,
        f"{topic}-{partition}'s replicas {list(replicas)} to hold the same bytes ({seen})",
    )
    return segment_bytes(cluster.brokers[replicas[0]].log_dir, topic, partition)


def new_leader(cluster: BrokerCluster, topic: str, partition: int, old: int) -> PartitionState:
    return cluster.wait_for_leader(
        topic, partition, lambda s: s.leader not in (-1, old), timeout_s=BROKER_SESSION_TIMEOUT_MS / 1000 + 15
    )


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
    cluster = start_cluster(3, min_insync_replicas=2, **REPLICATION)
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
            assert produce(other, "moving", 1, batch(20, 30), acks=-1).base_offset == 20
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

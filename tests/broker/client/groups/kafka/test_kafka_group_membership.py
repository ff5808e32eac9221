"""broker/client/groups/kafka/kafka_group_membership.py (with its bases kafka_coordinator_link.py,
kafka_group_offsets.py and kafka_group_rebalance.py) against real broker processes (their group coordinator)
and a real ZooKeeper: Lumber members with ``[group] protocol = "kafka"`` share a topic without overlap, hand
their partitions over with their offsets committed when they leave, and share a group with a confluent-kafka
consumer in another process."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import GroupClosedError, GroupError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.groups.kafka.kafka_group_admin import KafkaGroupAdmin
from broker.record.topic_partition import TopicPartition
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from tests.broker.client.groups.group_helpers import MemberApp, consumed, member, produce, wait_consumed
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster, servers, wait_for
from tests.support.sigstop import pause, resume

TOPIC = "events"
PARTITIONS = 6
#: The coordinator starts a group's first rebalance at once, and accepts the tests' short sessions.
ROOT = Path(__file__).resolve().parents[5]
GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}


def kafka_member(cluster: BrokerCluster, group: str, **settings: Any) -> GroupConsumer:
    settings.setdefault("session_timeout_ms", 6000)
    settings.setdefault("heartbeat_interval_ms", 100)
    settings.setdefault("max_poll_interval_ms", 20_000)
    return member(cluster, group, protocol="kafka", **settings)


def committed(cluster: BrokerCluster, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets, as the coordinator answers OffsetFetch (via Lumber's admin)."""
    with KafkaGroupAdmin(servers(cluster)) as admin:
        found = admin.committed(group, [TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: offset for tp, offset in sorted(found.items())}


def settled(members: list[GroupConsumer], partitions: int) -> bool:
    """Every member is in the same generation and their assignments split the topic exactly."""
    generations = {m.generation_id for m in members}
    owned = [tp for m in members for tp in m.assignment()]
    return len(generations) == 1 and -1 not in generations and len(owned) == len(set(owned)) == partitions


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_two_members_share_a_topic_and_a_clean_leave_hands_over_committed(
    start_cluster: Any, strategy: str
) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 40)
    first = MemberApp(kafka_member(cluster, "kg", partition_assignment_strategy=strategy), 0).start([TOPIC])
    wait_consumed([first], {(p, o) for p in range(PARTITIONS) for o in range(40)}, 30)
    second = MemberApp(kafka_member(cluster, "kg", partition_assignment_strategy=strategy), 1).start([TOPIC])
    apps = [first, second]
    wait_for(lambda: settled([first.member, second.member], PARTITIONS), 30, "two members to settle")
    assert first.member.generation_id == 2  # one rebalance for the second member
    # Kafka's assignors over the members sorted by id: range cuts chunks, roundrobin deals in turn
    low, high = sorted([first.member, second.member], key=lambda m: m.member_id)
    expected = {"range": ([0, 1, 2], [3, 4, 5]), "roundrobin": ([0, 2, 4], [1, 3, 5])}[strategy]
    assert ([tp.partition for tp in low.assignment()], [tp.partition for tp in high.assignment()]) == expected
    produce(cluster, TOPIC, PARTITIONS, 40, start=40)
    wait_consumed(apps, {(p, o) for p in range(PARTITIONS) for o in range(80)}, 30)
    # the second member got only partitions the first had committed: nothing consumed twice
    seen = collections.Counter((p, o) for p, o, _ in consumed(apps))
    assert [key for key, n in seen.items() if n > 1] == []
    assert {(p, i) for p, _, i in second.records} == {(tp.partition, 1) for tp in second.member.assignment()}

    leaving = sorted(tp.partition for tp in first.member.assignment())
    first.leave()
    # the first member committed its partitions' consumed positions before leaving
    offsets = committed(cluster, "kg", TOPIC, PARTITIONS)
    assert [offsets[p] for p in leaving] == [80] * 3
    wait_for(
        lambda: len(second.member.assignment()) == PARTITIONS, 30, "the survivor to take every partition"
    )
    assert second.member.generation_id == 3
    produce(cluster, TOPIC, PARTITIONS, 40, start=80)
    wait_consumed(apps, {(p, o) for p in range(PARTITIONS) for o in range(120)}, 30)
    second.leave()
    assert second.errors == first.errors == []
    seen = collections.Counter((p, o) for p, o, _ in consumed(apps))
    assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(120)]
    assert [key for key, n in seen.items() if n > 1] == []  # every record exactly once
    assert {i for p, o, i in consumed(apps) if o >= 80} == {1}
    assert committed(cluster, "kg", TOPIC, PARTITIONS) == dict.fromkeys(range(PARTITIONS), 120)


CONFLUENT_MEMBER = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import Consumer
    servers, group, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 100, "partition.assignment.strategy": "range"})
    def on_assign(c, partitions):
        print("assigned", ",".join(str(p.partition) for p in partitions), flush=True)
    consumer.subscribe([topic], on_assign=on_assign)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None or message.error():
            continue
        consumer.commit(message, asynchronous=False)
        print("record", message.partition(), message.offset(), flush=True)
    """
)


class ConfluentMember:
    """A confluent-kafka consumer of the group in its own process; what it prints is read by a thread:
    each assignment it was given, and each record it consumed (printed once committed)."""

    def __init__(self, cluster: BrokerCluster, group: str) -> None:
        self.assignments: list[list[int]] = []
        self.records: list[tuple[int, int]] = []
        self._process = subprocess.Popen(
            [sys.executable, "-c", CONFLUENT_MEMBER, cluster.bootstrap_servers, group, TOPIC],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            kind, _, rest = line.strip().partition(" ")
            if kind == "assigned":
                self.assignments.append([int(p) for p in rest.split(",") if p])
            elif kind == "record":
                partition, offset = rest.split()
                self.records.append((int(partition), int(offset)))

    def kill(self) -> None:
        self._process.kill()
        self._process.wait()
        self._reader.join(10)
        if self._process.stdout is not None:
            self._process.stdout.close()


@pytest.mark.parametrize("first", ["lumber", "confluent-kafka"])
def test_a_lumber_member_and_a_confluent_kafka_consumer_share_a_group(start_cluster: Any, first: str) -> None:
    """Whoever joins first leads the group and assigns the partitions: the other decodes its bytes."""
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 30)
    everything = {(p, o) for p in range(PARTITIONS) for o in range(30)}
    lumber: MemberApp | None = None
    foreign: ConfluentMember | None = None
    try:
        if first == "lumber":
            lumber = MemberApp(kafka_member(cluster, "mixed"), 0).start([TOPIC])
            wait_consumed([lumber], everything, 30)
            foreign = ConfluentMember(cluster, "mixed")
        else:
            foreign = ConfluentMember(cluster, "mixed")
            wait_for(
                lambda: set(foreign.records) >= everything, 60, "the confluent-kafka consumer to read all"
            )
            lumber = MemberApp(kafka_member(cluster, "mixed"), 0).start([TOPIC])
        wait_for(
            lambda: (
                len(foreign.assignments) >= 1 + (first != "lumber")
                and len(foreign.assignments[-1]) == 3
                and len(lumber.member.assignment()) == 3
            ),
            60,
            "the group to rebalance to 3 partitions each",
        )
        assigned = foreign.assignments[-1]
        mine = sorted(tp.partition for tp in lumber.member.assignment())
        assert sorted(mine + assigned) == list(range(PARTITIONS))  # no overlap, nothing left out
        produce(cluster, TOPIC, PARTITIONS, 30, start=30)
        wait_consumed([lumber], {(p, o) for p in mine for o in range(30, 60)}, 30)
        expected = {(p, o) for p in assigned for o in range(30, 60)}
        wait_for(lambda: set(foreign.records) >= expected, 30, "the confluent-kafka consumer's records")
    finally:
        if foreign is not None:
            foreign.kill()
        if lumber is not None:
            lumber.leave()
    # each started where the other had committed: no record read by both, none left out
    seen = collections.Counter([(p, o) for p, o, _ in lumber.records] + foreign.records)
    assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(60)]
    assert [key for key, n in seen.items() if n > 1] == []
    assert lumber.errors == []


def test_a_static_member_restarts_into_its_partitions_without_a_rebalance(start_cluster: Any) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 20)
    leader = MemberApp(kafka_member(cluster, "static", group_instance_id="leader-1"), 0).start([TOPIC])
    follower = MemberApp(kafka_member(cluster, "static", group_instance_id="follower-1"), 1).start([TOPIC])
    wait_for(
        lambda: settled([leader.member, follower.member], PARTITIONS), 30, "two static members to settle"
    )
    wait_consumed([leader, follower], {(p, o) for p in range(PARTITIONS) for o in range(20)}, 30)
    kept = follower.member.assignment()
    follower.leave()  # a static member commits but does not leave: the group waits for it
    assert leader.member.generation_id == 2
    produce(cluster, TOPIC, PARTITIONS, 20, start=20)
    again = MemberApp(kafka_member(cluster, "static", group_instance_id="follower-1"), 2).start([TOPIC])
    wait_for(lambda: again.member.assignment() == kept, 30, "the restarted member to get its partitions back")
    wait_consumed([leader, again], {(p, o) for p in range(PARTITIONS) for o in range(40)}, 30)
    assert (leader.member.generation_id, again.member.generation_id) == (2, 2)  # no rebalance
    again.leave()
    leader.leave()
    apps = [leader, follower, again]
    seen = collections.Counter((p, o) for p, o, _ in consumed(apps))
    assert [key for key, n in seen.items() if n > 1] == []
    assert {(p, o) for p, o, _ in again.records} == {(tp.partition, o) for tp in kept for o in range(20, 40)}
    assert leader.errors == follower.errors == again.errors == []


def test_streams_of_a_kafka_member_split_its_partitions_and_seek(start_cluster: Any) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 10)
    with kafka_member(cluster, "streams") as m:
        streams = m.create_message_streams({TOPIC: 2})[TOPIC]
        got: list[set[tuple[int, int]]] = [set(), set()]
        deadline = time.monotonic() + 30
        while sum(len(g) for g in got) < PARTITIONS * 10:
            assert time.monotonic() < deadline, f"only {[len(g) for g in got]} records"
            for number, stream in enumerate(streams):
                got[number] |= {(r.partition, r.offset) for r in stream.poll(timeout_ms=50)}
        assert m.target() == {TopicPartition(TOPIC, p): p // 3 for p in range(PARTITIONS)}
        assert got == [{(p, o) for p in range(3 * n, 3 * n + 3) for o in range(10)} for n in range(2)]
        # Kafka's seek: this member's own partitions, from where the seek put them
        assert m.seek_to_beginning() == {TopicPartition(TOPIC, p): 0 for p in range(PARTITIONS)}
        again: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(again) < PARTITIONS * 10:
            assert time.monotonic() < deadline, f"only {len(again)} records after the seek"
            for stream in streams:
                again.extend((r.partition, r.offset) for r in stream.poll(timeout_ms=50))
        assert sorted(again) == [(p, o) for p in range(PARTITIONS) for o in range(10)]


def test_the_coordinators_broker_killed_members_go_on_from_committed_offsets(start_cluster: Any) -> None:
    # a follower that stops fetching leaves the ISR after 3 s, so the survivors soon make progress
    cluster = start_cluster(
        3,
        **GROUP_SETTINGS,
        replica_lag_time_max_ms=3000,
        replica_fetch_wait_max_ms=200,
        replica_fetch_backoff_ms=200,
    )
    cluster.create_topic(TOPIC, PARTITIONS, replication_factor=3)
    produce(cluster, TOPIC, PARTITIONS, 50)
    apps = [MemberApp(kafka_member(cluster, "failover"), i).start([TOPIC]) for i in range(2)]
    wait_for(lambda: settled([a.member for a in apps], PARTITIONS), 60, "two members to settle")
    wait_consumed(apps, {(p, o) for p in range(PARTITIONS) for o in range(50)}, 60)
    wait_for(lambda: set(committed(cluster, "failover", TOPIC, PARTITIONS).values()) == {50}, 30, "commits")
    number = partition_for("failover", OFFSETS_TOPIC_PARTITIONS)
    assert len(cluster.state_of(OFFSETS_TOPIC, number).isr) == 3
    coordinator = cluster.leader_of(OFFSETS_TOPIC, number)
    assert {a.member.coordinator.node_id for a in apps if a.member.coordinator} == {coordinator.broker_id}
    coordinator.kill()  # kill -9 of the coordinator's broker
    cluster.wait_for_leader(OFFSETS_TOPIC, number, lambda s: s.leader not in (-1, coordinator.broker_id))
    produce(cluster, TOPIC, PARTITIONS, 50, start=50)
    wait_consumed(apps, {(p, o) for p in range(PARTITIONS) for o in range(100)}, 90)
    wait_for(
        lambda: set(committed(cluster, "failover", TOPIC, PARTITIONS).values()) == {100}, 60, "commits after"
    )
    moved = {a.member.coordinator.node_id for a in apps if a.member.coordinator}
    assert moved == {cluster.state_of(OFFSETS_TOPIC, number).leader}  # both found the new coordinator
    for app in apps:
        app.leave()
    assert [app.errors for app in apps] == [[], []]
    seen = collections.Counter((p, o) for p, o, _ in consumed(apps))
    # nothing committed before the kill was lost: none of those records was delivered again
    assert [key for key, n in seen.items() if n > 1 and key[1] < 50] == []
    assert sorted(seen) == [(p, o) for p in range(PARTITIONS) for o in range(100)]


def test_the_leader_assigns_a_subscribed_topic_created_later(start_cluster: Any) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, 2)
    produce(cluster, TOPIC, 2, 5)
    app = MemberApp(kafka_member(cluster, "later", consumer_settings={"metadata_max_age_ms": 300}), 0).start(
        [TOPIC, "later"]
    )
    wait_consumed([app], {(p, o) for p in range(2) for o in range(5)}, 30)
    assert (app.member.generation_id, app.member.assignment()) == (
        1,
        [TopicPartition(TOPIC, p) for p in range(2)],
    )
    cluster.create_topic("later", 2)
    produce(cluster, "later", 2, 5)
    wait_for(lambda: len(app.member.assignment()) == 4, 30, "the new topic's partitions to be assigned")
    assert app.member.generation_id == 2
    wait_for(lambda: len(app.records) >= 20, 30, "the new topic's records")
    app.leave()
    assert app.errors == []
    assert sorted((p, o) for p, o, _ in app.records) == sorted(
        [(p, o) for p in range(2) for o in range(5)] * 2
    )
    assert committed(cluster, "later", "later", 2) == committed(cluster, "later", TOPIC, 2) == {0: 5, 1: 5}


def test_a_member_stopped_past_its_session_is_dropped_and_joins_again(
    start_cluster: Any, tmp_path: Path
) -> None:
    """SIGSTOP a member (its own process) for longer than its session: the coordinator drops it and the
    survivor takes its partitions from their committed offsets; after SIGCONT it learns it was dropped
    (UNKNOWN_MEMBER_ID), commits nothing stale, and joins again."""
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, 2)
    produce(cluster, TOPIC, 2, 20)
    out = tmp_path / "stopped.out"
    with (tmp_path / "stopped.log").open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-m", "tests.broker.client.groups.group_member_process",
                "--zookeeper", cluster.zk_connect, "--servers", cluster.bootstrap_servers,
                "--group", "stopped", "--topic", TOPIC, "--prefix", "proc", "--out", str(out),
                "--protocol", "kafka", "--session-timeout-ms", "2000",
            ],
            cwd=ROOT,
            stderr=log,
        )  # fmt: skip
    admin = KafkaGroupAdmin(servers(cluster))
    try:
        wait_for(lambda: len(read_output(out)) == 40, 30, "the process to consume the first records")
        survivor = MemberApp(kafka_member(cluster, "stopped"), 0).start([TOPIC])
        wait_for(lambda: len(survivor.member.assignment()) == 1, 30, "a partition for the second member")
        before = survivor.member.generation_id
        pause(process.pid)
        try:
            produce(cluster, TOPIC, 2, 20, start=20)
            wait_for(
                lambda: len(survivor.member.assignment()) == 2, 30, "the survivor to take both partitions"
            )
            assert survivor.member.generation_id > before  # the coordinator dropped the stopped member
            wait_consumed([survivor], {(p, o) for p in range(2) for o in range(20, 40)}, 30)
        finally:
            resume(process.pid)
        wait_for(lambda: len(survivor.member.assignment()) == 1, 30, "the resumed member to join again")
        members = admin.describe("stopped").members
        assert sorted(tp.partition for m in members for tp in m.assignment) == [0, 1]  # no overlap
        produce(cluster, TOPIC, 2, 20, start=40)
        expected = {(p, o) for p in range(2) for o in range(60)}
        wait_for(
            lambda: {(p, o) for p, o, _ in survivor.records} | set(read_output(out)) >= expected,
            30,
            "every record",
        )
        process.terminate()  # a clean leave: commits what it wrote
        assert process.wait(30) == 0
        survivor.leave()
        assert survivor.errors == []
        offsets = admin.committed("stopped", [TopicPartition(TOPIC, p) for p in range(2)])
        assert offsets == {TopicPartition(TOPIC, p): 60 for p in range(2)}
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        admin.close()


def read_output(path: Path) -> list[tuple[int, int]]:
    """The records a member process wrote, ``<partition> <offset>`` per line."""
    lines = path.read_bytes().split(b"\n") if path.exists() else []
    return [(int(p), int(o)) for p, o in (line.split() for line in lines if line.count(b" ") == 1)]


def poll_for(m: GroupConsumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        m.poll(timeout_ms=100)


def test_a_static_member_fenced_by_its_instance_id_stops_and_says_so(start_cluster: Any) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, 2)
    produce(cluster, TOPIC, 2, 5)
    with kafka_member(cluster, "fenced", group_instance_id="same") as old:
        old.subscribe(TOPIC)
        wait_for(lambda: len(old.assignment()) == 2, 30, "the first member's partitions")
        with kafka_member(cluster, "fenced", group_instance_id="same") as new:
            new.subscribe(TOPIC)  # takes the instance id over: the coordinator fences the old member
            wait_for(lambda: len(new.assignment()) == 2, 30, "the new member to take the partitions")
            with pytest.raises(GroupClosedError, match="Heartbeat failed: FENCED_INSTANCE_ID"):
                poll_for(old, 30)
            records: list[tuple[int, int]] = []
            deadline = time.monotonic() + 30
            while len(records) < 10 and time.monotonic() < deadline:
                records.extend((r.partition, r.offset) for r in new.poll(timeout_ms=100))
            assert sorted(records) == [(p, o) for p in range(2) for o in range(5)]


def test_a_group_consumer_needs_a_way_to_the_cluster() -> None:
    with pytest.raises(GroupError, match="needs zookeeper_connect"):
        GroupConsumer("g")
    with pytest.raises(GroupError, match="needs zookeeper_connect"):
        GroupConsumer("g", config=GroupConfig(protocol="kafka"))
    brokers_only = ConsumerConfig(bootstrap_servers=["127.0.0.1:9092"])
    GroupConsumer("g", config=GroupConfig(protocol="kafka"), consumer_config=brokers_only).close()


def read_until(m: GroupConsumer, into: list[tuple[int, int]], done: Callable[[], bool], what: str) -> None:
    """Poll ``m`` (keeping its records) until ``done()``."""

    def step() -> bool:
        into.extend((r.partition, r.offset) for r in m.poll(timeout_ms=50))
        return done()

    wait_for(step, 30, what)


def test_a_member_not_polled_for_max_poll_interval_leaves_and_joins_again_when_polled(
    start_cluster: Any,
) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 10)
    busy = MemberApp(kafka_member(cluster, "slow"), 0).start([TOPIC])
    stuck = kafka_member(cluster, "slow", max_poll_interval_ms=3000)
    stuck.subscribe(TOPIC)
    held: list[tuple[int, int]] = []
    read_until(stuck, held, lambda: settled([busy.member, stuck], PARTITIONS), "two members to settle")
    mine = stuck.assignment()
    generation = stuck.generation_id
    # the application stops reading: after max_poll_interval_ms the member leaves, its partitions move
    wait_for(
        lambda: len(busy.member.assignment()) == PARTITIONS, 30, "the busy member to take every partition"
    )
    assert stuck.assignment() == []
    assert busy.member.generation_id == generation + 1
    produce(cluster, TOPIC, PARTITIONS, 10, start=10)
    wait_consumed([busy], {(tp.partition, o) for tp in mine for o in range(10, 20)}, 30)
    # reading again, it joins again and gets its share
    read_until(stuck, held, lambda: settled([busy.member, stuck], PARTITIONS), "the member to join again")
    assert busy.member.generation_id == generation + 2
    stuck.close()
    busy.leave()
    assert busy.errors == []
    everything = [(p, o) for p, o, _ in busy.records] + held
    assert set(everything) == {(p, o) for p in range(PARTITIONS) for o in range(20)}

"""broker/client/kafka_group_membership.py against real broker processes (their group coordinator) and a
real ZooKeeper: Lumber members with ``[group] protocol = "kafka"`` share a topic without overlap, hand their
partitions over with their offsets committed when they leave, and share a group with a confluent-kafka
consumer in another process."""

from __future__ import annotations

import collections
import subprocess
import sys
import textwrap
import time
from typing import Any

from broker.client.group_consumer import GroupConsumer
from broker.record.topic_partition import TopicPartition
from tests.broker.client.group_helpers import MemberApp, consumed, member, produce, wait_consumed
from tests.support.broker_cluster import BrokerCluster, servers, wait_for

TOPIC = "events"
PARTITIONS = 6
#: The coordinator starts a group's first rebalance at once, and accepts the tests' short sessions.
GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}


def kafka_member(cluster: BrokerCluster, group: str, **settings: Any) -> GroupConsumer:
    settings.setdefault("session_timeout_ms", 6000)
    settings.setdefault("heartbeat_interval_ms", 100)
    settings.setdefault("max_poll_interval_ms", 20_000)
    return member(cluster, group, protocol="kafka", **settings)


def committed(cluster: BrokerCluster, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """The group's committed offsets, as the coordinator answers OffsetFetch (via Lumber's admin)."""
    from broker.client.kafka_group_admin import KafkaGroupAdmin  # noqa: PLC0415

    with KafkaGroupAdmin(servers(cluster)) as admin:
        found = admin.committed(group, [TopicPartition(topic, p) for p in range(partitions)])
    return {tp.partition: offset for tp, offset in sorted(found.items())}


def settled(members: list[GroupConsumer], partitions: int) -> bool:
    """Every member is in the same generation and their assignments split the topic exactly."""
    generations = {m.generation_id for m in members}
    owned = [tp for m in members for tp in m.assignment()]
    return len(generations) == 1 and -1 not in generations and len(owned) == len(set(owned)) == partitions


def test_two_members_share_a_topic_and_a_clean_leave_hands_over_committed(
    start_cluster: Any,
) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 40)
    first = MemberApp(kafka_member(cluster, "kg"), 0).start([TOPIC])
    wait_consumed([first], {(p, o) for p in range(PARTITIONS) for o in range(40)}, 30)
    second = MemberApp(kafka_member(cluster, "kg"), 1).start([TOPIC])
    apps = [first, second]
    wait_for(lambda: settled([first.member, second.member], PARTITIONS), 30, "two members to settle")
    assert first.member.generation_id == 2  # one rebalance for the second member
    assert len(first.member.assignment()) == len(second.member.assignment()) == 3
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
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None or message.error():
            continue
        print("record", message.partition(), message.offset(), flush=True)
        consumer.commit(message, asynchronous=False)
    """
)


def test_a_lumber_member_and_a_confluent_kafka_consumer_share_a_group(start_cluster: Any) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    cluster.create_topic(TOPIC, PARTITIONS)
    produce(cluster, TOPIC, PARTITIONS, 30)
    lumber = MemberApp(kafka_member(cluster, "mixed"), 0).start([TOPIC])
    wait_consumed([lumber], {(p, o) for p in range(PARTITIONS) for o in range(30)}, 30)
    foreign = subprocess.Popen(
        [sys.executable, "-c", CONFLUENT_MEMBER, cluster.bootstrap_servers, "mixed", TOPIC],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert foreign.stdout is not None
        assigned: list[int] = []
        while not assigned:
            line = foreign.stdout.readline()
            assert line, "the confluent-kafka consumer exited before it was assigned partitions"
            if line.startswith("assigned ") and line.strip() != "assigned":
                assigned = [int(p) for p in line.split()[1].split(",")]
        wait_for(lambda: len(lumber.member.assignment()) == PARTITIONS - len(assigned), 30, "the rebalance")
        mine = sorted(tp.partition for tp in lumber.member.assignment())
        assert sorted(mine + assigned) == list(range(PARTITIONS))  # no overlap, nothing left out
        produce(cluster, TOPIC, PARTITIONS, 30, start=30)
        wait_consumed([lumber], {(p, o) for p in mine for o in range(60)}, 30)
        theirs: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while len(theirs) < 30 * len(assigned):
            assert time.monotonic() < deadline, f"the confluent-kafka consumer read {len(theirs)} records"
            line = foreign.stdout.readline()
            if line.startswith("record "):
                _, partition, offset = line.split()
                theirs.append((int(partition), int(offset)))
    finally:
        foreign.kill()
        foreign.wait()
        if foreign.stdout is not None:
            foreign.stdout.close()
    lumber.leave()
    # the foreign consumer started where the Lumber member had committed: no record read by both
    assert sorted(theirs) == [(p, o) for p in sorted(assigned) for o in range(30, 60)]
    lumber_after = {(p, o) for p, o, _ in lumber.records if o >= 30}
    assert lumber_after == {(p, o) for p in mine for o in range(30, 60)}
    assert lumber.errors == []

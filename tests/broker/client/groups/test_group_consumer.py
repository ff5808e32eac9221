"""broker/client/groups/group_consumer.py against real ZooKeeper and real brokers: the API, the handover
(property 3 of issue 5), the fence on expired members (property 4), offset resets, rewinds and a broker
restart."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooState

from broker.client.consumer.fetched_batch import FetchedBatch
from broker.client.consumer.message_stream import MessageStream
from broker.client.errors import CommitFailedError, GroupClosedError, GroupError
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.groups.rebalance_listener import RebalanceListener
from broker.client.groups.zookeeper.group_membership import GroupMembership
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition
from tests.broker.client.groups.group_helpers import (
    MemberApp,
    consumed,
    member,
    produce,
    wait_consumed,
    wait_settled,
)
from tests.broker.client.helpers import producer
from tests.support.group_invariants import settled
from tests.support.zookeeper import expire_session

TOPIC = "events"


def drive(
    members: list[GroupConsumer],
    until: Callable[[dict[int, list[tuple[int, int]]]], bool],
    timeout_s: float = 20,
) -> dict[int, list[tuple[int, int]]]:
    """Poll every member in turn from this thread until ``until(records by member index)``."""
    got: dict[int, list[tuple[int, int]]] = {i: [] for i in range(len(members))}
    deadline = time.monotonic() + timeout_s
    while not until(got):
        assert time.monotonic() < deadline, (
            f"not done within {timeout_s} s: { ({i: len(r) for i, r in got.items()}) }"
        )
        for i, m in enumerate(members):
            got[i].extend((r.partition, r.offset) for r in m.poll(timeout_ms=20))
    return got


def offset_of(zk: Any, group: str, partition: int, topic: str = TOPIC) -> int | None:
    path = zk_paths.group_offset_path(group, topic, partition)
    if zk.exists(path) is None:
        return None
    return int(json.loads(zk.get(path)[0])["offset"])


def test_a_member_stops_fetching_and_commits_before_it_releases(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, 4)
    produce(broker_cluster, TOPIC, 4, 25)
    zk = broker_cluster.zk
    seen_at_revoke: list[Any] = []

    class Recorder(RebalanceListener):
        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            owners = [
                json.loads(zk.get(zk_paths.group_owner_path("g", tp.topic, tp.partition))[0])["owner"]
                for tp in partitions
            ]
            offsets = [offset_of(zk, "g", tp.partition) for tp in partitions]
            seen_at_revoke.append((partitions, first.fetching(), owners, offsets))

    first = member(broker_cluster, "g", listener=Recorder(), member_id_prefix="a", auto_commit_enable=False)
    second = member(broker_cluster, "g", member_id_prefix="b", auto_commit_enable=False)
    try:
        first.subscribe(TOPIC)
        got = drive([first], lambda g: len(g[0]) == 100)
        assert first.is_leader
        assert sorted(got[0]) == [(p, o) for p in range(4) for o in range(25)]
        second.subscribe([TOPIC])
        wait_settled_driving([first, second], broker_cluster)
        first_id = first.member_id
        # at revocation: fetching had stopped, nothing committed yet, still the owner
        assert seen_at_revoke == [
            (
                [TopicPartition(TOPIC, 2), TopicPartition(TOPIC, 3)],
                {TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)},
                [first_id, first_id],
                [None, None],
            )
        ]
        # then committed exactly what was consumed, and released; nothing else was committed
        assert [offset_of(zk, "g", p) for p in range(4)] == [None, None, 25, 25]
        for p in (2, 3):
            committed = zk.exists(zk_paths.group_offset_path("g", TOPIC, p))
            owner_data, owner = zk.get(zk_paths.group_owner_path("g", TOPIC, p))
            assert json.loads(owner_data)["owner"] == second.member_id
            assert committed.mzxid < owner.czxid  # the new owner's claim came after the commit
        produce(broker_cluster, TOPIC, 4, 10, start=25)
        got = drive([first, second], lambda g: len(g[0]) + len(g[1]) == 40)
        assert sorted(got[0]) == [(p, o) for p in (0, 1) for o in range(25, 35)]
        assert sorted(got[1]) == [(p, o) for p in (2, 3) for o in range(25, 35)]
    finally:
        first.close()
        second.close()
    assert [offset_of(zk, "g", p) for p in range(4)] == [35, 35, 35, 35]


def wait_settled_driving(members: list[GroupConsumer], cluster: Any, partitions: int = 4) -> None:
    """Poll the members (so that they come back for more) until the group has settled; nothing may
    arrive meanwhile."""
    deadline = time.monotonic() + 15
    while not settled(cluster.zk, members[0].group, TOPIC, partitions, members):
        assert time.monotonic() < deadline, "the group did not settle within 15 s"
        for m in members:
            assert m.poll(timeout_ms=10) == []


def test_message_streams_split_the_partitions_and_block_until_messages(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, 4)
    with member(broker_cluster, "streams", member_id_prefix="s") as m:
        streams = m.create_message_streams({TOPIC: 2})
        assert list(streams) == [TOPIC]
        assert len(streams[TOPIC]) == 2
        wait_settled(broker_cluster, "streams", TOPIC, 4, [m], 15)
        registration = json.loads(
            broker_cluster.zk.get(zk_paths.group_member_path("streams", m.member_id))[0]
        )
        assert registration["subscription"] == {TOPIC: 2}
        assert m.generation is not None
        assert m.generation.assignment == {m.member_id: {TOPIC: [[0, 1], [2, 3]]}}
        received: list[list[tuple[int, int]]] = [[], []]

        def read(number: int) -> None:
            for record in streams[TOPIC][number]:  # never ends by itself
                received[number].append((record.partition, record.offset))
                if len(received[number]) == 10:
                    return

        readers = [threading.Thread(target=read, args=(n,)) for n in range(2)]
        for reader in readers:
            reader.start()
        time.sleep(0.3)
        assert received == [[], []]  # blocked: nothing produced yet
        produce(broker_cluster, TOPIC, 4, 5)
        for reader in readers:
            reader.join(20)
        assert sorted(received[0]) == [(p, o) for p in (0, 1) for o in range(5)]
        assert sorted(received[1]) == [(p, o) for p in (2, 3) for o in range(5)]
        stream = streams[TOPIC][0]
    assert list(stream.messages(timeout_ms=100)) == []  # a closed member's streams end
    with pytest.raises(GroupClosedError):
        stream.poll()


def test_a_member_whose_session_expired_cannot_commit(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, 2)
    produce(broker_cluster, TOPIC, 2, 10)
    zk = broker_cluster.zk
    with member(broker_cluster, "fenced", auto_commit_enable=False) as m:
        m.subscribe(TOPIC)
        got = drive([m], lambda g: len(g[0]) == 20)
        old_id = m.member_id
        expire_session(m.zookeeper, broker_cluster.zk_connect)
        # refused by the expired session, or before the client reconnected (once on a busy CI machine)
        with pytest.raises(CommitFailedError, match=r"session expired|zookeeper is not connected"):
            m.commit()
        assert [offset_of(zk, "fenced", p) for p in range(2)] == [None, None]
        # it joins again as a new member and gets the uncommitted records again (at least once)
        again = drive([m], lambda g: len(g[0]) == 20)
        assert m.member_id != old_id
        assert sorted(again[0]) == sorted(got[0]) == [(p, o) for p in range(2) for o in range(10)]
        m.commit()
        assert [offset_of(zk, "fenced", p) for p in range(2)] == [10, 10]


def test_a_commit_refused_while_disconnected_reports_the_sessions_loss_once(broker_cluster: Any) -> None:
    """kazoo tells the member of the lost connection before the session's expiry: a commit refused in
    between tells the application its records were not committed, so once the member joined again and got
    them back, its commit commits them (a CI run once saw the expiry reported again there)."""
    broker_cluster.create_topic(TOPIC, 2)
    produce(broker_cluster, TOPIC, 2, 10)
    with member(broker_cluster, "told", auto_commit_enable=False) as m:
        m.subscribe(TOPIC)
        got = drive([m], lambda g: len(g[0]) == 20)
        old_id = m.member_id
        membership = m._membership
        assert isinstance(membership, GroupMembership)
        membership._on_state(KazooState.SUSPENDED)  # what kazoo says first when the connection drops
        with pytest.raises(CommitFailedError, match="zookeeper is not connected"):
            m.commit()
        expire_session(m.zookeeper, broker_cluster.zk_connect)  # the real drop, expiry and new session
        again = drive([m], lambda g: len(g[0]) == 20)
        assert m.member_id != old_id
        assert sorted(again[0]) == sorted(got[0])
        m.commit()
        assert [offset_of(broker_cluster.zk, "told", p) for p in range(2)] == [10, 10]


def test_a_new_group_starts_at_smallest_or_largest(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, 2)
    produce(broker_cluster, TOPIC, 2, 5)
    smallest = member(broker_cluster, "from-start")
    largest = member(broker_cluster, "from-end", consumer_settings={"auto_offset_reset": "latest"})
    try:
        smallest.subscribe(TOPIC)
        largest.subscribe(TOPIC)
        wait_settled(broker_cluster, "from-end", TOPIC, 2, [largest], 15)
        (stream,) = largest.streams
        assert [stream.consumer.position(TopicPartition(TOPIC, p)) for p in range(2)] == [5, 5]  # reset done
        assert largest.poll(timeout_ms=100) == []
        produce(broker_cluster, TOPIC, 2, 3, start=5)
        got = drive([smallest, largest], lambda g: len(g[0]) == 16 and len(g[1]) == 6)
        assert sorted(got[0]) == [(p, o) for p in range(2) for o in range(8)]
        assert sorted(got[1]) == [(p, o) for p in range(2) for o in range(5, 8)]
    finally:
        smallest.close()
        largest.close()


def test_seek_and_seek_to_time_rewind_the_whole_group(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, 4)
    produce(broker_cluster, TOPIC, 4, 10)
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(broker_cluster, TOPIC, 4, 10, start=10)
    a = member(broker_cluster, "rewind", member_id_prefix="a")
    b = member(broker_cluster, "rewind", member_id_prefix="b")
    try:
        a.subscribe(TOPIC)
        wait_settled(broker_cluster, "rewind", TOPIC, 4, [a], 15)
        b.subscribe(TOPIC)
        wait_settled(broker_cluster, "rewind", TOPIC, 4, [a, b], 15)
        got = drive([a, b], lambda g: len(g[0]) + len(g[1]) == 80)
        assert sorted(got[0]) == [(p, o) for p in (0, 1) for o in range(20)]
        # a rewinds the whole group by time: b's partitions too
        assert a.seek_to_time(middle_ms) == {TopicPartition(TOPIC, p): 10 for p in range(4)}
        got = drive([a, b], lambda g: len(g[0]) + len(g[1]) == 40)
        assert sorted(got[0]) == [(p, o) for p in (0, 1) for o in range(10, 20)]
        assert sorted(got[1]) == [(p, o) for p in (2, 3) for o in range(10, 20)]
        # a single partition, owned by b, to an offset
        a.seek(TopicPartition(TOPIC, 3), 15)
        got = drive([a, b], lambda g: len(g[1]) == 5)
        assert got == {0: [], 1: [(3, o) for o in range(15, 20)]}
        assert a.seek_to_beginning(TopicPartition(TOPIC, 0)) == {TopicPartition(TOPIC, 0): 0}
        got = drive([a, b], lambda g: len(g[0]) == 20)
        assert sorted(got[0]) == [(0, o) for o in range(20)]
    finally:
        a.close()
        b.close()


def test_a_broker_restart_mid_stream_loses_and_duplicates_nothing(start_cluster: Any) -> None:
    cluster = start_cluster(2)
    cluster.create_topic(TOPIC, 4, assignment={0: [0], 1: [1], 2: [0], 3: [1]})
    apps = [
        MemberApp(member(cluster, "restart", member_id_prefix=f"r{i}"), i).start([TOPIC]) for i in range(2)
    ]
    try:
        wait_settled(cluster, "restart", TOPIC, 4, [a.member for a in apps], 15)
        generation = apps[0].member.generation
        produce(cluster, TOPIC, 4, 20)
        wait_consumed(apps, {(p, o) for p in range(4) for o in range(20)}, 20)
        cluster.brokers[1].restart()
        produce(cluster, TOPIC, 4, 20, start=20)
        wait_consumed(apps, {(p, o) for p in range(4) for o in range(40)}, 30)
        # the leader re-evaluated the broker change; no partition moved
        assert apps[0].member.generation == generation
    finally:
        for app in apps:
            app.leave()
    records = consumed(apps)
    assert sorted((p, o) for p, o, _ in records) == [(p, o) for p in range(4) for o in range(40)]


def test_round_robin_deals_partitions_of_all_topics_in_turn(broker_cluster: Any) -> None:
    broker_cluster.create_topic("left", 3)
    broker_cluster.create_topic("right", 3)
    a = member(broker_cluster, "rr", member_id_prefix="a", partition_assignment_strategy="roundrobin")
    b = member(broker_cluster, "rr", member_id_prefix="b", partition_assignment_strategy="roundrobin")
    try:
        a.subscribe(["left", "right"])
        b.subscribe(["left", "right"])
        deadline = time.monotonic() + 15
        # a alone may hold all six for a moment before b joins: wait for the two-member generation
        while (len(a.assignment()), len(b.assignment())) != (3, 3):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert a.assignment() == [
            TopicPartition("left", 0),
            TopicPartition("left", 2),
            TopicPartition("right", 1),
        ]
        assert b.assignment() == [
            TopicPartition("left", 1),
            TopicPartition("right", 0),
            TopicPartition("right", 2),
        ]
        with producer(broker_cluster) as p:
            p.send("right", value=b"x", partition=2)
            p.flush()
        got = drive([a, b], lambda g: len(g[1]) == 1)
        assert got == {0: [], 1: [(2, 0)]}
    finally:
        a.close()
        b.close()


def take_batches(stream: MessageStream, records: int, timeout_s: float = 20) -> list[FetchedBatch]:
    got: list[FetchedBatch] = []
    deadline = time.monotonic() + timeout_s
    while sum(b.next_offset - b.from_offset for b in got) < records:
        assert time.monotonic() < deadline, f"only {len(got)} batches within {timeout_s} s"
        got.extend(stream.poll_batches(timeout_ms=100))
    return got


def test_explicit_positions_commit_only_what_was_acknowledged(broker_cluster: Any) -> None:
    broker_cluster.create_topic(TOPIC, 2)
    produce(broker_cluster, TOPIC, 2, 30)
    zk = broker_cluster.zk
    tp0, tp1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
    m = member(broker_cluster, "explicit", auto_commit_interval_ms=50)
    try:
        (stream,) = m.create_message_streams({TOPIC: 1}, explicit_positions=True)[TOPIC]
        batches = take_batches(stream, 60)
        assert {b.topic_partition: b.next_offset for b in batches} == {tp0: 30, tp1: 30}
        with pytest.raises(GroupError, match="read with poll_batches"):
            stream.poll()
        assert stream.poll_batches(timeout_ms=300) == []  # coming back for more consumes nothing
        m.commit()
        # where the partitions started (nothing acknowledged), not where the handed-out batches end
        assert (offset_of(zk, "explicit", 0), offset_of(zk, "explicit", 1)) == (0, 0)
        stream.acknowledge({tp0: 10})
        deadline = time.monotonic() + 10
        while offset_of(zk, "explicit", 0) != 10:  # the auto-commit takes the acknowledged position
            assert time.monotonic() < deadline, "the acknowledged offset was not auto-committed"
            time.sleep(0.02)
        assert offset_of(zk, "explicit", 1) == 0
        with pytest.raises(GroupError, match=rf"{TOPIC}-1 up to offset 31: expected at most 30 .*, got 31"):
            stream.acknowledge({tp1: 31})
        stream.acknowledge({tp0: 4})  # below the acknowledged position: ignored
        m.commit({tp1: 25})
        assert (offset_of(zk, "explicit", 0), offset_of(zk, "explicit", 1)) == (10, 25)
        with pytest.raises(GroupError, match=r"cannot commit other-0 at offset 1"):
            m.commit({TopicPartition("other", 0): 1})
    finally:
        m.close()
    # closing commits the acknowledged positions, not what was handed out
    assert (offset_of(zk, "explicit", 0), offset_of(zk, "explicit", 1)) == (10, 25)


def test_a_released_partition_with_explicit_positions_is_committed_at_its_acknowledged_offset(
    broker_cluster: Any,
) -> None:
    broker_cluster.create_topic(TOPIC, 2)
    produce(broker_cluster, TOPIC, 2, 20)
    zk = broker_cluster.zk
    first = member(broker_cluster, "moving", auto_commit_enable=False, release_timeout_ms=500)
    second = member(broker_cluster, "moving", auto_commit_enable=False)
    try:
        (stream,) = first.create_message_streams({TOPIC: 1}, explicit_positions=True)[TOPIC]
        take_batches(stream, 40)
        stream.acknowledge({TopicPartition(TOPIC, 0): 7, TopicPartition(TOPIC, 1): 9})
        second.subscribe([TOPIC])  # one partition moves; its last 13 or 11 records are never acknowledged
        got = drive([second], lambda g: len(g[0]) >= 1)[0]
        moved = second.assignment()
        assert len(moved) == 1
        acknowledged = {0: 7, 1: 9}[moved[0].partition]
        assert offset_of(zk, "moving", moved[0].partition) == acknowledged
        assert got[0] == (moved[0].partition, acknowledged)  # the next owner goes on from there
        assert offset_of(zk, "moving", 1 - moved[0].partition) is None  # the kept one: no commit yet
    finally:
        second.close()
        first.close()

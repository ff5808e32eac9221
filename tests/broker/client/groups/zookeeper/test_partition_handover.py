"""broker/client/groups/zookeeper/partition_handover.py with a real broker and ZooKeeper: a partition goes
from one member's stream to another's: stop, commit and release by the first, claim by the second at exactly
the committed offset; the listener sees both sides."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.client.consumer.message_stream import MessageStream
from broker.client.groups.rebalance_listener import RebalanceListener
from broker.client.groups.zookeeper.committed_offset import CommittedOffset
from broker.client.groups.zookeeper.group_offsets import GroupOffsets
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.client.groups.zookeeper.partition_handover import PartitionHandover
from broker.client.groups.zookeeper.partition_owner import PartitionOwner
from broker.client.groups.zookeeper.partition_ownership import PartitionOwnership
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition
from tests.broker.client.groups.group_helpers import produce
from tests.broker.client.helpers import consumer
from tests.support.zookeeper import new_client

GROUP = "handover"
TOPIC = "events"
TP0 = TopicPartition(TOPIC, 0)
TP1 = TopicPartition(TOPIC, 1)


class Recorder(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))


class Member:
    def __init__(self, cluster: Any, member_id: str) -> None:
        self.client = new_client(cluster.zk_connect)
        self.cond = threading.Condition()
        self.stream = MessageStream(f"{member_id}-0", consumer(cluster), self.cond)
        self.listener = Recorder()
        offsets = GroupOffsets(self.client, GROUP)
        self.ownership = PartitionOwnership(self.client, GROUP, offsets, lambda tp: None)
        self.ownership.register(MemberRegistration(member_id, {TOPIC: 1}), self.client.client_id[0])
        self.handover = PartitionHandover(
            GROUP, {(TOPIC, 0): self.stream}, self.cond, self.listener, self.ownership, offsets, 10_000
        )

    def read(self, count: int, timeout_s: float = 20.0) -> list[tuple[int, int]]:
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {len(got)} of {count} records: {got}"
            got += [(r.partition, r.offset) for r in self.stream.poll(timeout_ms=200)]
        return sorted(got)

    def close(self) -> None:
        with self.cond:
            self.stream.close_delivery()
        self.stream.close_consumer()
        self.client.stop()
        self.client.close()


@pytest.fixture
def members(broker_cluster: Any) -> Iterator[list[Member]]:
    broker_cluster.create_topic(TOPIC, 2)
    made = [Member(broker_cluster, "m-1"), Member(broker_cluster, "m-2")]
    yield made
    for member in made:
        member.close()


def committed(zk: Any, tp: TopicPartition) -> tuple[int, int]:
    path = zk_paths.group_offset_path(GROUP, tp.topic, tp.partition)
    data, stat = zk.get(path)
    return CommittedOffset.decode(path, data, stat.version).offset, stat.version


def test_a_partition_moves_between_members_at_its_committed_offset(
    broker_cluster: Any, members: list[Member]
) -> None:
    first, second = members
    zk = broker_cluster.zk
    produce(broker_cluster, TOPIC, 2, 10)
    assert first.handover.apply({TP0: 0, TP1: 0}, 1) == []
    assert first.handover.owned() == {TP0, TP1}
    assert first.listener.calls == [("assigned", [TP0, TP1])]
    owner_path = zk_paths.group_owner_path(GROUP, TOPIC, 1)
    assert PartitionOwner.decode(owner_path, zk.get(owner_path)[0]) == PartitionOwner("m-1", 0, 1)
    assert first.read(20) == [(p, o) for p in (0, 1) for o in range(10)]
    first.handover.mark_consumed()
    # the second member's claim of partition 1 waits: the first still owns it
    assert second.handover.apply({TP1: 0}, 2) == []
    assert (second.handover.owned(), second.handover.pending()) == (set(), {TP1})
    # generation 2: the first member releases partition 1 (commit 10, delete the owner node, one step)
    assert first.handover.apply({TP0: 0}, 2) == []
    assert first.handover.owned() == {TP0}
    assert first.listener.calls[-1] == ("revoked", [TP1])
    assert committed(zk, TP1) == (10, 0)
    assert zk.exists(owner_path) is None
    assert zk.exists(zk_paths.group_offset_path(GROUP, TOPIC, 0)) is None  # not released: not committed
    # the second member claims it again (its owner-node watch fired) and reads on from offset 10
    assert second.handover.claim([TP1], 2) == []
    assert second.handover.owned() == {TP1}
    assert second.listener.calls == [("assigned", [TP1])]
    assert PartitionOwner.decode(owner_path, zk.get(owner_path)[0]) == PartitionOwner("m-2", 0, 2)
    produce(broker_cluster, TOPIC, 2, 5, start=10)
    assert second.read(5) == [(1, o) for o in range(10, 15)]
    assert first.read(5) == [(0, o) for o in range(10, 15)]
    first.handover.mark_consumed()
    assert first.handover.commit() is False  # no rewind meanwhile
    assert committed(zk, TP0) == (15, 0)
    first.handover.release_all()
    assert first.handover.owned() == set()
    assert committed(zk, TP0) == (15, 0)  # nothing new to commit: the node keeps its version
    assert zk.exists(zk_paths.group_owner_path(GROUP, TOPIC, 0)) is None

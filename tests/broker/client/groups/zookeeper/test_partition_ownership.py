"""broker/client/groups/zookeeper/partition_ownership.py against a real ZooKeeper: the registration and owner
znodes with their data and versions, a claim that waits for the previous owner's release, and the commit
fence."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker.client.errors import GroupError
from broker.client.groups.zookeeper.committed_offset import CommittedOffset
from broker.client.groups.zookeeper.group_offsets import GroupOffsets, OffsetCommit
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.client.groups.zookeeper.partition_owner import PartitionOwner
from broker.client.groups.zookeeper.partition_ownership import PartitionOwnership
from broker.cluster import zk_paths
from broker.record.topic_partition import TopicPartition
from tests.support.zookeeper import expire_session, new_client

GROUP = "g"
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[Any]]:
    made = [new_client(zk_connect) for _ in range(2)]
    yield made
    for client in made:
        client.stop()
        client.close()


def ownership(client: Any, freed: list[TopicPartition] | None = None) -> PartitionOwnership:
    sink = freed if freed is not None else []
    return PartitionOwnership(client, GROUP, GroupOffsets(client, GROUP), sink.append)


def registered(client: Any, member_id: str, freed: list[TopicPartition] | None = None) -> PartitionOwnership:
    found = ownership(client, freed)
    found.register(MemberRegistration(member_id, {"t": 1}, "h", 7), client.client_id[0])
    return found


def owner_at(zk: Any, tp: TopicPartition) -> tuple[PartitionOwner, int, int]:
    path = zk_paths.group_owner_path(GROUP, tp.topic, tp.partition)
    data, stat = zk.get(path)
    return PartitionOwner.decode(path, data), stat.version, stat.ephemeralOwner


def test_the_registration_is_an_ephemeral_node_of_this_session(zk: Any, clients: list[Any]) -> None:
    member = registered(clients[0], "m-1")
    path = zk_paths.group_member_path(GROUP, "m-1")
    assert member.member_path == path
    data, stat = zk.get(path)
    assert MemberRegistration.decode("m-1", path, data) == MemberRegistration("m-1", {"t": 1}, "h", 7)
    assert (stat.version, stat.ephemeralOwner) == (0, clients[0].client_id[0])
    # a register whose reply was lost: the node is this session's, fine
    member.register(MemberRegistration("m-1", {"t": 1}, "h", 7), clients[0].client_id[0])
    with pytest.raises(GroupError, match="member id m-1 is taken by another session"):
        registered(clients[1], "m-1")


def test_one_owner_a_waiting_claim_and_commit_then_release(zk: Any, clients: list[Any]) -> None:
    freed: list[TopicPartition] = []
    first = registered(clients[0], "m-1")
    second = registered(clients[1], "m-2", freed)
    claim = first.claim({TP0: PartitionOwner("m-1", 0, 3), TP1: PartitionOwner("m-1", 1, 3)})
    assert (sorted(claim.got), claim.waiting, claim.freed) == ([TP0, TP1], [], [])
    assert owner_at(zk, TP0) == (PartitionOwner("m-1", 0, 3), 0, clients[0].client_id[0])
    assert owner_at(zk, TP1) == (PartitionOwner("m-1", 1, 3), 0, clients[0].client_id[0])
    # a claim of its own node again (a create whose reply was lost) counts as got
    assert first.claim({TP0: PartitionOwner("m-1", 0, 3)}).got == [TP0]
    claim = second.claim({TP0: PartitionOwner("m-2", 0, 4)})
    assert (claim.got, claim.waiting, claim.freed) == ([], [TP0], [])
    assert freed == []
    # the owner commits TP0's offset and deletes its owner node in one transaction
    outcome = first.commit({TP0: OffsetCommit(42, None)}, release=[TP0])
    assert (outcome.fenced, outcome.versions, outcome.released, outcome.conflicts) == (
        False,
        {TP0: 0},
        {TP0},
        set(),
    )
    offset_path = zk_paths.group_offset_path(GROUP, "t", 0)
    data, stat = zk.get(offset_path)
    assert (CommittedOffset.decode(offset_path, data, stat.version).offset, stat.version) == (42, 0)
    assert zk.exists(zk_paths.group_owner_path(GROUP, "t", 0)) is None
    deadline = time.monotonic() + 20
    while not freed:
        assert time.monotonic() < deadline, "the waiting claim was not told"
        time.sleep(0.02)
    assert freed == [TP0]
    assert second.claim({TP0: PartitionOwner("m-2", 0, 4)}).got == [TP0]
    assert owner_at(zk, TP0) == (PartitionOwner("m-2", 0, 4), 0, clients[1].client_id[0])


def test_verify_names_owner_nodes_that_are_not_this_sessions_any_more(zk: Any, clients: list[Any]) -> None:
    member = registered(clients[0], "m-1")
    member.claim({TP0: PartitionOwner("m-1", 0, 1), TP1: PartitionOwner("m-1", 0, 1)})
    assert member.verify([TP0, TP1]) == []
    zk.delete(zk_paths.group_owner_path(GROUP, "t", 1))
    assert member.verify([TP0, TP1]) == [TP1]


def test_an_expired_member_commits_nothing(zk: Any, zk_connect: str, clients: list[Any]) -> None:
    member = registered(clients[0], "m-1")
    member.claim({TP0: PartitionOwner("m-1", 0, 1)})
    assert member.commit({TP0: OffsetCommit(5, None)}).versions == {TP0: 0}
    expire_session(clients[0], zk_connect)
    deadline = time.monotonic() + 20
    while not clients[0].connected:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    outcome = member.commit({TP0: OffsetCommit(9, 0)}, release=[TP0])
    assert (outcome.fenced, outcome.versions, outcome.released) == (True, {}, set())
    path = zk_paths.group_offset_path(GROUP, "t", 0)
    data, stat = zk.get(path)
    assert (CommittedOffset.decode(path, data, stat.version).offset, stat.version) == (5, 0)
    assert zk.exists(zk_paths.group_member_path(GROUP, "m-1")) is None
    assert zk.exists(zk_paths.group_owner_path(GROUP, "t", 0)) is None


def test_withdraw_and_reset(zk: Any, clients: list[Any]) -> None:
    member = registered(clients[0], "m-1")
    transaction = clients[0].transaction()
    member.withdraw(transaction)
    transaction.commit()
    assert zk.get_children(zk_paths.group_ids_path(GROUP)) == []
    member.reset()
    assert (member.registered, member.member_path, member.session_id) == (False, "", None)
    with pytest.raises(GroupError, match="claim before register"):
        member.claim({TP0: PartitionOwner("m-1", 0, 1)})
    with pytest.raises(GroupError, match="commit before register"):
        member.commit({})

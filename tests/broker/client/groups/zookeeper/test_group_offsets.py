"""broker/client/groups/zookeeper/group_offsets.py and group_leader.py against real ZooKeeper: the fences.

Property 4 of issue 5 at the storage level: a commit checks the member's own registration in the same
transaction, so once the session that registered it has expired (for real, on the server) nothing it
commits lands. The leader's writes are fenced the same way by its election candidate.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from broker.client.groups.zookeeper.committed_offset import CommittedOffset
from broker.client.groups.zookeeper.fenced_election import FencedElection
from broker.client.groups.zookeeper.group_assignment import GroupAssignment
from broker.client.groups.zookeeper.group_leader import GroupLeader, NotLeaderError
from broker.client.groups.zookeeper.group_offsets import GroupOffsets, OffsetCommit
from broker.client.groups.zookeeper.member_registration import MemberRegistration
from broker.cluster import zk_paths
from broker.cluster.topic_admin import TopicAdmin
from broker.record.topic_partition import TopicPartition
from tests.broker.cluster.helpers import add_broker
from tests.support.zookeeper import expire_session, new_client

GROUP = "g"
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def expire_and_reconnect(client: Any, connect: str) -> None:
    """Expire ``client``'s session for real and wait until kazoo has a new one."""
    old = client.client_id[0]
    expire_session(client, connect)
    deadline = time.monotonic() + 30
    while not (client.connected and client.client_id[0] != old):
        assert time.monotonic() < deadline, "no new session within 30 s"
        time.sleep(0.02)


def register(client: Any, member_id: str) -> str:
    path = zk_paths.group_member_path(GROUP, member_id)
    client.create(path, MemberRegistration(member_id, {"t": 1}).encode(), ephemeral=True, makepath=True)
    return path


def offset(zk: Any, tp: TopicPartition) -> int | None:
    path = zk_paths.group_offset_path(GROUP, tp.topic, tp.partition)
    return None if zk.exists(path) is None else CommittedOffset.decode(path, zk.get(path)[0]).offset


def test_an_expired_member_cannot_commit(zk: Any, zk_connect: str) -> None:
    member = new_client(zk_connect)
    try:
        member_path = register(member, "m-1")
        offsets = GroupOffsets(member, GROUP)
        first = offsets.commit(member_path, "m-1", {TP0: OffsetCommit(5, None), TP1: OffsetCommit(7, None)})
        assert (first.fenced, first.versions, first.conflicts) == (False, {TP0: 0, TP1: 0}, set())
        expire_and_reconnect(member, zk_connect)
        # the client has a new session now; the old registration went with the old one
        late = offsets.commit(member_path, "m-1", {TP0: OffsetCommit(9, 0)})
        assert (late.fenced, late.versions) == (True, {})
        assert (offset(zk, TP0), offset(zk, TP1)) == (5, 7)
    finally:
        member.stop()
        member.close()


def test_commit_and_release_are_one_transaction(zk: Any) -> None:
    member_path = register(zk, "m-1")
    owner = zk_paths.group_owner_path(GROUP, "t", 0)
    zk.create(owner, b"{}", ephemeral=True, makepath=True)
    outcome = GroupOffsets(zk, GROUP).commit(member_path, "m-1", {TP0: OffsetCommit(3, None)}, release=[TP0])
    assert (outcome.versions, outcome.released) == ({TP0: 0}, {TP0})
    assert zk.exists(owner) is None
    assert offset(zk, TP0) == 3
    data = json.loads(zk.get(zk_paths.group_offset_path(GROUP, "t", 0))[0])
    assert (data["member"], data["offset"]) == ("m-1", 3)


def test_a_rewind_wins_over_a_commit_that_read_before_it(zk: Any) -> None:
    member_path = register(zk, "m-1")
    offsets = GroupOffsets(zk, GROUP)
    assert offsets.commit(member_path, "m-1", {TP0: OffsetCommit(10, None)}).versions == {TP0: 0}
    offsets.rewind({TP0: 2, TP1: 4}, requested_by="admin")
    stale = offsets.commit(member_path, "m-1", {TP0: OffsetCommit(11, 0), TP1: OffsetCommit(6, None)})
    assert (stale.conflicts, stale.versions) == ({TP0, TP1}, {})
    assert offsets.read([TP0, TP1]) == {
        TP0: CommittedOffset(2, "admin", offsets.read([TP0])[TP0].timestamp_ms, 1),  # type: ignore[union-attr]
        TP1: CommittedOffset(4, "admin", offsets.read([TP1])[TP1].timestamp_ms, 0),  # type: ignore[union-attr]
    }
    marker = json.loads(zk.get(zk_paths.group_rewind_path(GROUP))[0])
    assert marker["partitions"] == {"t": [0, 1]}
    assert offsets.read_all() == offsets.read([TP0, TP1])


def test_kafka_08_plain_offsets_are_read(zk: Any) -> None:
    zk.create(zk_paths.group_offset_path(GROUP, "t", 0), b"42", makepath=True)
    assert GroupOffsets(zk, GROUP).read([TP0, TP1]) == {TP0: CommittedOffset(42, zk_version=0), TP1: None}


def test_a_deposed_leader_cannot_publish_an_assignment(zk: Any, zk_connect: str) -> None:
    add_broker(zk, 1, 9092)
    TopicAdmin(zk).create_topic("t", 2)
    leader_client = new_client(zk_connect)
    try:
        register(leader_client, "m-1")
        election = FencedElection(leader_client, GROUP, lambda: None)
        election.stand("m-1")
        assert election.lead()
        leader = GroupLeader(leader_client, GROUP, "m-1", election, "range", lambda: None)
        leader.start()
        try:
            published = leader.rebalance()
            assert published is not None
            assert (published.generation, published.assignment) == (1, {"m-1": {"t": [[0, 1]]}})
            assert leader.rebalance() is None  # nothing changed
            register(zk, "m-2")
            expire_and_reconnect(leader_client, zk_connect)
            with pytest.raises(NotLeaderError, match="is gone"):
                leader.rebalance()
        finally:
            leader.stop()
    finally:
        leader_client.stop()
        leader_client.close()
    path = zk_paths.group_assignment_path(GROUP)
    assert GroupAssignment.decode(path, zk.get(path)[0]).generation == 1

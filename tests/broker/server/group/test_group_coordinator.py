"""The group coordinator on the wire: Kafka's exact error codes for the classic protocol's fencing, static
membership, session timeouts and offsets, and group requests before the offsets topic exists; a raw client
built from Lumber's protocol codecs (raw_group_client.py) against real broker processes and a real ZooKeeper
(the point is the exact codes, which the third-party clients hide). What __consumer_offsets holds and the
commits' path through it: test_group_coordinator_offsets_topic.py."""

from __future__ import annotations

import time
from collections.abc import Callable

from broker.protocol import ErrorCode
from broker.protocol.messages.delete_groups import DeleteGroupsRequest
from broker.protocol.messages.describe_groups import DescribeGroupsRequest
from broker.protocol.messages.heartbeat import HeartbeatRequest
from broker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from broker.protocol.messages.list_groups import ListGroupsRequest
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from broker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from broker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC
from tests.broker.server.group.raw_group_client import (
    GROUP_SETTINGS,
    SUBSCRIPTION,
    commit,
    committed,
    coordinator,
    heartbeat,
    join,
    sync,
)
from tests.broker.server.helpers import connect
from tests.support.broker_cluster import BrokerCluster, wait_for


def test_membership_fencing_and_offsets(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    home = coordinator(cluster, "g")
    # one connection per member: a broker reads a connection's next request only once it answered the last
    conn, conn2 = connect(home), connect(home)

    # KIP-394: a dynamic member without an id is given one and must join with it
    first = join(conn, "g").wait(10)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    m1 = first.member_id
    assert m1.startswith("lumber")  # the client id
    joined = join(conn, "g", m1).wait(10)
    assert (joined.error_code, joined.generation_id, joined.leader, joined.protocol_name) == (
        0,
        1,
        m1,
        "range",
    )
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(m1, SUBSCRIPTION)]
    assert join(conn, "g", "nobody").wait(10).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert sync(conn, "g", 1, m1, {m1: b"A1"}).wait(10)[1:] == (0, "consumer", "range", b"A1")

    assert heartbeat(conn, "g", 1, m1) == ErrorCode.NONE
    assert heartbeat(conn, "g", 0, m1) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat(conn, "g", 1, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(conn, "g", 1, m1, 5, metadata="five") == ErrorCode.NONE
    assert commit(conn, "g", 7, m1, 6) == ErrorCode.ILLEGAL_GENERATION
    assert commit(conn, "g", -1, "", 6) == ErrorCode.UNKNOWN_MEMBER_ID  # outside a generation, group active
    assert committed(conn, "g") == (5, "five")

    # a second member: the group rebalances; the first learns it from its heartbeat and rejoins
    m2 = join(conn2, "g").wait(10).member_id
    second = join(conn2, "g", m2)
    wait_for(lambda: heartbeat(conn, "g", 1, m1) == ErrorCode.REBALANCE_IN_PROGRESS, 10, "the rebalance")
    assert sync(conn, "g", 1, m1, {}).wait(10).error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert commit(conn, "g", 1, m1, 6) == ErrorCode.NONE  # commits of the old generation pass meanwhile
    rejoined = join(conn, "g", m1).wait(10)
    other = second.wait(10)
    assert (rejoined.error_code, rejoined.generation_id, other.error_code, other.generation_id) == (
        0,
        2,
        0,
        2,
    )
    assert rejoined.leader == other.leader == m1
    assert sorted(m.member_id for m in rejoined.members) == sorted([m1, m2])
    assert other.members == []  # only the leader gets the members
    assert commit(conn, "g", 2, m2, 7) == ErrorCode.REBALANCE_IN_PROGRESS  # CompletingRebalance
    follower_sync = sync(conn2, "g", 2, m2, {})
    time.sleep(0.2)
    assert not follower_sync.done  # waits for the leader's assignment
    assert sync(conn, "g", 2, m1, {m1: b"A1", m2: b"A2"}).wait(10).assignment == b"A1"
    assert follower_sync.wait(10).assignment == b"A2"
    assert commit(conn, "g", 2, m2, 8) == ErrorCode.NONE
    assert commit(conn, "g", 1, m1, 9) == ErrorCode.ILLEGAL_GENERATION
    assert committed(conn, "g") == (8, "m")

    described = conn.request(DescribeGroupsRequest(groups=["g", "missing"])).groups
    assert (described[0].group_state, described[0].protocol_type, described[0].protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert {(m.member_id, bytes(m.member_assignment)) for m in described[0].members} == {
        (m1, b"A1"),
        (m2, b"A2"),
    }
    assert (described[1].error_code, described[1].group_state) == (0, "Dead")
    listed = conn.request(ListGroupsRequest(states_filter=["stable"]), version=4).groups
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed] == [("g", "consumer", "Stable")]

    deleted = conn.request(DeleteGroupsRequest(groups_names=["g", "missing"])).results
    assert [(r.group_id, r.error_code) for r in deleted] == [
        ("g", ErrorCode.NON_EMPTY_GROUP),
        ("missing", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    offset_delete = conn.request(
        OffsetDeleteRequest(
            group_id="g", topics=[OffsetDeleteRequestTopic("t", [OffsetDeleteRequestPartition(0)])]
        )
    )
    assert offset_delete.topics[0].partitions[0].error_code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC

    # a batch leave (v3+): one known member, one unknown
    left = conn.request(
        LeaveGroupRequest(group_id="g", members=[MemberIdentity(m2), MemberIdentity("ghost")])
    )
    assert (left.error_code, [(m.member_id, m.error_code) for m in left.members]) == (
        0,
        [(m2, 0), ("ghost", ErrorCode.UNKNOWN_MEMBER_ID)],
    )
    assert heartbeat(conn, "g", 2, m1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert join(conn, "g", m1).wait(10).generation_id == 3
    left = conn.request(LeaveGroupRequest(group_id="g", member_id=m1), version=1)
    assert left.error_code == 0
    wait_for(
        lambda: conn.request(DescribeGroupsRequest(groups=["g"])).groups[0].group_state == "Empty",
        10,
        "Empty",
    )
    deleted = conn.request(DeleteGroupsRequest(groups_names=["g"])).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("g", 0)]
    assert committed(conn, "g") == (-1, "")
    conn.close()
    conn2.close()


def test_session_timeouts_and_static_membership(start_cluster: Callable[..., BrokerCluster]) -> None:
    cluster = start_cluster(1, **GROUP_SETTINGS)
    conn = connect(coordinator(cluster, "s"))
    too_short = join(conn, "s", session_timeout_ms=500).wait(10)
    assert too_short.error_code == ErrorCode.INVALID_SESSION_TIMEOUT

    # static members (KIP-345) get their id at once, no MEMBER_ID_REQUIRED
    # sessions of 3 s: long enough for the steps below, short for the expiry at the end
    a = join(conn, "s", instance="a", session_timeout_ms=3000).wait(10)
    assert (a.error_code, a.generation_id, a.leader) == (0, 1, a.member_id)
    assert a.member_id.startswith("a-")
    assert sync(conn, "s", 1, a.member_id, {a.member_id: b"PA"}, instance="a").wait(10).assignment == b"PA"

    # the same instance restarts: it takes the old member's place in the same generation, no rebalance
    again = join(conn, "s", instance="a", session_timeout_ms=3000).wait(10)
    assert (again.error_code, again.generation_id) == (0, 1)
    assert again.member_id != a.member_id
    assert heartbeat(conn, "s", 1, again.member_id, "a") == ErrorCode.NONE
    # the old instance is fenced everywhere
    assert heartbeat(conn, "s", 1, a.member_id, "a") == ErrorCode.FENCED_INSTANCE_ID
    assert commit(conn, "s", 1, a.member_id, 1, instance="a") == ErrorCode.FENCED_INSTANCE_ID
    assert (
        sync(conn, "s", 1, a.member_id, {}, instance="a").wait(10).error_code == ErrorCode.FENCED_INSTANCE_ID
    )
    assert join(conn, "s", a.member_id, instance="a").wait(10).error_code == ErrorCode.FENCED_INSTANCE_ID
    assert (
        sync(conn, "s", 1, again.member_id, {}, instance="a").wait(10).assignment == b"PA"
    )  # kept its assignment
    assert commit(conn, "s", 1, again.member_id, 2, instance="a") == ErrorCode.NONE

    # a member whose session lapses is removed: the group rebalances to an empty generation
    wait_for(
        lambda: conn.request(DescribeGroupsRequest(groups=["s"])).groups[0].group_state == "Empty",
        30,
        "the session of instance a to expire",
    )
    assert heartbeat(conn, "s", 1, again.member_id, "a") == ErrorCode.UNKNOWN_MEMBER_ID
    assert committed(conn, "s") == (2, "m")
    # an Empty group takes commits from outside any generation (admin tools, assign-mode consumers)
    assert commit(conn, "s", -1, "", 40) == ErrorCode.NONE
    assert committed(conn, "s") == (40, "m")
    conn.close()


def test_group_requests_before_the_offsets_topic_exists_answer_not_coordinator(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """Kafka's ``partitionFor`` takes the configured partition count, so a broker that has no (or has not
    yet seen the) ``__consumer_offsets`` answers a group request with NOT_COORDINATOR, which sends the
    client to FindCoordinator; only FindCoordinator creates the topic."""
    cluster = start_cluster(1, **GROUP_SETTINGS)
    conn = connect(cluster.brokers[0])
    try:
        assert heartbeat(conn, "early", 1, "x") == ErrorCode.NOT_COORDINATOR
        assert commit(conn, "early", -1, "", 5) == ErrorCode.NOT_COORDINATOR
        fetched = conn.request(
            OffsetFetchRequest(group_id="early", topics=[OffsetFetchRequestTopic("t", [0])]), version=7
        )
        assert fetched.error_code == ErrorCode.NOT_COORDINATOR
        assert OFFSETS_TOPIC not in cluster.admin.list_topics()
        home = coordinator(cluster, "early")  # FindCoordinator creates the topic
        assert home is cluster.brokers[0]
        assert commit(conn, "early", -1, "", 5) == ErrorCode.NONE
        assert committed(conn, "early") == (5, "m")
    finally:
        conn.close()


def test_group_requests_pipelined_behind_a_waiting_commit_are_each_answered_in_order(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    # A kafka-python member's coordinator connection carries its heartbeat thread's requests beside its
    # synchronous commits and its rebalance: here all written at once behind a commit that waits for its
    # fsync (OffsetCommit is one of the processor's pipeline keys: a commit right behind it is served while
    # it waits and their answers may leave in one send; a request of any other key waits in the socket).
    # Every request gets its own answer, in request order, the leader's rejoin and sync included.
    cluster = start_cluster(1, **GROUP_SETTINGS)
    home = coordinator(cluster, "g")
    conn = connect(home)
    m1 = join(conn, "g").wait(10).member_id
    assert join(conn, "g", m1).wait(10).generation_id == 1
    assert sync(conn, "g", 1, m1, {m1: b"A1"}).wait(10).error_code == 0

    def commit_request(generation: int, offset: int) -> OffsetCommitRequest:
        return OffsetCommitRequest(
            group_id="g",
            generation_id_or_member_epoch=generation,
            member_id=m1,
            topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, offset, 3, "")])],
        )

    pending = [
        conn.send(commit_request(1, 10)),
        conn.send(commit_request(1, 11)),
        conn.send(HeartbeatRequest(group_id="g", generation_id=1, member_id=m1)),
        conn.send(commit_request(1, 12)),
        join(conn, "g", m1),  # the leader rejoins a Stable group: generation 2 (it is the only member)
        sync(conn, "g", 2, m1, {m1: b"A2"}),
        conn.send(HeartbeatRequest(group_id="g", generation_id=2, member_id=m1)),
        conn.send(commit_request(2, 13)),
        conn.send(commit_request(2, 14)),
    ]
    answers = [p.wait(10) for p in pending]
    assert [a.topics[0].partitions[0].error_code for a in answers[:2]] == [0, 0]
    assert answers[2].error_code == ErrorCode.NONE
    assert answers[3].topics[0].partitions[0].error_code == 0
    assert (answers[4].error_code, answers[4].generation_id, answers[4].leader) == (0, 2, m1)
    assert (answers[5].error_code, bytes(answers[5].assignment)) == (0, b"A2")
    assert answers[6].error_code == ErrorCode.NONE
    assert [a.topics[0].partitions[0].error_code for a in answers[7:]] == [0, 0]
    assert committed(conn, "g") == (14, "")
    conn.close()

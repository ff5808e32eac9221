"""The group coordinator on the wire: Kafka's exact error codes for the classic protocol's fencing, static
membership, offsets, and what ``__consumer_offsets`` holds; a raw client built from Lumber's protocol codecs
against real broker processes and a real ZooKeeper (the point is the exact codes, which the third-party
clients hide)."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from broker.client.network.connection import BrokerConnection
from broker.cluster import zk_paths
from broker.config import BrokerConfig, LogConfig
from broker.protocol import ApiKey, ErrorCode
from broker.protocol.codec import decode_response, encode_request
from broker.protocol.messages.delete_groups import DeleteGroupsRequest
from broker.protocol.messages.describe_groups import DescribeGroupsRequest
from broker.protocol.messages.find_coordinator import FindCoordinatorRequest
from broker.protocol.messages.heartbeat import HeartbeatRequest
from broker.protocol.messages.join_group import JoinGroupRequest, JoinGroupRequestProtocol
from broker.protocol.messages.leave_group import LeaveGroupRequest, MemberIdentity
from broker.protocol.messages.list_groups import ListGroupsRequest
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from broker.protocol.messages.offset_delete import (
    OffsetDeleteRequest,
    OffsetDeleteRequestPartition,
    OffsetDeleteRequestTopic,
)
from broker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchRequestTopic
from broker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupRequestAssignment
from broker.record.batch_scan import scan_batches
from broker.record.topic_partition import TopicPartition
from broker.server.broker_server import BrokerServer, ZooKeeperSettings
from broker.server.group.group_metadata import GroupState
from broker.server.group.offset_and_metadata import OffsetAndMetadata
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from tests.broker.server.helpers import connect, fetch
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, wait_for
from tests.support.sigstop import pause, resume
from tests.support.zookeeper import new_client

GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 0, "group_min_session_timeout_ms": 1000}
#: A ConsumerProtocolSubscription v0 of topic "t".
SUBSCRIPTION = struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)


def coordinator(cluster: BrokerCluster, group: str) -> BrokerProcess:
    """The group's coordinator, as FindCoordinator answers once the offsets topic has its leaders."""
    conn = connect(next(b for b in cluster.brokers if b.running))
    found: list[Any] = []

    def answered() -> bool:
        response = conn.request(FindCoordinatorRequest(key=group, key_type=0))
        found[:] = [response]
        return bool(response.error_code == 0)

    try:
        wait_for(answered, 30, f"a coordinator for {group}")
    finally:
        conn.close()
    home: BrokerProcess = cluster.brokers[found[0].node_id]
    conn = connect(home)
    try:  # and until it has loaded the group's partition (COORDINATOR_LOAD_IN_PROGRESS meanwhile)
        wait_for(
            lambda: committed_or_none(conn, group) is not None, 30, f"{home} to load {group}'s partition"
        )
    finally:
        conn.close()
    return home


def join(
    conn: BrokerConnection, group: str, member_id: str = "", instance: str | None = None, **kw: Any
) -> Any:
    return conn.send(
        JoinGroupRequest(
            group_id=group,
            session_timeout_ms=kw.pop("session_timeout_ms", 10_000),
            rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 10_000),
            member_id=member_id,
            group_instance_id=instance,
            protocol_type="consumer",
            protocols=[JoinGroupRequestProtocol(name="range", metadata=SUBSCRIPTION)],
        ),
        **kw,
    )


def sync(
    conn: BrokerConnection,
    group: str,
    generation: int,
    member: str,
    assignments: dict[str, bytes],
    instance: str | None = None,
) -> Any:
    return conn.send(
        SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member,
            group_instance_id=instance,
            assignments=[SyncGroupRequestAssignment(m, a) for m, a in assignments.items()],
        )
    )


def heartbeat(
    conn: BrokerConnection, group: str, generation: int, member: str, instance: str | None = None
) -> int:
    body = HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member, group_instance_id=instance
    )
    return int(conn.request(body).error_code)


def commit(
    conn: BrokerConnection,
    group: str,
    generation: int,
    member: str,
    offset: int,
    *,
    instance: str | None = None,
    metadata: str = "m",
) -> int:
    body = OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, offset, 3, metadata)])],
    )
    return int(conn.request(body).topics[0].partitions[0].error_code)


def committed(conn: BrokerConnection, group: str) -> tuple[int, str | None]:
    response = conn.request(
        OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", [0])]), version=7
    )
    assert response.error_code == 0
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.metadata


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


def _records(conn: BrokerConnection, partition: int) -> list[tuple[bytes, bytes | None]]:
    parts = fetch(conn, [(OFFSETS_TOPIC, partition, 0, 1 << 20)])
    data = parts[(OFFSETS_TOPIC, partition)].records
    return [
        (bytes(r.key or b""), None if r.value is None else bytes(r.value))
        for b in scan_batches(bytes(data)).batches
        for r in b.records()
    ]


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def test_offsets_topic_layout_coordinator_moves_and_commit_timeout(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(2, offsets_commit_timeout_ms=1000, **GROUP_SETTINGS)
    group = "layout"
    home = coordinator(cluster, group)
    number = partition_for(group, 4)
    assert cluster.leader_of(OFFSETS_TOPIC, number) is home  # Kafka's hash picks the partition
    other = next(b for b in cluster.brokers if b is not home)
    stranger = connect(other)
    assert heartbeat(stranger, group, 1, "x") == ErrorCode.NOT_COORDINATOR
    assert commit(stranger, group, -1, "", 1) == ErrorCode.NOT_COORDINATOR
    stranger.close()

    conn = connect(home)
    assert commit(conn, group, -1, "", 17, metadata="meta") == ErrorCode.NONE
    # Kafka's layouts: OffsetCommitKey v1 and OffsetCommitValue v3
    key, value = _records(conn, number)[-1]
    assert key == struct.pack(">h", 1) + _string(group) + _string("t") + struct.pack(">i", 0)
    assert value is not None
    # version 3, offset, leader epoch, metadata, then the commit timestamp
    assert value[:20] == struct.pack(">hqi", 3, 17, 3) + _string("meta")
    assert len(value) == 28

    # an acks=all commit the follower never gets: REQUEST_TIMED_OUT, and the cache keeps the old offset
    wait_for(lambda: len(cluster.state_of(OFFSETS_TOPIC, number).isr) == 2, 30, "both replicas in the ISR")
    assert other.popen is not None
    pause(other.popen.pid)
    try:
        assert commit(conn, group, -1, "", 18) == ErrorCode.REQUEST_TIMED_OUT
        assert committed(conn, group) == (17, "meta")
    finally:
        resume(other.popen.pid)
    wait_for(
        lambda: commit(conn, group, -1, "", 19) == ErrorCode.NONE, 30, "a commit after the follower returns"
    )
    conn.close()

    # the coordinator's broker is stopped: the follower leads the partition, loads it, and serves the group
    home.stop()
    successor = coordinator(cluster, group)
    assert successor is other
    conn = connect(other)
    wait_for(lambda: committed_or_none(conn, group) == (19, "m"), 30, "the offsets loaded by the new leader")
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


def committed_or_none(conn: BrokerConnection, group: str) -> tuple[int, str | None] | None:
    response = conn.request(
        OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequestTopic("t", [0])]), version=7
    )
    if response.error_code != 0:
        assert response.error_code in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.NOT_COORDINATOR,  # also from a broker that has not yet seen the new offsets topic
        )
        return None
    partition = response.topics[0].partitions[0]
    return partition.committed_offset, partition.metadata


def test_offsets_of_an_empty_group_expire_with_tombstones(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    cluster = start_cluster(
        1, offsets_retention_ms=1500, offsets_retention_check_interval_ms=100, **GROUP_SETTINGS
    )
    conn = connect(coordinator(cluster, "old"))
    assert commit(conn, "old", -1, "", 11) == ErrorCode.NONE
    assert committed(conn, "old") == (11, "m")
    wait_for(lambda: committed(conn, "old") == (-1, ""), 30, "the offsets to expire")
    # the commit, then its tombstone and the group's: Kafka's keys with null values
    number = partition_for("old", 4)
    wait_for(lambda: len(_records(conn, number)) == 3, 10, "the tombstones")
    (key, value), (tomb_key, tomb_value), (group_key, group_value) = _records(conn, number)
    assert value is not None
    assert (tomb_key, tomb_value) == (key, None)
    assert (group_key, group_value) == (struct.pack(">h", 2) + _string("old"), None)
    listed = conn.request(ListGroupsRequest()).groups
    assert listed == []
    conn.close()


def _logged_commit_offsets(broker: BrokerProcess, partition: int) -> list[int]:
    """The offsets of the commit records in the leader's own segment files (appended, acknowledged or not:
    a Fetch would see only what the in-sync replicas have)."""
    found: list[int] = []
    for segment in sorted((broker.log_dir / f"{OFFSETS_TOPIC}-{partition}").glob("*.log")):
        for batch in scan_batches(segment.read_bytes()).batches:
            found += [struct.unpack_from(">q", bytes(r.value), 2)[0] for r in batch.records() if r.value]
    return found


def _read_frame(reader: BinaryIO) -> bytes:
    (size,) = struct.unpack(">i", reader.read(4))
    frame = reader.read(size)
    assert len(frame) == size, "the broker closed the connection"
    return frame


def test_pipelined_commits_appended_while_the_first_waits_answered_in_order(
    start_cluster: Callable[..., BrokerCluster],
) -> None:
    """40 commits of one partition written in one go on one connection (as librdkafka's asynchronous commits
    arrive) while the follower is stopped: the first waits for it, and the ones behind it are validated and
    appended meanwhile (read-ahead pipelining; Kafka reads none of them before answering the first), so the
    leader's log gets the 39 accepted ones, in the order sent, before any answer (the fenced one is not
    appended). Once the follower is back, every one is answered in order, the fenced one with its own code,
    and the cache holds the last commit whatever order the acknowledgements came in."""
    cluster = start_cluster(
        2, offsets_commit_timeout_ms=60_000, replica_lag_time_max_ms=120_000, **GROUP_SETTINGS
    )
    group = "pipelined"
    home = coordinator(cluster, group)
    number = partition_for(group, 4)
    other = next(b for b in cluster.brokers if b is not home)
    wait_for(lambda: len(cluster.state_of(OFFSETS_TOPIC, number).isr) == 2, 30, "both replicas in the ISR")
    fenced = 20
    frames = b"".join(
        encode_request(
            7,
            offset,
            "pipelining",
            OffsetCommitRequest(
                group_id=group,
                generation_id_or_member_epoch=5 if offset == fenced else -1,
                member_id="nobody" if offset == fenced else "",
                topics=[OffsetCommitRequestTopic("t", [OffsetCommitRequestPartition(0, offset, 3, "")])],
            ),
        )
        for offset in range(1, 41)
    )
    accepted = [o for o in range(1, 41) if o != fenced]
    assert other.popen is not None
    with socket.create_connection(("127.0.0.1", home.port), timeout=60) as sock:
        pause(other.popen.pid)
        try:
            sock.sendall(frames)
            wait_for(
                lambda: _logged_commit_offsets(home, number) == accepted,
                30,
                "the accepted commits in the leader's log",
            )
            # ... while the first still waits for the follower, which is still in the ISR (its ZooKeeper
            # session expires 4 s after the stop; appended one at a time, they would be there only after)
            sock.setblocking(False)
            try:
                early = sock.recv(65536)
            except BlockingIOError:
                early = b""
            sock.setblocking(True)
            state = cluster.state_of(OFFSETS_TOPIC, number)
            assert early == b"", f"answered while the follower is stopped ({state}): {early.hex()}"
            assert len(state.isr) == 2
        finally:
            resume(other.popen.pid)
        responses = []
        with sock.makefile("rb") as reader:
            for _ in range(40):
                response = decode_response(int(ApiKey.OFFSET_COMMIT), 7, _read_frame(reader))
                body = response.body
                assert isinstance(body, OffsetCommitResponse)
                responses.append((response.header.correlation_id, body.topics[0].partitions[0].error_code))
    assert responses == [
        (o, ErrorCode.UNKNOWN_MEMBER_ID if o == fenced else ErrorCode.NONE) for o in range(1, 41)
    ]
    conn = connect(home)
    assert committed(conn, group) == (40, "")
    conn.close()


def test_an_unload_between_the_ownership_check_and_the_lookup_is_not_read_as_no_offset(
    zk_connect: str, tmp_path: Path
) -> None:
    """Issue 21, made deterministic: the broker runs in this process (real ZooKeeper, real logs, real
    threads) so that the reload can be placed exactly where the race put it. Just before the OffsetFetch
    handler's group lookup, the partition is led again in a new leader epoch and its groups unloaded;
    holding the group's lock keeps the unload from completing (its callback waits for the lock), so the
    reload cannot finish first. The answer must be the committed offset or a retriable error, never NONE
    without an offset (librdkafka's "never committed")."""
    group, tp = "race", TopicPartition("t", 0)
    server = BrokerServer(
        BrokerConfig(
            broker_id=0,
            port=0,
            metrics_port=0,
            offsets_topic_partitions=4,
            group_initial_rebalance_delay_ms=0,
            group_min_session_timeout_ms=1000,
        ),
        LogConfig(log_dirs=[str(tmp_path / "logs")], flush_ms=20),
        ZooKeeperSettings(connect=zk_connect, session_timeout_ms=4000),
    )
    server.start()
    try:
        coordinator = server._groups
        assert coordinator is not None
        manager = coordinator.manager
        assert coordinator.coordinator_of(group) == 0  # creates __consumer_offsets
        wait_for(lambda: manager.status_of(group) == ErrorCode.NONE, 30, "the group's partition loaded")
        answers: list[dict[TopicPartition, ErrorCode]] = []
        coordinator.handle_commit_offsets(
            group_id=group,
            member_id="",
            group_instance_id=None,
            generation_id=-1,
            offsets={tp: OffsetAndMetadata(17, -1, "m", int(time.time() * 1000))},
            respond=answers.append,
        )
        wait_for(lambda: bool(answers), 30, "the commit answered")
        assert answers == [{tp: ErrorCode.NONE}]
        assert _fetched(coordinator.handle_fetch_offsets(group, [tp]), tp) == (ErrorCode.NONE, 17)

        loaded = manager.get_group(group)
        assert loaded is not None
        path = zk_paths.partition_state_path(OFFSETS_TOPIC, partition_for(group, 4))
        server_zk = new_client(zk_connect)
        real_lock = manager._lock

        def lead_again() -> None:
            # the same leader in the next epoch, as the controller elects it after the partition had none
            data, stat = server_zk.get(path)
            state = zk_paths.decode_partition_state(path, data, stat.version)
            again = replace(state, leader_epoch=state.leader_epoch + 1)
            server_zk.set(path, zk_paths.encode_partition_state(again), version=stat.version)

        def fetch_with(hook: Callable[[], None]) -> tuple[ErrorCode, int | None]:
            """An OffsetFetch with ``hook`` run as the handler leaves the manager's lock, right after its
            ownership check."""
            manager._lock = _LockThen(real_lock, hook)  # type: ignore[assignment]
            try:
                return _fetched(coordinator.handle_fetch_offsets(group, [tp]), tp)
            finally:
                manager._lock = real_lock

        held: list[bool] = []

        def unload_before_lookup() -> None:
            # the group's lock, taken first and kept until the answer, stops the unload in its callback:
            # the group has left the cache and the reload cannot put it back before the lookup
            loaded.lock.acquire()
            held.append(True)
            lead_again()
            wait_for(lambda: all(g.group_id != group for g in manager.groups()), 30, "the group unloaded")

        try:
            answer = fetch_with(unload_before_lookup)
        finally:
            if held:
                loaded.lock.release()
        assert answer in ((ErrorCode.NONE, 17), (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)), (
            f"answered {answer[0].name} with offset {answer[1]} while the group was reloaded"
        )
        wait_for(lambda: coordinator.handle_fetch_offsets(group, [tp])[0] == ErrorCode.NONE, 30, "the reload")
        reloaded = manager.get_group(group)
        assert reloaded is not None
        assert reloaded is not loaded
        assert _fetched(coordinator.handle_fetch_offsets(group, [tp]), tp) == (ErrorCode.NONE, 17)

        def unload_after_lookup() -> None:
            # the group was found; it is unloaded (Dead) before the handler reads it under its lock
            lead_again()
            wait_for(lambda: reloaded.is_state(GroupState.DEAD), 30, "the group unloaded")

        try:
            answer = fetch_with(unload_after_lookup)
        finally:
            server_zk.stop()
            server_zk.close()
        assert answer in ((ErrorCode.NONE, 17), (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None)), (
            f"answered {answer[0].name} with offset {answer[1]} from a group unloaded meanwhile"
        )
        wait_for(lambda: coordinator.handle_fetch_offsets(group, [tp])[0] == ErrorCode.NONE, 30, "the reload")
        assert manager.get_group(group) not in (None, loaded, reloaded)
        assert _fetched(coordinator.handle_fetch_offsets(group, [tp]), tp) == (ErrorCode.NONE, 17)
    finally:
        server.shutdown()


def _fetched(
    answer: tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]], tp: TopicPartition
) -> tuple[ErrorCode, int | None]:
    """An OffsetFetch answer as (error, offset of ``tp`` or None)."""
    error, found = answer
    oam = found.get(tp)
    return error, None if oam is None else oam.offset


class _LockThen:
    """``lock``, calling ``then`` once on the thread that created it, right after its first release there
    (where a request handler has just checked that it coordinates the group)."""

    def __init__(self, lock: Any, then: Callable[[], None]) -> None:
        self._lock = lock
        self._then: Callable[[], None] | None = then
        self._thread = threading.get_ident()

    def __enter__(self) -> bool:
        return bool(self._lock.acquire())

    def __exit__(self, *exc: object) -> None:
        self._lock.release()
        then = self._then
        if then is not None and threading.get_ident() == self._thread:
            self._then = None
            then()

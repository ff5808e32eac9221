"""The group coordinator and __consumer_offsets, on the wire against real broker processes and a real
ZooKeeper: the records a commit writes and their partition, the coordinator moving with the partition's
leader, the commit timeout, an empty group's offsets expiring with tombstones, pipelined commits appended
while the first waits and answered in order, and a group unloaded between the ownership check and the offset
lookup."""

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
from broker.protocol.messages.list_groups import ListGroupsRequest
from broker.protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
    OffsetCommitResponse,
)
from broker.record.batch_scan import scan_batches
from broker.record.topic_partition import TopicPartition
from broker.server.broker_server import BrokerServer, ZooKeeperSettings
from broker.server.group.group_metadata import GroupState
from broker.server.group.offset_and_metadata import OffsetAndMetadata
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from tests.broker.server.group.raw_group_client import (
    GROUP_SETTINGS,
    commit,
    committed,
    committed_or_none,
    coordinator,
    heartbeat,
)
from tests.broker.server.helpers import connect, fetch
from tests.support.broker_cluster import BrokerCluster, BrokerProcess, wait_for
from tests.support.sigstop import pause, resume
from tests.support.zookeeper import new_client


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

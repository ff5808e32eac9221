"""Groups and committed offsets, in memory and in ``__consumer_offsets`` (Kafka's ``GroupMetadataManager``).

**The topic.** ``__consumer_offsets`` is created on first use (the first FindCoordinator for a group) with
``[broker] offsets_topic_partitions`` partitions, min(``offsets_topic_replication_factor``, live brokers)
replicas, ``cleanup.policy=compact`` and ``segment.bytes`` ``[broker] offsets_topic_segment_bytes`` (100 MiB,
as Kafka) (its records are keyed, so compaction keeps each partition's last
commit and each group's last metadata; this module never depends on the cleaner running). A group lives in
partition ``abs(h) % partitions`` where ``h`` is Java's ``String.hashCode`` of the group id (32-bit, over
UTF-16 code units) and ``abs`` is Kafka's ``Utils.abs`` (``Integer.MIN_VALUE`` -> 0), so a group maps to the
partition Kafka would pick; the partition count is read from the topic, not from the config. The topic's
name, that rule and the record layouts: :mod:`broker.server.group.offsets_topic_records`.

**Ownership.** This broker coordinates the groups of the partitions it leads. After every cluster change
(:meth:`GroupMetadataManager.on_leadership`, in :mod:`broker.server.group.group_loading`, mixed in) a
partition newly led here (or led again in a new leader epoch) is **loaded** on the loader thread: its log
is read from the start to the log end, offsets and group metadata replayed (tombstones delete), and
meanwhile its groups answer COORDINATOR_LOAD_IN_PROGRESS. A partition no longer led here is **unloaded**:
its groups become Dead, their waiting members are answered NOT_COORDINATOR, and the next request for them
answers NOT_COORDINATOR, so clients look the coordinator up again.

**Writes.** Commits and group metadata are appended through the replica manager with ``acks=-1`` and
``[broker] offsets_commit_timeout_ms``: the callback runs once every in-sync replica has them, and only then
does the cache change. Errors are mapped as Kafka maps them (a partition gone or led elsewhere:
NOT_COORDINATOR; too few in-sync replicas: COORDINATOR_NOT_AVAILABLE; a timeout: REQUEST_TIMED_OUT). Several
commits of one partition may wait at once (other members', or one connection's pipelined commits, see
``PIPELINE_API_KEYS`` in :mod:`broker.server.kafka_apis`) and be acknowledged in any order: as Kafka's
``GroupMetadata.onOffsetCommitAppend``, the cache takes an acknowledged commit only if its record lies
after the one the cached offset came from (``GroupMetadata.offset_positions``). Per commit, the key bytes
and the group's partition are cached and the value is packed directly
(:mod:`broker.server.group.offsets_topic_records`); with one replica the commit is answered within its
append, on the request's own thread.

**Expiry.** Every ``offsets_retention_check_interval_ms`` the coordinator's timer thread calls
:meth:`GroupMetadataManager.expire_offsets`: the offsets of a group that has been Empty for
``offsets_retention_ms`` (and of topics a consumer group no longer subscribes to, committed that long
ago) are deleted with tombstones; an Empty group left without offsets is removed with a tombstone too.

Concurrency: ``_lock`` guards the maps (groups, owned and loading partitions); each group's fields are
guarded by its own lock, which is never taken while ``_lock`` is held. Whether this broker coordinates a
group and which group object its cache holds are read in one hold of ``_lock``
(:meth:`GroupMetadataManager.coordinated_group`): an unload between the two would read as a group never
seen. The loader thread is the only one
that loads or unloads. A write's callback runs on this manager's own thread (``group-writes-<id>``), never
on the purgatory's: it takes the group's lock, and the purgatory's thread must stay free to answer the
followers' fetches that acknowledge the write.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ClusterError, TopicExistsError
from broker.cluster.topic_admin import TopicAdmin
from broker.cluster.zk_paths import CLEANUP_POLICY, SEGMENT_BYTES
from broker.config import BrokerConfig
from broker.log.errors import LogError
from broker.protocol import ErrorCode
from broker.record.errors import RecordError
from broker.record.record_batch_builder import RecordBatchBuilder
from broker.record.topic_partition import TopicPartition
from broker.server.delayed_produce import ProduceResult
from broker.server.error_codes import error_code_of
from broker.server.errors import ServerError
from broker.server.group import offsets_topic_records as records
from broker.server.group.group_loading import GroupLoading
from broker.server.group.group_metadata import GroupMetadata, GroupState
from broker.server.group.offset_and_metadata import OffsetAndMetadata
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from broker.server.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)


class CommitResult(NamedTuple):
    """What became of one partition's offset in a commit."""

    tp: TopicPartition
    error: ErrorCode


class GroupMetadataManager(GroupLoading):
    """The groups and offsets of the ``__consumer_offsets`` partitions led here (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        config: BrokerConfig,
        replicas: ReplicaManager,
        cluster: ClusterWatcher,
        topic_admin: TopicAdmin,
    ) -> None:
        self._broker_id = broker_id
        self._config = config
        self._replicas = replicas
        self._cluster = cluster
        self._admin = topic_admin
        self._lock = threading.Lock()
        self._groups: dict[str, GroupMetadata] = {}
        #: Partitions loaded here -> the leader epoch they were loaded in.
        self._owned: dict[int, int] = {}
        #: Partitions being loaded -> the leader epoch being loaded.
        self._loading: dict[int, int] = {}
        self._tasks: queue.Queue[tuple[str, int, int] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        #: Answers of acknowledged writes, run on the callback thread (see the module docstring).
        self._callbacks: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._callback_thread: threading.Thread | None = None
        #: Set while this thread is inside ``append_records`` (an answer then needs no hand-over).
        self._appending = threading.local()
        #: Called with every group a load or unload touched (the coordinator schedules heartbeats, answers).
        self.on_loaded: Callable[[GroupMetadata], None] = lambda _group: None
        self.on_unloaded: Callable[[GroupMetadata], None] = lambda _group: None

    # ------------------------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run_loader, name=f"group-loader-{self._broker_id}", daemon=True
        )
        self._thread.start()
        self._callback_thread = threading.Thread(
            target=self._run_callbacks, name=f"group-writes-{self._broker_id}", daemon=True
        )
        self._callback_thread.start()

    def shutdown(self) -> None:
        self._tasks.put(None)
        self._callbacks.put(None)
        for thread in (self._thread, self._callback_thread):
            if thread is not None:
                thread.join(10.0)
        with self._lock:
            owned = list(self._owned)
        for partition in owned:
            self._unload(partition)

    # ------------------------------------------------------------------------------------ the topic

    def partition_count(self) -> int | None:
        """The partitions of ``__consumer_offsets``; None while it does not exist."""
        assignment = self._cluster.view.topics.get(OFFSETS_TOPIC)
        return None if assignment is None else len(assignment)

    def partition_for(self, group_id: str) -> int:
        """``group_id``'s partition of ``__consumer_offsets``: by the topic's partition count, or by
        ``[broker] offsets_topic_partitions`` while this broker's view has no such topic yet (Kafka's
        ``partitionFor`` reads the configured count; a broker that has not yet seen the topic another broker
        just created answers NOT_COORDINATOR, as Kafka does, not COORDINATOR_NOT_AVAILABLE)."""
        count = self.partition_count()
        return partition_for(group_id, self._config.offsets_topic_partitions if count is None else count)

    def ensure_offsets_topic(self) -> int:
        """``__consumer_offsets``' partition count, the topic created first if need be (ClusterError if it
        cannot be)."""
        count = self.partition_count()
        if count is not None:
            return count
        view = self._cluster.refresh()
        if OFFSETS_TOPIC in view.topics:
            return len(view.topics[OFFSETS_TOPIC])
        factor = max(1, min(self._config.offsets_topic_replication_factor, len(view.brokers)))
        try:
            self._admin.create_topic(
                OFFSETS_TOPIC,
                self._config.offsets_topic_partitions,
                replication_factor=factor,
                configs={
                    CLEANUP_POLICY: "compact",
                    SEGMENT_BYTES: str(self._config.offsets_topic_segment_bytes),
                },
            )
            logger.info(
                "created %s with %d partitions of %d replicas",
                OFFSETS_TOPIC,
                self._config.offsets_topic_partitions,
                factor,
            )
        except TopicExistsError:
            pass
        view = self._cluster.refresh()
        return len(view.topics.get(OFFSETS_TOPIC, {})) or self._config.offsets_topic_partitions

    def coordinator_of(self, group_id: str) -> int:
        """The broker leading ``group_id``'s partition (-1: none now); creates the topic on first use."""
        count = self.ensure_offsets_topic()
        return self._cluster.view.leader(OFFSETS_TOPIC, partition_for(group_id, count))

    # ------------------------------------------------------------------------------------ ownership

    def status_of(self, group_id: str) -> ErrorCode:
        """NONE if this broker coordinates ``group_id`` now, else why not (Kafka's validateGroupStatus)."""
        return self.coordinated_group(group_id)[0]

    def coordinated_group(self, group_id: str) -> tuple[ErrorCode, GroupMetadata | None]:
        """:meth:`status_of` and, when NONE, the cached group (None: no group) read under one hold of
        ``_lock``, so that no unload falls between the check and the lookup (Kafka guards its
        check-and-get the same way): a group unloaded meanwhile is not mistaken for one never seen, whose
        offsets would be answered as "none committed"."""
        partition = self.partition_for(group_id)
        with self._lock:
            if partition in self._loading:
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
            if partition in self._owned:
                return ErrorCode.NONE, self._groups.get(group_id)
        if self._cluster.view.leader(OFFSETS_TOPIC, partition) == self._broker_id:
            # the view names this broker leader before the replica manager applies it and the load starts
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        return ErrorCode.NOT_COORDINATOR, None

    def _run_callbacks(self) -> None:
        while True:
            item = self._callbacks.get()
            if item is None:
                return
            try:
                item()
            except Exception:  # the thread's top loop: log it, answer the next write
                logger.exception("answering a write to %s failed", OFFSETS_TOPIC)

    # ------------------------------------------------------------------------------------ the cache

    def get_group(self, group_id: str) -> GroupMetadata | None:
        with self._lock:
            return self._groups.get(group_id)

    def get_or_create_group(self, group_id: str) -> GroupMetadata:
        with self._lock:
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = GroupMetadata(group_id)
            return group

    def remove_group(self, group: GroupMetadata) -> None:
        with self._lock:
            if self._groups.get(group.group_id) is group:
                del self._groups[group.group_id]

    def groups(self) -> list[GroupMetadata]:
        with self._lock:
            return list(self._groups.values())

    # ------------------------------------------------------------------------------------ writes

    def _append(
        self,
        group_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        respond: Callable[[ErrorCode], None],
    ) -> None:
        """Append ``entries`` (key, value) to ``group_id``'s partition with acks=-1; ``respond`` gets the
        mapped error (NONE once every in-sync replica has them)."""
        self._append_at(group_id, entries, lambda code, _first_offset: respond(code))

    def _append_at(
        self,
        group_id: str,
        entries: Sequence[tuple[bytes, bytes | None]],
        respond: Callable[[ErrorCode, int], None],
    ) -> None:
        """:meth:`_append`, ``respond`` also given the offset of the first entry in the log (-1 when
        nothing was appended); the entries follow it in order."""
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_for(group_id))
        builder = RecordBatchBuilder()
        now = int(time.time() * 1000)
        for key, value in entries:
            builder.append(now, key, value)
        batch = builder.build()

        def done(results: dict[TopicPartition, ProduceResult]) -> None:
            result = results.get(tp)
            code = ErrorCode.NONE if result is None or result.error is None else _store_error(result.error)
            first = result.info.first_offset if result is not None and result.info is not None else -1
            if getattr(self._appending, "active", False):
                respond(code, first)  # answered within append_records, on the caller's own thread
            else:
                # never on the purgatory's thread: the callback takes a group's lock, whose holder may be
                # waiting for the replica manager, whose changes may wait for a follower's fetch, which
                # the purgatory's thread answers
                self._callbacks.put(functools.partial(respond, code, first))

        self._appending.active = True
        try:
            self._replicas.append_records(
                [(tp, batch)], acks=-1, timeout_ms=self._config.offsets_commit_timeout_ms, respond=done
            )
        finally:
            self._appending.active = False

    def store_offsets(
        self,
        group: GroupMetadata,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        respond: Callable[[dict[TopicPartition, ErrorCode]], None],
    ) -> None:
        """Append ``offsets`` and, once the ISR has them, put them in the group's cache; ``respond`` gets
        each partition's error. Call with the group's lock held."""
        limit = self._config.offset_metadata_max_bytes
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, oam in offsets.items():
            if len(oam.metadata.encode()) > limit:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = oam
        if not valid:
            respond(errors)
            return
        group_id = group.group_id
        entries = [
            (
                records.offset_commit_key(group_id, tp.topic, tp.partition),
                records.offset_commit_value(
                    oam.offset, oam.leader_epoch, oam.metadata, oam.commit_timestamp_ms
                ),
            )
            for tp, oam in valid.items()
        ]
        pending = group.pending_commits
        for tp in valid:
            pending[tp] += 1

        def stored(error: ErrorCode, first_offset: int) -> None:
            with group.lock:
                cache = error == ErrorCode.NONE and not group.is_state(GroupState.DEAD)
                positions = group.offset_positions
                for position, (tp, oam) in enumerate(valid.items(), first_offset):
                    pending[tp] -= 1
                    if pending[tp] <= 0:
                        del pending[tp]
                    # a commit acknowledged after a later one of the same partition (pipelined commits,
                    # answered together) leaves the later one cached, as the log's compaction would
                    if cache and (first_offset < 0 or positions.get(tp, -1) < position):
                        group.offsets[tp] = oam
                        if first_offset >= 0:
                            positions[tp] = position
                    errors[tp] = error
            if error != ErrorCode.NONE:
                logger.info("group %s: committing %d offsets failed: %s", group_id, len(valid), error.name)
            respond(errors)

        self._append_at(group_id, entries, stored)

    def store_group(
        self, group: GroupMetadata, assignment: Mapping[str, bytes], respond: Callable[[ErrorCode], None]
    ) -> None:
        """Append the group's metadata (this generation, its members and ``assignment``); call with the
        group's lock held."""
        protocol = group.protocol_name
        members = [
            records.MemberMetadataValue(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(protocol) if protocol is not None else b"",
                assignment=bytes(assignment.get(m.member_id, b"")),
            )
            for m in group.members.values()
        ]
        value = records.GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp_ms,
            members=members,
        )
        self._append(
            group.group_id,
            [(records.group_metadata_key(group.group_id), records.group_metadata_value(value))],
            respond,
        )

    def delete_offsets(self, group: GroupMetadata, partitions: Sequence[TopicPartition]) -> int:
        """Drop ``partitions``' offsets from the cache and write their tombstones (without waiting for
        them, as Kafka's ``cleanupGroupMetadata``); returns how many there were. Group lock held."""
        removed = [tp for tp in partitions if group.offsets.pop(tp, None) is not None]
        entries: list[tuple[bytes, bytes | None]] = [
            (records.offset_commit_key(group.group_id, tp.topic, tp.partition), None) for tp in removed
        ]
        if group.is_state(GroupState.DEAD):
            entries.append((records.group_metadata_key(group.group_id), None))
        if entries:
            self._append(group.group_id, entries, lambda error: _log_tombstones(group.group_id, error))
        return len(removed)

    def expire_offsets(self) -> None:
        """Delete the offsets retention let go, and the Empty groups left without any (see the module
        docstring)."""
        now = int(time.time() * 1000)
        retention = self._config.offsets_retention_ms
        for group in self.groups():
            with group.lock:
                if group.is_state(GroupState.DEAD):
                    continue
                if group.is_state(GroupState.EMPTY):
                    expired = [
                        tp
                        for tp, oam in group.offsets.items()
                        if tp not in group.pending_commits
                        and max(group.state_timestamp_ms, oam.commit_timestamp_ms) + retention <= now
                    ]
                else:
                    subscribed = group.subscribed_topics()
                    expired = (
                        []
                        if subscribed is None
                        else [
                            tp
                            for tp, oam in group.offsets.items()
                            if tp.topic not in subscribed
                            and tp not in group.pending_commits
                            and oam.commit_timestamp_ms + retention <= now
                        ]
                    )
                if (
                    group.is_state(GroupState.EMPTY)
                    and not group.pending_commits
                    and (len(expired) == len(group.offsets))
                ):
                    group.transition_to(GroupState.DEAD)
                    self.remove_group(group)
                if expired or group.is_state(GroupState.DEAD):
                    self.delete_offsets(group, expired)
                    logger.info(
                        "group %s: %d offsets expired%s",
                        group.group_id,
                        len(expired),
                        ", group removed" if group.is_state(GroupState.DEAD) else "",
                    )


def _log_tombstones(group_id: str, error: ErrorCode) -> None:
    if error != ErrorCode.NONE:
        logger.warning("group %s: writing tombstones failed: %s", group_id, error.name)


def _store_error(exc: BaseException) -> ErrorCode:
    """Kafka's mapping of an append's error to what a group request answers."""
    code = error_code_of(exc) if isinstance(exc, (LogError, RecordError, ServerError, ClusterError)) else None
    if code in (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if code in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    if code == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REQUEST_TIMED_OUT
    return ErrorCode.UNKNOWN_SERVER_ERROR if code is None else code

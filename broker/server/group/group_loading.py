"""Loading and unloading the groups of the ``__consumer_offsets`` partitions this broker leads:
:class:`GroupLoading`, a part of :class:`~broker.server.group.group_metadata_manager.GroupMetadataManager`
(mixed in).

After every cluster change :meth:`GroupLoading.on_leadership` queues a **load** for each partition newly
led here (or led again in a new leader epoch) and an **unload** for each partition no longer led here. The
loader thread (:meth:`GroupLoading._run_loader`) reads a loaded partition's log from its start to its end,
replays the offsets and group metadata (tombstones delete; a record that does not decode is skipped with a
warning naming it), and only then answers for its groups; an unload drops the partition's groups from the
cache. A load superseded meanwhile (a newer epoch, an unload) is dropped. Loaded groups are Empty without
members and Stable with them (Kafka's ``GroupMetadata.loadGroup``).

Concurrency: as the manager's: ``_lock`` guards the maps; only the loader thread loads and unloads.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.record.batch_scan import scan_batches
from broker.record.topic_partition import TopicPartition
from broker.server.errors import ServerError
from broker.server.group import offsets_topic_records as records
from broker.server.group.group_metadata import GroupMetadata, GroupState
from broker.server.group.member_metadata import MemberMetadata
from broker.server.group.offset_and_metadata import OffsetAndMetadata
from broker.server.group.offsets_topic_records import OFFSETS_TOPIC, partition_for
from broker.server.replica_manager import ReplicaManager

__all__ = ["GroupLoading"]

logger = logging.getLogger("broker.server.group.group_metadata_manager")

_READ_BYTES = 1024 * 1024


class GroupLoading:
    """The loader's part of the group metadata manager (see the module docstring); its state is the
    manager's, set up in its ``__init__``."""

    _replicas: ReplicaManager
    _lock: threading.Lock
    _groups: dict[str, GroupMetadata]
    _owned: dict[int, int]
    _loading: dict[int, int]
    _tasks: queue.Queue[tuple[str, int, int] | None]
    on_loaded: Callable[[GroupMetadata], None]
    on_unloaded: Callable[[GroupMetadata], None]

    if TYPE_CHECKING:

        def partition_count(self) -> int | None: ...

    def on_leadership(self) -> None:
        """Load the partitions of ``__consumer_offsets`` led here since the last call, unload the others
        (called after the replica manager applied a cluster change)."""
        count = self.partition_count()
        led: dict[int, int] = {}
        if count is not None:
            for number in range(count):
                partition = self._replicas.get_partition(TopicPartition(OFFSETS_TOPIC, number))
                if partition is not None and partition.is_leader:
                    led[number] = partition.leader_epoch
        with self._lock:
            known = {**self._owned, **self._loading}
            to_load = [(p, e) for p, e in led.items() if known.get(p) != e]
            to_unload = [p for p in known if p not in led]
            for p in to_unload:
                # stops answering for it at once, and cancels a load still queued: the unload task only
                # empties the cache, so it cannot cancel a newer load queued after it
                self._loading.pop(p, None)
                self._owned.pop(p, None)
            for p, e in to_load:
                self._loading[p] = e
        for p in to_unload:
            self._tasks.put(("unload", p, -1))
        for p, e in to_load:
            self._tasks.put(("load", p, e))

    def _run_loader(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            kind, partition, epoch = task
            try:
                if kind == "load":
                    self._load(partition, epoch)
                else:
                    self._unload(partition)
            except Exception:  # the thread's top loop: log it, keep serving the other partitions
                logger.exception("%s-%d: %s failed", OFFSETS_TOPIC, partition, kind)
                with self._lock:
                    if self._loading.get(partition) == epoch:
                        del self._loading[partition]

    def _load(self, number: int, epoch: int) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, number)
        with self._lock:
            if self._loading.get(number) != epoch:
                return  # superseded by a newer epoch or an unload
        started = time.monotonic()
        self._unload(number)
        partition = self._replicas.get_partition(tp)
        if partition is None or not partition.is_leader or partition.leader_epoch != epoch:
            with self._lock:
                if self._loading.get(number) == epoch:
                    del self._loading[number]
            return
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        metadata: dict[str, records.GroupMetadataValue | None] = {}
        log = partition.log
        offset, end = log.log_start_offset, log.log_end_offset
        count = 0
        while offset < end:
            region = log.read(offset, _READ_BYTES, max_offset=end)
            if region is None:
                break
            scan = scan_batches(region.read_bytes(), where=str(tp))
            if not scan.batches:
                break
            for batch in scan.batches:
                for record in batch.records():
                    count += 1
                    self._replay(tp, record.offset, record.key, record.value, offsets, metadata)
                offset = batch.next_offset
        groups: list[GroupMetadata] = []
        for group_id in set(offsets) | {g for g, v in metadata.items() if v is not None}:
            group = _group_from(group_id, metadata.get(group_id))
            group.offsets = offsets.get(group_id, {})
            if group.offsets or group.members or group.generation_id > 0:
                groups.append(group)
        with self._lock:
            if self._loading.get(number) != epoch:
                return
            del self._loading[number]
            self._owned[number] = epoch
            for group in groups:
                self._groups[group.group_id] = group
        for group in groups:
            self.on_loaded(group)
        logger.info(
            "%s: loaded %d groups from %d records in %.0f ms (leader epoch %d)",
            tp,
            len(groups),
            count,
            (time.monotonic() - started) * 1000,
            epoch,
        )

    @staticmethod
    def _replay(
        tp: TopicPartition,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]],
        metadata: dict[str, records.GroupMetadataValue | None],
    ) -> None:
        where = f"{tp} offset {offset}"
        if key is None:
            logger.warning("%s: a record without a key: skipped", where)
            return
        try:
            decoded = records.decode_key(bytes(key), where)
            if isinstance(decoded, records.OffsetCommitKey):
                group_offsets = offsets.setdefault(decoded.group, {})
                partition = TopicPartition(decoded.topic, decoded.partition)
                if value is None:
                    group_offsets.pop(partition, None)
                else:
                    v = records.decode_offset_commit_value(bytes(value), where)
                    group_offsets[partition] = OffsetAndMetadata(
                        v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
                    )
            else:
                metadata[decoded.group] = (
                    None if value is None else records.decode_group_metadata_value(bytes(value), where)
                )
                if value is None:
                    offsets.pop(decoded.group, None)
        except ServerError as exc:
            logger.warning("%s: skipped: %s", where, exc)

    def _unload(self, number: int) -> None:
        """Drop the partition's groups from the cache (its ownership and a pending load are not touched
        here: :meth:`on_leadership` ends them when the leadership goes, :meth:`_load` sets them)."""
        with self._lock:
            self._owned.pop(number, None)
            count = self.partition_count() or 0
            doomed = [g for gid, g in self._groups.items() if count and partition_for(gid, count) == number]
            for group in doomed:
                del self._groups[group.group_id]
        for group in doomed:
            self.on_unloaded(group)
        if doomed:
            logger.info("%s-%d: unloaded %d groups", OFFSETS_TOPIC, number, len(doomed))


def _group_from(group_id: str, value: records.GroupMetadataValue | None) -> GroupMetadata:
    """A loaded group: Empty without members, Stable with them (Kafka's ``GroupMetadata.loadGroup``)."""
    if value is None:
        return GroupMetadata(group_id)
    state = GroupState.STABLE if value.members else GroupState.EMPTY
    group = GroupMetadata(group_id, state)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    if value.current_state_timestamp >= 0:
        group.state_timestamp_ms = value.current_state_timestamp
    for m in value.members:
        member = MemberMetadata(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout,
            m.session_timeout,
            value.protocol_type,
            [(value.protocol or "", bytes(m.subscription))],
        )
        member.assignment = bytes(m.assignment)
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    return group

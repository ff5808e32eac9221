"""The partitions this broker holds and everything done to them (Kafka's ``ReplicaManager``).

:mod:`broker.server.kafka_apis` decodes a request and calls one method here; this module knows partitions,
logs, offsets and the purgatory, never the wire format. What it owns:

* **The partitions**: one :class:`~broker.server.partition.Partition` per local log. The cluster watcher
  calls :meth:`ReplicaManager.apply` after every change it sees: the logs of partitions newly assigned
  here are created, those of deleted topics deleted. At start-up, :meth:`ReplicaManager.remove_strays`
  deletes local partitions that ZooKeeper no longer assigns here (their topic was deleted while the broker
  was down), naming each in the log, so that a topic created again under the same name starts from
  offset 0. A request for a partition the view assigns here but whose log the watcher has not created yet
  creates it (:meth:`leader_partition`).
* **Append** (:meth:`append_records`, Kafka's ``appendRecords``): each partition's records go through
  :meth:`_append_to_local_log` and :meth:`Partition.append_records_to_leader`, the one path into
  :meth:`broker.log.log.Log.append`, which validates them (:mod:`broker.log.log_validator`) and assigns
  the offsets. ``acks=0`` and ``acks=1`` are answered at once; ``acks=-1`` once every partition's
  acknowledged offset (:meth:`Partition.acknowledged_offset`: the log end today, the flushed offset with
  ``[log] flush_on_ack``, the high watermark with replication) is past its batches, through a
  :class:`~broker.server.delayed_produce.DelayedProduce` in the purgatory. The processors' pipelined
  ``acks=0`` runs (:meth:`append_run`) are the same path: one append per run of requests to one partition.
* **Fetch reads** (:meth:`fetch_messages`, :meth:`read_from_local_log`): whole batches below the high
  watermark as file regions for ``sendfile``, ``partition_max_bytes`` and ``max_bytes`` honoured (only the
  first partition with data may exceed them, by one batch, as in KIP-74); fewer than ``min_bytes`` wait up
  to ``max_wait_ms`` as a :class:`~broker.server.delayed_fetch.DelayedFetch`.
* **ListOffsets** (:meth:`fetch_offset_for_timestamp`).

Where replication lands (issue 19): the controller's LeaderAndIsr decisions arrive through
:meth:`apply` (``become leader``: the partition gets its leader epoch and ISR; ``become follower``: its
log is truncated to the divergence point and a replica fetcher thread per leader broker starts fetching);
a follower's Fetch carries its replica id, is read up to the log end instead of the high watermark, and
updates that follower's log end offset in the :class:`Partition`, which may advance the high watermark and
so complete waiting ``acks=-1`` produces and consumer fetches (the purgatory hears of it like of an
append); :meth:`leader_partition` then answers NOT_LEADER_OR_FOLLOWER from the partition's own leader
epoch, not only from the cluster view.

Errors are raised, never turned into codes here: a partition's result carries the exception
(:class:`~broker.log.errors.LogError`, :class:`~broker.record.errors.RecordError` or
:class:`~broker.server.errors.ServerError`) and
:mod:`broker.server.error_codes` maps it.

Concurrency: any number of request handler and processor threads call in at once. ``_partitions`` (a
dict) is read without a lock (a single ``dict.get``, atomic in CPython) and changed only under ``_lock``,
which also orders the log manager's create and delete calls made here; a partition found closed (its
topic deleted and created again) is looked up again under the lock. The log serialises appends to one
partition; the purgatory's thread completes delayed operations.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import NamedTuple

from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.log.errors import LogError
from broker.log.file_region import FileRegion
from broker.log.log import AppendInfo, Buffer
from broker.log.log_manager import LogManager
from broker.record.errors import InvalidRecordError, RecordError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from broker.server.delayed_fetch import DelayedFetch, FetchCallback
from broker.server.delayed_produce import DelayedProduce, ProduceCallback, ProduceResult
from broker.server.errors import NotLeaderOrFollowerError, ServerError, UnknownTopicOrPartitionError
from broker.server.partition import Partition
from broker.server.purgatory import Purgatory

logger = logging.getLogger(__name__)

#: One partition of a Fetch: the partition, the fetch offset and ``partition_max_bytes``.
FetchRead = tuple[TopicPartition, int, int]


class FetchPartitionResult(NamedTuple):
    """One partition's part of a Fetch (Kafka's ``FetchPartitionData``; a tuple: one is built per partition
    per read)."""

    #: Why nothing was read; None on success (``records`` may still be None: nothing to read yet).
    error: LogError | RecordError | ServerError | None
    high_watermark: int
    log_start_offset: int
    records: FileRegion | None


class ReplicaManager:
    """The local partitions of ``broker_id`` and the operations on them (see the module docstring)."""

    def __init__(
        self, broker_id: int, log_manager: LogManager, cluster: ClusterWatcher, purgatory: Purgatory
    ) -> None:
        self._broker_id = broker_id
        self._logs = log_manager
        self._cluster = cluster
        self._purgatory = purgatory
        self._lock = threading.Lock()
        self._partitions: dict[TopicPartition, Partition] = {}

    # ------------------------------------------------------------------------------------ partitions

    def remove_strays(self, view: ClusterView) -> list[TopicPartition]:
        """Delete the local partitions ``view`` does not assign to this broker; returns them."""
        assigned = set(view.partitions_of(self._broker_id))
        with self._lock:
            strays = [
                log.topic_partition for log in self._logs.all_logs() if log.topic_partition not in assigned
            ]
            for tp in strays:
                logger.warning(
                    "broker %d: deleting local partition %s: ZooKeeper does not assign it to this broker "
                    "(its topic was deleted while the broker was down)",
                    self._broker_id,
                    tp,
                )
                self._partitions.pop(tp, None)
                self._logs.delete_log(tp.topic, tp.partition)
        return strays

    def apply(self, old: ClusterView, new: ClusterView) -> None:
        """Create the logs of newly assigned partitions; delete those of deleted topics."""
        with self._lock:
            for topic in sorted(set(old.topics) - set(new.topics)):
                for tp in [tp for tp in self._partitions if tp.topic == topic]:
                    del self._partitions[tp]
                try:
                    deleted = self._logs.delete_topic(topic)
                except (LogError, RecordError):
                    logger.exception("broker %d: deleting topic %s failed", self._broker_id, topic)
                    continue
                if deleted:
                    logger.info(
                        "broker %d: deleted %d partitions of topic %s", self._broker_id, deleted, topic
                    )
            for tp in new.partitions_of(self._broker_id):
                if tp not in self._partitions:
                    try:
                        self._partitions[tp] = Partition(self._logs.get_or_create_log(tp.topic, tp.partition))
                    except (LogError, RecordError):
                        logger.exception("broker %d: creating the log of %s failed", self._broker_id, tp)

    def leader_partition(self, view: ClusterView, tp: TopicPartition) -> Partition:
        """The partition ``tp`` if this broker leads it in ``view``: else
        :class:`~broker.log.errors.InvalidTopicError`, :class:`UnknownTopicOrPartitionError`,
        :class:`NotLeaderOrFollowerError`, or the log manager's error creating its log."""
        topic = tp.topic
        validate_topic_name(topic)
        assignment = view.topics.get(topic)
        if assignment is None or tp.partition not in assignment:
            raise UnknownTopicOrPartitionError(tp)
        leader = view.leader(topic, tp.partition)
        if leader != self._broker_id:
            raise NotLeaderOrFollowerError(tp, leader, self._broker_id)
        partition = self._partitions.get(tp)
        if partition is not None and not partition.closed:
            return partition
        with self._lock:
            # the view is newer than the watcher's last apply (or the topic was created again): look again
            log = self._logs.get_log(topic, tp.partition)
            if log is None:
                log = self._logs.get_or_create_log(topic, tp.partition)
            partition = self._partitions.get(tp)
            if partition is None or partition.log is not log:
                partition = self._partitions[tp] = Partition(log)
            return partition

    # ------------------------------------------------------------------------------------ append

    def _append_to_local_log(self, partition: Partition, records: Buffer) -> AppendInfo:
        """Every append of the broker goes through here (see the module docstring)."""
        return partition.append_records_to_leader(records)

    def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, Buffer | None]],
        *,
        acks: int,
        timeout_ms: int,
        respond: ProduceCallback,
    ) -> None:
        """Append each partition's records (None: the request carried none) and call ``respond`` with
        every partition's result: at once for ``acks`` 0 and 1, once acknowledged for -1 (or at
        ``timeout_ms``, see :mod:`broker.server.delayed_produce`)."""
        view = self._cluster.view
        results: dict[TopicPartition, ProduceResult] = {}
        for tp, records in entries:
            try:
                partition = self.leader_partition(view, tp)
                if records is None:
                    raise InvalidRecordError(str(tp), "the request has no records")
                info = self._append_to_local_log(partition, records)
            except (LogError, RecordError, ServerError) as exc:
                results[tp] = ProduceResult(exc, None, None)
            else:
                results[tp] = ProduceResult(None, info, partition)
        if acks != -1:
            respond(results)
            return
        waiting = {
            tp: (result.partition, result.info.last_offset + 1)
            for tp, result in results.items()
            if result.info is not None and result.partition is not None
        }
        for partition, end in waiting.values():
            if partition.flush_on_ack:
                partition.request_flush(end)
        self._purgatory.watch(DelayedProduce(waiting, results, timeout_ms, respond))

    def append_run(self, runs: Sequence[tuple[Partition, Sequence[Buffer]]]) -> int:
        """Append pipelined ``acks=0`` requests, each run of requests to one partition in one append, with
        the same outcome as appending them one by one; returns how many requests were appended.

        When a run's append fails, its requests are appended one at a time up to the failing one, and
        the count stops there: that request and the ones after it are left to the caller (which serves
        them one by one, reporting the failure), nothing of them appended.
        """
        appended = 0
        for partition, parts in runs:
            try:
                self._append_to_local_log(partition, parts[0] if len(parts) == 1 else b"".join(parts))
            except (LogError, RecordError):
                for part in parts:
                    try:
                        self._append_to_local_log(partition, part)
                    except (LogError, RecordError):
                        return appended
                    appended += 1
            else:
                appended += len(parts)
        return appended

    # ------------------------------------------------------------------------------------ fetch

    def fetch_messages(
        self,
        reads: Sequence[FetchRead],
        *,
        max_bytes: int,
        min_bytes: int,
        max_wait_ms: int,
        respond: FetchCallback,
    ) -> None:
        """Read ``reads`` and call ``respond`` with each partition's result, in order: at once when
        ``min_bytes`` are there (or a read failed, or no wait was asked for), else from the purgatory."""
        results, size, errors = self.read_from_local_log(reads, max_bytes)
        if max_wait_ms <= 0 or size >= min_bytes or errors or not reads:
            respond(results)
            return
        self._purgatory.watch(
            DelayedFetch(
                self,
                reads,
                max_bytes=max_bytes,
                min_bytes=min_bytes,
                max_wait_ms=max_wait_ms,
                respond=respond,
            )
        )

    def read_from_local_log(
        self, reads: Sequence[FetchRead], max_bytes: int
    ) -> tuple[list[FetchPartitionResult], int, bool]:
        """Each partition's result now, the record bytes read in all, and whether any read failed."""
        view = self._cluster.view
        remaining = max_bytes if max_bytes > 0 else 0x7FFFFFFF
        total = 0
        errors = False
        first_with_data = True
        results: list[FetchPartitionResult] = []
        for tp, fetch_offset, partition_max_bytes in reads:
            try:
                partition = self.leader_partition(view, tp)
            except (LogError, RecordError, ServerError) as exc:
                errors = True
                results.append(FetchPartitionResult(exc, -1, -1, None))
                continue
            high_watermark = partition.high_watermark
            log_start = partition.log_start_offset
            limit = min(partition_max_bytes, remaining)
            region = None
            error: LogError | RecordError | None = None
            if limit > 0 or first_with_data:
                try:
                    region = partition.read(fetch_offset, max(limit, 1))
                except (LogError, RecordError) as exc:
                    error = exc
                    errors = True
            if region is not None and region.size_bytes > limit and not first_with_data:
                region = None  # only the first partition with data may go over (KIP-74)
            if region is not None:
                first_with_data = False
                remaining -= region.size_bytes
                total += region.size_bytes
            results.append(FetchPartitionResult(error, high_watermark, log_start, region))
        return results, total, errors

    # ------------------------------------------------------------------------------------ ListOffsets

    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int) -> int:
        """ListOffsets for one partition led here (:meth:`Partition.fetch_offset_for_timestamp`)."""
        return self.leader_partition(self._cluster.view, tp).fetch_offset_for_timestamp(timestamp)

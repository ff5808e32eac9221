"""The partitions this broker holds and everything done to them (Kafka's ``ReplicaManager``).

:mod:`broker.server.kafka_apis` decodes a request and calls one method here; this module knows partitions,
logs, offsets, replica state and the purgatory, never the wire format. What it owns:

* **The partitions**: one :class:`~broker.server.partition.Partition` per local log. The cluster watcher
  calls :meth:`ReplicaManager.apply` after every change it sees: the logs of partitions newly assigned
  here are created, those of deleted topics deleted, and each partition's state znode (leader, leader
  epoch, ISR) is applied: **become leader** (:meth:`Partition.make_leader`: its fetcher stops first, then
  it stamps the new epoch and tracks its followers) or **become follower** (:meth:`Partition.make_follower`,
  then the :class:`~broker.server.replica_fetcher_manager.ReplicaFetcherManager` fetches it from the
  leader, after finding the divergence point with OffsetForLeaderEpoch). Kafka's controller sends these
  decisions as LeaderAndIsr requests; Lumber's brokers read them from the state znodes they watch, which
  reach every broker within milliseconds and need no controller-to-broker channel. At start-up,
  :meth:`ReplicaManager.remove_strays` deletes local partitions that ZooKeeper no longer assigns here (their
  topic was deleted while the broker was down), naming each in the log, so that a topic created again under
  the same name starts from offset 0. A request for a partition whose newer state the watcher has not
  applied yet applies it at once (:meth:`leader_partition`): Metadata answers from the view once published,
  so a Produce after it finds the leader, ISR and epoch Metadata named.
* **Topic configs** (``/config/topics/<topic>``, :mod:`broker.cluster.topic_config`): a topic's logs run on
  ``[log]`` with its overrides (:func:`~broker.cluster.topic_config.topic_log_config`), given by
  :meth:`ReplicaManager.apply` to each local log of a topic whose overrides changed (the next append, roll
  and retention pass use it: :meth:`~broker.log.log_manager.LogManager.update_topic_config`), comparing the
  latest view's overrides with those the logs run with (``_topic_configs``), so views applied out of order
  cannot leave an older config. A log created here starts with its topic's config (at start-up before any
  request, :mod:`broker.server.broker_server`). ``min.insync.replicas`` is each partition's, set on apply.
* **Append** (:meth:`append_records`, Kafka's ``appendRecords``): each partition's records go through
  :meth:`append_to_local_log` and :meth:`Partition.append_records_to_leader`, the one path into
  :meth:`broker.log.log.Log.append` (validation, offsets, the leader epoch). ``acks=0`` and ``acks=1`` are
  answered at once, ``acks=-1`` once every in-sync replica has the batches (:meth:`answer_when_acknowledged`:
  a :class:`~broker.server.delayed_produce.DelayedProduce`). ``acks=0`` runs (:meth:`append_run`) and
  :mod:`~broker.server.produce_fast_path` take it (a read's requests in one write: :meth:`append_many`).
  A Produce is served inside :meth:`completing_here`, so the thread that appended answers the followers'
  fetches waiting for its batches (Kafka's action queue), and a Fetch the produces it acknowledges.
* **Fetch reads** (:meth:`fetch_messages`, :meth:`read_from_local_log`): whole batches as file regions for
  ``sendfile``, ``partition_max_bytes`` and ``max_bytes`` honoured (only the first partition with data may
  exceed them, by one batch, as in KIP-74); fewer than ``min_bytes`` wait up to ``max_wait_ms`` as a
  :class:`~broker.server.delayed_fetch.DelayedFetch`. A consumer reads below the high watermark; a
  follower (``replica_id`` >= 0) reads up to the log end, and its fetch offset is its log end offset
  (:meth:`Partition.update_follower_fetch_state`), which may move the ISR and the high watermark, its log
  start a waiting DeleteRecords' (:mod:`broker.server.delayed_delete_records`); epochs fenced as Kafka's.
* **Offsets**: ListOffsets (:meth:`fetch_offset_for_timestamp`) and OffsetForLeaderEpoch (its next method).
* **ISR changes** (:mod:`broker.server.isr_changes`, mixed in): one thread (``isr-<id>``) writes the
  leaders' ISR changes to their state znodes, each conditional on the znode version it was computed from,
  the changes queued meanwhile in one pipelined batch
  (:func:`broker.cluster.partition_state_store.update_isrs`), and every ``replica_lag_time_max_ms / 2``
  asks each led partition for followers that fell out of sync (Kafka's ``isr-expiration`` task). A write
  that loses to a newer state (the controller's) is dropped: the new state arrives through the watcher.
* **Reassignments** (:mod:`broker.server.replica_moves`, mixed in): a replica moved off here is stopped and
  deleted; a leader's fetch reads for followers out of the ISR keep within the leader's throttle
  (:mod:`broker.server.replication_quota`).

Errors are raised, never turned into codes here: a partition's result carries the exception (LogError,
RecordError or ServerError) and :mod:`broker.server.error_codes` maps it.

Concurrency: any number of request handler and processor threads call in at once, the watcher's
notification thread calls :meth:`apply`, the fetcher threads append as followers. ``_partitions`` (a dict)
is read without a lock (a single ``dict.get``, atomic in CPython) and changed only under ``_lock``, which
also orders the log manager's create and delete calls and the application of states made here; a
partition found closed (its topic deleted and created again) is looked up again under the lock. A state is
applied under ``_lock`` with the fetcher stopped for that partition first, and the partition's own lock
orders it against appends. The log serialises appends to one partition; the purgatory's thread completes
delayed operations.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.partition_state import PartitionState
from broker.cluster.replication_throttle import ReplicationThrottle, ThrottleSnapshot
from broker.cluster.topic_config import min_insync_replicas, topic_log_config
from broker.config import BrokerConfig
from broker.log.append_info import AppendInfo
from broker.log.errors import LogError
from broker.log.file_region import FileRegion
from broker.log.log import Buffer
from broker.log.log_append import AppendOutcome
from broker.log.log_manager import LogManager
from broker.record.errors import InvalidRecordError, RecordError
from broker.record.topic_name import validate_topic_name
from broker.record.topic_partition import TopicPartition
from broker.server.completing_here import CompletingHere
from broker.server.delayed_fetch import DelayedFetch, FetchCallback
from broker.server.delayed_operation import DelayedOperation
from broker.server.delayed_produce import ProduceCallback, ProduceResult, answer_or_watch
from broker.server.errors import NotLeaderOrFollowerError, ServerError, UnknownTopicOrPartitionError
from broker.server.isr_changes import IsrChanges, IsrStore, eligible
from broker.server.partition import Partition
from broker.server.purgatory import Purgatory
from broker.server.replica_fetcher_manager import ReplicaFetcherManager
from broker.server.replica_moves import ReplicaMoves
from broker.server.replication_quota import ReplicationQuota

logger = logging.getLogger(__name__)

#: One partition of a Fetch: the partition, the fetch offset, ``partition_max_bytes`` and the request's
#: ``current_leader_epoch`` (-1: not checked).
FetchRead = tuple[TopicPartition, int, int, int]

_NO_THROTTLE = ThrottleSnapshot()


class FetchPartitionResult(NamedTuple):
    """One partition's part of a Fetch (Kafka's ``FetchPartitionData``; a tuple, one per partition read)."""

    #: Why nothing was read; None on success (``records`` may still be None: nothing to read yet).
    error: LogError | RecordError | ServerError | None
    high_watermark: int
    log_start_offset: int
    records: FileRegion | None


class ReplicaManager(IsrChanges, ReplicaMoves):
    """The local partitions of ``broker_id`` and the operations on them (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        cluster: ClusterWatcher,
        purgatory: Purgatory,
        *,
        config: BrokerConfig | None = None,
        isr_store: IsrStore | None = None,
        throttle: ReplicationThrottle | None = None,
    ) -> None:
        self._broker_id = broker_id
        #: reassignments' copy limits (:mod:`broker.server.replication_quota`); the fetchers read them too
        self.throttle = throttle
        self.leader_quota = ReplicationQuota(lambda: self._throttle_snapshot().leader_rate)
        self.follower_quota = ReplicationQuota(lambda: self._throttle_snapshot().follower_rate)
        self._config = config if config is not None else BrokerConfig(broker_id=broker_id)
        self._logs = log_manager
        self._cluster = cluster
        self._purgatory = purgatory
        self._isr_store = isr_store
        self._lock = threading.RLock()
        self._partitions: dict[TopicPartition, Partition] = {}
        #: each topic's overrides its local logs run with (changed only under ``_lock``)
        self._topic_configs: dict[str, dict[str, str]] = {}
        self.fetchers = ReplicaFetcherManager(broker_id, self._config, cluster, self)
        self._isr_queue: queue.Queue[tuple[Partition, PartitionState, tuple[int, ...]] | None] = queue.Queue()
        self._stopping = threading.Event()
        self._isr_thread: threading.Thread | None = None
        #: ISR changes written by this broker as leader (the ISR thread's; read by the metrics).
        self.isr_shrinks = 0
        self.isr_expands = 0

    def _throttle_snapshot(self) -> ThrottleSnapshot:
        return self.throttle.snapshot if self.throttle is not None else _NO_THROTTLE

    def start(self) -> None:
        """Start the ISR thread (writes and expiry); :meth:`apply` works without it."""
        if self._isr_thread is None and self._isr_store is not None:
            self._isr_thread = threading.Thread(
                target=self._run_isr_changes, name=f"isr-{self._broker_id}", daemon=True
            )
            self._isr_thread.start()

    def shutdown(self) -> None:
        """Stop the fetchers and the ISR thread (the logs are the log manager's to close)."""
        self._stopping.set()
        self._isr_queue.put(None)
        self.fetchers.shutdown()
        thread = self._isr_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(10.0)

    def completing_here(self) -> CompletingHere:
        """A block (a Produce or a Fetch being served, no lock held) at whose end this thread completes the
        delayed operations its changes made ready (:meth:`Purgatory.completing_here`, Kafka's
        ``tryCompleteActions``)."""
        return self._purgatory.completing_here()

    def watch(self, operation: DelayedOperation) -> None:
        self._purgatory.watch(operation)

    # ------------------------------------------------------------------------------------ partitions

    @property
    def log_manager(self) -> LogManager:
        """The broker's logs (DescribeLogDirs reads its dirs)."""
        return self._logs

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        """The local partition ``tp``, if any."""
        partition = self._partitions.get(tp)
        return None if partition is None or partition.closed else partition

    def partitions(self) -> list[Partition]:
        """Every local partition (a snapshot)."""
        return [p for p in list(self._partitions.values()) if not p.closed]

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
        """Create the logs of newly assigned partitions, delete those of deleted topics, and apply every
        partition's state (see the module docstring)."""
        with self._lock:
            for topic in sorted(set(old.topics) - set(new.topics)):
                doomed = [tp for tp in self._partitions if tp.topic == topic]
                self.fetchers.remove_partitions(doomed)
                for tp in doomed:
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
            # the watcher's latest view, not ``new``: at start-up a change may be applied before the first
            # view is, and configs carry no version to tell the older one
            latest = self._cluster.view
            for topic in [t for t in self._topic_configs if t not in latest.topics]:
                del self._topic_configs[topic]
            for topic in latest.topics:
                configs = latest.topic_config(topic)
                if configs != self._topic_configs.get(topic, {}):
                    self._apply_topic_config(topic, configs)
            mine = new.partitions_of(self._broker_id)
            for tp in mine:
                try:
                    self._apply_partition(new, tp)
                except (LogError, RecordError):
                    logger.exception("broker %d: applying the state of %s failed", self._broker_id, tp)
            gone = set(old.partitions_of(self._broker_id)) - set(mine)
            for tp in sorted(t for t in gone if t.topic in new.topics):
                self._stop_replica(new, tp)
        if set(old.brokers) != set(new.brokers) or old.shutting_down != new.shutting_down:
            # a follower that went away or is shutting down no longer holds a high watermark back
            for partition in self.partitions():
                if partition.is_leader and partition.recheck_high_watermark():
                    self._purgatory.notify(partition.topic_partition)

    def _apply_topic_config(self, topic: str, configs: Mapping[str, str]) -> None:
        """Give the topic's local logs its effective config (caller holds ``_lock``)."""
        config = topic_log_config(topic, self._logs.config, configs)
        updated = self._logs.update_topic_config(topic, config)
        self._topic_configs[topic] = dict(configs)
        if updated:
            logger.info(
                "broker %d: topic %s: %d local logs now run with the topic's configs %s",
                self._broker_id,
                topic,
                updated,
                dict(configs) or "{} (the broker's [log])",
            )

    def _apply_partition(self, view: ClusterView, tp: TopicPartition) -> Partition:
        """``tp``'s local partition, created if need be, with ``view``'s state applied (caller holds
        ``_lock``)."""
        partition = self._partitions.get(tp)
        if partition is None or partition.closed:
            log = self._logs.get_log(tp.topic, tp.partition)
            if log is None:
                # the latest view's configs: a request's older view may predate an apply that changed them
                configs = self._cluster.view.topic_config(tp.topic)
                log = self._logs.get_or_create_log(
                    tp.topic, tp.partition, topic_log_config(tp.topic, self._logs.config, configs)
                )
            config = self._config
            partition = Partition(
                log,
                self._broker_id,
                replica_lag_time_max_ms=config.replica_lag_time_max_ms,
                min_insync_replicas=config.min_insync_replicas,
                isr_writer=self._submit_isr_change,
                replica_eligible=self._replica_eligible,
            )
            self._partitions[tp] = partition
        replicas = view.replicas(tp)
        if len(replicas) > 1 and not partition.end_listened:
            # followers' fetches wait for the log end to move, not the high watermark
            partition.log.add_end_listener(self._purgatory.notify)
            partition.end_listened = True
        partition.min_insync_replicas = self._min_insync_replicas(view, tp.topic)
        state = view.states.get(tp)
        # a reassignment changes the replicas (the topic node's version orders them): applied even with
        # the same state; a request's view older than the one applied never brings older replicas back
        topic_version = view.topic_versions.get(tp.topic, -1)
        replicas_newer = topic_version > partition.assignment_version
        if state is None or (not partition.is_newer(state) and not replicas_newer):
            return partition
        if topic_version < partition.assignment_version:
            replicas = partition.replicas
        partition.assignment_version = max(topic_version, partition.assignment_version)
        if not partition.is_newer(state):
            # only the replicas changed: the state applied stays (it may be newer than this view's, this
            # leader's own ISR change), or acks=all would stop waiting for a replica the ISR holds
            partition.update_replicas(replicas)
            self._purgatory.notify(tp)
            return partition
        if state.leader == self._broker_id:
            self.fetchers.remove_partitions([tp])
            if partition.make_leader(state, replicas):
                logger.info(
                    "broker %d: leading %s in epoch %d from offset %d, high watermark %d, ISR %s",
                    self._broker_id,
                    tp,
                    state.leader_epoch,
                    partition.log_end_offset,
                    partition.log.high_watermark,
                    list(state.isr),
                )
        elif partition.make_follower(state, replicas) or not self.fetchers.has_partition(tp):
            self.fetchers.remove_partitions([tp])
            if state.leader >= 0:
                logger.info(
                    "broker %d: following broker %d for %s in epoch %d from offset %d",
                    self._broker_id,
                    state.leader,
                    tp,
                    state.leader_epoch,
                    partition.log_end_offset,
                )
                self.fetchers.add_partition(tp, state.leader, state.leader_epoch)
        # a leadership change answers the produces and fetches waiting on this partition
        self._purgatory.notify(tp)
        return partition

    def _replica_eligible(self, broker_id: int) -> bool:
        return eligible(self._cluster.view, broker_id)

    def _min_insync_replicas(self, view: ClusterView, topic: str) -> int:
        return min_insync_replicas(view.topic_configs.get(topic, {}), self._config.min_insync_replicas)

    def leader_partition(
        self, view: ClusterView, tp: TopicPartition, current_leader_epoch: int = -1
    ) -> Partition:
        """The partition ``tp`` if this broker leads it, with ``view``'s state applied if newer: else
        :class:`~broker.log.errors.InvalidTopicError`, :class:`UnknownTopicOrPartitionError`,
        :class:`NotLeaderOrFollowerError`, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a
        ``current_leader_epoch`` other than the partition's, or the log manager's error creating its log."""
        partition, state = self._partitions.get(tp), view.states.get(tp)
        if partition is None or partition.closed or not partition.is_leader or partition.is_newer(state):
            partition = self._refreshed_partition(view, tp)
        if current_leader_epoch >= 0:
            partition.check_leader_epoch(current_leader_epoch)
        return partition

    def _refreshed_partition(self, view: ClusterView, tp: TopicPartition) -> Partition:
        """``tp`` with ``view``'s state applied now (the watcher has not delivered it yet), if led here."""
        topic = tp.topic
        validate_topic_name(topic)
        assignment = view.topics.get(topic)
        if assignment is None or tp.partition not in assignment:
            raise UnknownTopicOrPartitionError(tp)
        if self._broker_id not in assignment[tp.partition]:
            raise NotLeaderOrFollowerError(tp, view.leader(topic, tp.partition), self._broker_id)
        with self._lock:
            partition = self._apply_partition(view, tp)
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(tp, partition.leader_id, self._broker_id)
        return partition

    # ------------------------------------------------------------------------------------ append

    def append_to_local_log(self, partition: Partition, records: Buffer, acks: int = 1) -> AppendInfo:
        """Every append of the broker goes through here (see the module docstring)."""
        return partition.append_records_to_leader(records, acks)

    def append_many(self, partition: Partition, requests: Sequence[Buffer], acks: int) -> list[AppendOutcome]:
        """:meth:`append_to_local_log` of several requests in one write: each one's outcome, or raises."""
        return partition.append_many_to_leader(requests, acks)

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
            partition: Partition | None = None
            try:
                partition = self.leader_partition(view, tp)
                if records is None:
                    raise InvalidRecordError(str(tp), "the request has no records")
                info = self.append_to_local_log(partition, records, acks)
            except (LogError, RecordError, ServerError) as exc:
                results[tp] = ProduceResult(exc, None, partition)  # the answer's log start offset
            else:
                results[tp] = ProduceResult(None, info, partition)
        if acks != -1:
            respond(results)
            return
        self.answer_when_acknowledged(results, timeout_ms, respond)

    def answer_when_acknowledged(
        self, results: dict[TopicPartition, ProduceResult], timeout_ms: int, respond: ProduceCallback
    ) -> None:
        """``respond(results)`` of an ``acks=-1`` append once acknowledged, or at ``timeout_ms``."""
        waiting = {
            tp: (result.partition, result.info.last_offset + 1)
            for tp, result in results.items()
            if result.info is not None and result.partition is not None
        }
        for partition, end in waiting.values():
            if partition.flush_on_ack:
                partition.request_flush(end)
        answer_or_watch(self._purgatory, waiting, results, timeout_ms, respond)

    def append_run(self, runs: Sequence[tuple[Partition, Sequence[Buffer]]]) -> int:
        """Append pipelined ``acks=0`` requests, each run of requests to one partition in one append, with
        the same outcome as appending them one by one; returns how many requests were appended. When a
        run's append fails, its requests are appended one at a time up to the failing one, and the count
        stops there: that request and the ones after it are left to the caller (which serves them one by
        one, reporting the failure), nothing of them appended."""
        appended = 0
        for partition, parts in runs:
            try:
                self.append_to_local_log(partition, parts[0] if len(parts) == 1 else b"".join(parts), 0)
            except (LogError, RecordError, ServerError):
                for part in parts:
                    try:
                        self.append_to_local_log(partition, part, 0)
                    except (LogError, RecordError, ServerError):
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
        replica_id: int = -1,
        log_starts: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Read ``reads`` and call ``respond`` with each partition's result, in order: at once when
        ``min_bytes`` are there (or a read failed, or no wait was asked for), else from the purgatory.
        ``replica_id`` >= 0: a follower's fetch, naming ``log_starts`` (see the module docstring)."""
        results, size, errors = self.read_from_local_log(reads, max_bytes, replica_id)
        if replica_id >= 0:
            self._record_follower_fetches(reads, results, replica_id, log_starts or {})
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
                replica_id=replica_id,
            )
        )

    def _record_follower_fetches(
        self,
        reads: Sequence[FetchRead],
        results: list[FetchPartitionResult],
        replica_id: int,
        log_starts: Mapping[TopicPartition, int],
    ) -> None:
        for (tp, fetch_offset, _max, _epoch), result in zip(reads, results, strict=True):
            partition = self._partitions.get(tp)
            if result.error is not None or partition is None:
                continue
            try:
                if partition.update_follower_fetch_state(replica_id, fetch_offset, log_starts.get(tp)):
                    self._purgatory.notify(tp)  # a DeleteRecords may be answered
            except ServerError as exc:
                logger.debug("follower fetch of %s by broker %d: %s", tp, replica_id, exc)

    def nothing_to_read(self, reads: Sequence[FetchRead], replica_id: int = -1) -> bool:
        """Whether :meth:`read_from_local_log` would now read no byte of ``reads`` and fail none of them:
        each partition is led here in its asked epoch, and its fetch offset is its end (the log end for a
        follower's fetch, the high watermark for a consumer's). Offsets only, no index lookup: a waiting
        Fetch's cheap check (Kafka's ``DelayedFetch.tryComplete``). False means "read to find out"."""
        follower = replica_id >= 0
        partitions = self._partitions
        for tp, fetch_offset, _max_bytes, current_leader_epoch in reads:
            partition = partitions.get(tp)
            if (
                partition is None
                or partition.leader_id != self._broker_id
                or (current_leader_epoch >= 0 and current_leader_epoch != partition.leader_epoch)
                or partition.closed
            ):
                return False
            log = partition.log
            if fetch_offset != (log.log_end_offset if follower else log.high_watermark):
                return False
        return True

    def read_from_local_log(
        self, reads: Sequence[FetchRead], max_bytes: int, replica_id: int = -1
    ) -> tuple[list[FetchPartitionResult], int, bool]:
        """Each partition's result now, the record bytes read in all, and whether any read failed."""
        view = self._cluster.view
        remaining = max_bytes if max_bytes > 0 else 0x7FFFFFFF
        total = 0
        errors = False
        first_with_data = True
        follower = replica_id >= 0
        results: list[FetchPartitionResult] = []
        for tp, fetch_offset, partition_max_bytes, current_leader_epoch in reads:
            try:
                partition = self.leader_partition(view, tp, current_leader_epoch)
            except (LogError, RecordError, ServerError) as exc:
                errors = True
                results.append(FetchPartitionResult(exc, -1, -1, None))
                continue
            high_watermark = partition.high_watermark
            log_start = partition.log_start_offset
            limit = min(partition_max_bytes, remaining)
            region = None
            error: LogError | RecordError | None = None
            # a reassignment's copy to a follower out of the ISR, within the leader's throttle (Kafka's
            # shouldLeaderThrottle): skipped while the quota is exceeded
            throttled = (
                follower
                and self.throttle is not None
                and replica_id not in partition.isr
                and self.throttle.leader_throttled(tp)
            )
            skip = throttled and self.leader_quota.exceeded()
            if not skip and (limit > 0 or first_with_data):
                try:
                    if follower and fetch_offset == partition.log.log_end_offset:
                        region = None  # a caught-up follower (most partitions of its every fetch)
                    elif follower:
                        region = partition.read_for_follower(fetch_offset, max(limit, 1))
                    else:
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
                if throttled:
                    self.leader_quota.record(region.size_bytes)
            results.append(FetchPartitionResult(error, high_watermark, log_start, region))
        return results, total, errors

    # ------------------------------------------------------------------------------------ offsets

    def fetch_offset_for_timestamp(
        self, tp: TopicPartition, timestamp: int, current_leader_epoch: int = -1
    ) -> tuple[int, int, int]:
        """ListOffsets for one partition led here (:meth:`Partition.fetch_offset_for_timestamp`): offset,
        timestamp and the leader epoch."""
        partition = self.leader_partition(self._cluster.view, tp, current_leader_epoch)
        offset, found_timestamp = partition.fetch_offset_for_timestamp(timestamp)
        return offset, found_timestamp, partition.leader_epoch

    def last_offset_for_leader_epoch(
        self, tp: TopicPartition, leader_epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch for one partition led here: ``(epoch, end offset)`` of the largest epoch
        at or below ``leader_epoch`` in the leader's log, ``(-1, -1)`` when there is none (Kafka's
        ``lastOffsetForLeaderEpoch``)."""
        partition = self.leader_partition(self._cluster.view, tp, current_leader_epoch)
        return partition.log.end_offset_for_epoch(leader_epoch)

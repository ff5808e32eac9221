"""One partition this broker holds a replica of (Kafka's ``Partition``): its log and its replica state.

The :class:`~broker.server.replica_manager.ReplicaManager` keeps one :class:`Partition` per local log and
reaches the log only through it: :meth:`Partition.append_records_to_leader` is the one call of
:meth:`broker.log.log.Log.append` in the broker (Produce, and the processors' pipelined ``acks=0`` runs),
:meth:`Partition.append_many_to_leader` of :meth:`~broker.log.log.Log.append_many` (pipelined requests),
:meth:`Partition.append_records_to_follower` of :meth:`~broker.log.log.Log.append_as_follower` (the
replica fetcher); reads go through :meth:`Partition.read` and :meth:`Partition.fetch_offset_for_timestamp`.

A replica is the **leader** or a **follower**, as the partition's state znode says
(``/brokers/topics/<t>/partitions/<p>/state``: leader, leader epoch, ISR; :mod:`broker.cluster.zk_paths`).
The replica manager applies each new state with :meth:`make_leader` or :meth:`make_follower`; a state is
applied once (a state whose znode version is not newer than the applied one changes nothing).

The offsets a leader answers with::

    log_start_offset <= high_watermark <= log_end_offset      acknowledged_offset <= log_end_offset

* **Remote replicas**: the leader keeps, per follower, the log end offset the follower last fetched from
  and when it was last caught up (Kafka's ``Replica``): a fetch at the leader's log end makes it caught up
  now; a fetch at or past the log end of the previous fetch makes it caught up as of that fetch
  (:meth:`update_follower_fetch_state`), and the log start offset its fetches say, from which
  :attr:`Partition.low_watermark` (Kafka's ``lowWatermarkIfLeader``) tells a DeleteRecords when every live
  replica has deleted the records below it.
* **High watermark**: the lowest log end offset of the ISR and of the followers caught up within
  ``replica_lag_time_max_ms`` (Kafka's ``maybeIncrementLeaderHW``, without the min-ISR condition Kafka 3.x
  added), kept in the log as its replicated high watermark, which the log caps by its exposure point: the
  paper's flush rule (``expose = "flushed"``) still applies on top. It only moves up. A partition with one
  replica leaves the log's exposure rules exactly as they were (the log is not ``replicated``).
* **acknowledged_offset**: every offset below it is held by every in-sync replica, so an ``acks=-1``
  Produce whose batches end at or below it is answered (Kafka's ``checkEnoughReplicasReachOffset``): the
  replicated high watermark, not capped by the flush (acks=all waits for the ISR, never for a flush timer),
  or the flushed offset too with ``[log] flush_on_ack``. :meth:`check_enough_replicas` answers
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below ``min.insync.replicas`` meanwhile and
  NOT_LEADER_OR_FOLLOWER when leadership moved, the replica was stopped or its log closed (the batches may
  be truncated by the new leader, or were never copied off a replica being deleted), whatever the offsets
  say; it reads the leadership and the followers under the lock, as one.
* **ISR changes** are the leader's: a follower that fetched up to the high watermark, and past the start of
  the current leader epoch, joins (:meth:`update_follower_fetch_state`); a follower not caught up for
  ``replica_lag_time_max_ms`` leaves (:meth:`out_of_sync_replicas`). The leader does not write ZooKeeper
  here: it hands the new ISR to ``isr_writer`` (the replica manager's ISR thread), which updates the state
  znode conditionally on its version and reports back through :meth:`isr_committed` or
  :meth:`isr_failed`; one change is in flight at a time. While an expansion is in flight the high watermark
  already waits for the joining replica (Kafka's "maximal ISR"): waiting for more replicas is always safe.
  The controller's writes (leader elections, dead brokers removed from the ISR) arrive as new states.

Concurrency: ``_lock`` guards the replica state (leader, epoch, ISR, remote replicas) and is held across the
leader's append and the follower's append, so a leadership change never interleaves with an append (Kafka
takes its leader-ISR lock for reading there; appends to one partition are serialised by the log anyway).
The log is thread-safe on its own (one append lock; readers take none, see :mod:`broker.log.log`). Reads of
``leader_epoch``, ``is_leader`` and ``isr`` without the lock see a value that was true a moment ago, which
is all Metadata-like answers need; an answer that depends on several of them at once (ListOffsets' KIP-207
check: leadership, the epoch's start, the followers and the high watermark) reads them under the lock, or
it could see a leadership half applied (leader set, epoch start and followers not yet). Nothing here calls
ZooKeeper or blocks on another partition.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.clock import Clock, system_clock_ms
from broker.cluster.partition_state import PartitionState
from broker.log.append_info import AppendInfo
from broker.log.file_region import FileRegion
from broker.log.log import Buffer, Log
from broker.log.log_append import AppendOutcome
from broker.protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from broker.record.topic_partition import TopicPartition
from broker.server.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    ServerError,
    UnknownLeaderEpochError,
)

logger = logging.getLogger(__name__)

#: Kafka's "no leader" and "no epoch".
NO_LEADER = -1
NO_EPOCH = -1

#: Called with ``(partition, state it was computed from, new ISR)`` to write an ISR change.
IsrWriter = Callable[["Partition", PartitionState, tuple[int, ...]], None]
#: Whether a broker may be in an ISR now: registered and not in controlled shutdown (Kafka's
#: ``isReplicaIsrEligible``).
ReplicaEligible = Callable[[int], bool]


@dataclass(slots=True)
class RemoteReplica:
    """What the leader knows of one follower (Kafka's ``Replica``); guarded by the partition's lock."""

    broker_id: int
    #: The follower's log end offset, from its last fetch (-1: not fetched since this leadership began).
    log_end_offset: int = -1
    #: The follower's log start offset, as its fetches last said it (-1: not said since this leadership
    #: began); a DeleteRecords waits for it (:attr:`Partition.low_watermark`).
    log_start_offset: int = -1
    #: When the follower last had everything the leader had (ms; 0: never).
    last_caught_up_ms: int = 0
    #: The leader's log end offset and the time at the follower's previous fetch.
    last_fetch_leader_log_end: int = -1
    last_fetch_ms: int = 0


class Partition:
    """The replica of ``log``'s partition on broker ``broker_id`` (see the module docstring)."""

    def __init__(
        self,
        log: Log,
        broker_id: int,
        *,
        replica_lag_time_max_ms: int = 10_000,
        min_insync_replicas: int = 1,
        isr_writer: IsrWriter | None = None,
        replica_eligible: ReplicaEligible | None = None,
        clock: Clock = system_clock_ms,
    ) -> None:
        self.log = log
        self.topic_partition: TopicPartition = log.topic_partition
        self.broker_id = broker_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        #: ``min.insync.replicas`` in force (the topic's, else the broker's); set by the replica manager.
        self.min_insync_replicas = min_insync_replicas
        self._isr_writer = isr_writer
        self._replica_eligible: ReplicaEligible = replica_eligible or (lambda _broker_id: True)
        self._clock = clock
        self._lock = threading.Lock()
        self.leader_id = NO_LEADER
        self.leader_epoch = NO_EPOCH
        #: The log end offset when this broker became leader for ``leader_epoch`` (-1: not leader).
        self.leader_epoch_start_offset = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()
        #: The applied state (its znode version orders states).
        self.state: PartitionState | None = None
        self._remote: dict[int, RemoteReplica] = {}
        #: An ISR change handed to the writer and not yet answered (None: none in flight).
        self._pending_isr: tuple[int, ...] | None = None
        #: As a follower: the high watermark the leader answered last (-1: none yet); one int store by the
        #: fetcher thread, read by a metrics scrape.
        self.leader_high_watermark = -1
        #: Whether the replica manager listens to the log end (once the partition has followers).
        self.end_listened = False
        #: The topic node's znode version whose replicas were applied (-1: none known).
        self.assignment_version = -1

    # ------------------------------------------------------------------------------------ state

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def high_watermark(self) -> int:
        """Consumers read below it (see the module docstring)."""
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def closed(self) -> bool:
        """The log was closed or deleted (its topic deleted, or the broker stopping)."""
        return self.log.closed

    @property
    def flush_on_ack(self) -> bool:
        """Whether an ``acks=-1`` append waits for the fsync of its batches (``[log] flush_on_ack``)."""
        return self.log.config.flush_on_ack

    @property
    def replicated(self) -> bool:
        """Whether the partition has other replicas than this one."""
        return len(self.replicas) > 1

    def is_newer(self, state: PartitionState | None) -> bool:
        """Whether ``state`` is newer than the applied one (a state is applied once; None is not)."""
        applied = self.state
        if state is None:
            return False
        return (
            applied is None
            or state.zk_version > applied.zk_version
            or state.leader_epoch > applied.leader_epoch
        )

    def make_leader(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        """Lead the partition as ``state`` says (Kafka's ``makeLeader``); True if this starts a leadership
        (a new leader epoch), False if it only updates the ISR of the current one."""
        now = self._clock()
        with self._lock:
            new_epoch = not self.is_leader or state.leader_epoch != self.leader_epoch
            self.state = state
            self.replicas = replicas
            self.isr = frozenset(state.isr)
            self._pending_isr = None
            self.leader_id = self.broker_id
            self.leader_epoch = state.leader_epoch
            log = self.log
            log.set_replicated(len(replicas) > 1)
            followers = [r for r in replicas if r != self.broker_id]
            if new_epoch:
                self.leader_epoch_start_offset = log.log_end_offset
                log.assign_epoch_start_offset(state.leader_epoch, log.log_end_offset)
                # Kafka: ISR members count as caught up when a leadership starts; the others must prove it
                self._remote = {
                    r: RemoteReplica(r, last_caught_up_ms=now if r in self.isr else 0) for r in followers
                }
            else:
                for r in followers:
                    self._remote.setdefault(r, RemoteReplica(r))
                for r in [r for r in self._remote if r not in followers]:
                    del self._remote[r]
            self._maybe_increment_high_watermark(now)
        return new_epoch

    def update_replicas(self, replicas: tuple[int, ...]) -> None:
        """A reassignment changed the replicas, not the state (same leader epoch and ISR): only the replica
        list and a leader's followers change. The applied state, the ISR, an ISR change in flight and the
        followers' fetch states stay, so the high watermark keeps counting every in-sync replica (applying
        the view's state here could bring back an ISR older than this leader's own last change)."""
        with self._lock:
            self.replicas = replicas
            self.log.set_replicated(len(replicas) > 1)
            if self.leader_id == self.broker_id:
                followers = [r for r in replicas if r != self.broker_id]
                for r in followers:
                    self._remote.setdefault(r, RemoteReplica(r))
                for r in [r for r in self._remote if r not in followers]:
                    del self._remote[r]
                self._maybe_increment_high_watermark(self._clock())

    def make_follower(self, state: PartitionState, replicas: tuple[int, ...]) -> bool:
        """Follow ``state.leader`` (Kafka's ``makeFollower``); True if the leader or its epoch changed, so
        that the fetcher must find the divergence point again before fetching."""
        with self._lock:
            changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
            self.state = state
            self.replicas = replicas
            self.isr = frozenset(state.isr)
            self._pending_isr = None
            self.leader_id = state.leader
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = -1
            self._remote = {}
            self.log.set_replicated(len(replicas) > 1)
        return changed

    def stop_replica(self) -> None:
        """This replica was moved off the broker (its log is being deleted): it neither leads nor follows
        any more, so every produce waiting on it is answered NOT_LEADER_OR_FOLLOWER (retried at the new
        leader) and nothing more is acknowledged here."""
        with self._lock:
            self.leader_id = NO_LEADER
            self.leader_epoch_start_offset = -1
            self._remote = {}
            self._pending_isr = None

    def check_leader_epoch(self, request_epoch: int) -> None:
        """Kafka's fencing of a request's ``current_leader_epoch`` (-1: not checked)."""
        if request_epoch < 0:
            return
        current = self.leader_epoch
        if request_epoch < current:
            raise FencedLeaderEpochError(self.topic_partition, request_epoch, current)
        if request_epoch > current:
            raise UnknownLeaderEpochError(self.topic_partition, request_epoch, current)

    def _not_leader(self) -> NotLeaderOrFollowerError:
        return NotLeaderOrFollowerError(self.topic_partition, self.leader_id, self.broker_id)

    # ------------------------------------------------------------------------------------ append
    def append_records_to_leader(self, records: Buffer, required_acks: int = 1) -> AppendInfo:
        """Append a producer's batches at the log end, leader epoch stamped (the one path into
        :meth:`Log.append`, whose errors it raises, nothing appended): NOT_LEADER_OR_FOLLOWER when this
        replica does not lead, NOT_ENOUGH_REPLICAS for ``acks=-1`` while the ISR is below min.insync."""
        with self._lock:
            self._check_appendable(required_acks)
            info = self.log.append(records, leader_epoch=self.leader_epoch)
            if self._remote:  # the ISR may be the leader alone: then the high watermark follows the log end
                self._maybe_increment_high_watermark(self._clock())
            return info

    def append_many_to_leader(self, requests: Sequence[Buffer], acks: int = 1) -> list[AppendOutcome]:
        """:meth:`append_records_to_leader` of several requests in one write (the one call of
        :meth:`Log.append_many`): each request's outcome; raises what refuses them all."""
        with self._lock:
            self._check_appendable(acks)
            outcomes = self.log.append_many(requests, leader_epoch=self.leader_epoch)
            if self._remote:
                self._maybe_increment_high_watermark(self._clock())
            return outcomes

    def _check_appendable(self, required_acks: int) -> None:
        if self.leader_id != self.broker_id:
            raise self._not_leader()
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            raise NotEnoughReplicasError(self.topic_partition, sorted(self.isr), self.min_insync_replicas)

    def append_records_to_follower(self, records: Buffer, leader_epoch: int) -> AppendInfo | None:
        """Append the leader's batches unchanged (the replica fetcher); None when this replica no longer
        follows in ``leader_epoch`` (the fetch was answered before a leadership change: dropped)."""
        with self._lock:
            if self.is_leader or self.leader_epoch != leader_epoch:
                return None
            return self.log.append_as_follower(records)

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        """A follower exposes what the leader says is replicated, up to its own log end."""
        self.leader_high_watermark = leader_high_watermark
        log = self.log
        log.update_replicated_high_watermark(min(leader_high_watermark, log.log_end_offset))

    @property
    def follower_lag(self) -> int:
        """As a follower, the messages this replica is behind what the leader last said is replicated
        (Kafka's replica fetcher lag); 0 on a leader or before the first answer."""
        if self.is_leader or self.leader_high_watermark < 0:
            return 0
        return max(0, self.leader_high_watermark - self.log.log_end_offset)

    def truncate_to(self, offset: int, leader_epoch: int) -> int | None:
        """Truncate the follower's log to ``offset`` (the divergence point); None if this replica no
        longer follows in ``leader_epoch``. Returns the new log end."""
        with self._lock:
            if self.is_leader or self.leader_epoch != leader_epoch:
                return None
            return self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int, leader_epoch: int) -> bool:
        """Empty the follower's log and start it at ``offset`` (the leader's log start is past our end)."""
        with self._lock:
            if self.is_leader or self.leader_epoch != leader_epoch:
                return False
            self.log.truncate_fully_and_start_at(offset)
            return True

    def acknowledged_offset(self) -> int:
        """Every in-sync replica holds the offsets below it (see the module docstring)."""
        with self._lock:
            return self._acknowledged_offset()

    def _acknowledged_offset(self) -> int:
        """:meth:`acknowledged_offset` (caller holds the lock: leadership and followers read as one)."""
        log = self.log
        if self._remote:
            replicated = log.replicated_high_watermark
            end = log.high_watermark if replicated is None else replicated
            return min(end, log.flushed_offset) if log.config.flush_on_ack else end
        return log.flushed_offset if log.config.flush_on_ack else log.log_end_offset

    def check_enough_replicas(self, end_offset: int) -> tuple[bool, ServerError | None]:
        """Whether an ``acks=-1`` append ending below ``end_offset`` can be answered, and with which error
        (Kafka's ``checkEnoughReplicasReachOffset``).

        NOT_LEADER_OR_FOLLOWER once this replica no longer leads, was stopped (moved off the broker) or its
        log closed (deleted, or the broker stopping): its unreplicated batches may never reach the new
        leader, so they are never acknowledged here (Kafka answers a partition no longer hosted so). Under
        the lock, so that leadership and the followers are read as of one moment: read apart, a leader
        demoted in between looked like a leader without followers, whose log end is acknowledged."""
        with self._lock:
            if self.leader_id != self.broker_id or self.log.closed:
                return True, self._not_leader()
            if self._acknowledged_offset() < end_offset:
                return False, None
            isr = self.isr
            if self._remote and len(isr) < self.min_insync_replicas:
                return True, NotEnoughReplicasAfterAppendError(
                    self.topic_partition, sorted(isr), self.min_insync_replicas
                )
            return True, None

    def request_flush(self, offset: int) -> None:
        """Ask for the offsets below ``offset`` to be fsynced now (``flush_on_ack``: group commit)."""
        self.log.request_flush(offset)

    # ------------------------------------------------------------------------------------ followers

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int | None = None
    ) -> bool:
        """A follower fetched from ``fetch_offset``: it holds everything below it (Kafka's
        ``updateFollowerFetchState``). May start an ISR expansion and advance the high watermark.
        ``log_start_offset``: the follower's, when its fetch said it (None: unchanged). True when that moved
        the follower's log start offset (a waiting DeleteRecords may be answered)."""
        now = self._clock()
        with self._lock:
            if self.leader_id != self.broker_id:
                raise self._not_leader()
            remote = self._remote.get(replica_id)
            if remote is None:
                raise InvalidRequestError(
                    f"{self.topic_partition}: broker {replica_id} is not a replica (replicas "
                    f"{list(self.replicas)})"
                )
            leader_end = self.log.log_end_offset
            if fetch_offset >= leader_end:
                remote.last_caught_up_ms = max(remote.last_caught_up_ms, now)
            elif fetch_offset >= remote.last_fetch_leader_log_end:
                remote.last_caught_up_ms = max(remote.last_caught_up_ms, remote.last_fetch_ms)
            moved = remote.log_end_offset != fetch_offset
            remote.log_end_offset = fetch_offset
            start_moved = False
            if log_start_offset is not None and remote.log_start_offset != log_start_offset:
                remote.log_start_offset = log_start_offset
                start_moved = True
            remote.last_fetch_leader_log_end = leader_end
            remote.last_fetch_ms = now
            expand = self._expansion_of(remote)
            if moved or expand is not None:
                self._maybe_increment_high_watermark(now)
            state = self.state
        if expand is not None and state is not None and self._isr_writer is not None:
            logger.info(
                "%s: broker %d caught up at offset %d (high watermark %d): adding it to the ISR %s",
                self.topic_partition,
                replica_id,
                fetch_offset,
                self.log.high_watermark,
                sorted(self.isr),
            )
            self._isr_writer(self, state, expand)
        return start_moved

    def _expansion_of(self, remote: RemoteReplica) -> tuple[int, ...] | None:
        """The ISR with ``remote`` added, if it may join now (caller holds the lock; marks it in flight)."""
        if self._pending_isr is not None or remote.broker_id in self.isr:
            return None
        end = remote.log_end_offset
        replicated = self.log.replicated_high_watermark
        if end < (replicated or 0) or end < self.leader_epoch_start_offset:
            return None
        new_isr = tuple(sorted(self.isr | {remote.broker_id}))
        self._pending_isr = new_isr
        return new_isr

    def out_of_sync_replicas(self) -> tuple[PartitionState, tuple[int, ...]] | None:
        """The ISR without the followers not caught up for ``replica_lag_time_max_ms``, and the state it
        replaces, if any must leave (Kafka's ``getOutOfSyncReplicas``); marks the change in flight."""
        now = self._clock()
        with self._lock:
            state = self.state
            if self.leader_id != self.broker_id or self._pending_isr is not None or state is None:
                return None
            lagging = {
                r
                for r in self.isr
                if r != self.broker_id
                and (
                    (remote := self._remote.get(r)) is None
                    or now - remote.last_caught_up_ms > self.replica_lag_time_max_ms
                )
            }
            if not lagging:
                return None
            new_isr = tuple(sorted(self.isr - lagging))
            self._pending_isr = new_isr
        logger.warning(
            "%s: followers %s have not caught up for %d ms: shrinking the ISR from %s to %s",
            self.topic_partition,
            sorted(lagging),
            self.replica_lag_time_max_ms,
            sorted(self.isr),
            list(new_isr),
        )
        return state, new_isr

    def isr_committed(self, state: PartitionState) -> None:
        """The ISR writer stored ``state`` (the change in flight): apply it if it still leads that epoch."""
        with self._lock:
            self._pending_isr = None
            current = self.state
            if (
                self.leader_id != self.broker_id
                or state.leader_epoch != self.leader_epoch
                or (current is not None and current.zk_version >= state.zk_version)
            ):
                return
            self.state = state
            self.isr = frozenset(state.isr)
            self._maybe_increment_high_watermark(self._clock())

    def isr_failed(self) -> None:
        """The ISR write lost to a newer state (the controller's): the new state arrives by the watcher."""
        with self._lock:
            self._pending_isr = None

    def recheck_high_watermark(self) -> bool:
        """Recompute the high watermark now (a broker went away or began a controlled shutdown, so a
        caught-up follower outside the ISR no longer holds it back); True if it advanced."""
        with self._lock:
            if self.leader_id != self.broker_id:
                return False
            return self._maybe_increment_high_watermark(self._clock())

    def _maybe_increment_high_watermark(self, now: int) -> bool:
        """Kafka's ``maybeIncrementLeaderHW`` (caller holds the lock): the lowest log end of the (maximal)
        ISR and of the followers that caught up within ``replica_lag_time_max_ms`` and may join the ISR
        (registered, not shutting down: without that check a follower stopped after the controller took
        it out of the ISR would hold acks=all writes until its lag ran out)."""
        log = self.log
        if not self._remote:
            return False
        new_hw = log.log_end_offset
        isr = self.isr if self._pending_isr is None else self.isr | set(self._pending_isr)
        lag = self.replica_lag_time_max_ms
        for remote in self._remote.values():
            end = remote.log_end_offset
            if end < new_hw and (
                remote.broker_id in isr
                or (now - remote.last_caught_up_ms <= lag and self._replica_eligible(remote.broker_id))
            ):
                new_hw = max(end, 0)
        return log.update_replicated_high_watermark(new_hw)

    @property
    def low_watermark(self) -> int:
        """The lowest log start offset of this leader and of its followers on live brokers (Kafka's
        ``lowWatermarkIfLeader``; -1 while such a follower has not said its own). NOT_LEADER_OR_FOLLOWER
        when this replica does not lead."""
        with self._lock:
            if self.leader_id != self.broker_id:
                raise self._not_leader()
            low = self.log.log_start_offset
            for remote in self._remote.values():
                if remote.log_start_offset < low and self._replica_eligible(remote.broker_id):
                    low = remote.log_start_offset
            return low

    def follower_log_end_offsets(self) -> dict[int, int]:
        """Each follower's log end offset as last fetched (-1: not since this leadership began)."""
        with self._lock:
            return {r: remote.log_end_offset for r, remote in self._remote.items()}

    # ------------------------------------------------------------------------------------ reads

    def read(self, fetch_offset: int, max_bytes: int) -> FileRegion | None:
        """Whole batches from ``fetch_offset``, below the high watermark (:meth:`Log.read`)."""
        return self.log.read(fetch_offset, max_bytes)

    def read_for_follower(self, fetch_offset: int, max_bytes: int) -> FileRegion | None:
        """Whole batches from ``fetch_offset`` up to the log end: a follower copies what consumers may not
        read yet."""
        log = self.log
        return log.read(fetch_offset, max_bytes, max_offset=log.log_end_offset)

    def fetch_offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """ListOffsets: ``(offset, timestamp)``: the log start for -2, the high watermark for -1 (timestamp
        -1 for both), the first exposed record with the largest timestamp for -3 (KIP-734), else the first
        offset whose timestamp is at or after ``timestamp`` and that record's timestamp, as Kafka answers
        (``(-1, -1)`` when there is none).

        A new leader whose high watermark has not yet reached the start of its epoch answers
        OFFSET_NOT_AVAILABLE (Kafka's KIP-207): the previous leader may have exposed offsets this one
        cannot vouch for yet, and a latest offset must never go back. NOT_LEADER_OR_FOLLOWER when this
        replica does not lead; the leadership, the epoch's start, the followers and the high watermark are
        read under the lock, as one (see the module docstring)."""
        log = self.log
        with self._lock:
            if self.leader_id != self.broker_id:
                raise self._not_leader()
            start, followed, high_watermark = (
                self.leader_epoch_start_offset,
                bool(self._remote),
                log.high_watermark,
            )
        if start > 0 and followed and high_watermark < start:
            raise OffsetNotAvailableError(self.topic_partition, high_watermark, start)
        if timestamp == EARLIEST_TIMESTAMP:
            return log.log_start_offset, -1
        if timestamp == LATEST_TIMESTAMP:
            return high_watermark, -1
        if timestamp == MAX_TIMESTAMP:
            found = log.offset_of_max_timestamp()
            return (-1, -1) if found is None else found
        if timestamp < 0:
            raise InvalidRequestError(f"timestamp {timestamp} is not -1, -2, -3 or a time")
        found = log.offset_for_timestamp(timestamp)
        return (-1, -1) if found is None else found

    def __repr__(self) -> str:
        return (
            f"Partition({self.topic_partition}, leader={self.leader_id}, epoch={self.leader_epoch}, "
            f"isr={sorted(self.isr)}, {self.log!r})"
        )

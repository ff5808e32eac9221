"""The cluster's controller: one broker that elects partition leaders and keeps ISRs honest (Kafka's
``KafkaController`` in ZooKeeper mode).

Every broker runs a :class:`Controller`; the one whose
:class:`~broker.cluster.controller_election.ControllerElection` holds the ephemeral ``/controller`` znode is
active, with the ``/controller_epoch`` it incremented on election. Every state it writes is a ZooKeeper
multi that checks ``/controller_epoch``'s znode version, so a controller that lost its session (a paused
or partitioned broker) can no longer write anything once another was elected
(:func:`broker.cluster.partition_state_store.write_states` raises ``ControllerMovedError`` and this one
resigns).

What it does, on its own thread (Kafka's single controller event thread), each time it is woken:

* **Reconcile**: for every partition, :func:`broker.server.partition_leader_election.next_state` against the
  cluster view (live brokers, brokers in controlled shutdown, the states): offline partitions get a leader
  from the ISR (unclean election only with ``[broker] unclean_leader_election`` or the topic's
  ``unclean.leader.election.enable``), dead replicas leave the ISR, a leader in controlled shutdown hands
  over. The states that differ are written conditionally on the versions the view read; a write that loses
  (a leader changed its ISR meanwhile) is retried on the next pass, which the watcher's next view starts.
  The brokers read the new states from their own watches of the state znodes (Lumber's brokers need no
  LeaderAndIsr request; :mod:`broker.server.replica_manager`).
* **Wake-ups**: every new cluster view (a broker registered or gone, a topic created, a state changed, a
  controlled-shutdown request), election to controller, a preferred-replica election request
  (``/admin/preferred_replica_election``, deleted when done: Kafka's), and every
  ``[broker] leader_imbalance_check_interval_ms`` with ``auto_leader_rebalance`` on, which moves leadership
  back to each partition's preferred replica where it is live and in the ISR.
* **Older topics**: partitions without a state znode (a topic written by an older Lumber) get their first
  state.
* **Reassignments** (AlterPartitionReassignments, ``/admin/reassign_partitions``): started, completed and
  tidied by :class:`~broker.server.partition_reassigner.PartitionReassigner` before the other decisions of
  each pass; a new controller resumes them from ZooKeeper.

Lumber differs from Kafka here: decisions are recomputed from the whole view at each wake-up (level-
triggered) instead of a state machine per partition and replica; controlled shutdown is asked through the
``/admin/controlled_shutdown/<id>`` znode rather than a ControlledShutdown request; an ISR change alone
keeps the leader epoch.

Concurrency: :meth:`wake`, :meth:`on_elected` and :meth:`on_resigned` only set flags and wake the thread;
everything else runs on the controller thread, which reads views (immutable) and ZooKeeper and holds no
lock while it writes. :meth:`stats` (a metrics scrape's thread) reads the current view and one counter that
only the controller thread increments.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import DataWatch

from broker.cluster import partition_state_store, zk_paths
from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.controller_election import ControllerElection
from broker.cluster.errors import ClusterError, ControllerMovedError
from broker.cluster.partition_state import NO_LEADER, PartitionState
from broker.cluster.topic_config import unclean_leader_election
from broker.config import BrokerConfig
from broker.record.topic_partition import TopicPartition
from broker.server.partition_leader_election import next_state
from broker.server.partition_reassigner import Outcome, PartitionReassigner

logger = logging.getLogger(__name__)

#: How long the thread waits after a failed pass before trying again.
_RETRY_S = 0.5


@dataclass(frozen=True)
class ControllerStats:
    """What the active controller tells the metrics (:mod:`broker.server.broker_metrics`)."""

    #: partitions without a live leader (no leader, or a leader not registered), in the current view
    offline_partitions: int
    #: leader changes this broker wrote as controller since it started (a new leader for a partition)
    leader_elections: int


class Controller:
    """This broker's part in controller election, and the controller's work once elected (see the module
    docstring)."""

    def __init__(
        self,
        client: KazooClient,
        broker_id: int,
        config: BrokerConfig,
        cluster: ClusterWatcher,
        *,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._broker_id = broker_id
        self._config = config
        self._cluster = cluster
        self._clock_s = clock_s
        self._cond = threading.Condition()
        self._wake_reason: set[str] = set()
        self._stopping = False
        #: The epoch and its znode version while active; None while not the controller.
        self._epoch: tuple[int, int] | None = None
        #: The znode version of each state this controller wrote last (the controller thread's own).
        self._written: dict[TopicPartition, int] = {}
        self._next_rebalance_s = 0.0
        self._leader_elections = 0
        self._election = ControllerElection(
            client, broker_id, on_elected=self.on_elected, on_resigned=self.on_resigned
        )
        self._thread = threading.Thread(target=self._run, name=f"controller-{broker_id}", daemon=True)
        self._preferred_watch: DataWatch | None = None
        self._reassign_watch: DataWatch | None = None
        self.reassigner = PartitionReassigner(client, broker_id, refresh=cluster.refresh, wake=self.wake)

    # ------------------------------------------------------------------------------------ public

    @property
    def active(self) -> bool:
        return self._epoch is not None

    @property
    def epoch(self) -> int:
        """The controller epoch while active, else -1."""
        current = self._epoch
        return -1 if current is None else current[0]

    def stats(self) -> ControllerStats | None:
        """The offline partitions and the elections so far, while this broker is the controller."""
        if not self.active:
            return None
        view = self._cluster.view
        live = set(view.brokers)
        offline = sum(
            1 for state in view.states.values() if state.leader == NO_LEADER or state.leader not in live
        )
        return ControllerStats(offline, self._leader_elections)

    def start(self) -> None:
        self._thread.start()
        self._election.start()
        self._preferred_watch = DataWatch(
            self._client, zk_paths.PREFERRED_REPLICA_ELECTION_PATH, self._on_preferred_request
        )
        self._reassign_watch = DataWatch(
            self._client, zk_paths.REASSIGN_PARTITIONS_PATH, self._on_reassign_request
        )

    def _on_reassign_request(self, data: bytes | None, _stat: object) -> None:
        """kazoo's thread: ``/admin/reassign_partitions`` was written (never blocks)."""
        if data is not None and not self._stopping:
            self.wake("reassignment requested")

    def alter_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None], timeout_s: float
    ) -> dict[TopicPartition, Outcome]:
        """AlterPartitionReassignments (request handler threads): see
        :meth:`~broker.server.partition_reassigner.PartitionReassigner.submit`."""
        return self.reassigner.submit(targets, timeout_s, self._cluster.view.controller_id)

    def _on_preferred_request(self, data: bytes | None, _stat: object) -> None:
        """kazoo's thread: a preferred-replica election was asked for (never blocks)."""
        if data is not None and not self._stopping:
            self.wake("preferred election requested")

    def stop(self) -> None:
        """Resign (if active) and stop the thread. Idempotent."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._election.resign()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(10.0)

    def wake(self, reason: str = "cluster change") -> None:
        """Look at the cluster again (the watcher's views call it; never blocks)."""
        with self._cond:
            self._wake_reason.add(reason)
            self._cond.notify_all()

    def on_elected(self, epoch: int, epoch_zk_version: int) -> None:
        logger.info("broker %d is the controller (epoch %d)", self._broker_id, epoch)
        with self._cond:
            self._epoch = (epoch, epoch_zk_version)
            self._written = {}
            self._next_rebalance_s = self._clock_s() + self._config.leader_imbalance_check_interval_ms / 1000
            self._wake_reason.add("elected")
            self._cond.notify_all()
        self.reassigner.set_active(True)

    def on_resigned(self) -> None:
        with self._cond:
            was = self._epoch
            self._epoch = None
            self._cond.notify_all()
        self.reassigner.set_active(False)
        if was is not None:
            logger.warning("broker %d is no longer the controller (was epoch %d)", self._broker_id, was[0])

    # ------------------------------------------------------------------------------------ the thread

    def _run(self) -> None:
        while True:
            with self._cond:
                timeout = self._timeout_s()
                if not self._wake_reason and not self._stopping:
                    self._cond.wait(timeout)
                if self._stopping:
                    return
                reasons, self._wake_reason = self._wake_reason, set()
                epoch = self._epoch
            if epoch is None:
                continue
            try:
                self._pass(epoch, reasons)
            except ControllerMovedError as exc:
                logger.warning("broker %d: %s; resigning", self._broker_id, exc)
                self._election.resign()
                self.on_resigned()
            except (ClusterError, KazooException, KazooTimeoutError) as exc:
                logger.warning(
                    "controller %d: a pass failed (%r); retrying in %.1f s", self._broker_id, exc, _RETRY_S
                )
                self._retry_later(reasons)
            except Exception:  # the thread's top loop: log, retry, keep controlling
                logger.exception(
                    "controller %d: a pass failed; retrying in %.1f s", self._broker_id, _RETRY_S
                )
                self._retry_later(reasons)

    def _timeout_s(self) -> float | None:
        """Caller holds ``_cond``: how long to sleep before the next periodic rebalance."""
        if self._epoch is None or not self._config.auto_leader_rebalance:
            return None
        return max(0.0, self._next_rebalance_s - self._clock_s())

    def _retry_later(self, reasons: set[str]) -> None:
        with self._cond:
            self._cond.wait(_RETRY_S)
            self._wake_reason |= reasons

    def _pass(self, epoch: tuple[int, int], reasons: set[str]) -> None:
        controller_epoch, epoch_zk_version = epoch
        view = self._cluster.refresh() if "elected" in reasons else self._cluster.view
        if len(self._written) > len(view.states):
            self._written = {tp: v for tp, v in self._written.items() if tp in view.states}
        self._create_missing_states(view, controller_epoch, epoch_zk_version)
        view, moved = self.reassigner.run(view, controller_epoch, epoch_zk_version, self._written)
        preferred = self._preferred_partitions(view, reasons)
        updates = self._decisions(view, controller_epoch, preferred)
        for tp in moved:
            updates.pop(tp, None)
        if updates:
            self._write(updates, epoch_zk_version)
        if "preferred election requested" in reasons:
            self._finish_preferred_request()

    def _preferred_partitions(self, view: ClusterView, reasons: set[str]) -> set[TopicPartition]:
        """The partitions whose preferred replica should lead, if it can, in this pass."""
        chosen: set[TopicPartition] = set()
        if "preferred election requested" in reasons:
            chosen |= set(self._read_preferred_request())
        now = self._clock_s()
        if self._config.auto_leader_rebalance and now >= self._next_rebalance_s:
            self._next_rebalance_s = now + self._config.leader_imbalance_check_interval_ms / 1000
            chosen |= set(view.states)
        return chosen

    def _read_preferred_request(self) -> list[TopicPartition]:
        """The partitions ``/admin/preferred_replica_election`` names (none if it is gone or unreadable)."""
        path = zk_paths.PREFERRED_REPLICA_ELECTION_PATH
        try:
            data, _ = self._client.get(path)
        except NoNodeError:
            return []
        try:
            return zk_paths.decode_preferred_election(path, data)
        except zk_paths.ZkDataError as exc:
            logger.error("controller %d: %s; deleting the request", self._broker_id, exc)  # noqa: TRY400
            return []

    def _finish_preferred_request(self) -> None:
        """Delete the request once its elections are written (Kafka's controller does the same)."""
        with contextlib.suppress(NoNodeError):
            self._client.delete(zk_paths.PREFERRED_REPLICA_ELECTION_PATH)

    def _decisions(
        self, view: ClusterView, controller_epoch: int, preferred: set[TopicPartition]
    ) -> dict[TopicPartition, tuple[PartitionState, PartitionState]]:
        live = set(view.brokers)
        shutting_down = set(view.shutting_down) & live
        default_unclean = self._config.unclean_leader_election
        updates: dict[TopicPartition, tuple[PartitionState, PartitionState]] = {}
        for tp, state in view.states.items():
            replicas = view.replicas(tp)
            new = next_state(
                state,
                replicas,
                live,
                shutting_down,
                controller_epoch=controller_epoch,
                unclean=self._unclean(view, tp.topic, default_unclean),
                preferred=tp in preferred,
            )
            if new is not state and state.zk_version >= self._written.get(tp, -1):
                updates[tp] = (state, new)
        return updates

    @staticmethod
    def _unclean(view: ClusterView, topic: str, default: bool) -> bool:
        return unclean_leader_election(view.topic_configs.get(topic, {}), default)

    def _write(
        self, updates: Mapping[TopicPartition, tuple[PartitionState, PartitionState]], epoch_zk_version: int
    ) -> None:
        results = partition_state_store.write_states(self._client, updates, epoch_zk_version)
        for tp, stored in results.items():
            if stored is not None:
                # the watcher's views lag behind this write: decide on this partition again only from a view
                # that has it, not from the older state it replaced
                self._written[tp] = stored.zk_version
        lost = [tp for tp, stored in results.items() if stored is None]
        for tp, (old, new) in sorted(updates.items()):
            if results.get(tp) is None:
                continue
            if new.leader != old.leader:
                if new.leader != NO_LEADER:
                    self._leader_elections += 1
                logger.info(
                    "controller %d: %s: leader %d -> %d (epoch %d), ISR %s -> %s",
                    self._broker_id,
                    tp,
                    old.leader,
                    new.leader,
                    new.leader_epoch,
                    list(old.isr),
                    list(new.isr),
                )
            else:
                logger.info(
                    "controller %d: %s: ISR %s -> %s", self._broker_id, tp, list(old.isr), list(new.isr)
                )
        if lost:
            logger.info(
                "controller %d: %d state writes lost to newer states (retried with the next view): %s",
                self._broker_id,
                len(lost),
                sorted(lost)[:10],
            )
            self.wake("lost writes")

    def _create_missing_states(self, view: ClusterView, controller_epoch: int, epoch_zk_version: int) -> None:
        missing = view.partitions_without_state()
        if missing:
            count = sum(len(partitions) for partitions in missing.values())
            logger.info(
                "controller %d: creating the state of %d partitions that have none (topics written by an "
                "older Lumber)",
                self._broker_id,
                count,
            )
            partition_state_store.create_missing_states(
                self._client, missing, set(view.brokers), controller_epoch, epoch_zk_version
            )

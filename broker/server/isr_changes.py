"""The leaders' ISR changes, written by one thread: :class:`IsrChanges`, a part of
:class:`~broker.server.replica_manager.ReplicaManager` (mixed in, as Kafka's ``ReplicaManager`` keeps them).

A leader's partition asks for an ISR change (:meth:`IsrChanges._submit_isr_change`: a follower caught up or
fell behind); the ``isr-<id>`` thread writes the changes queued meanwhile in one pipelined batch of at most
:data:`MAX_ISR_BATCH`, each conditional on the state znode version it was computed from
(:func:`broker.cluster.partition_state_store.update_isrs`), and reports each outcome to its partition
(:meth:`~broker.server.partition.Partition.isr_committed` or ``isr_failed``). A broker that is not
registered or is in controlled shutdown is not added (Kafka's ``isReplicaIsrEligible``). Every
``replica_lag_time_max_ms / 2`` the thread asks each led partition for followers that fell out of sync
(Kafka's ``isr-expiration`` task). A write that loses to a newer state (the controller's) is dropped: the
new state arrives through the watcher.

Concurrency: any thread queues a change; only the ISR thread writes and counts (``isr_shrinks``,
``isr_expands``, read by the metrics).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.errors import ClusterError
from broker.cluster.partition_state import PartitionState
from broker.config import BrokerConfig
from broker.record.topic_partition import TopicPartition
from broker.server.partition import Partition
from broker.server.purgatory import Purgatory

__all__ = ["MAX_ISR_BATCH", "IsrChanges", "IsrStore", "eligible"]

logger = logging.getLogger(__name__)

#: Writes ISR changes, pipelined: partition -> ``(state it was computed from, new ISR)``, answered per
#: partition with the stored state, or None when the state znode moved on meanwhile
#: (:func:`broker.cluster.partition_state_store.update_isrs`).
IsrStore = Callable[
    [Mapping[TopicPartition, tuple[PartitionState, tuple[int, ...]]]],
    dict[TopicPartition, PartitionState | None],
]
#: Most ISR changes written in one pipelined batch.
MAX_ISR_BATCH = 1000


class IsrChanges:
    """The ISR thread's part of the replica manager (see the module docstring); its state is the replica
    manager's, set up in its ``__init__``."""

    _config: BrokerConfig
    _cluster: ClusterWatcher
    _purgatory: Purgatory
    _isr_store: IsrStore | None
    _isr_queue: queue.Queue[tuple[Partition, PartitionState, tuple[int, ...]] | None]
    _stopping: threading.Event
    isr_shrinks: int
    isr_expands: int

    if TYPE_CHECKING:

        def partitions(self) -> list[Partition]: ...

    def _submit_isr_change(self, partition: Partition, state: PartitionState, isr: tuple[int, ...]) -> None:
        if self._isr_store is None or self._stopping.is_set():
            partition.isr_failed()
            return
        self._isr_queue.put((partition, state, isr))

    def _run_isr_changes(self) -> None:
        interval_s = max(self._config.replica_lag_time_max_ms / 2000, 0.05)
        store = self._isr_store
        if store is None:
            return
        while not self._stopping.is_set():
            try:
                item = self._isr_queue.get(timeout=interval_s)
            except queue.Empty:
                self._expire_isr()
                continue
            batch = [item]
            while len(batch) < MAX_ISR_BATCH:
                try:
                    batch.append(self._isr_queue.get_nowait())
                except queue.Empty:
                    break
            changes = self._eligible_isr_changes([b for b in batch if b is not None])
            if changes:
                self._write_isr_changes(store, changes)
            if self._isr_queue.empty():
                self._expire_isr()

    def _eligible_isr_changes(
        self, batch: list[tuple[Partition, PartitionState, tuple[int, ...]]]
    ) -> dict[TopicPartition, tuple[Partition, PartitionState, tuple[int, ...]]]:
        """The changes of ``batch`` to write: an expansion adding a broker that is not registered (still
        starting, or gone) or in controlled shutdown is dropped (Kafka's ``isReplicaIsrEligible``; it is
        asked again at the follower's next fetch)."""
        view = self._cluster.view
        changes: dict[TopicPartition, tuple[Partition, PartitionState, tuple[int, ...]]] = {}
        for partition, state, isr in batch:
            joining = set(isr) - set(state.isr)
            ineligible = sorted(r for r in joining if not eligible(view, r))
            if ineligible:
                logger.debug(
                    "%s: broker %s caught up but is not live: not adding it to the ISR yet",
                    partition.topic_partition,
                    ineligible,
                )
                partition.isr_failed()
                continue
            earlier = changes.get(partition.topic_partition)
            if earlier is not None:  # a partition closed and made again: the older object's change is moot
                earlier[0].isr_failed()
            changes[partition.topic_partition] = (partition, state, isr)
        return changes

    def _write_isr_changes(
        self,
        store: IsrStore,
        changes: dict[TopicPartition, tuple[Partition, PartitionState, tuple[int, ...]]],
    ) -> None:
        """Write ``changes`` in one pipelined batch and report each outcome to its partition."""
        try:
            stored = store({tp: (state, isr) for tp, (_, state, isr) in changes.items()})
        except ClusterError as exc:  # ZooKeeper unreachable or the session gone: a paused leader's case
            logger.warning(
                "writing the ISR of %d partitions (first %s) failed (%s); the next state read decides",
                len(changes),
                next(iter(changes)),
                exc,
            )
            stored = {}
        except Exception:  # the thread's top loop: log, drop the changes, keep serving
            logger.exception("writing the ISR of %d partitions failed", len(changes))
            stored = {}
        for tp, (partition, state, isr) in changes.items():
            written = stored.get(tp)
            if written is None:
                if tp in stored:
                    logger.info(
                        "%s: the ISR change to %s lost to a newer state; waiting for it", tp, list(isr)
                    )
                partition.isr_failed()
                continue
            if len(isr) < len(state.isr):
                self.isr_shrinks += 1
            else:
                self.isr_expands += 1
            partition.isr_committed(written)
            self._purgatory.notify(tp)

    def _expire_isr(self) -> None:
        """Shrink the ISR of every led partition with followers out of sync (Kafka's ``maybeShrinkIsr``)."""
        for partition in self.partitions():
            if not partition.is_leader or not partition.replicated:
                continue
            change = partition.out_of_sync_replicas()
            if change is not None:
                self._isr_queue.put((partition, change[0], change[1]))


def eligible(view: ClusterView, broker_id: int) -> bool:
    """Whether ``broker_id`` may be in an ISR: registered and not in controlled shutdown (Kafka's
    ``isReplicaIsrEligible``)."""
    return broker_id in view.brokers and broker_id not in view.shutting_down

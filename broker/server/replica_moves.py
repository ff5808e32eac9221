"""A reassignment's part of the replica manager: :class:`ReplicaMoves`, mixed into
:class:`~broker.server.replica_manager.ReplicaManager` (as :class:`~broker.server.isr_changes.IsrChanges` is).

* **A replica moved off this broker** (Kafka's StopReplica with delete): when the topic node no longer
  assigns a partition here, its fetcher stops, the replica stops (:meth:`Partition.stop_replica`: the
  produces and fetches waiting on it are answered NOT_LEADER_OR_FOLLOWER and retried at the new leader), and
  its log is deleted. Called by :meth:`ReplicaManager.apply` under its ``_lock``.
* **Progress, for the metrics**: the partitions led here that are moving, and what each replica being added
  still has to copy, estimated from offsets (the log's bytes per offset times the offsets it lacks). Read
  on a scrape without a lock: each log end and follower end is one int read, as the other metrics read them.

The controller drives the move itself (:mod:`broker.server.partition_reassigner`); this broker only applies
the replicas the topic node names.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.cluster.cluster_view import ClusterView
from broker.cluster.cluster_watcher import ClusterWatcher
from broker.cluster.partition_reassignment import PartitionReassignment
from broker.log.errors import LogError
from broker.log.log_manager import LogManager
from broker.record.errors import RecordError
from broker.record.topic_partition import TopicPartition
from broker.server.partition import Partition
from broker.server.purgatory import Purgatory
from broker.server.replica_fetcher_manager import ReplicaFetcherManager

__all__ = ["Progress", "ReplicaMoves"]

logger = logging.getLogger(__name__)

#: A partition led here that is moving: its RS/AR/RR and the bytes each replica being added still lacks.
Progress = dict[Partition, tuple[PartitionReassignment, dict[int, int]]]


class ReplicaMoves:
    """The reassignment's part of the replica manager (see the module docstring); its state is the replica
    manager's, set up in its ``__init__``."""

    _broker_id: int
    _cluster: ClusterWatcher
    _logs: LogManager
    _purgatory: Purgatory
    _partitions: dict[TopicPartition, Partition]
    fetchers: ReplicaFetcherManager

    if TYPE_CHECKING:

        def partitions(self) -> list[Partition]: ...

    def reassignments_led(self) -> Progress:
        """The partitions led here that are moving, each with the bytes each replica being added lacks."""
        moving = self._cluster.view.reassignments
        found: Progress = {}
        for partition in self.partitions():
            reassignment = moving.get(partition.topic_partition)
            if reassignment is None or not partition.is_leader:
                continue
            log = partition.log
            span = max(1, log.log_end_offset - log.log_start_offset)
            ends = partition.follower_log_end_offsets()
            found[partition] = (
                reassignment,
                {
                    broker: log.size_bytes
                    * max(0, log.log_end_offset - max(ends.get(broker, -1), log.log_start_offset))
                    // span
                    for broker in reassignment.adding
                },
            )
        return found

    def _stop_replica(self, view: ClusterView, tp: TopicPartition) -> None:
        """``tp`` was moved off this broker: stop fetching it, stop the replica, delete its log (caller
        holds ``_lock``)."""
        self.fetchers.remove_partitions([tp])
        partition = self._partitions.pop(tp, None)
        if partition is not None:
            partition.stop_replica()
            self._purgatory.notify(tp)
        try:
            deleted = self._logs.delete_log(tp.topic, tp.partition)
        except (LogError, RecordError):
            logger.exception("broker %d: deleting the moved-away replica of %s failed", self._broker_id, tp)
            return
        if deleted:
            logger.info(
                "broker %d: %s was reassigned to %s: stopped and deleted the local replica",
                self._broker_id,
                tp,
                list(view.replicas(tp)),
            )

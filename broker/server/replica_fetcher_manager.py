"""The follower side of replication: which fetcher thread copies which partition (Kafka's
``ReplicaFetcherManager`` / ``AbstractFetcherManager``).

Partitions followed from one leader broker are spread over ``[broker] num_replica_fetchers`` threads (by a
stable hash of the partition, as Kafka's ``getFetcherId``), each a
:class:`~broker.server.replica_fetcher_thread.ReplicaFetcherThread` with its own connection to the leader.
A thread is started with its first partition and stopped once it has none left (Kafka's
``shutdownIdleFetcherThreads``). The replica manager adds a partition when it becomes a follower of a live
leader, and removes it before it becomes leader, is deleted, or follows another leader or epoch.

Thread-safe: ``_lock`` guards the thread table; a thread's own lock guards its partitions.
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.config import BrokerConfig
from broker.record.topic_partition import TopicPartition
from broker.server.replica_fetcher_thread import ReplicaFetcherThread

if TYPE_CHECKING:
    from broker.server.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)


class ReplicaFetcherManager:
    """Fetcher threads by (leader broker, fetcher index) (see the module docstring)."""

    def __init__(
        self, broker_id: int, config: BrokerConfig, cluster: ClusterWatcher, replicas: ReplicaManager
    ) -> None:
        self._broker_id = broker_id
        self._config = config
        self._cluster = cluster
        self._replicas = replicas
        self._lock = threading.Lock()
        self._threads: dict[tuple[int, int], ReplicaFetcherThread] = {}
        self._where: dict[TopicPartition, tuple[int, int]] = {}
        self._stopped = False

    def _fetcher_id(self, tp: TopicPartition) -> int:
        return zlib.crc32(f"{tp.topic}-{tp.partition}".encode()) % self._config.num_replica_fetchers

    def add_partition(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        """Fetch ``tp`` from ``leader_id`` in ``leader_epoch`` (from wherever it was fetched before)."""
        key = (leader_id, self._fetcher_id(tp))
        idle: list[ReplicaFetcherThread] = []
        with self._lock:
            if self._stopped:
                return
            previous = self._where.get(tp)
            if previous is not None and previous != key:
                idle = self._detach([tp])
            thread = self._threads.get(key)
            if thread is None:
                thread = ReplicaFetcherThread(
                    f"replica-fetcher-{self._broker_id}-from-{leader_id}-{key[1]}",
                    self._broker_id,
                    leader_id,
                    self._config,
                    self._cluster,
                    self._replicas,
                )
                self._threads[key] = thread
                thread.start()
            thread.add_partition(tp, leader_epoch)
            self._where[tp] = key
        for old in idle:
            old.shutdown(wait=False)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """Stop fetching ``tps``; once this returns no fetcher appends to them."""
        with self._lock:
            idle = self._detach(tps)
        for thread in idle:
            thread.shutdown(wait=False)  # it may be waiting for an answer: it exits after it

    def _detach(self, tps: Iterable[TopicPartition]) -> list[ReplicaFetcherThread]:
        """Take ``tps`` off their threads; returns the threads left with no partition, taken out of the
        table for the caller to shut down (caller holds ``_lock``).

        A thread drops a partition on its own (FENCED_LEADER_EPOCH, a partition no longer followed in its
        epoch) without telling the table, so a thread found empty may still be named by other partitions
        of ``_where``: they go with it, and the next state of each adds it again (a thread that was gone
        while ``_where`` still named it made the next removal of such a partition fail, and with it the
        rest of that cluster change's application)."""
        by_thread: dict[tuple[int, int], list[TopicPartition]] = {}
        for tp in tps:
            key = self._where.pop(tp, None)
            if key is not None:
                by_thread.setdefault(key, []).append(tp)
        idle: list[ReplicaFetcherThread] = []
        for key, removed in by_thread.items():
            thread = self._threads.get(key)
            if thread is None:
                continue
            thread.remove_partitions(removed)
            if thread.partition_count() == 0:
                del self._threads[key]
                for tp in [tp for tp, where in self._where.items() if where == key]:
                    del self._where[tp]
                idle.append(thread)
        return idle

    def has_partition(self, tp: TopicPartition) -> bool:
        with self._lock:
            return tp in self._where

    def followed(self) -> dict[TopicPartition, int]:
        """Each partition fetched, with the leader it is fetched from."""
        with self._lock:
            return {tp: key[0] for tp, key in self._where.items()}

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
            threads = list(self._threads.values())
            self._threads.clear()
            self._where.clear()
        for thread in threads:  # all at once: each is woken from its request in flight
            thread.shutdown(wait=False)
        deadline = time.monotonic() + 10.0
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0.0))

"""broker/server/replica_fetcher_manager.py: the table of fetcher threads stays right when a thread drops a
partition on its own (issue 38's reassignment runs: broker 1's cluster watcher failed a whole change with
``KeyError: (0, 0)``, leaving the rest of that change unapplied until the next one)."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from broker.cluster.cluster_watcher import ClusterWatcher
from broker.config import BrokerConfig
from broker.log.log_manager import LogManager
from broker.record.topic_partition import TopicPartition
from broker.server.purgatory import Purgatory
from broker.server.replica_manager import ReplicaManager
from tests.broker.log.helpers import config


def test_a_partition_its_thread_dropped_is_removed_and_added_again(tmp_path: Path) -> None:
    # a watcher never started: its view is empty, so the fetchers only try to reach broker 0 and back off
    cluster = ClusterWatcher(KazooClient(hosts="127.0.0.1:1"))
    purgatory = Purgatory("fetchers")
    with LogManager(config(tmp_path)) as logs:
        replicas = ReplicaManager(
            1, logs, cluster, purgatory, config=BrokerConfig(broker_id=1, num_replica_fetchers=1)
        )
        fetchers = replicas.fetchers
        a, b = TopicPartition("moves", 0), TopicPartition("moves", 1)
        try:
            fetchers.add_partition(a, 0, 0)
            fetchers.add_partition(b, 0, 0)
            assert fetchers.followed() == {a: 0, b: 0}
            # the thread drops b itself, as it does when the leader answers FENCED_LEADER_EPOCH
            thread = fetchers._threads[(0, 0)]  # the one thread both partitions share
            thread.remove_partitions([b])
            # a becomes leader here: its thread is left with nothing and stops; then b's next state (a new
            # leader) removes b (this raised KeyError: (0, 0)) and adds it again
            fetchers.remove_partitions([a])
            fetchers.remove_partitions([b])
            assert fetchers.followed() == {}
            fetchers.add_partition(b, 2, 1)
            assert fetchers.followed() == {b: 2}
            # moving b from one leader's thread to another's stops the emptied thread
            fetchers.add_partition(b, 3, 2)
            assert fetchers.followed() == {b: 3}
            thread.join(10)
            assert not thread._thread.is_alive()
        finally:
            replicas.shutdown()
            purgatory.shutdown()

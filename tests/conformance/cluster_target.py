"""Clusters of several brokers for the fault scenarios: Apache Kafka nodes or Lumber broker processes, each
as a :class:`ClusterTarget` whose brokers a scenario may kill with SIGKILL, pause (SIGSTOP of its ``pid``
by :func:`tests.support.sigstop.paused`) and start again.

Broker ``i`` (0-based) is at the same place in both: Kafka's node ``i + 1`` and Lumber's broker ``i``, so
a scenario names brokers by index and its transcript holds indexes, never ids. A killed broker stays down
until the scenario starts it again (``start(i)``: same port, same data) or its cluster stops: a module that
kills one starts its own clusters (module scope, shared by the module's scenarios), Kafka's and Lumber's at
the same time (:func:`started_together`).

Both sides notice a killed broker after about 4 s: Lumber's brokers hold 4 s ZooKeeper sessions
(:mod:`tests.support.broker_cluster`), and the Kafka nodes here are given ``broker.session.timeout.ms``
4000 (Kafka's default is 9 s) with a 500 ms heartbeat, so that the controller fences the broker as soon. The
Lumber brokers keep the conformance suite's settings (``[log] flush_ms`` at its default, 4 partitions of
``__consumer_offsets``); every JVM gets 256 MiB of heap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from lumber.dev.kafka_server import KafkaCluster
from lumber.dev.process import ProcessHandle
from tests.conformance.target import Target
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster

KAFKA_FAULT_SETTINGS = {"broker.session.timeout.ms": "4000", "broker.heartbeat.interval.ms": "500"}
KAFKA_HEAP_MB = 256
LUMBER_SETTINGS = {"flush_ms": 1000, "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS}


@dataclass(frozen=True)
class ClusterTarget(Target):
    """A cluster under test: ``broker_ids`` and ``addresses`` by index; ``kill(i)`` sends SIGKILL to
    broker ``i``, ``pid(i)`` is its process id, ``start(i)`` starts a killed broker again and waits until it
    has started."""

    broker_ids: tuple[int, ...]
    addresses: tuple[str, ...]
    kill: Callable[[int], None]
    pid: Callable[[int], int]
    start: Callable[[int], None]

    def index_of(self, broker_id: int) -> int:
        """The index of ``broker_id`` (-1 for -1, no broker)."""
        return -1 if broker_id == -1 else self.broker_ids.index(broker_id)


def _pid(handle: ProcessHandle | None) -> int | None:
    return handle.pid if handle is not None else None


def _started(_: ProcessHandle) -> None:
    return None


def _running(pid: int | None, index: int) -> int:
    if pid is None:
        raise RuntimeError(f"broker {index} is not running: it has no process id")
    return pid


@contextlib.contextmanager
def kafka_cluster_target(
    base_dir: Path, size: int, *, controllers: int | None = None, settings: Mapping[str, str] | None = None
) -> Iterator[ClusterTarget]:
    """``size`` Kafka nodes, the first ``controllers`` (default all) combined, the rest brokers only."""
    cluster = KafkaCluster(
        base_dir,
        size=size,
        controllers=controllers,
        heap_mb=KAFKA_HEAP_MB,
        settings={**KAFKA_FAULT_SETTINGS, **(settings or {})},
    )
    cluster.start()
    try:
        yield ClusterTarget(
            "kafka",
            cluster.bootstrap,
            tuple(node.data_dir for node in cluster.nodes),
            tuple(node.node_id for node in cluster.nodes),
            tuple(node.address for node in cluster.nodes),
            lambda i: cluster.nodes[i].kill(),
            lambda i: _running(cluster.nodes[i].pid, i),
            lambda i: _started(cluster.nodes[i].start()),
        )
    finally:
        cluster.stop()


@contextlib.contextmanager
def lumber_cluster_target(zk_connect: str, base_dir: Path, size: int) -> Iterator[ClusterTarget]:
    """``size`` Lumber broker processes on the ZooKeeper chroot ``zk_connect``."""
    cluster = BrokerCluster(zk_connect, base_dir)
    try:
        for _ in range(size):
            cluster.add_broker(LUMBER_SETTINGS)
        yield ClusterTarget(
            "lumber",
            cluster.bootstrap_servers,
            tuple(b.log_dir for b in cluster.brokers),
            tuple(b.broker_id for b in cluster.brokers),
            tuple(b.address for b in cluster.brokers),
            lambda i: cluster.brokers[i].kill(),
            lambda i: _running(_pid(cluster.brokers[i].handle), i),
            lambda i: cluster.brokers[i].start(),
        )
    finally:
        cluster.stop()


@contextlib.contextmanager
def started_together(
    kafka: AbstractContextManager[ClusterTarget], lumber: AbstractContextManager[ClusterTarget]
) -> Iterator[tuple[ClusterTarget, ClusterTarget]]:
    """Both clusters, started at the same time (each start mostly waits on its own processes); a cluster
    that started is stopped even when the other failed to."""
    with contextlib.ExitStack() as stack:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(manager.__enter__) for manager in (kafka, lumber)]
            started: list[ClusterTarget] = []
            failures: list[BaseException] = []
            for manager, future in zip((kafka, lumber), futures, strict=True):
                failure = future.exception()
                if failure is None:
                    started.append(future.result())
                    stack.push(manager.__exit__)
                else:
                    failures.append(failure)
        if failures:
            raise failures[0]
        yield started[0], started[1]

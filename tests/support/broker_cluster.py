"""Real broker processes on 127.0.0.1 for the tests: the pytest fixtures over
:mod:`lumber.dev.broker_cluster` (``lumber broker start``, one process per broker).

Fixtures (imported by ``tests/conftest.py``):

* ``broker_cluster``: one broker on the test's own ZooKeeper chroot, stopped after the test;
* ``start_cluster``: a factory, ``start_cluster(3)`` starts three brokers (``**settings`` go to ``[broker]``
  and ``[log]`` of each broker's config, e.g. ``auto_create_topics=False``; ``session_timeout_ms`` to
  ``[zookeeper]``: :data:`KILL_LOOP_SESSION_TIMEOUT_MS` for the kill -9 loops).

The fixtures' brokers, and the shared stacks' that :func:`fixture_broker_settings` configures, look for
expired segments and idempotent producers only when a test asks (:data:`UNCHECKED_RETENTION_INTERVAL_MS`).

The fixtures' brokers also fsync before answering acks=all (``[log] flush_on_ack``, unless a test passes
``flush_on_ack=False``): with the default ``expose = "flushed"``, what an acks=all producer was told is
stored is then also exposed, so a test may read it at once. They create ``__consumer_offsets`` with 4
partitions (:data:`OFFSETS_TOPIC_PARTITIONS`). :class:`BrokerProcess`, :class:`BrokerCluster` and
``bench_cluster`` (a ZooKeeper of its own, for ``bench/``, with the defaults) live in
:mod:`lumber.dev.broker_cluster` and are imported from here too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from lumber.dev.broker_cluster import (
    BROKER_SESSION_TIMEOUT_MS,
    BrokerCluster,
    BrokerProcess,
    bench_cluster,
)
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.zookeeper import make_chroot

__all__ = [
    "BROKER_SESSION_TIMEOUT_MS",
    "KILL_LOOP_SESSION_TIMEOUT_MS",
    "OFFSETS_TOPIC_PARTITIONS",
    "UNCHECKED_RETENTION_INTERVAL_MS",
    "BrokerCluster",
    "BrokerProcess",
    "bench_cluster",
    "broker_cluster",
    "fixture_broker_settings",
    "servers",
    "start_cluster",
    "wait_for",
]

#: ``session_timeout_ms`` (``[zookeeper]``) of the kill -9 loops' brokers, half the default
#: (:data:`BROKER_SESSION_TIMEOUT_MS`): every round waits out the killed broker's session, for a new leader
#: or for the restarted broker to register again (its old node must go first), so a round is 2 s shorter.
#: 2 s still outlives a loaded machine's pauses of a broker (kazoo pings every third of it; the test
#: ZooKeeper's tickTime is 500 ms).
KILL_LOOP_SESSION_TIMEOUT_MS = 2000

#: ``[broker] offsets_topic_partitions`` of the fixtures' brokers: every confluent-kafka consumer has a
#: group.id and looks its coordinator up, which creates ``__consumer_offsets``; 4 partitions instead of
#: Kafka's 50 keep that cheap on 2 cores (a test may pass its own).
OFFSETS_TOPIC_PARTITIONS = 4

#: ``[log] retention_check_interval_ms`` of the tests' brokers unless a test gives its own: a day, longer than
#: any run, so the retention thread never wakes. The tests' records carry fixed timestamps (hours of
#: 2026-11-22, ``tests.support.load_job.BASE_MS``) and retention judges a segment by its newest timestamp:
#: with the default check every 5 minutes and the default ``retention_ms`` of a week, a broker that ran
#: past 5 minutes would delete every rolled segment of those hours (and forget their idempotent producers)
#: once the hours were a week old, as they are from 2026-11-29 on. ``retention_ms`` itself keeps its
#: default, so DescribeConfigs still answers as a broker with Lumber's defaults; the tests of retention give
#: a short interval of their own.
UNCHECKED_RETENTION_INTERVAL_MS = 24 * 3600 * 1000


def fixture_broker_settings(settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``settings`` with the retention check of the tests' brokers (see
    :data:`UNCHECKED_RETENTION_INTERVAL_MS`) unless they give one."""
    return {"retention_check_interval_ms": UNCHECKED_RETENTION_INTERVAL_MS, **(settings or {})}


@pytest.fixture
def start_cluster(
    zookeeper_server: ZooKeeperServer, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., BrokerCluster]]:
    clusters: list[BrokerCluster] = []

    def start(brokers: int = 1, **given: Any) -> BrokerCluster:
        settings = fixture_broker_settings(given)
        settings.setdefault("flush_on_ack", True)  # acknowledged by acks=all, so exposed: see above
        settings.setdefault("offsets_topic_partitions", OFFSETS_TOPIC_PARTITIONS)
        name = f"{request.node.name}-c{len(clusters)}"
        cluster = BrokerCluster(
            make_chroot(zookeeper_server.connect, name), tmp_path / f"cluster-{len(clusters)}"
        )
        clusters.append(cluster)
        for _ in range(brokers):
            cluster.add_broker(settings)
        return cluster

    yield start
    for cluster in clusters:
        cluster.stop()


@pytest.fixture
def broker_cluster(start_cluster: Callable[..., BrokerCluster]) -> BrokerCluster:
    return start_cluster(1)


def servers(cluster: Any) -> list[str]:
    """The cluster's brokers as a list of ``host:port``."""
    found = cluster.bootstrap_servers
    return found.split(",") if isinstance(found, str) else list(found)


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``predicate`` for up to ``timeout_s``; fail the test naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)

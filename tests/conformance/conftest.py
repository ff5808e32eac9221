"""The two brokers every conformance scenario runs against, each started once per session.

* ``kafka_target``: one real Apache Kafka broker (KRaft combined mode, :mod:`lumber.dev.kafka_server`).
* ``lumber_target``: one real Lumber broker process on the session's real ZooKeeper, with Lumber's default
  settings (the fixtures of :mod:`tests.support.broker_cluster` flush every 20 ms and fsync before acks=all to
  hide the paper's flush delay; here the defaults must show, so ``flush_ms`` is set back to its default).

``sasl_ssl_brokers``: the same two behind a SASL_SSL listener with users and an ACL authorizer
(:mod:`tests.conformance.secure_targets`), each started once per session, Kafka's and Lumber's at the same
time; their certificates come from one test CA.

Both run their log cleaner every 500 ms when idle (``log.cleaner.backoff.ms``, ``[log] cleaner_backoff_ms``;
both default to 15 s) and check retention every 500 ms (``log.retention.check.interval.ms``, ``[log]
retention_check_interval_ms``; 5 min by default in both) so compaction and retention scenarios take
seconds. Both fixtures mark their tests ``interop`` and ``zookeeper``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from lumber.dev.kafka_server import KafkaCluster
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.conformance.secure_targets import (
    SecureBroker,
    sasl_ssl_kafka,
    sasl_ssl_lumber,
    sasl_ssl_setup,
)
from tests.conformance.target import Target
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster
from tests.support.zookeeper import make_chroot

CLEANER_BACKOFF_MS = 500
RETENTION_CHECK_INTERVAL_MS = 500


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    settings = {
        "log.cleaner.backoff.ms": str(CLEANER_BACKOFF_MS),
        "log.retention.check.interval.ms": str(RETENTION_CHECK_INTERVAL_MS),
    }
    cluster = KafkaCluster(tmp_path_factory.mktemp("kafka"), size=1, settings=settings)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def lumber_cluster(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerCluster]:
    cluster = BrokerCluster(
        make_chroot(zookeeper_server.connect, "conformance"), tmp_path_factory.mktemp("lumber")
    )
    try:
        cluster.add_broker(
            {
                "flush_ms": 1000,
                "cleaner_backoff_ms": CLEANER_BACKOFF_MS,
                "retention_check_interval_ms": RETENTION_CHECK_INTERVAL_MS,
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
            }
        )
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_target(kafka_cluster: KafkaCluster) -> Target:
    return Target("kafka", kafka_cluster.bootstrap, tuple(node.data_dir for node in kafka_cluster.nodes))


@pytest.fixture(scope="session")
def lumber_target(lumber_cluster: BrokerCluster) -> Target:
    return Target(
        "lumber", lumber_cluster.bootstrap_servers, tuple(b.log_dir for b in lumber_cluster.brokers)
    )


@pytest.fixture(scope="session")
def sasl_ssl_brokers(
    zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SecureBroker, SecureBroker]]:
    """Kafka's and Lumber's SASL_SSL brokers (Kafka first), started at the same time."""
    setup = sasl_ssl_setup(tmp_path_factory.mktemp("sasl-ssl-ca"))
    managers = [
        sasl_ssl_kafka(tmp_path_factory.mktemp("kafka-sasl-ssl"), setup),
        sasl_ssl_lumber(
            make_chroot(zookeeper_server.connect, "conformance-sasl-ssl"),
            tmp_path_factory.mktemp("lumber-sasl-ssl"),
            setup,
        ),
    ]
    with contextlib.ExitStack() as stack:
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(stack.enter_context, manager) for manager in managers]
        kafka, lumber = (future.result() for future in futures)
        yield kafka, lumber


@pytest.fixture
def targets(kafka_target: Target, lumber_target: Target) -> tuple[Target, Target]:
    """Kafka first (the oracle), then Lumber."""
    return kafka_target, lumber_target


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "targets" in getattr(item, "fixturenames", ()):
            for marker in ("interop", "zookeeper"):
                if marker not in {m.name for m in item.iter_markers()}:
                    item.add_marker(getattr(pytest.mark, marker))

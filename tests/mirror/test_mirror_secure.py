"""``lumber mirror`` from a secured cluster to a plaintext one (issue 37: the mirror takes the clients'
security settings): the source's consumer is ``[consumer]`` on SASL_SSL with SCRAM-SHA-512 (the password by
file), the target's producer ``[producer]`` on PLAINTEXT. Both clusters are real broker processes on one
ZooKeeper; the mirror learns each from its ZooKeeper, and reaches the source's brokers at their SASL_SSL
listeners. The target must hold exactly what was produced to the source, in order; the mirror's stderr
never holds the password.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from tests.broker.client.helpers import read_records
from tests.support.broker_cluster import BrokerCluster, servers
from tests.support.secure_broker import PASSWORD, USER, SecureBroker

pytestmark = pytest.mark.zookeeper

TOPIC = "securelog"
COUNT = 500


def test_the_mirror_copies_a_sasl_ssl_source_into_a_plaintext_target(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    source = SecureBroker(start_cluster(0), tmp_path / "source")
    target = start_cluster(1)
    source.cluster.create_topic(TOPIC, 1)
    password_file = tmp_path / "alice.pass"
    password_file.write_text(PASSWORD + "\n")
    config = tmp_path / "mirror.toml"
    config.write_text(
        f'[mirror]\ntopics = "{TOPIC}"\ngroup = "secure-mirror"\naudit_interval_ms = 0\n\n'
        "[group]\nsession_timeout_ms = 3000\nauto_commit_interval_ms = 300\n\n"
        '[consumer]\nfetch_max_wait_ms = 100\nsecurity_protocol = "SASL_SSL"\n'
        f'sasl_mechanism = "SCRAM-SHA-512"\nsasl_username = "{USER}"\n'
        f'sasl_password_file = "{password_file}"\nssl_cafile = "{source.ca.cafile}"\n\n'
        "[producer]\nlinger_ms = 5\n"
    )
    producer = Producer(ProducerConfig(linger_ms=5, **source.sasl_ssl()))
    try:
        for i in range(COUNT):
            producer.send(TOPIC, f"m{i}".encode(), partition=0)
        producer.flush(30)
    finally:
        producer.close()

    log = tmp_path / "mirror.log"
    with log.open("wb") as stderr:
        mirror = subprocess.Popen(
            [
                sys.executable, "-m", "lumber", "-v", "--config", str(config), "mirror",
                "--source-zookeeper", source.cluster.zk_connect,
                "--target-zookeeper", target.zk_connect,
            ],
            stderr=stderr,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not target.zk.exists(f"/brokers/topics/{TOPIC}") and time.monotonic() < deadline:
                assert mirror.poll() is None, log.read_text()
                time.sleep(0.2)
            target.wait_for_topic(TOPIC, {0: [0]})
            reader = Consumer(
                ConsumerConfig(
                    bootstrap_servers=servers(target), auto_offset_reset="earliest", fetch_max_wait_ms=100
                ),
                partitions=[TopicPartition(TOPIC, 0)],
            )
            try:
                records = read_records(reader, COUNT, timeout_s=60)
                assert [(r.offset, r.value) for r in records] == [(i, f"m{i}".encode()) for i in range(COUNT)]
                assert reader.poll(timeout_ms=500) == []
            finally:
                reader.close()
        finally:
            mirror.send_signal(signal.SIGTERM)
            assert mirror.wait(60) == 0, log.read_text()
    assert PASSWORD.encode() not in log.read_bytes()

"""lumber/dev/sasl_ssl_setup.py: the settings it gives Kafka (checked as server.properties text: Kafka itself
runs them in tests/conformance/test_sasl_ssl.py and test_acls.py), and a real Lumber broker started with its
settings and users, produced to and read from over SASL_SSL by confluent-kafka, a wrong password refused."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from lumber.dev.process import free_port
from lumber.dev.sasl_ssl_setup import SaslSslSetup
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

PASSWORDS = {"admin": "setup-admin-Pa55", "carol": "setup-carol-Pa55"}


def test_kafka_settings_name_every_mechanism_user_and_the_pem_on_one_line(tmp_path: Path) -> None:
    setup = SaslSslSetup.create(tmp_path / "ca", PASSWORDS)
    settings = setup.kafka_settings("127.0.0.1:9092", 9093, 9094)
    assert settings["listeners"] == (
        "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094"
    )
    assert settings["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094"
    assert settings["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,PLAIN"
    assert settings["listener.name.sasl_ssl.plain.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'user_admin="setup-admin-Pa55" user_carol="setup-carol-Pa55";'
    )
    key = settings["listener.name.sasl_ssl.ssl.keystore.key"]
    chain = settings["listener.name.sasl_ssl.ssl.keystore.certificate.chain"]
    assert "\n" not in key
    assert "\n" not in chain
    assert key.replace("\\n", "\n") == setup.server.keyfile.read_text().strip()
    assert chain.replace("\\n", "\n") == setup.server.certfile.read_text().strip()
    assert settings["super.users"] == "User:ANONYMOUS;User:admin"
    assert setup.kafka_format_args() == (
        "--add-scram",
        "SCRAM-SHA-512=[name=admin,password=setup-admin-Pa55]",
        "--add-scram",
        "SCRAM-SHA-512=[name=carol,password=setup-carol-Pa55]",
    )
    bare = SaslSslSetup.create(tmp_path / "ca2", PASSWORDS, mechanisms=("SCRAM-SHA-512",), authorizer=False)
    bare_settings = bare.kafka_settings("127.0.0.1:9092", 9093, 9094)
    assert "authorizer.class.name" not in bare_settings
    assert "super.users" not in bare_settings
    assert not any(".plain." in key for key in bare_settings)
    assert "authorizer" not in bare.lumber_settings(9092, 9094)


@pytest.mark.zookeeper
@pytest.mark.interop
def test_a_lumber_broker_with_the_setup_serves_its_users_over_sasl_ssl(
    zk_connect: str, tmp_path: Path
) -> None:
    setup = SaslSslSetup.create(tmp_path / "ca", PASSWORDS)
    cluster = BrokerCluster(zk_connect, tmp_path / "lumber")
    setup.add_users(cluster.zk)
    plain, port = free_port(), free_port()
    try:
        cluster.add_broker(
            {**setup.lumber_settings(plain, port), "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS},
            port=plain,
        )
        cluster.create_topic("setup", 1)
        address = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": address, **setup.client_settings("admin"), "acks": "all"})
        for i in range(10):
            producer.produce("setup", f"v{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer(
            {"bootstrap.servers": address, **setup.client_settings("admin", "PLAIN"), "group.id": "setup"}
        )
        consumer.assign([TopicPartition("setup", 0, 0)])
        got: list[tuple[int | None, bytes | None]] = []
        for _ in range(40):
            for message in consumer.consume(10, 0.5):
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
            if len(got) >= 10:
                break
        consumer.close()
        assert got == [(i, f"v{i}".encode()) for i in range(10)]
        errors: list[KafkaError] = []
        wrong = {**setup.client_settings("carol"), "sasl.password": "not-the-password"}
        config: dict[str, Any] = {"bootstrap.servers": address, **wrong, "error_cb": errors.append}
        admin = AdminClient(config)
        for _ in range(40):
            admin.poll(0.25)
            if errors:
                break
        assert errors, "no error reported for a wrong password within 10 s"
        assert errors[0].code() == KafkaError._AUTHENTICATION, errors
        assert "Authentication failed" in errors[0].str(), errors[0].str()
    finally:
        cluster.stop()

"""Lumber's own producer and consumer on secured listeners of a real broker (broker/client/network/
connection.py's TLS and SASL login, tls_channel.py, sasl_client.py; broker/client/client_security.py).

One broker process listens on PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (tests/support/secure_broker.py);
user ``alice`` is added with ``lumber users add``. Each test produces a counted set of records through one
listener and reads back exactly those, at exact offsets; the refusals check the error's words and that
nothing was appended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.errors import AuthenticationError, ClientConfigError
from broker.client.groups.group_config import GroupConfig
from broker.client.groups.group_consumer import GroupConsumer
from broker.client.groups.kafka.kafka_group_admin import KafkaGroupAdmin
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.dev.dev_certificates import CertificateAuthority
from tests.broker.client.helpers import read_records
from tests.support.broker_cluster import BrokerCluster
from tests.support.secure_broker import PASSWORD, USER, SecureBroker

pytestmark = pytest.mark.zookeeper

COUNT = 300


@pytest.fixture
def secure(start_cluster: Callable[..., BrokerCluster], tmp_path: Path) -> SecureBroker:
    return SecureBroker(start_cluster(0), tmp_path)


def produce(settings: dict[str, Any], topic: str, count: int = COUNT) -> list[int]:
    """``count`` records to partition 0 with acks=all; their offsets."""
    producer = Producer(
        ProducerConfig(linger_ms=5, max_block_ms=20_000, request_timeout_ms=10_000, **settings)
    )
    try:
        futures = [producer.send(topic, f"value-{i}".encode(), key=b"k", partition=0) for i in range(count)]
        producer.flush(30)
        return [future.result(10).offset for future in futures]
    finally:
        producer.close()


def consume(settings: dict[str, Any], topic: str, count: int = COUNT) -> list[tuple[int, bytes]]:
    consumer = Consumer(
        ConsumerConfig(auto_offset_reset="earliest", fetch_max_wait_ms=100, **settings),
        partitions=[TopicPartition(topic, 0)],
    )
    try:
        return [(r.offset, r.value or b"") for r in read_records(consumer, count, timeout_s=30)]
    finally:
        consumer.close()


def expected(count: int = COUNT) -> list[tuple[int, bytes]]:
    return [(i, f"value-{i}".encode()) for i in range(count)]


def end_offset(secure: SecureBroker, topic: str) -> int:
    consumer = Consumer(
        ConsumerConfig(bootstrap_servers=[f"127.0.0.1:{secure.plain_port}"]),
        partitions=[TopicPartition(topic, 0)],
    )
    try:
        return consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_produce_and_consume_over_sasl_ssl(secure: SecureBroker, mechanism: str) -> None:
    secure.cluster.create_topic("secure", 1)
    settings = secure.sasl_ssl(mechanism)
    assert produce(settings, "secure") == list(range(COUNT))
    assert consume(settings, "secure") == expected()


def test_produce_and_consume_over_sasl_plaintext_with_a_password_file(
    secure: SecureBroker, tmp_path: Path
) -> None:
    secure.cluster.create_topic("plainsasl", 1)
    password_file = tmp_path / "alice.pass"
    password_file.write_text(PASSWORD + "\n")
    settings: dict[str, Any] = {
        "bootstrap_servers": [f"127.0.0.1:{secure.sasl_port}"],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": USER,
        "sasl_password_file": str(password_file),
    }
    assert produce(settings, "plainsasl") == list(range(COUNT))
    assert consume(settings, "plainsasl") == expected()


def test_clients_learning_the_cluster_from_zookeeper_use_the_listener_of_their_protocol(
    secure: SecureBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker registers its four listeners; a SASL_SSL client found through ZooKeeper connects to the
    SASL_SSL one (a PLAINTEXT connection would fail its TLS handshake)."""
    secure.cluster.create_topic("viazk", 1)
    monkeypatch.setenv("ALICE_SECRET", PASSWORD)
    settings: dict[str, Any] = {
        "security_protocol": "SASL_SSL",
        "sasl_username": USER,
        "sasl_password_env": "ALICE_SECRET",
        "ssl_cafile": str(secure.ca.cafile),
    }
    producer = Producer(
        ProducerConfig(linger_ms=5, max_block_ms=20_000, **settings),
        zookeeper_connect=secure.cluster.zk_connect,
    )
    try:
        offsets = [producer.send("viazk", f"value-{i}".encode(), partition=0) for i in range(COUNT)]
        producer.flush(30)
        assert [f.result(10).offset for f in offsets] == list(range(COUNT))
        leader = producer._pool.peek(producer._metadata.snapshot.brokers[0])
        assert leader is not None
        assert leader.port == secure.sasl_ssl_port
    finally:
        producer.close()
    assert end_offset(secure, "viazk") == COUNT


def test_a_wrong_password_is_refused_at_once_naming_the_broker_and_mechanism(secure: SecureBroker) -> None:
    secure.cluster.create_topic("refused", 1)
    settings = secure.sasl_ssl("SCRAM-SHA-512", password="Wr0ng-Gue55-9d2c")
    producer = Producer(ProducerConfig(max_block_ms=20_000, **settings))
    started = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as refused:
            producer.send("refused", b"never", partition=0)
    finally:
        producer.close()
    assert time.monotonic() - started < 10, "a refused login is not retried until max_block_ms"
    message = str(refused.value)
    assert f"broker 127.0.0.1:{secure.sasl_ssl_port}" in message
    assert "SASL SCRAM-SHA-512 login as 'alice' refused: SASL_AUTHENTICATION_FAILED" in message
    assert "Wr0ng" not in message
    assert PASSWORD not in message
    assert refused.value.retriable is False
    consumer = Consumer(ConsumerConfig(**settings), partitions=[TopicPartition("refused", 0)])
    try:
        with pytest.raises(AuthenticationError, match="SCRAM-SHA-512 login as 'alice' refused"):
            consumer.end_offsets([TopicPartition("refused", 0)])
    finally:
        consumer.close()
    assert end_offset(secure, "refused") == 0


def test_a_mechanism_the_listener_does_not_enable_is_named(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    secure = SecureBroker(start_cluster(0), tmp_path, sasl_enabled_mechanisms=["SCRAM-SHA-512"])
    settings = secure.sasl_ssl("PLAIN")
    consumer = Consumer(ConsumerConfig(**settings), partitions=[TopicPartition("t", 0)])
    try:
        with pytest.raises(AuthenticationError) as refused:
            consumer.end_offsets([TopicPartition("t", 0)])
    finally:
        consumer.close()
    assert "SASL PLAIN login as 'alice' refused: UNSUPPORTED_SASL_MECHANISM" in str(refused.value)
    assert "the broker's listener enables: SCRAM-SHA-512" in str(refused.value)


def test_a_broker_certificate_the_client_does_not_trust_fails_the_handshake(
    secure: SecureBroker, tmp_path: Path
) -> None:

    stranger = CertificateAuthority(tmp_path / "stranger")
    stranger.issue("nobody")
    settings = {**secure.sasl_ssl(), "ssl_cafile": str(stranger.cafile)}
    consumer = Consumer(ConsumerConfig(**settings), partitions=[TopicPartition("t", 0)])
    try:
        with pytest.raises(AuthenticationError, match="TLS handshake failed: CERTIFICATE_VERIFY_FAILED"):
            consumer.end_offsets([TopicPartition("t", 0)])
    finally:
        consumer.close()


def test_mutual_tls_with_a_client_certificate_and_its_key_password(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    """A broker that requires client certificates: with one (its key encrypted, the password from a
    file) the client produces and consumes over SSL; without one it is refused."""
    secure = SecureBroker(start_cluster(0), tmp_path, client_auth="required")
    secure.cluster.create_topic("mtls", 1)
    key_password = "Key-Pa55-7b3e"
    issued = secure.ca.issue("app", client=True, key_password=key_password)
    key_password_file = tmp_path / "key.pass"
    key_password_file.write_text(key_password)
    settings: dict[str, Any] = {
        "bootstrap_servers": [f"127.0.0.1:{secure.ssl_port}"],
        "security_protocol": "SSL",
        "ssl_cafile": str(secure.ca.cafile),
        "ssl_certfile": str(issued.certfile),
        "ssl_keyfile": str(issued.keyfile),
        "ssl_key_password_file": str(key_password_file),
    }
    assert produce(settings, "mtls") == list(range(COUNT))
    assert consume(settings, "mtls") == expected()
    without = {k: v for k, v in settings.items() if not k.startswith(("ssl_certfile", "ssl_key"))}
    consumer = Consumer(ConsumerConfig(**without), partitions=[TopicPartition("mtls", 0)])
    try:
        with pytest.raises(AuthenticationError):
            consumer.end_offsets([TopicPartition("mtls", 0)])
    finally:
        consumer.close()
    with pytest.raises(ClientConfigError, match="ssl_certfile / ssl_keyfile: cannot load"):
        Consumer(ConsumerConfig(**{**settings, "ssl_key_password_file": "", "ssl_key_password": "nope"}))
    assert end_offset(secure, "mtls") == COUNT


def test_a_kafka_protocol_group_member_over_sasl_ssl_reads_and_commits(secure: SecureBroker) -> None:
    """The group coordinator's requests (FindCoordinator, JoinGroup, SyncGroup, OffsetCommit) go through the
    same secured pools: a member reads every record and commits the end."""

    secure.cluster.create_topic("grouped", 1)
    settings = secure.sasl_ssl()
    assert produce(settings, "grouped", 50) == list(range(50))
    member = GroupConsumer(
        "secure-group",
        config=GroupConfig(protocol="kafka", auto_commit_enable=False),
        consumer_config=ConsumerConfig(auto_offset_reset="earliest", fetch_max_wait_ms=100, **settings),
    )
    try:
        member.subscribe(["grouped"])
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(seen) < 50 and time.monotonic() < deadline:
            seen.extend((r.offset, r.value or b"") for r in member.poll(timeout_ms=500))
        assert seen == expected(50)
        member.commit({TopicPartition("grouped", 0): 50})
    finally:
        member.close()
    # what `lumber groups` reads, through the same secured settings
    admin = KafkaGroupAdmin(config=ConsumerConfig(**settings))
    try:
        assert admin.committed("secure-group", [TopicPartition("grouped", 0)]) == {
            TopicPartition("grouped", 0): 50
        }
    finally:
        admin.close()

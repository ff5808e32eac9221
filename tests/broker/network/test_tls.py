"""TLS listeners end to end (broker/network/tls_handshake.py, ssl_factory.py, response_send.py's TLS path):
real broker processes, certificates made by a CA of the test's own, unmodified confluent-kafka and kcat.

The broker listens on PLAINTEXT (the test's own probes) and SSL with ``ssl_client_auth = "required"``.
Clients with a certificate of the CA produce and consume over SSL; clients without one, with one of another
CA, that do not trust the broker's CA, or that speak plaintext to the SSL port are refused, and the broker
stays up with nothing of theirs appended.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster, BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import KafkaException
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition as ConfluentPartition

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]


class TlsBroker:
    """One broker with a PLAINTEXT and an SSL listener, its CA and a client certificate of that CA."""

    def __init__(self, cluster: BrokerCluster, folder: Path, **settings: Any) -> None:
        self.ca = CertificateAuthority(folder / "ca")
        server = self.ca.issue("broker")
        self.client = self.ca.issue("alice", client=True)
        plain, self.ssl_port = free_port(), free_port()
        self.broker: BrokerProcess = cluster.add_broker(
            {
                "listeners": [f"PLAINTEXT://127.0.0.1:{plain}", f"SSL://127.0.0.1:{self.ssl_port}"],
                "ssl_certfile": str(server.certfile),
                "ssl_keyfile": str(server.keyfile),
                "ssl_cafile": str(self.ca.cafile),
                "ssl_client_auth": "required",
                "flush_on_ack": True,
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                **settings,
            },
            port=plain,
        )
        self.cluster = cluster

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def confluent_settings(self, **overrides: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": self.ssl_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca.cafile),
            "ssl.certificate.location": str(self.client.certfile),
            "ssl.key.location": str(self.client.keyfile),
            **overrides,
        }

    def kcat(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [
                "kcat",
                "-b",
                self.ssl_bootstrap,
                "-X",
                "security.protocol=SSL",
                "-X",
                f"ssl.ca.location={self.ca.cafile}",
                "-X",
                f"ssl.certificate.location={self.client.certfile}",
                "-X",
                f"ssl.key.location={self.client.keyfile}",
                *args,
            ],
            input=stdin,
            capture_output=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def tls_broker(start_cluster: Callable[..., BrokerCluster], tmp_path: Path) -> TlsBroker:
    return TlsBroker(start_cluster(0), tmp_path)


def produce_all(settings: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    producer = ConfluentProducer({**settings, "acks": "all", "linger.ms": 5})
    delivered: list[Any] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda e, m: delivered.append((e, m)))
    assert producer.flush(60) == 0
    return delivered


def consume_all(settings: dict[str, Any], topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = ConfluentConsumer({**settings, "group.id": f"tls-{topic}", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                got.append((message.offset() or 0, message.value() or b""))
        return got
    finally:
        consumer.close()


def high_watermark(tls: TlsBroker, topic: str) -> int:
    consumer = ConfluentConsumer(tls.confluent_settings(**{"group.id": "hw"}))
    try:
        return int(consumer.get_watermark_offsets(ConfluentPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def test_confluent_kafka_and_kcat_produce_and_consume_over_ssl_with_client_certificates(
    tls_broker: TlsBroker,
) -> None:
    tls_broker.cluster.create_topic("secret", 1)
    values = [b"v%05d-" % i + b"x" * (i % 700) for i in range(3000)]  # ~1 MB: fetches span many records
    delivered = produce_all(tls_broker.confluent_settings(), "secret", values)
    assert [e for e, _ in delivered] == [None] * 3000
    assert sorted(m.offset() for _, m in delivered) == list(range(3000))
    # one record larger than the read-ahead buffer and a TLS record: read in pieces, pending bytes included
    big = bytes(range(256)) * 3500
    delivered = produce_all(
        tls_broker.confluent_settings(**{"message.max.bytes": 2_000_000}), "secret", [big]
    )
    assert [(e, m.offset()) for e, m in delivered] == [(None, 3000)]

    got = consume_all(tls_broker.confluent_settings(), "secret", 3001)
    assert got == [(i, v) for i, v in enumerate(values)] + [(3000, big)]

    produced = tls_broker.kcat("-P", "-t", "secret", "-p", "0", stdin=b"k1\nk2\nk3\n")
    assert produced.returncode == 0, produced.stderr
    consumed = tls_broker.kcat("-C", "-t", "secret", "-p", "0", "-o", "3001", "-c", "3", "-J", "-e")
    assert consumed.returncode == 0, consumed.stderr
    lines = [json.loads(line) for line in consumed.stdout.decode().splitlines()]
    assert [(m["offset"], m["payload"]) for m in lines] == [(3001, "k1"), (3002, "k2"), (3003, "k3")]
    metadata = json.loads(tls_broker.kcat("-L", "-J").stdout)
    assert [b["name"] for b in metadata["brokers"]] == [tls_broker.ssl_bootstrap]  # the SSL listener


def api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def test_clients_without_a_certificate_of_the_ca_or_without_tls_are_refused_and_the_broker_stays_up(
    tls_broker: TlsBroker, tmp_path: Path
) -> None:
    tls_broker.cluster.create_topic("guarded", 1)
    assert [e for e, _ in produce_all(tls_broker.confluent_settings(), "guarded", [b"a", b"b"])] == [None] * 2
    address = ("127.0.0.1", tls_broker.ssl_port)

    # a plaintext client on the TLS listener: at most a TLS alert (record type 21), then the connection ends
    with socket.create_connection(address, timeout=10) as plain:
        plain.sendall(api_versions_frame())
        data = b""
        try:
            while chunk := plain.recv(4096):
                data += chunk
        except ConnectionResetError:
            pass
        assert data == b"" or data[0] == 21, data[:20]

    def handshake(context: ssl.SSLContext) -> str:
        """Connect, handshake and send ApiVersions; what happened."""
        with socket.create_connection(address, timeout=10) as raw:
            try:
                with context.wrap_socket(raw, server_hostname="localhost") as tls:
                    tls.sendall(api_versions_frame())
                    answer = tls.recv(4)
                    return "answered" if answer else "closed"
            except (ssl.SSLError, OSError) as exc:
                return f"refused: {exc}"

    trusting = ssl.create_default_context(cafile=str(tls_broker.ca.cafile))
    assert handshake(trusting).startswith(("refused", "closed"))  # no client certificate: required
    stranger_ca = CertificateAuthority(tmp_path / "stranger")
    stranger = stranger_ca.issue("mallory", client=True)
    strange = ssl.create_default_context(cafile=str(tls_broker.ca.cafile))
    strange.load_cert_chain(stranger.certfile, stranger.keyfile)
    assert handshake(strange).startswith(("refused", "closed"))  # a certificate of another CA
    old = ssl.create_default_context(cafile=str(tls_broker.ca.cafile))
    old.load_cert_chain(tls_broker.client.certfile, tls_broker.client.keyfile)
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # the client's OpenSSL would refuse TLS 1.1 itself otherwise
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.minimum_version = old.maximum_version = ssl.TLSVersion.TLSv1_1
    refused = handshake(old)
    assert refused.startswith("refused"), refused  # TLS 1.1: below the broker's minimum
    assert "no protocols available" not in refused  # refused by the broker, not by the client's OpenSSL
    good = ssl.create_default_context(cafile=str(tls_broker.ca.cafile))
    good.load_cert_chain(tls_broker.client.certfile, tls_broker.client.keyfile)
    assert handshake(good) == "answered"

    # confluent-kafka that does not trust the broker's CA (its own system CAs): it refuses the broker
    untrusting = tls_broker.confluent_settings()
    del untrusting["ssl.ca.location"]
    producer = ConfluentProducer({**untrusting, "message.timeout.ms": 3000})
    errors: list[Any] = []
    producer.produce("guarded", b"never", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert len(errors) == 1
    assert errors[0] is not None
    # confluent-kafka without a client certificate: the broker refuses it
    anonymous = tls_broker.confluent_settings()
    del anonymous["ssl.certificate.location"], anonymous["ssl.key.location"]
    consumer = ConfluentConsumer({**anonymous, "group.id": "anon"})
    try:
        with pytest.raises(KafkaException):
            consumer.list_topics("guarded", timeout=3)
    finally:
        consumer.close()

    # the broker is up, nothing of the refused clients appended, and the refusals counted in its log
    assert tls_broker.broker.running
    assert high_watermark(tls_broker, "guarded") == 2
    assert consume_all(tls_broker.confluent_settings(), "guarded", 2) == [(0, b"a"), (1, b"b")]
    log = tls_broker.broker.log()
    assert "TLS handshake failed" in log


def test_followers_replicate_over_an_ssl_inter_broker_listener_with_their_own_certificates(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    cluster = start_cluster(0)
    ca = CertificateAuthority(tmp_path / "ca")
    external_ports = []
    for broker_id in range(2):
        issued = ca.issue(f"broker{broker_id}")  # a server certificate, presented as a client one too
        plain, internal = free_port(), free_port()
        external_ports.append(plain)
        cluster.add_broker(
            {
                "listeners": [f"EXTERNAL://127.0.0.1:{plain}", f"INTERNAL://127.0.0.1:{internal}"],
                "listener_security_protocol_map": {"EXTERNAL": "PLAINTEXT", "INTERNAL": "SSL"},
                "inter_broker_listener_name": "INTERNAL",
                "ssl_certfile": str(issued.certfile),
                "ssl_keyfile": str(issued.keyfile),
                "ssl_cafile": str(ca.cafile),
                "ssl_client_auth": "required",
                "flush_on_ack": True,
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                "replica_fetch_wait_max_ms": 200,
            },
            port=plain,
        )
    cluster.create_topic("replicated", 1, {0: [0, 1]}, replication_factor=2)
    settings = {"bootstrap.servers": f"127.0.0.1:{external_ports[0]}"}
    delivered = produce_all(settings, "replicated", [b"r%d" % i for i in range(100)])
    assert [e for e, _ in delivered] == [None] * 100
    assert sorted(m.offset() for _, m in delivered) == list(range(100))
    assert sorted(cluster.state_of("replicated", 0).isr) == [0, 1]
    follower_log = cluster.broker(1).log_dir / "replicated-0" / "00000000000000000000.log"
    leader_log = cluster.broker(0).log_dir / "replicated-0" / "00000000000000000000.log"
    deadline = time.monotonic() + 30
    while follower_log.read_bytes() != leader_log.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert follower_log.read_bytes() == leader_log.read_bytes()
    assert len(leader_log.read_bytes()) > 0

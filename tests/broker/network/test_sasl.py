"""SASL listeners end to end (broker/network/sasl_authenticator.py, sasl_server.py, sasl_serving.py; users
from ``lumber users``): real broker processes, unmodified confluent-kafka, kcat and kafka-python.

The broker listens on PLAINTEXT (the test's probes), SASL_PLAINTEXT and SASL_SSL, with PLAIN and both SCRAM
mechanisms enabled; users are added with the real CLI, their passwords passed through the environment.
Good credentials produce and consume; a wrong password, an unknown user, a client that skips the handshake
and a bounded fuzz of SASL frames are each refused, the broker stays up and nothing of theirs is appended.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.codec import encode_request
from broker.protocol.messages.metadata import MetadataRequest
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.messages.sasl_handshake import SaslHandshakeRequest
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from tests.broker.server.helpers import batch
from tests.support.broker_cluster import OFFSETS_TOPIC_PARTITIONS, BrokerCluster, BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer as ConfluentConsumer
    from confluent_kafka import Producer as ConfluentProducer
    from confluent_kafka import TopicPartition as ConfluentPartition
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaPartition
    from kafka.errors import KafkaError as KafkaPythonError

pytestmark = [pytest.mark.zookeeper, pytest.mark.interop]

PASSWORD = "alice-Pa55word-that-must-never-show"
WRONG = "Wr0ng-Gue55-never-logged"
#: kafka-python's constructors leave their wake-up socket pair open when authentication fails in them
KAFKA_PYTHON_LEAKS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class SaslBroker:
    """One broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners and user ``alice``."""

    def __init__(self, cluster: BrokerCluster, folder: Path, **settings: Any) -> None:
        self.ca = CertificateAuthority(folder / "ca")
        server = self.ca.issue("broker")
        plain, self.sasl_port, self.sasl_ssl_port = free_port(), free_port(), free_port()
        self.broker: BrokerProcess = cluster.add_broker(
            {
                "listeners": [
                    f"PLAINTEXT://127.0.0.1:{plain}",
                    f"SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}",
                    f"SASL_SSL://127.0.0.1:{self.sasl_ssl_port}",
                ],
                "ssl_certfile": str(server.certfile),
                "ssl_keyfile": str(server.keyfile),
                "sasl_enabled_mechanisms": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                "flush_on_ack": True,
                "offsets_topic_partitions": OFFSETS_TOPIC_PARTITIONS,
                **settings,
            },
            port=plain,
        )
        self.cluster = cluster
        self.users("add", "alice", "--password-env", "ALICE_PASSWORD", env={"ALICE_PASSWORD": PASSWORD})

    def users(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "lumber", "--config", str(self.broker.config_path), "users", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **(env or {})},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done

    def confluent(
        self, mechanism: str = "SCRAM-SHA-512", password: str = PASSWORD, user: str = "alice"
    ) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_ssl_port}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca.cafile),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }


@pytest.fixture
def sasl_broker(start_cluster: Callable[..., BrokerCluster], tmp_path: Path) -> SaslBroker:
    # librdkafka retries a failed login every few ms: the throttle would soon refuse the test's own good
    # logins from the same host (test_repeated_failures_from_one_host_are_throttled tests it)
    return SaslBroker(start_cluster(0), tmp_path, sasl_max_failed_authentications=100_000)


def produce_all(settings: dict[str, Any], topic: str, values: list[bytes]) -> list[Any]:
    producer = ConfluentProducer({**settings, "acks": "all", "message.timeout.ms": 10_000})
    delivered: list[Any] = []
    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=lambda e, m: delivered.append((e, m)))
    producer.flush(30)
    return delivered


def consume_all(settings: dict[str, Any], topic: str, count: int, start: int = 0) -> list[tuple[int, bytes]]:
    consumer = ConfluentConsumer({**settings, "group.id": f"sasl-{topic}", "enable.auto.commit": False})
    try:
        consumer.assign([ConfluentPartition(topic, 0, start)])
        got: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                assert message.error() is None, message.error()
                got.append((message.offset() or 0, message.value() or b""))
        return got
    finally:
        consumer.close()


def errors_of(errors: list[Any]) -> Callable[[Any, Any], None]:
    """A delivery callback keeping each delivery's error in ``errors``."""
    return lambda error, _message: errors.append(error)


def high_watermark(sasl: SaslBroker, topic: str) -> int:
    consumer = ConfluentConsumer({**sasl.confluent(), "group.id": "hw"})
    try:
        return int(consumer.get_watermark_offsets(ConfluentPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def test_confluent_kafka_kcat_and_kafka_python_authenticate_and_produce_and_consume(
    sasl_broker: SaslBroker,
) -> None:
    listed = json.loads(sasl_broker.users("list", "--json").stdout)
    assert listed == [{"user": "alice", "mechanisms": ["SCRAM-SHA-256", "SCRAM-SHA-512"]}]
    sasl_broker.cluster.create_topic("sasl", 1)

    # confluent-kafka over SASL_SSL with SCRAM-SHA-512
    values = [b"c%04d" % i for i in range(500)]
    delivered = produce_all(sasl_broker.confluent(), "sasl", values)
    assert [e for e, _ in delivered] == [None] * 500
    assert sorted(m.offset() for _, m in delivered) == list(range(500))
    assert consume_all(sasl_broker.confluent(), "sasl", 500) == list(enumerate(values))

    # kcat over SASL_SSL with SCRAM-SHA-512
    kcat = [
        "kcat", "-b", f"127.0.0.1:{sasl_broker.sasl_ssl_port}", "-X", "security.protocol=SASL_SSL",
        "-X", f"ssl.ca.location={sasl_broker.ca.cafile}", "-X", "sasl.mechanism=SCRAM-SHA-512",
        "-X", "sasl.username=alice", "-X", f"sasl.password={PASSWORD}",
    ]  # fmt: skip
    produced = subprocess.run(
        [*kcat, "-P", "-t", "sasl", "-p", "0"], input=b"k1\nk2\n", capture_output=True, timeout=60
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [*kcat, "-C", "-t", "sasl", "-p", "0", "-o", "500", "-c", "2", "-J", "-e"],
        capture_output=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr
    lines = [json.loads(line) for line in consumed.stdout.decode().splitlines()]
    assert [(m["offset"], m["payload"]) for m in lines] == [(500, "k1"), (501, "k2")]

    # confluent-kafka over SASL_PLAINTEXT with SCRAM-SHA-256
    plain_256 = {**sasl_broker.confluent("SCRAM-SHA-256"), "security.protocol": "SASL_PLAINTEXT"}
    plain_256["bootstrap.servers"] = f"127.0.0.1:{sasl_broker.sasl_port}"
    assert [e for e, _ in produce_all(plain_256, "sasl", [b"s256"])] == [None]

    # kafka-python over SASL_PLAINTEXT with PLAIN
    settings = {
        "bootstrap_servers": f"127.0.0.1:{sasl_broker.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "sasl_plain_password": PASSWORD,
    }
    producer = KafkaProducer(acks="all", **settings)
    futures = [producer.send("sasl", b"kp%d" % i, partition=0) for i in range(10)]
    offsets = [f.get(timeout=30).offset for f in futures]
    producer.close()
    assert offsets == list(range(503, 513))
    consumer = KafkaConsumer(enable_auto_commit=False, consumer_timeout_ms=10_000, **settings)
    consumer.assign([KafkaPartition("sasl", 0)])
    consumer.seek(KafkaPartition("sasl", 0), 502)
    got = []
    for message in consumer:
        got.append((message.offset, message.value))
        if len(got) == 11:
            break
    consumer.close()
    assert got == [(502, b"s256")] + [(503 + i, b"kp%d" % i) for i in range(10)]


def frame(api_key_body: Any, version: int, correlation_id: int = 1) -> bytes:
    return encode_request(version, correlation_id, "fuzz", api_key_body)


def exchange(port: int, frames: list[bytes], *, wait_s: float = 2.0) -> list[bytes]:
    """Send ``frames`` one by one, reading each answer; the answers read until the connection closed."""
    answers: list[bytes] = []
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as sock:
        for data in frames:
            try:
                sock.sendall(data)
                head = _read(sock, 4)
                if head is None:
                    return answers
                (size,) = struct.unpack(">i", head)
                body = _read(sock, size)
                if body is None:
                    return answers
                answers.append(body)
            except (ConnectionResetError, BrokenPipeError, TimeoutError):
                return answers
    return answers


def _read(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def produce_frame(topic: str) -> bytes:
    body = ProduceRequest(
        acks=1, timeout_ms=5000, topic_data=[TopicProduceData(topic, [PartitionProduceData(0, batch(0, 3))])]
    )
    return frame(body, 8, 99)


@KAFKA_PYTHON_LEAKS
def test_wrong_password_unknown_user_and_no_handshake_are_refused_and_nothing_is_appended(
    sasl_broker: SaslBroker,
) -> None:
    sasl_broker.cluster.create_topic("guarded", 1)
    assert [e for e, _ in produce_all(sasl_broker.confluent(), "guarded", [b"ok"])] == [None]

    for settings in (sasl_broker.confluent(password=WRONG), sasl_broker.confluent(user="mallory")):
        producer = ConfluentProducer({**settings, "message.timeout.ms": 3000})
        errors: list[Any] = []
        producer.produce("guarded", b"never", partition=0, on_delivery=errors_of(errors))
        producer.flush(10)
        assert len(errors) == 1
        assert errors[0] is not None
    with pytest.raises(KafkaPythonError):
        KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{sasl_broker.sasl_port}",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=WRONG,
            bootstrap_timeout_ms=5000,
        ).send("guarded", b"never").get(timeout=10)

    # a client that skips the handshake: a Produce or Metadata first is never answered; closed
    assert exchange(sasl_broker.sasl_port, [produce_frame("guarded")]) == []
    assert exchange(sasl_broker.sasl_port, [frame(MetadataRequest(topics=None), 1)]) == []
    # an unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM (33) with the enabled ones, then closed
    answers = exchange(
        sasl_broker.sasl_port, [frame(SaslHandshakeRequest("GSSAPI"), 1), produce_frame("guarded")]
    )
    assert len(answers) == 1
    assert answers[0][4:6] == struct.pack(">h", 33)
    # a handshake, then Produce instead of SaslAuthenticate: closed, unanswered
    answers = exchange(
        sasl_broker.sasl_port, [frame(SaslHandshakeRequest("PLAIN"), 1), produce_frame("guarded")]
    )
    assert len(answers) == 1
    assert answers[0][4:6] == b"\x00\x00"

    # SASL on the PLAINTEXT listener: ILLEGAL_SASL_STATE (34), as Kafka; the connection stays open
    answers = exchange(
        sasl_broker.broker.port,
        [
            frame(SaslHandshakeRequest("PLAIN"), 1, 5),
            frame(SaslAuthenticateRequest(b"x"), 1, 6),
            frame(MetadataRequest(topics=None), 1, 7),
        ],
    )
    assert [a[:4] for a in answers] == [struct.pack(">i", c) for c in (5, 6, 7)]
    assert [a[4:6] for a in answers[:2]] == [struct.pack(">h", 34)] * 2

    assert high_watermark(sasl_broker, "guarded") == 1
    assert sasl_broker.broker.running
    log = sasl_broker.broker.log()
    assert "SASL SCRAM-SHA-512 authentication failed: user 'alice': invalid credentials" in log
    assert "user 'mallory' has no SCRAM-SHA-512 credential" in log
    assert "from 127.0.0.1:" in log
    assert PASSWORD not in log
    assert WRONG not in log  # the wrong password was never logged either


def test_a_bounded_fuzz_of_sasl_frames_never_authenticates_and_never_kills_the_broker(
    sasl_broker: SaslBroker,
) -> None:
    """300 fuzzed connections, drawn from one seed, ten at a time (a case that waits for an answer the
    broker never sends, such as a truncated handshake's, takes its 3 s alone); at most 90 s."""
    sasl_broker.cluster.create_topic("fuzzed", 1)
    rng = random.Random(37)
    handshake = frame(SaslHandshakeRequest("SCRAM-SHA-512"), 1)
    plain_handshake = frame(SaslHandshakeRequest("PLAIN"), 1)
    cases: list[list[bytes]] = []
    for case in range(300):
        kind = case % 6
        if kind == 0:  # random bytes with a plausible size prefix
            junk = rng.randbytes(rng.randint(1, 200))
            frames = [struct.pack(">i", len(junk)) + junk]
        elif kind == 1:  # a truncated handshake, then the connection is closed by us
            frames = [handshake[: rng.randint(1, len(handshake) - 1)]]
        elif kind == 2:  # an oversized size prefix before authentication (over the 512 KiB bound)
            frames = [struct.pack(">i", rng.choice([600_000, 2**31 - 1, -5])) + b"\x00\x24"]
        elif kind == 3:  # a handshake, then random SCRAM tokens in SaslAuthenticate
            token = rng.choice([rng.randbytes(rng.randint(0, 300)), b"n,,n=alice,r=" + rng.randbytes(20)])
            frames = [handshake, frame(SaslAuthenticateRequest(token), rng.randint(0, 2))]
        elif kind == 4:  # PLAIN with random fields
            parts = [rng.choice([b"", b"alice", rng.randbytes(8)]) for _ in range(rng.randint(1, 4))]
            frames = [plain_handshake, frame(SaslAuthenticateRequest(b"\0".join(parts)), 1)]
        else:  # a valid handshake with a corrupted byte somewhere, then an authenticate of garbage
            corrupt = bytearray(handshake)
            corrupt[rng.randint(4, len(corrupt) - 1)] ^= 0xFF
            frames = [bytes(corrupt), frame(SaslAuthenticateRequest(rng.randbytes(50)), 2)]
        cases.append([*frames, produce_frame("fuzzed")])
    deadline = time.monotonic() + 90

    def run(frames: list[bytes]) -> list[bytes] | None:
        if time.monotonic() > deadline:
            return None
        return exchange(sasl_broker.sasl_port, frames, wait_s=3.0)

    with ThreadPoolExecutor(max_workers=10) as pool:
        done = [answers for answers in pool.map(run, cases) if answers is not None]
    # whatever was answered, the Produce never was: no answer carries its correlation id 99
    assert [a for answers in done for a in answers if a[:4] == struct.pack(">i", 99)] == []
    assert len(done) >= 100
    assert sasl_broker.broker.running
    assert high_watermark(sasl_broker, "fuzzed") == 0
    assert [e for e, _ in produce_all(sasl_broker.confluent(), "fuzzed", [b"after"])] == [None]


@KAFKA_PYTHON_LEAKS
def test_repeated_failures_from_one_host_are_throttled(
    start_cluster: Callable[..., BrokerCluster], tmp_path: Path
) -> None:
    sasl = SaslBroker(
        start_cluster(0),
        tmp_path,
        sasl_max_failed_authentications=3,
        sasl_failed_authentication_window_ms=3000,
    )
    settings = {
        "bootstrap_servers": f"127.0.0.1:{sasl.sasl_port}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        "bootstrap_timeout_ms": 1500,  # kafka-python retries a failed login until then
    }

    def log_in(password: str) -> bool:
        try:
            KafkaConsumer(sasl_plain_password=password, **settings).close()
        except KafkaPythonError:
            return False
        return True

    assert log_in(PASSWORD)
    assert [log_in(WRONG) for _ in range(3)] == [False, False, False]
    assert not log_in(PASSWORD)  # throttled: refused without looking at the password
    last_attempt = time.monotonic()
    assert "refused without checking" in sasl.broker.log()
    time.sleep(max(0.0, last_attempt + 3.5 - time.monotonic()))  # the window passes without an attempt
    assert log_in(PASSWORD)

"""What TLS and SASL cost a broker, and whether the plaintext path changed: produce and consume over
SASL_SSL against PLAINTEXT, on one broker, in one run (issue 37's benchmark), and the same on Apache Kafka.

Run from the repository root (take the machine's benchmark lock; Kafka's jars from ``make jars`` or
``LUMBER_JARS_DIR``)::

    flock /work/bench.lock .venv/bin/python bench/tls.py [--messages 200000] [--rounds 3] [--no-kafka] \
        [--before TREE]

It starts a real ZooKeeper and one Lumber broker process with a PLAINTEXT and a SASL_SSL listener, and one
Apache Kafka 4.4 node (KRaft combined, :mod:`bench.paper_kafka`'s heap and JVM options) with the same two
listeners: both from one :class:`~lumber.dev.sasl_ssl_setup.SaslSslSetup` (a CA and certificate of its
own, a SCRAM-SHA-512 user, no authorizer). It measures with confluent-kafka (librdkafka, the same client
and settings for every listener), 200-byte values, one partition per case:

1. **produce, batch 50**: ``acks=1``, ``batch.num.messages=50``, ``linger.ms=5``: requests of 50 records;
2. **consume**: the topic just written, from offset 0, once the broker exposes all of it (not timed).

Kafka's SASL_SSL / PLAINTEXT ratio, with the same client in the same rounds, tells what TLS costs the client
and the machine from what it costs Lumber's network layer (librdkafka writes a produce request as dozens of
small TLS records: every broker decrypts each). ``--before TREE`` also starts a second Lumber broker from
another checkout (``PYTHONPATH=TREE``, its default PLAINTEXT listener) and measures its PLAINTEXT cases in
the same rounds: the plaintext hot path of this tree against that one. A warm-up comes first (not counted:
it creates ``__consumer_offsets``, opens the connections, and gives Kafka's JIT 20,000 messages a case).
Cases alternate within each round so that all see the same machine load; the best of ``--rounds`` counts.
It prints messages/s per case and the ratios SASL_SSL / PLAINTEXT of each broker (and this tree / TREE for
PLAINTEXT).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.paper_kafka import KAFKA_DEFAULTS, KAFKA_HEAP_MB
from bench.paper_kafka_clients import admin_create_topic
from lumber.dev.broker_cluster import BrokerCluster
from lumber.dev.kafka_server import KAFKA_SCRIPT_JVM_OPTIONS, KafkaCluster
from lumber.dev.process import LOOPBACK, free_port
from lumber.dev.sasl_ssl_setup import SaslSslSetup
from lumber.dev.zookeeper_server import ZooKeeperServer, make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, Producer, TopicPartition

PASSWORDS = {"bench": "bench-password"}
VALUE = b"x" * 200
#: Messages a case produces and consumes before the rounds (Kafka's: its JIT compiles the request path).
WARM_UP = {"lumber": 1000, "kafka": 20_000}

#: A case: how to create its topics, and the client settings of its listener.
Case = tuple[Callable[[str], object], dict[str, Any]]


def produce(settings: dict[str, Any], topic: str, count: int) -> float:
    producer = Producer({**settings, "acks": 1, "linger.ms": 5, "batch.num.messages": 50})
    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0:
        raise RuntimeError(f"{topic}: not every message was delivered")
    return count / (time.perf_counter() - started)


def consume(settings: dict[str, Any], topic: str, count: int) -> float:
    consumer = Consumer({**settings, "group.id": f"bench-{topic}", "enable.auto.commit": False})
    exposed_by = time.monotonic() + 60  # not timed: the broker exposes what it flushed (flush_ms)
    while consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1] < count:
        if time.monotonic() > exposed_by:
            raise RuntimeError(f"{topic}: not all {count} messages exposed")
        time.sleep(0.05)
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < count and time.monotonic() < deadline:
        for message in consumer.consume(min(10_000, count - got), 1.0):
            if message.error() is None:
                got += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    if got < count:
        raise RuntimeError(f"{topic}: read {got} of {count}")
    return count / elapsed


def start_lumber(cluster: BrokerCluster, setup: SaslSslSetup | None) -> dict[str, dict[str, Any]]:
    """A Lumber broker; the client settings of each of its listeners by protocol (PLAINTEXT only without
    ``setup``)."""
    plain = free_port()
    if setup is None:
        cluster.add_broker({"flush_ms": 1000, "num_io_threads": 4}, port=plain)
        return {"PLAINTEXT": {"bootstrap.servers": f"{LOOPBACK}:{plain}"}}
    secure = free_port()
    setup.add_users(cluster.zk)
    cluster.add_broker(
        {**setup.lumber_settings(plain, secure), "flush_ms": 1000, "num_io_threads": 4}, port=plain
    )
    return {
        "PLAINTEXT": {"bootstrap.servers": f"{LOOPBACK}:{plain}"},
        "SASL_SSL": {"bootstrap.servers": f"{LOOPBACK}:{secure}", **setup.client_settings("bench")},
    }


def start_kafka(base: Path, setup: SaslSslSetup) -> tuple[KafkaCluster, dict[str, Case]]:
    """A Kafka node with the same two listeners; its cases by protocol (topics made over PLAINTEXT)."""
    kafka = KafkaCluster(
        base,
        heap_mb=KAFKA_HEAP_MB,
        settings=KAFKA_DEFAULTS,
        jvm_options=(f"-Xms{KAFKA_HEAP_MB}m", *KAFKA_SCRIPT_JVM_OPTIONS),
    )
    [node] = kafka.nodes
    secure = free_port()
    node.settings = {**KAFKA_DEFAULTS, **setup.kafka_settings(node.address, node.controller_port, secure)}
    node.format_args = setup.kafka_format_args()
    kafka.start()
    create = admin_create_topic(node.address, node.data_dir)
    return kafka, {
        "PLAINTEXT": (lambda topic: create(topic, 1), {"bootstrap.servers": node.address}),
        "SASL_SSL": (
            lambda topic: create(topic, 1),
            {"bootstrap.servers": f"{LOOPBACK}:{secure}", **setup.client_settings("bench")},
        ),
    }


def lumber_cases(cluster: BrokerCluster, settings: dict[str, dict[str, Any]]) -> dict[str, Case]:
    return {protocol: (lambda topic: cluster.create_topic(topic, 1), s) for protocol, s in settings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-kafka", action="store_true", help="Lumber's cases only")
    parser.add_argument("--before", metavar="TREE", help="another checkout whose PLAINTEXT path to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumber-bench-tls-") as tmp:
        base = Path(tmp)
        setup = SaslSslSetup.create(base / "ca", PASSWORDS, mechanisms=("SCRAM-SHA-512",), authorizer=False)
        zookeeper = ZooKeeperServer(base / "zookeeper", free_port())
        zookeeper.start()
        clusters: list[BrokerCluster] = []
        kafka: KafkaCluster | None = None
        try:
            this = BrokerCluster(make_chroot(zookeeper.connect, "this"), base / "this")
            clusters.append(this)
            cases = {f"this {p}": c for p, c in lumber_cases(this, start_lumber(this, setup)).items()}
            if not args.no_kafka:
                kafka, kafka_cases = start_kafka(base / "kafka", setup)
                cases |= {f"kafka {p}": c for p, c in kafka_cases.items()}
            if args.before:
                saved = os.environ.get("PYTHONPATH")
                os.environ["PYTHONPATH"] = str(Path(args.before).resolve())
                try:
                    before = BrokerCluster(make_chroot(zookeeper.connect, "before"), base / "before")
                    clusters.append(before)
                    cases["before PLAINTEXT"] = lumber_cases(before, start_lumber(before, None))["PLAINTEXT"]
                finally:
                    if saved is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = saved
            for name, (create, settings) in cases.items():  # not counted: __consumer_offsets, connections
                warm = f"warm-{name.replace(' ', '-')}"
                create(warm)
                count = WARM_UP["kafka" if name.startswith("kafka") else "lumber"]
                produce(settings, warm, count)
                consume(settings, warm, count)
            best: dict[str, dict[str, float]] = {name: {"produce": 0.0, "consume": 0.0} for name in cases}
            for round_ in range(args.rounds):
                for name, (create, settings) in cases.items():
                    topic = f"t{round_}-{name.replace(' ', '-')}"
                    create(topic)
                    best[name]["produce"] = max(
                        best[name]["produce"], produce(settings, topic, args.messages)
                    )
                    best[name]["consume"] = max(
                        best[name]["consume"], consume(settings, topic, args.messages)
                    )
                    print(f"round {round_ + 1} {name}: {best[name]}", flush=True)
        finally:
            for cluster in clusters:
                cluster.stop()
            if kafka is not None:
                kafka.stop()
            zookeeper.stop()
    print(f"\n{args.messages} messages of 200 bytes, best of {args.rounds} rounds (messages/s):")
    for name, figures in best.items():
        produced, consumed = figures["produce"], figures["consume"]
        print(f"  {name:18} produce (batch 50) {produced:>10,.0f}   consume {consumed:>10,.0f}")
    for broker in ("this", "kafka"):
        if f"{broker} SASL_SSL" in best:
            plain, secure = best[f"{broker} PLAINTEXT"], best[f"{broker} SASL_SSL"]
            for what in ("produce", "consume"):
                print(f"  {broker:5} SASL_SSL / PLAINTEXT {what}: {secure[what] / plain[what]:.2f}")
    if "before PLAINTEXT" in best:
        plain = best["this PLAINTEXT"]
        for what in ("produce", "consume"):
            print(f"  PLAINTEXT this / before {what}: {plain[what] / best['before PLAINTEXT'][what]:.2f}")


if __name__ == "__main__":
    main()

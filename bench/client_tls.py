"""What TLS and SASL cost Lumber's own clients: its producer and consumer over SASL_SSL against PLAINTEXT, on
one broker, in one run (the client side of issue 37; ``bench/tls.py`` measures the broker with librdkafka).

Run from the repository root (take the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/client_tls.py [--messages 200000] [--rounds 3]

One real ZooKeeper and one Lumber broker process with a PLAINTEXT and a SASL_SSL listener (SCRAM-SHA-512, a
CA made for the run), started as ``bench/tls.py`` starts them. Per listener, 200-byte values, one partition:

1. **produce**: :class:`~broker.client.producer.producer.Producer` ``send_many`` with ``acks=1``,
   idempotence off, ``linger_ms=5``, 128 KiB batches, then ``flush``;
2. **consume**: :class:`~broker.client.consumer.consumer.Consumer` ``poll_batches`` from offset 0 until every
   record came (once the broker exposes all of them, not timed).

The clients' TLS goes through :class:`~broker.client.network.tls_channel.TlsChannel` (an ``SSLObject`` over
memory buffers). A warm-up of 1,000 records per case first; cases alternate within each round; the best of
``--rounds`` counts. Prints records/s per case and SASL_SSL / PLAINTEXT.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tls import PASSWORD, start_broker  # bench/tls.py, beside this script

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer
from tests.support.broker_cluster import BrokerCluster
from tests.support.zookeeper import make_chroot

VALUE = b"x" * 200


def lumber_settings(confluent: dict[str, Any]) -> dict[str, Any]:
    """The same listener in Lumber's keys."""
    settings: dict[str, Any] = {"bootstrap_servers": [confluent["bootstrap.servers"]]}
    if confluent.get("security.protocol") == "SASL_SSL":
        settings |= {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "bench",
            "sasl_password": PASSWORD,
            "ssl_cafile": confluent["ssl.ca.location"],
        }
    return settings


def produce(settings: dict[str, Any], topic: str, count: int) -> float:
    producer = Producer(
        ProducerConfig(acks="1", enable_idempotence=False, linger_ms=5, batch_size=128 * 1024, **settings)
    )
    try:
        started = time.perf_counter()
        sent = 0
        while sent < count:
            chunk = min(10_000, count - sent)
            producer.send_many(topic, [VALUE] * chunk, partition=0)
            sent += chunk
        producer.flush(120)
        return count / (time.perf_counter() - started)
    finally:
        producer.close()


def consume(settings: dict[str, Any], topic: str, count: int) -> float:
    tp = TopicPartition(topic, 0)
    consumer = Consumer(
        ConsumerConfig(auto_offset_reset="earliest", fetch_max_wait_ms=100, **settings), partitions=[tp]
    )
    try:
        exposed_by = time.monotonic() + 60
        while consumer.end_offsets([tp])[tp] < count:
            if time.monotonic() > exposed_by:
                raise RuntimeError(f"{topic}: not all {count} records exposed")
            time.sleep(0.05)
        got = 0
        started = time.perf_counter()
        deadline = time.monotonic() + 300
        while got < count and time.monotonic() < deadline:
            got += sum(batch.record_count for batch in consumer.poll_batches(timeout_ms=1000))
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if got < count:
        raise RuntimeError(f"{topic}: read {got} of {count}")
    return count / elapsed


def figures(produced: float, consumed: float) -> str:
    return f"produce {produced:>10,.0f}/s  consume {consumed:>10,.0f}/s"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumber-bench-client-tls-") as tmp:
        base = Path(tmp)
        zookeeper = ZooKeeperServer(base / "zookeeper", free_port())
        zookeeper.start()
        cluster = BrokerCluster(make_chroot(zookeeper.connect, "client-tls"), base / "cluster")
        try:
            listeners = start_broker(cluster, base, CertificateAuthority(base / "ca"))
            cases = {name: lumber_settings(conf) for name, conf in listeners.items()}
            best: dict[str, dict[str, float]] = {name: {"produce": 0.0, "consume": 0.0} for name in cases}
            for name, settings in cases.items():
                cluster.create_topic(f"warm-{name.lower()}", 1)
                produce(settings, f"warm-{name.lower()}", 1000)
                consume(settings, f"warm-{name.lower()}", 1000)
            for round_number in range(args.rounds):
                for name, settings in cases.items():
                    topic = f"r{round_number}-{name.lower()}"
                    cluster.create_topic(topic, 1)
                    produced = produce(settings, topic, args.messages)
                    consumed = consume(settings, topic, args.messages)
                    best[name]["produce"] = max(best[name]["produce"], produced)
                    best[name]["consume"] = max(best[name]["consume"], consumed)
                    print(f"round {round_number + 1} {name:<10} {figures(produced, consumed)}")
            print(
                f"\nbest of {args.rounds}, {args.messages:,} records of {len(VALUE)} bytes, Lumber's clients:"
            )
            for name, found in best.items():
                print(f"  {name:<10} {figures(found['produce'], found['consume'])}")
            for what in ("produce", "consume"):
                print(
                    f"  SASL_SSL / PLAINTEXT {what}: {best['SASL_SSL'][what] / best['PLAINTEXT'][what]:.2f}"
                )
        finally:
            cluster.stop()
            zookeeper.stop()


if __name__ == "__main__":
    main()

"""What TLS and SASL cost a broker, and whether the plaintext path changed: produce and consume over
SASL_SSL against PLAINTEXT, on one broker, in one run (issue 37's benchmark).

Run from the repository root (take the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/tls.py [--messages 200000] [--rounds 3] [--before TREE]

It starts a real ZooKeeper and one Lumber broker process with a PLAINTEXT and a SASL_SSL listener (a CA and
certificates made by :mod:`lumber.dev.dev_certificates`, a SCRAM-SHA-512 user), and measures with
confluent-kafka (librdkafka, the same client for both listeners), 200-byte values, one partition per case:

1. **produce, batch 50**: ``acks=1``, ``batch.num.messages=50``, ``linger.ms=5``: requests of 50 records;
2. **consume**: the topic just written, from offset 0, once the broker exposes all of it (not timed).

``--before TREE`` also starts a second broker from another checkout (``PYTHONPATH=TREE``, its default
PLAINTEXT listener) and measures its PLAINTEXT cases in the same rounds: the plaintext hot path of this tree
against that one. A warm-up of 1,000 messages per case comes first (not counted: it creates
``__consumer_offsets`` and opens the connections). Cases alternate within each round so that all see the
same machine load; the best of ``--rounds`` counts. It prints messages/s per case and the ratios
SASL_SSL / PLAINTEXT (and this tree / TREE for PLAINTEXT).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from broker.cluster.user_credential_store import UserCredentialStore
from broker.network.scram_credential import ScramCredential, ScramMechanism
from lumber.dev.broker_cluster import BrokerCluster
from lumber.dev.dev_certificates import CertificateAuthority
from lumber.dev.process import free_port
from lumber.dev.zookeeper_server import ZooKeeperServer, make_chroot

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, Producer, TopicPartition

PASSWORD = "bench-password"
VALUE = b"x" * 200


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


def start_broker(
    cluster: BrokerCluster, folder: Path, ca: CertificateAuthority | None
) -> dict[str, dict[str, Any]]:
    """A broker; the client settings of each of its listeners by protocol."""
    plain = free_port()
    if ca is None:
        cluster.add_broker({"flush_ms": 1000, "num_io_threads": 4}, port=plain)
        return {"PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"}}
    secure = free_port()
    server = ca.issue("broker")
    cluster.add_broker(
        {
            "listeners": [f"PLAINTEXT://127.0.0.1:{plain}", f"SASL_SSL://127.0.0.1:{secure}"],
            "ssl_certfile": str(server.certfile),
            "ssl_keyfile": str(server.keyfile),
            "sasl_enabled_mechanisms": ["SCRAM-SHA-512"],
            "flush_ms": 1000,
            "num_io_threads": 4,
        },
        port=plain,
    )
    UserCredentialStore(cluster.zk).upsert(
        "bench",
        {ScramMechanism.SCRAM_SHA_512: ScramCredential.generate(PASSWORD, ScramMechanism.SCRAM_SHA_512)},
    )
    del folder
    return {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{plain}"},
        "SASL_SSL": {
            "bootstrap.servers": f"127.0.0.1:{secure}",
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(ca.cafile),
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bench",
            "sasl.password": PASSWORD,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", metavar="TREE", help="another checkout whose PLAINTEXT path to compare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lumber-bench-tls-") as tmp:
        base = Path(tmp)
        zookeeper = ZooKeeperServer(base / "zookeeper", free_port())
        zookeeper.start()
        clusters: list[BrokerCluster] = []
        try:
            this = BrokerCluster(make_chroot(zookeeper.connect, "this"), base / "this")
            clusters.append(this)
            cases = {
                f"this {p}": (this, s)
                for p, s in start_broker(this, base, CertificateAuthority(base / "ca")).items()
            }
            if args.before:
                saved = os.environ.get("PYTHONPATH")
                os.environ["PYTHONPATH"] = str(Path(args.before).resolve())
                try:
                    before = BrokerCluster(make_chroot(zookeeper.connect, "before"), base / "before")
                    clusters.append(before)
                    cases["before PLAINTEXT"] = (before, start_broker(before, base, None)["PLAINTEXT"])
                finally:
                    if saved is None:
                        os.environ.pop("PYTHONPATH", None)
                    else:
                        os.environ["PYTHONPATH"] = saved
            for name, (cluster, settings) in cases.items():  # not counted: __consumer_offsets, connections
                warm = f"warm-{name.replace(' ', '-')}"
                cluster.create_topic(warm, 1)
                produce(settings, warm, 1000)
                consume(settings, warm, 1000)
            best: dict[str, dict[str, float]] = {name: {"produce": 0.0, "consume": 0.0} for name in cases}
            for round_ in range(args.rounds):
                for name, (cluster, settings) in cases.items():
                    topic = f"t{round_}-{name.replace(' ', '-')}"
                    cluster.create_topic(topic, 1)
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
            zookeeper.stop()
    print(f"\n{args.messages} messages of 200 bytes, best of {args.rounds} rounds (messages/s):")
    for name, figures in best.items():
        produced, consumed = figures["produce"], figures["consume"]
        print(f"  {name:18} produce (batch 50) {produced:>10,.0f}   consume {consumed:>10,.0f}")
    plain, secure = best["this PLAINTEXT"], best["this SASL_SSL"]
    for what in ("produce", "consume"):
        print(f"  SASL_SSL / PLAINTEXT {what}: {secure[what] / plain[what]:.2f}")
    if "before PLAINTEXT" in best:
        for what in ("produce", "consume"):
            print(f"  PLAINTEXT this / before {what}: {plain[what] / best['before PLAINTEXT'][what]:.2f}")


if __name__ == "__main__":
    main()

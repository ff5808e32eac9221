"""A topic's ``compression.type`` against Apache Kafka: the broker CPU a recompressing topic costs, Lumber's
and Kafka's, over the network in one run.

Run from the repository root (take the machine's benchmark lock; ``LUMBER_JARS_DIR`` names Kafka's jars)::

    flock /work/bench.lock .venv/bin/python bench/topic_compression_kafka.py [--records 200000]

One Apache Kafka broker (KRaft combined mode, Kafka's defaults as ``bench/paper_kafka.py`` sets them back)
and one Lumber broker with its defaults (and its own ZooKeeper). On each, for each topic codec in turn
(``producer``, then ``zstd``, then ``gzip``: one topic each, one partition, created with that
``compression.type``), a confluent-kafka producer writes ``--records`` 200-byte log-line records compressed
with lz4 (``acks=1``, ``linger.ms=5``, ``batch.num.messages=50``: batches of 50 records, about 5 KB), after
a warm-up of a tenth as many to a topic of its own. The broker's CPU seconds per million records come from
its ``/proc/<pid>/stat`` (utime + stime, all threads: :mod:`bench.broker_cpu`), and the ratio to the
``producer`` topic's is what the recompression costs.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.broker_cpu import BrokerCpu, per_million
from bench.paper_kafka import LUMBER_DEFAULTS, benchmark_kafka, kafka_version
from bench.paper_kafka_clients import admin_create_topic
from tests.support.broker_cluster import bench_cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import confluent_kafka
    from confluent_kafka import Producer

TOPIC_CODECS = ("producer", "zstd", "gzip")
TIMEOUT_S = 600.0


def values(count: int) -> list[bytes]:
    rng = random.Random(7)
    words = [b"GET", b"POST", b"/api/v1/items", b"/home", b"200", b"404", b"user=", b"session=", b"ms"]
    distinct = []
    for _ in range(1000):
        out = bytearray()
        while len(out) < 200:
            out += rng.choice(words) + b" " + str(rng.randrange(10**6)).encode() + b" "
        distinct.append(bytes(out[:200]))
    return [distinct[i % 1000] for i in range(count)]


def create(bootstrap: str, topic: str, codec: str) -> None:
    admin_create_topic(bootstrap, config={"compression.type": codec})(topic, 1)


def produce(bootstrap: str, topic: str, records: list[bytes]) -> None:
    errors: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "1",
            "linger.ms": 5,
            "batch.num.messages": 50,
            "compression.type": "lz4",
            "delivery.report.only.error": True,
            "on_delivery": delivered,
        }
    )
    producer.list_topics(topic, timeout=30)
    for i, value in enumerate(records):
        while True:
            try:
                producer.produce(topic, value, partition=0)
                break
            except BufferError:  # librdkafka's queue is full: let the acknowledgements drain it
                producer.poll(0.05)
        if not i % 5000:
            producer.poll(0)
    left = producer.flush(TIMEOUT_S)
    if left or errors:
        raise RuntimeError(f"{topic} at {bootstrap}: {left} records unacknowledged, errors {errors[:3]}")


def measure(name: str, bootstrap: str, pid: int, records: list[bytes]) -> dict[str, float]:
    """CPU seconds per million records on the broker, per topic codec."""
    create(bootstrap, "warm-up", "zstd")
    produce(bootstrap, "warm-up", records[: len(records) // 10])
    cpu = BrokerCpu(pid)
    found: dict[str, float] = {}
    for codec in TOPIC_CODECS:
        topic = f"codec-{codec}"
        create(bootstrap, topic, codec)
        with cpu.phase() as spent:
            produce(bootstrap, topic, records)
        found[codec] = per_million(spent.seconds, len(records))
        print(f"  {name}, topic {codec}: {found[codec]:.2f} CPU s per million records", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per topic (default 200,000)")
    args = parser.parse_args()
    records = values(args.records)
    print(
        f"load average {os.getloadavg()}; Apache Kafka {kafka_version()}; librdkafka "
        f"{confluent_kafka.libversion()[0]}; {args.records} lz4-compressed records of 200 bytes per topic"
    )
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="topic-compression-kafka-") as scratch:
        kafka = benchmark_kafka(Path(scratch) / "kafka")
        kafka.start()
        try:
            pid = kafka.nodes[0].pid
            if pid is None:
                raise RuntimeError("Kafka is not running")
            results["Apache Kafka"] = measure("Apache Kafka", kafka.bootstrap, pid, records)
        finally:
            kafka.stop()
        with bench_cluster(Path(scratch) / "lumber", 0) as cluster:
            broker = cluster.add_broker(LUMBER_DEFAULTS)
            if broker.popen is None:
                raise RuntimeError("the Lumber broker is not running")
            results["Lumber"] = measure("Lumber", broker.address, broker.popen.pid, records)
    print(f"load average {os.getloadavg()}")
    print("| broker | " + " | ".join(f"topic {c}" for c in TOPIC_CODECS) + " |")
    print("| --- |" + " ---: |" * len(TOPIC_CODECS))
    for name, found in results.items():
        base = found["producer"]
        cells = [f"{found[c]:.2f} ({found[c] / base:.2f}x)" for c in TOPIC_CODECS]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Moving partitions to a new broker with and without a replication throttle (issue 38), and what a steady
producer sees meanwhile, in one run on three real broker processes and a real ZooKeeper.

Run from the repository root (under the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/reassign.py [--mib 32] [--throttle 4m] [--rate 1000]

Two topics of ``--mib`` MiB each (4 partitions, 1 KiB records) are written to broker 0; broker 2 holds
nothing. A confluent-kafka producer (idempotent, acks=all) sends ``--rate`` records/s of 200 bytes to a
third topic led by broker 0 (replicated to broker 1) for the whole run; each record's latency is the time
from ``produce()`` to its delivery report. Then:

1. **before**: 10 s of the steady producer alone;
2. **unthrottled**: the first topic is moved to broker 2 (``/admin/reassign_partitions``, as ``lumber
   cluster reassign --execute``); timed from the request to the controller's completion;
3. **throttled**: the second topic likewise, with ``--throttle`` bytes/s on brokers 0 and 2 (Kafka's leader
   and follower rates, as ``--throttle`` writes them).

Printed: each move's time and copy rate, and the steady producer's throughput and p50/p99 latency in each
phase against before (goal of the issue: at least 0.7x throughput and p99 at most 3x while a throttled
move runs). BENCHMARKS.md ("Reassignment") records runs with their date.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.cluster import reassignment_store, zk_paths
from broker.cluster.replication_throttle import clear_throttle, write_throttle
from broker.record.topic_partition import TopicPartition
from lumber.cli.throttle_option import parse_rate
from tests.support.broker_cluster import BrokerCluster, bench_cluster

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Producer

PARTITIONS = 4


class SteadyProducer:
    """``rate`` records/s on a thread; each delivery's (time, latency) recorded."""

    def __init__(self, cluster: BrokerCluster, topic: str, rate: int) -> None:
        self.deliveries: list[tuple[float, float]] = []
        self.errors = 0
        self.parse_rate = rate
        self._topic = topic
        self._stop = threading.Event()
        self._producer = Producer(
            {"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "acks": "all",
             "linger.ms": 5}
        )  # fmt: skip
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        value = b"s" * 200
        start = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            due = start + sent / self.parse_rate
            now = time.monotonic()
            if now < due:
                self._producer.poll(min(due - now, 0.01))
                continue
            sent_at = time.monotonic()

            def done(error: object, _message: object, sent_at: float = sent_at) -> None:
                if error is not None:
                    self.errors += 1
                else:
                    at = time.monotonic()
                    self.deliveries.append((at, at - sent_at))

            self._producer.produce(self._topic, value, on_delivery=done)
            sent += 1
        self._producer.flush(30)

    def window(self, start: float, end: float) -> tuple[float, float, float]:
        """Records/s delivered, p50 and p99 latency (ms) of the deliveries in ``[start, end)``."""
        inside = sorted(lat for at, lat in self.deliveries if start <= at < end)
        if len(inside) < 2:
            return 0.0, float("nan"), float("nan")
        quantiles = statistics.quantiles(inside, n=100)
        return len(inside) / (end - start), quantiles[49] * 1000, quantiles[98] * 1000

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def fill(cluster: BrokerCluster, topic: str, mib: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20, "acks": 1})
    record = b"b" * 1024
    for i in range(mib * 1024):
        while True:
            try:
                producer.produce(topic, record, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise SystemExit(f"{topic}: records left undelivered")


def move(cluster: BrokerCluster, topic: str, throttle: int | None) -> float:
    targets = {TopicPartition(topic, p): (2,) for p in range(PARTITIONS)}
    if throttle is not None:
        lists = {topic: {(p, 0) for p in range(PARTITIONS)}}
        write_throttle(cluster.zk, throttle, [0, 2], lists, {topic: {(p, 2) for p in range(PARTITIONS)}})
    started = time.monotonic()
    reassignment_store.request_reassignment(cluster.zk, targets)
    # done once every partition is on broker 2 and the controller has removed the request
    while not all(
        cluster.admin.describe_topic(topic)[p] == (2,) for p in range(PARTITIONS)
    ) or cluster.zk.exists(zk_paths.REASSIGN_PARTITIONS_PATH):
        time.sleep(0.1)
    took = time.monotonic() - started
    if throttle is not None:
        clear_throttle(cluster.zk, [0, 2], [topic])
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=32, help="MiB in each moved topic (default 32)")
    parser.add_argument("--throttle", type=parse_rate, default=4 * 1024 * 1024, help="bytes/s (default 4m)")
    parser.add_argument("--rate", type=int, default=1000, help="steady producer's records/s (default 1000)")
    args = parser.parse_args(argv)
    with (
        tempfile.TemporaryDirectory(prefix="bench-reassign-") as base,
        bench_cluster(Path(base), 3) as cluster,
    ):
        for topic in ("bulk-a", "bulk-b"):
            cluster.create_topic(topic, PARTITIONS, {p: [0] for p in range(PARTITIONS)})
            fill(cluster, topic, args.mib)
        size = sum(
            f.stat().st_size
            for topic in ("bulk-a",)
            for f in (cluster.broker(0).log_dir).glob(f"{topic}-*/*.log")
        )
        cluster.create_topic("steady", 1, {0: [0, 1]})
        steady = SteadyProducer(cluster, "steady", args.rate)
        time.sleep(2)
        t0 = time.monotonic()
        time.sleep(10)
        t1 = time.monotonic()
        free = move(cluster, "bulk-a", None)
        t2 = time.monotonic()
        slow = move(cluster, "bulk-b", args.throttle)
        t3 = time.monotonic()
        steady.stop()
        phases = {"before": (t0, t1), "unthrottled move": (t1, t2), "throttled move": (t2, t3)}
        base_rate, _p50, base_p99 = steady.window(t0, t1)
        print(f"moved {size / 2**20:.1f} MiB (4 partitions) from broker 0 to broker 2:")
        print(f"  unthrottled: {free:6.2f} s, {size / free / 2**20:6.2f} MiB/s")
        print(f"  throttled:   {slow:6.2f} s, {size / slow / 2**20:6.2f} MiB/s (throttle "
              f"{args.throttle / 2**20:g} MiB/s)")  # fmt: skip
        print(f"steady producer, {args.rate} records/s of 200 B, acks=all, to a topic led by broker 0:")
        for name, (start, end) in phases.items():
            rate, p50, p99 = steady.window(start, end)
            ratio = rate / base_rate
            print(
                f"  {name:17} {rate:8.0f} rec/s ({ratio:4.2f}x)  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms "
                f"({p99 / base_p99:4.1f}x)"
            )
        print(f"  delivery errors: {steady.errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

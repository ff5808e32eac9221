"""End-to-end latency, produce to consume, of Lumber and of a real Apache Kafka broker in one run (issue 35).

Run from the repository root, after ``make jars`` (under the machine's benchmark lock)::

    flock /work/bench.lock .venv/bin/python bench/e2e_latency.py              # 10 s per rate, 3 rounds
    .venv/bin/python bench/e2e_latency.py --seconds 3 --rounds 1             # a smoke run

What is measured: one broker of each (Kafka 4.4 in KRaft combined mode, ``lumber.dev.kafka_server``; Lumber
with its default settings on a real ZooKeeper), a one-partition topic on each, and the same client for both:
a confluent-kafka producer and consumer with librdkafka's defaults (``acks=all``, ``linger.ms`` 5,
``fetch.wait.max.ms`` 500; ``--linger-ms 0`` sends each message at once, leaving the brokers' own path).
The producer, in this process, is paced at each ``--rates`` msg/s for
``--seconds`` (plus a second before and one after, not measured), each 200-byte value stamped with its
scheduled send time (``time.time_ns``), so a producer falling behind shows as latency; a producer more than
``MAX_BEHIND_S`` (1 s) behind its schedule stops. The consumer runs in a child process (``spawn``),
assigned to the new topic's end (offset 0) a second before the producer starts; it waits for one message
(``poll``), takes every other one already there (``consume`` without waiting) and records receive time
minus stamp for each. The consumer, once connected, and the producer, before each paced run, settle their
garbage collectors as the broker does (``GarbageCollection.settle``: what exists is frozen out of every later
collection), so that the harness's own full collections (34-110 ms in the consumer at 100,000 msg/s) are
not counted as either broker's latency. Reported per broker and rate: messages received of those sent in
the window, p50, p99, p99.9 and max in ms, and :mod:`bench.latency_verdict`'s verdict (sustained only if
the producer kept the rate, everything arrived, latency did not grow through the window and the p50 is at
most 100 ms).
First each broker takes ``--warmup-seconds`` (5) of the highest rate, not reported (a cold JVM compiles
Kafka's hot paths in its first seconds: latencies of seconds). Then the brokers run alternately, Kafka
first, ``--rounds`` times, each round on fresh topics.
The machine may be shared: compare the two brokers within a round. The table ends with the medians of
the rounds per rate and broker, then each broker's percentiles over every round's messages together.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.latency_verdict import MAX_BEHIND_S, judge  # noqa: E402
from broker.server.garbage_collection import GarbageCollection  # noqa: E402
from lumber.dev.kafka_server import KafkaCluster  # noqa: E402
from tests.support.broker_cluster import bench_cluster  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

VALUE_PAD = b"." * 184  # 16 hex digits of stamp + 184 = 200 bytes
WARM_S = 1.0
TAIL_S = 1.0
GRACE_S = 10.0


@dataclass
class Row:
    broker: str
    rate: int
    round: int
    sent: int = 0
    received: int = 0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    max_ms: float = 0.0
    verdict: str = ""
    #: every received message's latency in the window, in ms (a numpy array; the pooled figures' input)
    latencies_ms: Any = field(default=None, repr=False)


def consumer_child(bootstrap: str, topic: str, expected: int, ready: Any, results: Connection) -> None:
    """Child process: read ``topic``-0 from its end until ``expected`` messages or 60 s of silence;
    send back (stamp, latency) pairs in ns."""
    from array import array  # noqa: PLC0415

    pairs = array("q")
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"e2e-{topic}", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])  # a fresh topic: its end is offset 0
        warm_until = time.monotonic() + 1.0  # connected and fetching (an empty fetch waiting) before ready
        while time.monotonic() < warm_until:
            consumer.poll(0.1)
        GarbageCollection.settle()  # the harness's own full collections are not the broker's latency
        ready.set()
        silent_since = time.monotonic()
        while len(pairs) < 2 * expected and time.monotonic() - silent_since < 60:
            first = consumer.poll(0.2)  # one message as soon as it is there
            if first is None:
                continue
            # then every one already fetched, without waiting (consume() with a timeout waits to fill)
            now = time.time_ns()
            for msg in (first, *consumer.consume(10_000, 0)):
                value = msg.value()
                if msg.error() or value is None:
                    continue
                stamp = int(value[:16], 16)
                pairs.append(stamp)
                pairs.append(now - stamp)
            silent_since = time.monotonic()
        results.send_bytes(pairs.tobytes())
    finally:
        consumer.close()


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = admin.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None and found.partitions and found.partitions[0].leader >= 0:
            return
        time.sleep(0.1)
    raise TimeoutError(f"{topic} got no leader at {bootstrap}")


def measure(
    broker: str, bootstrap: str, rate: int, seconds: float, round_: int, linger_ms: int | None = None
) -> Row:
    import numpy as np  # noqa: PLC0415

    topic = f"e2e-{broker}-{rate}-{round_}"
    create_topic(bootstrap, topic)
    warm = int(rate * WARM_S)
    measured = int(rate * seconds)
    total = warm + measured + int(rate * TAIL_S)
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=consumer_child, args=(bootstrap, topic, total, ready, sender), daemon=True)
    child.start()
    linger = {} if linger_ms is None else {"linger.ms": linger_ms}
    producer = Producer({"bootstrap.servers": bootstrap, **linger})
    try:
        if not ready.wait(60):
            raise TimeoutError(f"{broker}: the consumer did not start within 60 s")
        GarbageCollection.settle()  # nor the paced producer's
        interval_ns = 1e9 / rate
        start_ns = time.time_ns() + 50_000_000
        sent = 0
        behind = False
        produce = producer.produce  # bound once: at 100,000 msg/s the loop's own cost counts
        while sent < total:
            now = time.time_ns()
            due = min(total, int((now - start_ns) / interval_ns) + 1) if now >= start_ns else 0
            if due <= sent:
                time.sleep(max(0.0, (start_ns + sent * interval_ns - now) / 1e9))
                producer.poll(0)
                continue
            if now - (start_ns + sent * interval_ns) > MAX_BEHIND_S * 1e9:
                behind = True
                break
            for k in range(sent, due):
                try:
                    produce(topic, b"%016x" % int(start_ns + k * interval_ns) + VALUE_PAD, partition=0)
                except BufferError:  # librdkafka's queue is full: the broker is behind
                    producer.poll(0.01)
                    due = k
                    break
            sent = due
            producer.poll(0)
        elapsed_s = (time.time_ns() - start_ns) / 1e9
        producer.flush(30)
        answer = receiver.recv_bytes() if receiver.poll(GRACE_S + 60) else b""
    finally:
        child.join(70)
        if child.is_alive():
            child.kill()
            child.join(5)
    pairs = np.frombuffer(answer, dtype=np.int64).reshape(-1, 2)
    stamps = pairs[:, 0]
    window = pairs[
        (stamps > start_ns + (warm - 0.5) * interval_ns)
        & (stamps < start_ns + (warm + measured - 0.5) * interval_ns)
    ]
    window = window[np.argsort(window[:, 0], kind="stable")]
    latencies = window[:, 1] / 1e6
    row = Row(broker, rate, round_, sent=measured, received=len(latencies), latencies_ms=latencies)
    growth_ms = None
    if len(latencies):
        row.p50_ms, row.p99_ms, row.p999_ms = (float(np.percentile(latencies, q)) for q in (50, 99, 99.9))
        row.max_ms = float(latencies.max())
        fifth = max(1, len(latencies) // 5)
        growth_ms = float(np.median(latencies[-fifth:]) - np.median(latencies[:fifth]))
    row.verdict = judge(
        rate=rate,
        measured=measured,
        received=row.received,
        achieved_rate=sent / elapsed_s if elapsed_s > 0 else 0.0,
        behind_after=sent if behind else None,
        p50_ms=row.p50_ms if len(latencies) else None,
        growth_ms=growth_ms,
        grace_s=GRACE_S + 60,
    ).text
    return row


def pooled_percentiles(rows: list[Row]) -> tuple[int, float, float, float] | None:
    """Messages, p50, p99 and p99.9 in ms of ``rows``' latencies taken together (one broker and rate over
    its rounds: a percentile of every message rather than the median of the rounds' percentiles, whose
    p99s move by tenths of a millisecond from round to round); None without a message."""
    import numpy as np  # noqa: PLC0415

    parts = [r.latencies_ms for r in rows if r.latencies_ms is not None and len(r.latencies_ms)]
    if not parts:
        return None
    every = np.concatenate(parts)
    p50, p99, p999 = (float(np.percentile(every, q)) for q in (50, 99, 99.9))
    return len(every), p50, p99, p999


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rates", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup-seconds", type=float, default=5.0)
    parser.add_argument("--linger-ms", type=int, help="the producer's linger.ms (default: librdkafka's, 5)")
    args = parser.parse_args()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="e2e-latency-") as tmp:
        kafka = KafkaCluster(Path(tmp) / "kafka")
        kafka.start()
        try:
            # Lumber's defaults: the fixtures' 20 ms flush is set back to [log] flush_ms's default
            with bench_cluster(Path(tmp) / "lumber", 1, flush_ms=1000) as lumber:
                targets = (("kafka", kafka.bootstrap), ("lumber", lumber.bootstrap_servers))
                for broker, bootstrap in targets:  # a JVM's first seconds are its JIT's: not measured
                    warm = measure(broker, bootstrap, max(args.rates), args.warmup_seconds, 0, args.linger_ms)
                    print(f"warm-up {broker}: p50 {warm.p50_ms:.1f} p99 {warm.p99_ms:.1f} ms", flush=True)
                for round_ in range(1, args.rounds + 1):
                    for rate in args.rates:
                        for broker, bootstrap in (
                            ("kafka", kafka.bootstrap),
                            ("lumber", lumber.bootstrap_servers),
                        ):
                            row = measure(broker, bootstrap, rate, args.seconds, round_, args.linger_ms)
                            rows.append(row)
                            print(
                                f"round {row.round} {row.broker:6} {row.rate:>6} msg/s: "
                                f"{row.received:,}/{row.sent:,} "
                                f"p50 {row.p50_ms:.1f} p99 {row.p99_ms:.1f} p99.9 {row.p999_ms:.1f} "
                                f"max {row.max_ms:.1f} ms; {row.verdict}",
                                flush=True,
                            )
        finally:
            kafka.stop()
    print("\n| round | broker | msg/s | received | p50 ms | p99 ms | p99.9 ms | max ms | verdict |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row.round} | {row.broker} | {row.rate:,} | {row.received:,} / {row.sent:,} | "
            f"{row.p50_ms:.1f} | {row.p99_ms:.1f} | {row.p999_ms:.1f} | {row.max_ms:.1f} | {row.verdict} |"
        )
    print("\nmedians of the rounds:\n\n| msg/s | broker | p50 ms | p99 ms | p99.9 ms | sustained rounds |")
    print("|---|---|---|---|---|---|")
    for rate in args.rates:
        for broker in ("kafka", "lumber"):
            mine = [r for r in rows if r.rate == rate and r.broker == broker]
            if mine:
                p50, p99, p999 = (
                    statistics.median(getattr(r, f) for r in mine) for f in ("p50_ms", "p99_ms", "p999_ms")
                )
                held = sum(r.verdict.startswith("sustained") for r in mine)
                print(f"| {rate:,} | {broker} | {p50:.1f} | {p99:.1f} | {p999:.1f} | {held} of {len(mine)} |")
    print("\nevery round's messages together:\n")
    print("| msg/s | broker | messages | p50 ms | p99 ms | p99.9 ms |")
    print("|---|---|---|---|---|---|")
    for rate in args.rates:
        for broker in ("kafka", "lumber"):
            pooled = pooled_percentiles([r for r in rows if r.rate == rate and r.broker == broker])
            if pooled is not None:
                count, p50, p99, p999 = pooled
                print(f"| {rate:,} | {broker} | {count:,} | {p50:.2f} | {p99:.2f} | {p999:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

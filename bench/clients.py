"""Client benchmark: Lumber's producer and consumer against kafka-python's, on the same broker, in one run.

Run from the repository root::

    .venv/bin/python bench/clients.py [--messages 1000000] [--baseline-messages 200000] [--rounds 3]

It starts a real ZooKeeper and one real Lumber broker process on 127.0.0.1 (the test-suite helper
``tests/support/broker_cluster.py``) and measures, with 200-byte values and ``acks=1``:

1. **produce, batch size 1**: one ``Producer.send()`` call per message;
2. **produce, batch size 50**: one ``Producer.send_many()`` call per 50 messages (the paper's producer
   batch), no per-message future;
3. **produce, kafka-python**: ``KafkaProducer.send()`` per message (it has no batch call), same
   ``linger_ms`` and ``batch_size``;
4. **consume**: reading a topic of N messages from offset 0 with ``Consumer.poll_values()`` (offsets and
   values, no object per message), ``Consumer.messages()`` (a ``ConsumerRecord`` per message) and
   ``Consumer.poll_batches()`` (CRC-checked batches, not decoded); each also with the paper benchmark's
   consumer prefetch of ~200 KB; against ``KafkaConsumer`` (assign, seek to 0, iterate).

Both clients batch on the wire the same way (``linger_ms`` 5, ``batch_size`` 128 KiB, up to 5 requests in
flight); "batch size" is how many messages the application hands over per call. A round of each case runs
in turn (so that all see the same machine load) and the best of ``--rounds`` counts. Each producer case
writes its own topic of one partition; consuming waits until the broker exposes every message (flushed).
It prints messages/s and the ratios Lumber / kafka-python, and the reference figures of issue 9 (RabbitMQ
with pika, measured here: ~40k msg/s produce, ~48k msg/s consume).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker.client.consumer.consumer import Consumer
from broker.client.consumer.consumer_config import ConsumerConfig
from broker.client.producer.producer import Producer
from broker.client.producer.producer_config import ProducerConfig
from broker.record.topic_partition import TopicPartition

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

VALUE_BYTES = 200
LINGER_MS = 5
BATCH_BYTES = 128 * 1024
PAPER_PREFETCH_BYTES = 200 * 1024
RABBITMQ_PRODUCE = 40_000
RABBITMQ_CONSUME = 48_000
TARGETS = {"produce, batch 1": 2.5, "produce, batch 50": 25.0, "consume": 20.0}


def values(count: int) -> list[bytes]:
    """Distinct 200-byte values (log-line-like), reused round-robin."""
    distinct = [
        (b"%08d GET /api/v1/items?id=%d 200 " % (i, i * 7919)).ljust(VALUE_BYTES, b"x") for i in range(1000)
    ]
    return [distinct[i % 1000] for i in range(count)]


def producer_config(servers: list[str]) -> ProducerConfig:
    return ProducerConfig(
        bootstrap_servers=servers,
        acks="1",
        enable_idempotence=False,
        linger_ms=LINGER_MS,
        batch_size=BATCH_BYTES,
        buffer_memory=64 * 1024 * 1024,
        host_name="bench-host",
    )


def produce_ours_batch1(servers: list[str], topic: str, payload: list[bytes]) -> float:
    with Producer(producer_config(servers)) as producer:
        producer.partitions_for(topic)
        send = producer.send
        started = time.perf_counter()
        for value in payload:
            send(topic, value, partition=0)
        producer.flush()
        return time.perf_counter() - started


def produce_ours_batch50(servers: list[str], topic: str, payload: list[bytes]) -> float:
    chunks = [payload[i : i + 50] for i in range(0, len(payload), 50)]
    with Producer(producer_config(servers)) as producer:
        producer.partitions_for(topic)
        send_many = producer.send_many
        started = time.perf_counter()
        for chunk in chunks:
            send_many(topic, chunk, partition=0)
        producer.flush()
        return time.perf_counter() - started


def produce_kafka_python(servers: list[str], topic: str, payload: list[bytes]) -> float:
    producer = kafka.KafkaProducer(
        bootstrap_servers=servers,
        acks=1,
        linger_ms=LINGER_MS,
        batch_size=BATCH_BYTES,
        buffer_memory=64 * 1024 * 1024,
        enable_idempotence=False,
    )
    try:
        producer.partitions_for(topic)
        send = producer.send
        started = time.perf_counter()
        for value in payload:
            send(topic, value=value, partition=0)
        producer.flush()
        return time.perf_counter() - started
    finally:
        producer.close()


def consumer_config(servers: list[str], prefetch_bytes: int | None) -> ConsumerConfig:
    if prefetch_bytes is None:
        return ConsumerConfig(bootstrap_servers=servers, auto_offset_reset="earliest")
    return ConsumerConfig(
        bootstrap_servers=servers,
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=prefetch_bytes,
        max_prefetch_bytes=prefetch_bytes,
    )


def consume_ours(how: str, prefetch_bytes: int | None) -> Callable[[list[str], str, int], float]:
    def run(servers: list[str], topic: str, count: int) -> float:
        tp = TopicPartition(topic, 0)
        with Consumer(consumer_config(servers, prefetch_bytes), partitions=[tp]) as consumer:
            consumer.seek(tp, 0)
            seen = 0
            started = time.perf_counter()
            if how == "values":
                while seen < count:
                    for chunk in consumer.poll_values(timeout_ms=1000):
                        seen += len(chunk.values)
            elif how == "records":
                for _ in consumer.messages(timeout_ms=5000):
                    seen += 1
                    if seen == count:
                        break
            else:
                while seen < count:
                    for batch in consumer.poll_batches(timeout_ms=1000):
                        seen += batch.record_count
            elapsed = time.perf_counter() - started
        if seen != count:
            raise RuntimeError(f"consumed {seen} messages of {topic}, expected {count}")
        return elapsed

    return run


def consume_kafka_python(servers: list[str], topic: str, count: int) -> float:
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=servers, group_id=None, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        seen = 0
        started = time.perf_counter()
        for _ in consumer:
            seen += 1
            if seen == count:
                break
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if seen != count:
        raise RuntimeError(f"kafka-python consumed {seen} messages of {topic}, expected {count}")
    return elapsed


def wait_exposed(servers: list[str], topic: str, count: int) -> None:
    tp = TopicPartition(topic, 0)
    with Consumer(ConsumerConfig(bootstrap_servers=servers), partitions=[tp]) as consumer:
        deadline = time.monotonic() + 60
        while consumer.end_offsets([tp])[tp] < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: the broker did not expose {count} messages within 60 s")
            time.sleep(0.1)


def best(rates: list[float]) -> float:
    return max(rates) if rates else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000, help="messages per Lumber case")
    parser.add_argument(
        "--baseline-messages", type=int, default=200_000, help="messages per kafka-python case"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", metavar="CASE", help="run only CASE once (for py-spy) and exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from tests.support.broker_cluster import bench_cluster  # noqa: PLC0415 - the tests' launcher

    payload = values(args.messages)
    baseline_payload = values(args.baseline_messages)
    produce_cases: list[tuple[str, Callable[[list[str], str, list[bytes]], float], list[bytes]]] = [
        ("produce, batch 1", produce_ours_batch1, payload),
        ("produce, batch 50", produce_ours_batch50, payload),
        ("produce, kafka-python", produce_kafka_python, baseline_payload),
    ]
    consume_cases: list[tuple[str, Callable[[list[str], str, int], float], bool]] = [
        ("consume, poll_values", consume_ours("values", None), False),
        ("consume, poll_values, 200 KB prefetch", consume_ours("values", PAPER_PREFETCH_BYTES), False),
        ("consume, messages()", consume_ours("records", None), False),
        ("consume, poll_batches (not decoded)", consume_ours("batches", None), False),
        ("consume, kafka-python", consume_kafka_python, True),
    ]
    rates: dict[str, list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="lumber-bench-") as folder,
        bench_cluster(Path(folder)) as cluster,
    ):
        servers = cluster.bootstrap_servers.split(",")
        round_number = 0
        source_topic = ""
        for round_number in range(args.rounds):
            for name, run, data in produce_cases:
                if args.profile and name != args.profile:
                    continue
                topic = f"bench-{round_number}-{name.replace(' ', '').replace(',', '-')}"
                cluster.create_topic(topic, 1)
                elapsed = run(servers, topic, data)
                rates.setdefault(name, []).append(len(data) / elapsed)
                print(
                    f"round {round_number + 1}: {name:<40s} {len(data) / elapsed:>12,.0f} msg/s", flush=True
                )
                if name == "produce, batch 50":
                    source_topic = topic
            if not source_topic:
                continue
            wait_exposed(servers, source_topic, len(payload))
            for name, consume, baseline in consume_cases:
                if args.profile and name != args.profile:
                    continue
                count = min(len(payload), len(baseline_payload)) if baseline else len(payload)
                elapsed = consume(servers, source_topic, count)
                rates.setdefault(name, []).append(count / elapsed)
                print(f"round {round_number + 1}: {name:<40s} {count / elapsed:>12,.0f} msg/s", flush=True)
        if args.profile:
            return 0

    produce_baseline = best(rates["produce, kafka-python"])
    consume_baseline = best(rates["consume, kafka-python"])
    print()
    print(f"{'case':<40s} {'best msg/s':>12s} {'x kafka-python':>15s} {'x RabbitMQ ref':>15s}")
    for name, found in rates.items():
        rate = best(found)
        against = produce_baseline if name.startswith("produce") else consume_baseline
        reference = RABBITMQ_PRODUCE if name.startswith("produce") else RABBITMQ_CONSUME
        print(f"{name:<40s} {rate:>12,.0f} {rate / against:>15.2f} {rate / reference:>15.2f}")
    print()
    for name, target in TARGETS.items():
        achieved = (
            best(rates.get(name, [])) if name != "consume" else best(rates.get("consume, poll_values", []))
        )
        reference = RABBITMQ_PRODUCE if name.startswith("produce") else RABBITMQ_CONSUME
        print(
            f"issue 9 target {name}: >= {target:g}x RabbitMQ's {reference:,} msg/s "
            f"= {target * reference:,.0f}; "
            f"here {achieved:,.0f} ({achieved / reference:.1f}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

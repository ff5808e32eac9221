"""The clients of the Kafka comparison (:mod:`bench.paper_kafka`): confluent-kafka producers and consumers,
kcat, and the high-watermark check, alike for Apache Kafka and Lumber.

* :class:`ConfluentProducer`: one confluent-kafka producer (librdkafka) at batch 1 (``linger.ms=0``,
  ``batch.num.messages=1``: one record per Produce request) or batch N (``linger.ms=5``,
  ``batch.num.messages=N``), idempotence off, connected with the topic's metadata before any clock starts;
  :meth:`ConfluentProducer.send` returns once every record is acknowledged and raises on any delivery error
  or record left unacknowledged.
* :func:`confluent_consume`: a consumer assigned the partitions from offset 0 (no group commits) reads until
  it has exactly ``count`` records; more, fewer (in :data:`PHASE_TIMEOUT_S`) or an error raise. Its
  prefetch queue holds the whole run and, over its byte threshold, pauses 10 ms instead of librdkafka's
  1 s (:func:`connected_consumer`): the client must not be what a consume phase measures.
* :func:`high_watermarks`: the sum of a topic's high watermarks (ListOffsets), what a phase checks against
  the records acknowledged.
* :func:`admin_create_topic`: CreateTopics on Apache Kafka, waited for until every partition's log exists.
* kcat (a separate process): :func:`kcat_produce` from a file of one record a line, :func:`kcat_consume`
  counting every offset it prints.

A producer or consumer object belongs to one thread (librdkafka's own threads aside).
"""

from __future__ import annotations

import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

#: the longest a phase may take before it fails
PHASE_TIMEOUT_S = 600.0


def producer_config(bootstrap: str, batch: int, acks: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "acks": acks,
        "enable.idempotence": False,
        "compression.type": "none",
        "linger.ms": 0 if batch == 1 else 5,
        "batch.num.messages": batch,
        "queue.buffering.max.messages": 2_000_000,
    }


class ConfluentProducer:
    """A confluent-kafka producer connected to ``topic``'s leader before any clock starts; :meth:`send`
    produces ``records`` (to ``partition``, or spread by librdkafka's partitioner) and waits for every
    acknowledgement, raising on any delivery error."""

    def __init__(self, bootstrap: str, topic: str, batch: int, acks: str) -> None:
        self.topic = topic
        self.bootstrap = bootstrap
        self.errors: list[str] = []
        self.producer = Producer(
            {
                **producer_config(bootstrap, batch, acks),
                "delivery.report.only.error": True,
                "on_delivery": self._delivered,
            }
        )
        self.producer.list_topics(topic, timeout=30)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))

    def send(self, records: list[bytes], partition: int | None) -> None:
        topic = self.topic
        produce, poll = self.producer.produce, self.producer.poll
        if partition is None:
            for i, value in enumerate(records):
                produce(topic, value)
                if not i % 5000:
                    poll(0)
        else:
            for i, value in enumerate(records):
                produce(topic, value, partition=partition)
                if not i % 5000:
                    poll(0)
        left = self.producer.flush(PHASE_TIMEOUT_S)
        if left or self.errors:
            raise RuntimeError(
                f"{topic} at {self.bootstrap}: {left} records unacknowledged, errors: {self.errors[:3]}"
            )


#: librdkafka's default ``queued.min.messages``
QUEUED_MIN_MESSAGES = 100_000
#: how long a consumer waits before fetching again once its prefetch queue is over a threshold
#: (``fetch.queue.backoff.ms``); librdkafka's default, 1 s, put a second's pause into every consume phase
#: of more than 100,000 records (its ``queued.min.messages``), the same on both brokers
FETCH_QUEUE_BACKOFF_MS = 10


def connected_consumer(bootstrap: str, topic: str, records: int = QUEUED_MIN_MESSAGES) -> Any:
    """A consumer connected (with ``topic``'s metadata) before any clock starts, its prefetch queue able to
    hold ``records`` (``queued.min.messages``, at least librdkafka's default) and its pause at a full queue
    :data:`FETCH_QUEUE_BACKOFF_MS`."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "queued.min.messages": max(QUEUED_MIN_MESSAGES, records),
            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        }
    )
    consumer.list_topics(topic, timeout=30)  # connected, with metadata, before any clock starts
    return consumer


def confluent_consume(consumer: Any, topic: str, partitions: int, count: int) -> None:
    """Read ``topic``'s partitions from offset 0 until ``count`` records came; raise on an error or more."""
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while seen < count:
        # no more than are missing: librdkafka waits for a whole batch of num_messages (or the timeout)
        for msg in consumer.consume(num_messages=min(10_000, count - seen), timeout=1.0):
            error = msg.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise RuntimeError(f"{topic}: consumer error {error}")
            if error is None:
                seen += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: consumed {seen} of {count} records in {PHASE_TIMEOUT_S:.0f} s")
    if seen != count:
        raise RuntimeError(f"{topic}: consumed {seen} records, expected {count}")


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> int:
    """The sum of ``topic``'s high watermarks; a partition answered NOT_LEADER (Kafka, a new topic of many
    partitions whose leaders the broker is still loading) is asked again, up to 30 s."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-hw-{topic}"})
    try:
        total = 0
        for p in range(partitions):
            deadline = time.monotonic() + 30
            while True:
                try:
                    total += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    break
                except KafkaException as exc:
                    if (
                        exc.args[0].code() != KafkaError.NOT_LEADER_FOR_PARTITION
                        or time.monotonic() > deadline
                    ):
                        raise
                    time.sleep(0.2)
        return total
    finally:
        consumer.close()


def kcat_produce(bootstrap: str, topic: str, lines: Path, acks: str, batch: int) -> None:
    """kcat -P of ``lines`` (one record a line) to partition 0."""
    argv = [
        "kcat",
        "-P",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-p",
        "0",
        *("-X", f"acks={acks}", "-X", f"linger.ms={0 if batch == 1 else 5}"),
        *("-X", f"batch.num.messages={batch}", "-X", "queue.buffering.max.messages=2000000"),
        "-l",
        str(lines),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"kcat -P to {topic} at {bootstrap} exited {done.returncode}: {done.stderr[-300:]}"
        )


def kcat_consume(bootstrap: str, topic: str, count: int) -> None:
    """kcat -C of ``count`` records from the beginning; every record's offset printed and counted."""
    argv = ["kcat", "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-c", str(count), "-e", "-q"]
    argv += ["-f", "%o\n"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=PHASE_TIMEOUT_S, check=False)
    offsets = done.stdout.split()
    if done.returncode != 0 or len(offsets) != count or offsets[-1] != str(count - 1):
        raise RuntimeError(
            f"kcat -C of {topic} at {bootstrap} exited {done.returncode} after {len(offsets)} of {count} "
            f"records (last offset {offsets[-1] if offsets else None}): {done.stderr[-300:]}"
        )


def kcat_version() -> str:
    done = subprocess.run(["kcat", "-V"], capture_output=True, text=True, check=False, timeout=10)
    line = next((line for line in done.stdout.splitlines() if line.startswith("Version ")), "")
    words = line.split()  # Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)
    if len(words) < 2:
        return "kcat"
    librdkafka = words[words.index("librdkafka") + 1] if "librdkafka" in words[:-1] else "?"
    return f"kcat {words[1]} (librdkafka {librdkafka})"


def admin_create_topic(
    bootstrap: str,
    log_dir: Path | None = None,
    *,
    replication_factor: int = 1,
    config: dict[str, str] | None = None,
) -> Callable[[str, int], None]:
    """CreateTopics through confluent-kafka's AdminClient (with ``replication_factor`` and the topic
    ``config``), then wait until every partition has a leader and all its replicas in sync, and, with
    ``log_dir`` (one broker's data folder), its log folder there, as Lumber's are waited for: Kafka names the
    leaders before it has made the logs (BENCHMARKS.md, 2026-11-29 21:42), so a phase started on the leaders
    timed Kafka's creation too."""

    def create(topic: str, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        new = NewTopic(topic, partitions, replication_factor, config=config or {})
        admin.create_topics([new], operation_timeout=60)[topic].result(timeout=120)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = admin.list_topics(topic, timeout=10).topics.get(topic)
            if (
                found is not None
                and found.error is None
                and len(found.partitions) == partitions
                and all(
                    p.leader >= 0 and len(p.isrs) == replication_factor for p in found.partitions.values()
                )
                and (log_dir is None or all((log_dir / f"{topic}-{p}").is_dir() for p in range(partitions)))
            ):
                return
            time.sleep(0.1)
        raise TimeoutError(
            f"{topic}: not every one of its {partitions} partitions got a leader, {replication_factor} "
            f"in-sync replicas{' and a log' if log_dir else ''} at {bootstrap}"
        )

    return create

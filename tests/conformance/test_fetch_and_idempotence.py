"""Fetch limits and the idempotent producer, as clients observe them on Kafka and on Lumber.

* ``fetch_limits_below_one_batch``: records of 5,000 bytes read by a confluent-kafka consumer with
  ``fetch.max.bytes`` 1,024 and ``max.partition.fetch.bytes`` 100, and by kafka-python with
  ``max_partition_fetch_bytes`` 100: KIP-74 says the first batch is returned whole even past the limits,
  so every record arrives.
* ``idempotent_producer``: confluent-kafka with ``enable.idempotence`` and five requests in flight, 2,000
  records in many batches to two partitions: the delivery reports' offsets and what a consumer reads back
  (each record once, in order).
"""

from __future__ import annotations

from typing import Any

from tests.conformance.clients import consume, create_topic, kafka_python_read_all, produce
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target


def fetch_limits_below_one_batch(target: Target, topic: str) -> Transcript:
    created = create_topic(target.bootstrap, topic)
    records: list[dict[str, Any]] = [
        {
            "key": f"k{i}".encode(),
            "value": bytes([65 + i]) * 5000,
            "partition": 0,
            "timestamp": 1_700_000_000_000 + i,
        }
        for i in range(6)
    ]
    produce(target.bootstrap, topic, records, {"linger.ms": 0, "max.in.flight.requests.per.connection": 1})
    small = consume(
        target.bootstrap,
        topic,
        [0],
        len(records),
        config={
            "fetch.max.bytes": 1024,
            "message.max.bytes": 1000,
            "max.partition.fetch.bytes": 100,
        },
    )
    python = kafka_python_read_all(target.bootstrap, topic, 0)
    return {
        "created": created,
        "confluent": [(r["offset"], r["key"], len(r["value"])) for r in small["records"]],
        "confluent_errors": small["errors"],
        "kafka_python": [(r["offset"], r["key"], len(r["value"])) for r in python["records"]],
        "kafka_python_error": python["error"],
    }


def idempotent_producer(target: Target, topic: str) -> Transcript:
    created = create_topic(target.bootstrap, topic, partitions=2)
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2} for i in range(2000)]
    reports = produce(
        target.bootstrap,
        topic,
        records,
        {
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 2,
            "batch.size": 2000,
        },
    )
    read = consume(target.bootstrap, topic, [0, 1], len(records))
    by_partition: dict[int, list[str]] = {0: [], 1: []}
    for record in read["records"]:
        by_partition[record["partition"]].append(record["value"])
    return {
        "created": created,
        "report_errors": sorted({str(r["error"]) for r in reports}),
        "report_offsets": sorted((r["partition"], r["offset"]) for r in reports)
        == sorted((p, o) for p in (0, 1) for o in range(1000)),
        "read_in_order": by_partition == {p: [f"v{i}" for i in range(p, 2000, 2)] for p in (0, 1)},
        "errors": read["errors"],
    }


def test_fetch_limits_below_one_batch(targets: tuple[Target, Target]) -> None:
    transcript = conform(fetch_limits_below_one_batch, targets)
    assert len(transcript["confluent"]) == 6


def test_idempotent_producer(targets: tuple[Target, Target]) -> None:
    transcript = conform(idempotent_producer, targets)
    assert transcript["read_in_order"] is True

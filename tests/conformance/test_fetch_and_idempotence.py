"""Fetch limits and the idempotent producer, as clients observe them on Kafka and on Lumber.

* ``fetch_limits_below_one_batch``: records of 5,000 bytes read by a confluent-kafka consumer with
  ``fetch.max.bytes`` 1,024 and ``max.partition.fetch.bytes`` 100, and by kafka-python with
  ``max_partition_fetch_bytes`` 100: KIP-74 says the first batch is returned whole even past the limits,
  so every record arrives.
* ``idempotent_producer``: confluent-kafka with ``enable.idempotence`` and five requests in flight, 2,000
  records in many batches to two partitions: the delivery reports' offsets and what a consumer reads back
  (each record once, in order).
* ``fetch_at_log_end_waits``: kafka-python's Fetch v12 on a raw socket at a partition's log end (3 records),
  ``min_bytes`` 1: with ``max_wait_ms`` 500 the empty answer comes after the wait (the transcript holds a
  coarse bucket of the time, not the time); with ``max_wait_ms`` 5,000 and a record produced 300 ms after the
  request, the answer comes with that record well before the wait ends.
"""

from __future__ import annotations

import socket
import threading
import time
import warnings
from typing import Any

from tests.conformance.clients import consume, create_topic, kafka_python_read_all, produce
from tests.conformance.conformance import RECENT_TS, Transcript, conform
from tests.conformance.raw_requests import fetch_frame, read_response
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchResponse


def fetch_limits_below_one_batch(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic)
    records: list[dict[str, Any]] = [
        {
            "key": f"k{i}".encode(),
            "value": bytes([65 + i]) * 5000,
            "partition": 0,
            "timestamp": RECENT_TS + i,
        }
        for i in range(6)
    ]
    produce(target, topic, records, {"linger.ms": 0, "max.in.flight.requests.per.connection": 1})
    small = consume(
        target,
        topic,
        [0],
        len(records),
        config={
            "fetch.max.bytes": 1024,
            "message.max.bytes": 1000,
            "max.partition.fetch.bytes": 100,
        },
    )
    python = kafka_python_read_all(target, topic, 0)
    return {
        "created": created,
        "confluent": [(r["offset"], r["key"], len(r["value"])) for r in small["records"]],
        "confluent_errors": small["errors"],
        "kafka_python": [(r["offset"], r["key"], len(r["value"])) for r in python["records"]],
        "kafka_python_error": python["error"],
    }


def idempotent_producer(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2} for i in range(2000)]
    reports = produce(
        target,
        topic,
        records,
        {
            "enable.idempotence": True,
            "max.in.flight.requests.per.connection": 5,
            "linger.ms": 2,
            "batch.size": 2000,
        },
    )
    read = consume(target, topic, [0, 1], len(records))
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


def _timed_fetch(target: Target, topic: str, offset: int, max_wait_ms: int) -> dict[str, Any]:
    host, port = target.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        started = time.monotonic()
        sock.sendall(fetch_frame(topic, 0, 21, offset=offset, max_wait_ms=max_wait_ms))
        response, closed = read_response(sock, max_wait_ms / 1000 + 10)
        waited_ms = (time.monotonic() - started) * 1000
    if response is None:
        return {"answer": None, "closed": closed}
    answer = FetchResponse.decode(response, version=12, header=True, framed=True)
    (partition,) = [p for t in answer.responses for p in t.partitions]
    return {
        "error_code": partition.error_code,
        "high_watermark": partition.high_watermark,
        "has_records": bool(partition.records),
        "waited_ms": waited_ms,
    }


def _bucket(waited_ms: float, max_wait_ms: int) -> str:
    if waited_ms < 0.8 * max_wait_ms:
        return "before 80% of the wait"
    return "within 4 s after the wait" if waited_ms < max_wait_ms + 4000 else "4 s or more after the wait"


def fetch_at_log_end_waits(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic)
    produce(target, topic, [{"value": b"v%d" % i, "partition": 0} for i in range(3)], {"acks": "all"})
    empty = _timed_fetch(target, topic, 3, 500)
    empty["waited"] = _bucket(empty.pop("waited_ms"), 500)

    def late() -> None:
        time.sleep(0.3)
        produce(target, topic, [{"value": b"late", "partition": 0}], {"acks": "all", "linger.ms": 0})

    writer = threading.Thread(target=late)
    writer.start()
    try:
        woken = _timed_fetch(target, topic, 3, 5000)
    finally:
        writer.join(timeout=40)
    waited_ms = woken.pop("waited_ms")
    woken["waited"] = "under 2.5 s" if waited_ms < 2500 else "2.5 s or more"
    return {"created": created, "empty": empty, "woken": woken}


def test_fetch_limits_below_one_batch(targets: tuple[Target, Target]) -> None:
    transcript = conform(fetch_limits_below_one_batch, targets)
    assert len(transcript["confluent"]) == 6


def test_idempotent_producer(targets: tuple[Target, Target]) -> None:
    transcript = conform(idempotent_producer, targets)
    assert transcript["read_in_order"] is True


def test_fetch_at_log_end_waits(targets: tuple[Target, Target]) -> None:
    transcript = conform(fetch_at_log_end_waits, targets)
    assert transcript["empty"] == {
        "error_code": 0,
        "high_watermark": 3,
        "has_records": False,
        "waited": "within 4 s after the wait",
    }
    assert transcript["woken"] == {
        "error_code": 0,
        "high_watermark": 4,
        "has_records": True,
        "waited": "under 2.5 s",
    }

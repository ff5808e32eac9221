"""Produce, then consume at once: what standard clients observe from Kafka and from Lumber.

Scenarios (each ``scenario(target, topic, ...) -> transcript``):

* ``kcat_produce_then_consume_at_once``: issue 35's first bug. ``kcat -P`` of 3,000 records to 3 partitions,
  then at once ``kcat -C -e -o beginning``: every acknowledged record is readable (Kafka exposes up to the
  high watermark, flushed or not).
* ``produce_and_read_back``: one confluent-kafka producer per acks setting (0, 1, all): keys, a null key, a
  null value, headers and explicit CreateTime timestamps, read back by confluent-kafka.
* ``codec_round_trip``: each codec (none, gzip, snappy, lz4, zstd) written by confluent-kafka, read back
  by confluent-kafka, kafka-python and aiokafka.
* ``log_append_time``: a topic with ``message.timestamp.type=LogAppendTime``: records produced with old
  CreateTime timestamps come back, in the delivery reports and to the consumer, stamped with the broker's
  clock at the append (one time per batch).
* ``too_large``: a record over the topic's ``max.message.bytes`` and a batch over the broker's
  ``message.max.bytes`` (1 MiB + 12 on both): the producer's delivery error.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, Producer

from tests.conformance.clients import (
    aiokafka_read_all,
    consume,
    create_topic,
    kafka_python_read_all,
    kcat,
    produce,
)
from tests.conformance.conformance import RECENT_TS, Transcript, conform
from tests.conformance.target import Target


def kcat_produce_then_consume_at_once(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=3)
    count = 3000
    code, _, err = kcat(["-P", *target.kcat_args, "-t", topic], stdin="".join(f"{i}\n" for i in range(count)))
    produced = {"exit": code, "stderr": err.strip()}
    code, out, err = kcat(
        ["-C", *target.kcat_args, "-t", topic, "-e", "-o", "beginning", "-q", "-f", "%p %o %s\n"]
    )
    offsets: dict[int, list[int]] = {0: [], 1: [], 2: []}
    values = []
    for line in out.splitlines():
        partition, offset, value = line.split(" ", 2)
        offsets[int(partition)].append(int(offset))
        values.append(int(value))
    return {
        "created": created,
        "produced": produced,
        "consume_exit": code,
        "consumed": len(values),
        "every_value_once": sorted(values) == list(range(count)),
        # keyless records are spread at random (librdkafka's consistent_random): only the shape compares
        "offsets_dense_from_0": all(o == list(range(len(o))) for o in offsets.values()),
    }


def produce_and_read_back(target: Target, topic: str, acks: str) -> Transcript:
    created = create_topic(target, topic)
    records: list[dict[str, Any]] = [
        {"key": b"k1", "value": b"v1", "partition": 0, "timestamp": RECENT_TS},
        {"key": None, "value": b"no key", "partition": 0, "timestamp": RECENT_TS + 1},
        {"key": b"tombstone", "value": None, "partition": 0, "timestamp": RECENT_TS + 2},
        {
            "key": b"h",
            "value": b"with headers",
            "partition": 0,
            "headers": [("a", b"1"), ("a", b"2"), ("empty", b""), ("none", None)],
            "timestamp": RECENT_TS - 3_600_000,  # an hour before the others
        },
        {"key": b"", "value": b"", "partition": 0, "timestamp": RECENT_TS + 3},
    ]
    reports = produce(target, topic, records, {"acks": acks})
    read = consume(target, topic, [0], len(records))
    return {"created": created, "reports": reports, **read}


def codec_round_trip(target: Target, topic: str, codec: str) -> Transcript:
    created = create_topic(target, topic)
    records = [
        {
            "key": f"k{i}".encode(),
            "value": f"value {i} ".encode() * 20,
            "partition": 0,
            "timestamp": RECENT_TS + i,
        }
        for i in range(200)
    ]
    reports = produce(target, topic, records, {"compression.type": codec, "linger.ms": 50})
    read = consume(target, topic, [0], len(records))
    other = kafka_python_read_all(target, topic, 0)
    aio = aiokafka_read_all(target, topic, 0)
    return {
        "created": created,
        "report_errors": sorted({str(r["error"]) for r in reports}),
        "offsets": [r["offset"] for r in reports],
        **read,
        "kafka_python": other,
        "aiokafka": aio,
    }


def log_append_time(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, configs={"message.timestamp.type": "LogAppendTime"})
    before_ms = int(time.time() * 1000)
    reports: list[dict[str, Any]] = []
    stamps: list[int] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        ts_type, ts = msg.timestamp()
        stamps.append(ts)
        reports.append({"error": err.name() if err else None, "offset": msg.offset(), "type": ts_type})

    producer = Producer({**target.client_config, "linger.ms": 100})
    for i in range(5):  # one batch: linger.ms holds them together
        producer.produce(
            topic, b"v%d" % i, partition=0, timestamp=1_600_000_000_000 + i, on_delivery=delivered
        )
    if producer.flush(30):
        raise AssertionError(f"records to {topic} still not delivered after 30 s")
    after_ms = int(time.time() * 1000)
    read = consume(target, topic, [0], 5)
    return {
        "created": created,
        "reports": reports,
        "reports_stamped_at_the_append": all(before_ms <= t <= after_ms for t in stamps),
        "read": [(r["offset"], r["value"], r["timestamp_type"]) for r in read["records"]],
        "read_the_reported_time": [r["timestamp"] for r in read["records"]] == stamps,
        "errors": read["errors"],
    }


def too_large(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, configs={"max.message.bytes": "2000"})
    small_topic_big_record = produce(target, topic, [{"value": b"x" * 3000, "partition": 0}])
    other = f"{topic}-big"
    created_other = create_topic(target, other)
    big_batch = produce(
        target,
        other,
        [{"value": b"y" * 1_500_000, "partition": 0}],
        {"message.max.bytes": 2_000_000, "retries": 0},
    )
    after = consume(target, topic, [0], 1, timeout_s=2)
    return {
        "created": [created, created_other],
        "record_over_topic_limit": small_topic_big_record,
        "batch_over_broker_limit": big_batch,
        "left_in_topic": after["records"],
    }


def test_kcat_produce_then_consume_at_once(targets: tuple[Target, Target]) -> None:
    transcript = conform(kcat_produce_then_consume_at_once, targets)
    assert transcript["consumed"] == 3000


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_and_read_back(targets: tuple[Target, Target], acks: str) -> None:
    transcript = conform(produce_and_read_back, targets, acks=acks)
    assert len(transcript["records"]) == 5


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_codec_round_trip(targets: tuple[Target, Target], codec: str) -> None:
    transcript = conform(codec_round_trip, targets, codec=codec)
    assert len(transcript["records"]) == 200


def test_log_append_time(targets: tuple[Target, Target]) -> None:
    transcript = conform(log_append_time, targets)
    assert transcript["reports"] == [
        {"error": None, "offset": i, "type": TIMESTAMP_LOG_APPEND_TIME} for i in range(5)
    ]
    assert transcript["reports_stamped_at_the_append"] is True
    assert transcript["read"] == [(i, f"v{i}", TIMESTAMP_LOG_APPEND_TIME) for i in range(5)]
    assert transcript["read_the_reported_time"] is True


def test_too_large(targets: tuple[Target, Target]) -> None:
    transcript = conform(too_large, targets)
    assert transcript["record_over_topic_limit"][0]["error"] == "MSG_SIZE_TOO_LARGE"

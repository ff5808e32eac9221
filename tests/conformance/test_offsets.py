"""ListOffsets and where a consumer starts, as clients observe them from Kafka and from Lumber.

* ``list_offsets``: ten records with CreateTime timestamps 1,000 ms apart (the fifth the largest), then
  confluent-kafka's AdminClient ``list_offsets`` with earliest, latest, max-timestamp and by-timestamp
  specs, and its consumer's ``offsets_for_times`` (before the first, between two, past the last).
* ``offsets_after_retention``: five records with CreateTime timestamps of 2023 in one segment, a roll
  (``segment.ms=1000``), five records with this hour's timestamps; retention (``retention.ms`` one day)
  deletes the old segment; then where the log starts, ListOffsets earliest and max-timestamp, and
  ``offsets_for_times`` before the deleted records' timestamps, between the kept ones and past the last.
* ``offset_out_of_range``: a consumer assigned past the log end with ``auto.offset.reset`` earliest,
  latest and error: where it starts (earliest, latest) or the error it gets.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from tests.conformance.clients import consume, create_topic, error_name, produce
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

BASE_TS = 1_700_000_000_000
TIMESTAMPS = [BASE_TS + i * 1000 for i in range(10)]
TIMESTAMPS[4] = BASE_TS + 60_000  # the largest timestamp is the fifth record's


def list_offsets(target: Target, topic: str) -> Transcript:
    # records of 2023, kept: the session brokers check retention every 500 ms (conformance.RECENT_TS)
    created = create_topic(target, topic, configs={"retention.ms": "-1"})
    produce(
        target,
        topic,
        [
            {"key": b"k", "value": str(i).encode(), "partition": 0, "timestamp": ts}
            for i, ts in enumerate(TIMESTAMPS)
        ],
        {"linger.ms": 0, "max.in.flight.requests.per.connection": 1},
    )
    admin = AdminClient(target.client_config)
    tp = TopicPartition(topic, 0)
    specs: dict[str, Any] = {
        "earliest": OffsetSpec.earliest(),
        "latest": OffsetSpec.latest(),
        "max_timestamp": OffsetSpec.max_timestamp(),
        "at_base": OffsetSpec.for_timestamp(BASE_TS),
        "between": OffsetSpec.for_timestamp(BASE_TS + 5500),
        "past_last": OffsetSpec.for_timestamp(BASE_TS + 120_000),
    }
    answers: dict[str, Any] = {}
    for name, spec in specs.items():
        try:
            found = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=20)
            answers[name] = {"offset": found.offset, "timestamp": found.timestamp}
        except KafkaException as exc:
            answers[name] = error_name(exc)
    consumer = Consumer({**target.client_config, "group.id": f"conformance-{topic}"})
    try:
        for_times = {
            ts: consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0].offset
            for ts in (BASE_TS - 1, BASE_TS + 2500, BASE_TS + 120_000)
        }
        watermarks = consumer.get_watermark_offsets(tp, timeout=10)
    finally:
        consumer.close()
    return {
        "created": created,
        "list_offsets": answers,
        "offsets_for_times": {str(k): v for k, v in for_times.items()},
        "watermarks": list(watermarks),
    }


def offsets_after_retention(target: Target, topic: str, recent_ts: int) -> Transcript:
    configs = {"segment.ms": "1000", "retention.ms": str(24 * 3600 * 1000)}
    created = create_topic(target, topic, configs=configs)
    one_batch = {"linger.ms": 200, "max.in.flight.requests.per.connection": 1}
    old = [{"value": b"old%d" % i, "partition": 0, "timestamp": ts} for i, ts in enumerate(TIMESTAMPS[:5])]
    produce(target, topic, old, one_batch)
    time.sleep(1.5)  # past segment.ms: the next append rolls a new segment
    recent = [{"value": b"new%d" % i, "partition": 0, "timestamp": recent_ts + i * 1000} for i in range(5)]
    produce(target, topic, recent, one_batch)
    tp = TopicPartition(topic, 0)
    consumer = Consumer({**target.client_config, "group.id": f"conformance-{topic}"})
    try:
        deadline = time.monotonic() + 30
        watermarks = consumer.get_watermark_offsets(tp, timeout=10)
        while watermarks[0] < 5 and time.monotonic() < deadline:
            time.sleep(0.2)
            watermarks = consumer.get_watermark_offsets(tp, timeout=10)
        for_times = {
            name: consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)[0].offset
            for name, ts in (
                ("before_deleted", BASE_TS - 1),
                ("among_deleted", BASE_TS + 2500),
                ("between_kept", recent_ts + 2500),
                ("past_last", recent_ts + 60_000),
            )
        }
    finally:
        consumer.close()
    admin = AdminClient(target.client_config)
    answers = {}
    for name, spec in (("earliest", OffsetSpec.earliest()), ("max_timestamp", OffsetSpec.max_timestamp())):
        found = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=20)
        answers[name] = {"offset": found.offset, "timestamp": found.timestamp}
    read = consume(target, topic, [0], 5, timeout_s=10)
    return {
        "created": created,
        "watermarks": list(watermarks),
        "offsets_for_times": for_times,
        "list_offsets": answers,
        "read": [(r["offset"], r["value"]) for r in read["records"]],
    }


def offset_out_of_range(target: Target, topic: str, reset: str) -> Transcript:
    created = create_topic(target, topic)
    produce(target, topic, [{"value": str(i).encode(), "partition": 0} for i in range(5)])
    consumer = Consumer(
        {
            **target.client_config,
            "group.id": f"conformance-{topic}-{reset}",
            "auto.offset.reset": reset,
            "enable.partition.eof": True,
        }
    )
    seen: list[Any] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 100)])
        for _ in range(100):
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            failure = msg.error()
            seen.append(failure.name() if failure is not None else msg.offset())
            if failure is not None or len(seen) >= 5:
                break
    finally:
        consumer.close()
    read = consume(target, topic, [0], 5, timeout_s=5)
    return {"created": created, "seen": seen, "log": [r["offset"] for r in read["records"]]}


def test_list_offsets(targets: tuple[Target, Target]) -> None:
    transcript = conform(list_offsets, targets)
    assert transcript["list_offsets"]["latest"]["offset"] == 10


def test_offsets_after_retention(targets: tuple[Target, Target]) -> None:
    recent_ts = int(time.time() // 3600 * 3600 * 1000)  # this hour: within Kafka's timestamp bounds
    transcript = conform(offsets_after_retention, targets, recent_ts=recent_ts)
    assert transcript["watermarks"] == [5, 10]
    assert transcript["offsets_for_times"] == {
        "before_deleted": 5,
        "among_deleted": 5,
        "between_kept": 8,
        "past_last": -1,
    }
    assert transcript["list_offsets"]["max_timestamp"] == {"offset": 9, "timestamp": recent_ts + 4000}


@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_offset_out_of_range(targets: tuple[Target, Target], reset: str) -> None:
    conform(offset_out_of_range, targets, reset=reset)

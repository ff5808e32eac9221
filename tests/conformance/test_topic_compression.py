"""A topic's ``compression.type``: the codec a broker stores batches with, as Kafka's LogValidator decides.

* ``stored_codec`` (per topic codec: ``gzip``, ``zstd``, ``uncompressed``, ``producer``, and ``zstd`` on a
  LogAppendTime topic): a topic created with that ``compression.type``; an idempotent confluent-kafka
  producer writes 20 records compressed with lz4 (one batch: ``linger.ms`` holds them), then a plain
  producer 10 uncompressed ones. The transcript: the delivery reports, the records as confluent-kafka and
  kafka-python read them back, what each record was stored with as a raw Fetch returns its batch (codec,
  timestamp type, producer fields: :func:`~tests.conformance.raw_requests.stored_batches`, record by
  record, as the client's cut into batches varies), and the
  topic's ``compression.type`` as DescribeConfigs answers it (value, source, synonyms).
* ``compression_type_configs``: CreateTopics with an unknown codec and with one in capitals, an
  IncrementalAlterConfigs SET of an unknown codec, of ``lz4``, then a DELETE, each followed by
  DescribeConfigs of the topic's ``compression.type``; and the broker's own ``compression.type``.

Record timestamps are fixed CreateTime values (the LogAppendTime case reports only whether every record
reads its batch's time), so both runs write the same records.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from tests.conformance.clients import consume, create_topic, error_name, kafka_python_read_all, produce
from tests.conformance.conformance import RECENT_TS, Transcript, conform
from tests.conformance.raw_requests import BROKER_RESOURCE, TOPIC_RESOURCE, describe_config, stored_batches
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

KEY = "compression.type"
BASE_TS = RECENT_TS


def _records(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {
            "key": f"k{i}".encode(),
            "value": f"GET /items/{i} 200 ".encode() * 12,
            "partition": 0,
            "headers": [("host", b"h1")],
            "timestamp": BASE_TS + i,
        }
        for i in range(first, first + count)
    ]


def stored_codec(
    target: Target, topic: str, topic_codec: str, timestamp_type: str = "CreateTime"
) -> Transcript:
    created = create_topic(
        target, topic, configs={KEY: topic_codec, "message.timestamp.type": timestamp_type}
    )
    lz4 = produce(
        target,
        topic,
        _records(0, 20),
        {"compression.type": "lz4", "enable.idempotence": True, "linger.ms": 200},
    )
    plain = produce(target, topic, _records(20, 10), {"compression.type": "none", "linger.ms": 200})
    read = consume(target, topic, [0], 30)
    stored = stored_batches(target.bootstrap, topic, 0, 30)
    if timestamp_type == "LogAppendTime":  # the append's time: one per batch, not the producer's
        records = read["records"]
        read["records"] = {
            "offsets_and_types": [[r["offset"], r["timestamp_type"]] for r in records],
            "one_time_per_batch": all(
                len({r["timestamp"] for r in records if low <= r["offset"] <= high}) == 1
                for low, high in (batch["offsets"] for batch in stored)
            ),
            "producers_times": sum(r["timestamp"] < BASE_TS + 1_000 for r in records),
            "values": [r["value"] for r in records],
        }
    return {
        "created": created,
        "reports": lz4 + plain,
        "confluent_kafka": read,
        "kafka_python": kafka_python_read_all(target, topic, 0),
        "stored": _per_record(stored),
        "described": describe_config(target.bootstrap, TOPIC_RESOURCE, topic, KEY),
    }


def _per_record(batches: list[dict[str, Any]]) -> list[list[Any]]:
    """Each stored record's offset, codec, timestamp type, transactional bit and producer fields (its own
    sequence: the batch's base sequence plus its place; -1 without one): how librdkafka cut the records into
    batches varies between runs (once 10 records of one linger went as 10 batches), what was stored for each
    record does not."""
    return [
        [
            offset,
            batch["codec"],
            batch["timestamp_type"],
            batch["transactional"],
            batch["has_producer_id"],
            batch["producer_epoch"],
            batch["base_sequence"] + offset - batch["offsets"][0] if batch["base_sequence"] >= 0 else -1,
        ]
        for batch in batches
        for offset in range(batch["offsets"][0], batch["offsets"][1] + 1)
    ]


def _alter(admin: AdminClient, topic: str, value: str | None, op: AlterConfigOpType) -> str | None:
    resource = ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(KEY, value, incremental_operation=op)]
    )
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    except KafkaException as exc:
        return error_name(exc)
    time.sleep(0.5)  # both brokers apply a config change asynchronously (Kafka: the metadata log)
    return None


def _create(admin: AdminClient, topic: str, value: str) -> str | None:
    try:
        admin.create_topics([NewTopic(topic, 1, 1, config={KEY: value})], operation_timeout=30)[topic].result(
            timeout=60
        )
    except KafkaException as exc:
        return error_name(exc)
    return None


def compression_type_configs(target: Target, topic: str) -> Transcript:
    admin = AdminClient(target.client_config)
    transcript: Transcript = {
        "create_brotli": _create(admin, f"{topic}-b", "brotli"),
        "create_capitals": _create(admin, f"{topic}-c", "GZIP"),
        "created": create_topic(target, topic),
        "default": describe_config(target.bootstrap, TOPIC_RESOURCE, topic, KEY),
        "set_brotli": _alter(admin, topic, "brotli", AlterConfigOpType.SET),
        "after_brotli": describe_config(target.bootstrap, TOPIC_RESOURCE, topic, KEY),
        "set_lz4": _alter(admin, topic, "lz4", AlterConfigOpType.SET),
        "after_lz4": describe_config(target.bootstrap, TOPIC_RESOURCE, topic, KEY),
        "delete": _alter(admin, topic, None, AlterConfigOpType.DELETE),
        "after_delete": describe_config(target.bootstrap, TOPIC_RESOURCE, topic, KEY),
    }
    [broker] = admin.list_topics(timeout=10).brokers
    broker_config = describe_config(target.bootstrap, BROKER_RESOURCE, str(broker), KEY)
    assert broker_config is not None
    transcript["broker"] = {k: broker_config[k] for k in ("value", "source")}
    return transcript


@pytest.mark.parametrize("topic_codec", ["gzip", "zstd", "uncompressed", "producer"])
def test_stored_codec(targets: tuple[Target, Target], topic_codec: str) -> None:
    transcript = conform(stored_codec, targets, topic_codec=topic_codec)
    idempotent, plain = {"producer": ("lz4", "uncompressed")}.get(topic_codec, (topic_codec, topic_codec))
    assert [record[:2] for record in transcript["stored"]] == [
        *([offset, idempotent] for offset in range(20)),
        *([offset, plain] for offset in range(20, 30)),
    ]
    assert [record[6] for record in transcript["stored"]] == [*range(20), *[-1] * 10]  # sequences
    assert len(transcript["kafka_python"]["records"]) == 30


def test_stored_codec_log_append_time(targets: tuple[Target, Target]) -> None:
    transcript = conform(stored_codec, targets, topic_codec="zstd", timestamp_type="LogAppendTime")
    assert [(record[1], record[2]) for record in transcript["stored"]] == [("zstd", 1)] * 30
    assert transcript["confluent_kafka"]["records"]["one_time_per_batch"] is True
    assert transcript["confluent_kafka"]["records"]["producers_times"] == 0


def test_compression_type_configs(targets: tuple[Target, Target]) -> None:
    transcript = conform(compression_type_configs, targets)
    assert transcript["create_brotli"] == transcript["set_brotli"] == "INVALID_CONFIG"
    assert transcript["after_lz4"]["value"] == "lz4"

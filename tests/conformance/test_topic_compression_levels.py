"""A topic's compression levels (KIP-390: ``compression.gzip.level``, ``compression.lz4.level``,
``compression.zstd.level``), against Kafka 4.4.

* ``stored_at_level`` (gzip, lz4, zstd): two topics of that ``compression.type``, one at a low level, one at
  a high one. Each gets the same two batches in raw Produce requests, built here so both brokers get the
  same bytes: 300 compressible records in snappy (another codec: the leader recompresses them at the topic's
  level), then 50 in the topic's own codec at a third level. The transcript: the produce answers, each
  stored batch's codec and offsets, whether the high level stored the snappy batch smaller than the low
  one, whether the second batch is stored as it was sent (Kafka's LogValidator keeps a batch of the
  topic's codec whatever its level: it compares codecs, not levels), the records as confluent-kafka and
  kafka-python read them back (compared with what was sent), and DescribeConfigs of the level (value,
  source, synonyms). The stored sizes themselves are not compared: Kafka's Java codecs (zstd-jni, lz4-java,
  the JDK's zlib) and Lumber's (cramjam, zlib) compress the same records to different bytes.
* ``level_configs``: CreateTopics with levels outside each codec's range (and one that is not a number),
  a topic created with a level, DescribeConfigs of the three levels, IncrementalAlterConfigs SET of a
  valid level, of an invalid one, and DELETE, each followed by DescribeConfigs; the broker's own levels.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from broker.record.compression import CompressionType
from broker.record.record_batch_builder import RecordBatchBuilder
from tests.conformance.clients import consume, create_topic, error_name, kafka_python_read_all
from tests.conformance.conformance import RECENT_TS, Transcript, conform
from tests.conformance.raw_requests import (
    BROKER_RESOURCE,
    CODEC_NAMES,
    TOPIC_RESOURCE,
    describe_config,
    exchange,
    produce_answer,
    produce_frame,
    stored_batch_bytes,
)
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

#: Per codec: the topic's low and high level, and the level of the batch already in the topic's codec.
LEVELS = {"gzip": (1, 9, 4), "lz4": (9, 17, 3), "zstd": (1, 19, 5)}
CODECS = {"gzip": CompressionType.GZIP, "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
LEVEL_KEYS = ("compression.gzip.level", "compression.lz4.level", "compression.zstd.level")
#: Kafka's default levels (``CompressionType.GZIP.defaultLevel()``...), as DescribeConfigs writes them.
DEFAULTS = {"gzip": "-1", "lz4": "9", "zstd": "3"}


def _value(i: int) -> bytes:
    return f"GET /items/{i} 200 user={i % 97} agent=lumber-conformance\n".encode() * 3


def _batch(codec: CompressionType, level: int | None, first: int, count: int) -> bytes:
    builder = RecordBatchBuilder(codec, level=level)
    for i in range(first, first + count):
        builder.append(RECENT_TS + i, f"k{i}".encode(), _value(i))
    return builder.build()


#: Produce errors a new topic may answer while its leader learns it leads (Kafka: the metadata log),
#: retried: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
RETRIABLE = (3, 6)


def _produce(target: Target, topic: str, batch: bytes, correlation_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while True:
        [response] = exchange(target.bootstrap, [produce_frame(topic, 0, -1, correlation_id, records=batch)])
        assert response is not None, f"{target.bootstrap} did not answer a Produce to {topic}"
        [answer] = produce_answer(response)
        if answer["error_code"] not in RETRIABLE or time.monotonic() > deadline:
            return {k: answer[k] for k in ("error_code", "base_offset", "record_errors", "error_message")}
        time.sleep(0.2)


def stored_at_level(target: Target, topic: str, codec: str) -> Transcript:
    low, high, third = LEVELS[codec]
    key = f"compression.{codec}.level"
    snappy = _batch(CompressionType.SNAPPY, None, 0, 300)
    own = _batch(CODECS[codec], third, 300, 50)
    transcript: Transcript = {}
    stored: dict[int, list[bytes]] = {}
    for level in (low, high):
        name = f"{topic}-{level}"
        transcript[f"created_{level}"] = create_topic(
            target, name, configs={"compression.type": codec, key: str(level)}
        )
        transcript[f"produced_{level}"] = [
            _produce(target, name, snappy, 61),
            _produce(target, name, own, 62),
        ]
        stored[level] = stored_batch_bytes(target.bootstrap, name, 0, 350)
        transcript[f"stored_{level}"] = [
            [_base_offset(batch), _record_count(batch), CODEC_NAMES[batch[22] & 0x07]]
            for batch in stored[level]
        ]
    transcript["recompressed_smaller_at_high_level"] = len(stored[high][0]) < len(stored[low][0])
    transcript["own_codec_kept_as_sent"] = {level: stored[level][1][16:] == own[16:] for level in (low, high)}
    name = f"{topic}-{high}"
    sent = [[f"k{i}", _value(i).decode()] for i in range(350)]
    read = consume(target, name, [0], 350)
    transcript["confluent_kafka"] = {
        "offsets": [r["offset"] for r in read["records"]],
        "as_sent": [[r["key"], r["value"]] for r in read["records"]] == sent,
        "errors": read["errors"],
    }
    kafka_python = kafka_python_read_all(target, name, 0)
    transcript["kafka_python"] = {
        "offsets": [r["offset"] for r in kafka_python["records"]],
        "as_sent": [[r["key"], r["value"]] for r in kafka_python["records"]] == sent,
        "error": kafka_python["error"],
    }
    transcript["described"] = describe_config(target.bootstrap, TOPIC_RESOURCE, name, key)
    return transcript


def _base_offset(batch: bytes) -> int:
    return int.from_bytes(batch[0:8], "big", signed=True)


def _record_count(batch: bytes) -> int:
    return int.from_bytes(batch[57:61], "big", signed=True)


def _create(admin: AdminClient, topic: str, configs: dict[str, str]) -> str | None:
    try:
        admin.create_topics([NewTopic(topic, 1, 1, config=configs)], operation_timeout=30)[topic].result(
            timeout=60
        )
    except KafkaException as exc:
        return error_name(exc)
    return None


def _alter(admin: AdminClient, topic: str, key: str, value: str | None, op: AlterConfigOpType) -> str | None:
    resource = ConfigResource(
        ResourceType.TOPIC, topic, incremental_configs=[ConfigEntry(key, value, incremental_operation=op)]
    )
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    except KafkaException as exc:
        return error_name(exc)
    time.sleep(0.5)  # both brokers apply a config change asynchronously (Kafka: the metadata log)
    return None


def _levels(target: Target, topic: str) -> dict[str, Any]:
    return {key: describe_config(target.bootstrap, TOPIC_RESOURCE, topic, key) for key in LEVEL_KEYS}


def level_configs(target: Target, topic: str) -> Transcript:
    admin = AdminClient(target.client_config)
    invalid = [
        ("compression.gzip.level", "0"),
        ("compression.gzip.level", "10"),
        ("compression.gzip.level", "-2"),
        ("compression.lz4.level", "0"),
        ("compression.lz4.level", "18"),
        ("compression.zstd.level", "23"),
        ("compression.zstd.level", "-131073"),
        ("compression.zstd.level", "fast"),
    ]
    transcript: Transcript = {
        "create_invalid": [
            [key, value, _create(admin, f"{topic}-{i}", {key: value})]
            for i, (key, value) in enumerate(invalid)
        ],
        "created": create_topic(
            target, topic, configs={"compression.type": "gzip", "compression.gzip.level": "9"}
        ),
        "levels": _levels(target, topic),
        "set_zstd_lowest": _alter(admin, topic, "compression.zstd.level", "-131072", AlterConfigOpType.SET),
        "set_lz4_18": _alter(admin, topic, "compression.lz4.level", "18", AlterConfigOpType.SET),
        "set_gzip_minus_1": _alter(admin, topic, "compression.gzip.level", "-1", AlterConfigOpType.SET),
        "after_sets": _levels(target, topic),
        "delete_gzip": _alter(admin, topic, "compression.gzip.level", None, AlterConfigOpType.DELETE),
        "after_delete": _levels(target, topic),
    }
    [broker] = admin.list_topics(timeout=10).brokers
    transcript["broker"] = {}
    for key in LEVEL_KEYS:
        broker_config = describe_config(target.bootstrap, BROKER_RESOURCE, str(broker), key)
        assert broker_config is not None, key
        transcript["broker"][key] = {k: broker_config[k] for k in ("value", "source")}
    return transcript


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_stored_at_level(targets: tuple[Target, Target], codec: str) -> None:
    transcript = conform(stored_at_level, targets, codec=codec)
    low, high, _ = LEVELS[codec]
    for level in (low, high):
        assert transcript[f"stored_{level}"] == [[0, 300, codec], [300, 50, codec]]
    assert transcript["recompressed_smaller_at_high_level"] is True
    assert transcript["own_codec_kept_as_sent"] == {low: True, high: True}
    assert transcript["confluent_kafka"] == {"offsets": list(range(350)), "as_sent": True, "errors": []}
    assert transcript["kafka_python"] == {"offsets": list(range(350)), "as_sent": True, "error": None}
    key, default = f"compression.{codec}.level", DEFAULTS[codec]
    assert transcript["described"] == {
        "value": str(high),
        "source": "DYNAMIC_TOPIC_CONFIG",
        "read_only": False,
        "synonyms": [[key, str(high), "DYNAMIC_TOPIC_CONFIG"], [key, default, "DEFAULT_CONFIG"]],
    }


def test_level_configs(targets: tuple[Target, Target]) -> None:
    transcript = conform(level_configs, targets)
    assert [refused for _, _, refused in transcript["create_invalid"]] == ["INVALID_CONFIG"] * 8
    assert transcript["set_lz4_18"] == "INVALID_CONFIG"
    assert transcript["after_sets"]["compression.zstd.level"]["value"] == "-131072"
    assert transcript["after_delete"]["compression.gzip.level"] == {
        "value": "-1",
        "source": "DEFAULT_CONFIG",
        "read_only": False,
        "synonyms": [["compression.gzip.level", "-1", "DEFAULT_CONFIG"]],
    }
    assert transcript["broker"] == {
        key: {"value": DEFAULTS[codec], "source": "DEFAULT_CONFIG"}
        for codec, key in zip(DEFAULTS, LEVEL_KEYS, strict=True)
    }

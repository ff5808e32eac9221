"""Admin requests through confluent-kafka's AdminClient, as a user observes them from Kafka and from Lumber.

* ``create_topics_invalid``: CreateTopics with invalid names (``bad/name``, ``..``, 250 characters), zero
  partitions, a replication factor over the broker count, an invalid config value, an unknown config and a
  ``segment.bytes`` below Kafka 4's 1 MiB floor: the error name of each (the valid one among them
  succeeds).
* ``produce_to_missing_topic``: a confluent-kafka producer writes to a topic nobody created.
* ``describe_topic_configs``: DescribeConfigs of a topic created with ``cleanup.policy=compact`` and
  ``retention.ms=3600000``: for a fixed set of keys, the value, the source and whether it is the default.
* ``alter_topic_configs``: IncrementalAlterConfigs (SET ``retention.ms``, DELETE ``cleanup.policy``), then
  DescribeConfigs of both.
* ``delete_and_recreate``: DeleteTopics, then CreateTopics of the same name with another partition count;
  the new topic is empty and has the new count.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from tests.conformance.clients import consume, create_topic, error_name, produce, wait_for_leaders
from tests.conformance.conformance import Transcript, conform
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

DESCRIBED_KEYS = (
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "min.insync.replicas",
    "delete.retention.ms",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
)


def _create(admin: AdminClient, topic: str, partitions: int, rf: int, configs: dict[str, str]) -> str | None:
    try:
        admin.create_topics([NewTopic(topic, partitions, rf, config=configs)], operation_timeout=30)[
            topic
        ].result(timeout=60)
    except KafkaException as exc:
        return error_name(exc)
    return None


def create_topics_invalid(target: Target, topic: str) -> Transcript:
    admin = AdminClient(target.client_config)
    cases: dict[str, tuple[str, int, int, dict[str, str]]] = {
        "slash": ("bad/name", 1, 1, {}),
        "dots": ("..", 1, 1, {}),
        "too_long": ("x" * 250, 1, 1, {}),
        "zero_partitions": (f"{topic}-p", 0, 1, {}),
        "replication_over_brokers": (f"{topic}-rf", 1, 5, {}),
        "bad_config_value": (f"{topic}-v", 1, 1, {"cleanup.policy": "bogus"}),
        "unknown_config": (f"{topic}-u", 1, 1, {"no.such.config": "1"}),
        "segment_bytes_below_1_mib": (f"{topic}-s", 1, 1, {"segment.bytes": "65536"}),
        "valid": (topic, 1, 1, {}),
        "exists": (topic, 1, 1, {}),
    }
    return {name: _create(admin, *case) for name, case in cases.items()}


def produce_to_missing_topic(target: Target, topic: str) -> Transcript:
    reports = produce(target, topic, [{"value": b"x"}], {"message.timeout.ms": 5000})
    return {"reports": [{"error": r["error"]} for r in reports]}


def _describe(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([resource], request_timeout=20)[resource].result(timeout=30)
    return {
        key: {
            "value": entries[key].value,
            "source": str(entries[key].source),
            "is_default": entries[key].is_default,
        }
        if key in entries
        else None
        for key in DESCRIBED_KEYS
    }


def describe_topic_configs(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, configs={"cleanup.policy": "compact", "retention.ms": "3600000"})
    return {
        "created": created,
        "configs": _describe(AdminClient(target.client_config), topic),
    }


def alter_topic_configs(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, configs={"cleanup.policy": "compact"})
    admin = AdminClient(target.client_config)
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    try:
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        altered = None
    except KafkaException as exc:
        altered = error_name(exc)
    time.sleep(0.5)  # both brokers apply a config change asynchronously (Kafka: the metadata log)
    described = _describe(admin, topic)
    return {
        "created": created,
        "altered": altered,
        "retention.ms": described["retention.ms"],
        "cleanup.policy": described["cleanup.policy"],
    }


def delete_and_recreate(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    produce(target, topic, [{"value": b"old", "partition": 1}])
    admin = AdminClient(target.client_config)
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
        deleted = None
    except KafkaException as exc:
        deleted = error_name(exc)
    recreated = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # a deletion completes asynchronously on both
        recreated = _create(admin, topic, 3, 1, {})
        if recreated != "TOPIC_ALREADY_EXISTS":
            break
        time.sleep(0.2)
    wait_for_leaders(target, topic, 3)
    read = consume(target, topic, [0, 1, 2], 1, timeout_s=3)
    partitions = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    return {
        "created": created,
        "deleted": deleted,
        "recreated": recreated,
        "partitions": partitions,
        "records": read["records"],
    }


def test_create_topics_invalid(targets: tuple[Target, Target]) -> None:
    transcript = conform(create_topics_invalid, targets)
    assert transcript["valid"] is None


def test_produce_to_missing_topic(targets: tuple[Target, Target]) -> None:
    conform(produce_to_missing_topic, targets)


def test_describe_topic_configs(targets: tuple[Target, Target]) -> None:
    transcript = conform(describe_topic_configs, targets)
    assert transcript["configs"]["cleanup.policy"]["value"] == "compact"


def test_alter_topic_configs(targets: tuple[Target, Target]) -> None:
    transcript = conform(alter_topic_configs, targets)
    assert transcript["retention.ms"]["value"] == "7200000"


def test_delete_and_recreate(targets: tuple[Target, Target]) -> None:
    transcript = conform(delete_and_recreate, targets)
    assert transcript["partitions"] == 3

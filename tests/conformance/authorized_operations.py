"""What confluent-kafka's AdminClient tells of authorized operations (KIP-430), as plain data for a
conformance transcript.

``describe_topics``, ``describe_cluster`` and ``describe_consumer_groups`` with
``include_authorized_operations=True`` (librdkafka asks Metadata v8+ for topics and for the cluster,
DescribeGroups v3+ for groups): each resource's operations as sorted names (``READ``, ``DESCRIBE``...), or
the error the broker answered for it; and the same three calls without the flag, whose operations are
``None`` when the broker answered Kafka's "not given" (INT32_MIN).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from tests.conformance.clients import error_name

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicCollection
    from confluent_kafka import TopicPartition as ConfluentPartition
    from confluent_kafka.admin import AdminClient


#: Every operation each resource type supports, by name (without an authorizer, and to a super user).
EVERY_TOPIC_OPERATION = [
    "ALTER",
    "ALTER_CONFIGS",
    "CREATE",
    "DELETE",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "READ",
    "WRITE",
]
EVERY_GROUP_OPERATION = ["ALTER_CONFIGS", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
EVERY_CLUSTER_OPERATION = [
    "ALTER",
    "ALTER_CONFIGS",
    "CLUSTER_ACTION",
    "CREATE",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "IDEMPOTENT_WRITE",
]


def operation_names(operations: Any) -> list[str] | None:
    """``None`` (not given) or the operations' names, sorted."""
    return None if operations is None else sorted(str(op.name) for op in operations)


def _each(futures: Mapping[str, Any], rename: Mapping[str, str]) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for name, future in sorted(futures.items()):
        try:
            answers[rename.get(name, name)] = operation_names(future.result(60).authorized_operations)
        except KafkaException as exc:
            answers[rename.get(name, name)] = error_name(exc)
    return answers


def commit_offset(config: Mapping[str, Any], group: str, topic: str) -> None:
    """Make ``group`` exist (Empty, with one committed offset) through AlterConsumerGroupOffsets, retried
    while a fresh coordinator answers NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS (Kafka creating
    ``__consumer_offsets``, either broker loading its partition) or librdkafka times out waiting for it."""
    admin = AdminClient(dict(config))
    request = ConsumerGroupTopicPartitions(group, [ConfluentPartition(topic, 0, 0)])
    deadline = time.monotonic() + 120
    while True:
        [future] = admin.alter_consumer_group_offsets([request], request_timeout=30).values()
        try:
            errors = [tp.error for tp in future.result(60).topic_partitions if tp.error is not None]
        except KafkaException as exc:
            errors = [error_name(exc)]
        if not errors:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"committing an offset of group {group!r} still fails after 120 s: {errors}")
        time.sleep(0.5)


def described_operations(
    config: Mapping[str, Any], topics: Sequence[str], groups: Sequence[str], rename: Mapping[str, str]
) -> dict[str, Any]:
    """The authorized operations the client ``config`` is told of ``topics``, the cluster and ``groups``
    (names in the transcript through ``rename``: topic names differ between the runs)."""
    admin = AdminClient(dict(config))
    asked: dict[str, Any] = {
        "topics": _each(
            admin.describe_topics(
                TopicCollection(list(topics)), request_timeout=30, include_authorized_operations=True
            ),
            rename,
        ),
        "groups": _each(
            admin.describe_consumer_groups(
                list(groups), request_timeout=30, include_authorized_operations=True
            ),
            rename,
        ),
    }
    try:
        cluster = admin.describe_cluster(request_timeout=30, include_authorized_operations=True).result(60)
        asked["cluster"] = operation_names(cluster.authorized_operations)
    except KafkaException as exc:
        asked["cluster"] = error_name(exc)
    not_asked = {
        "topic": _each(admin.describe_topics(TopicCollection(list(topics[:1])), request_timeout=30), rename),
        "group": _each(admin.describe_consumer_groups(list(groups[:1]), request_timeout=30), rename),
        "cluster": operation_names(
            admin.describe_cluster(request_timeout=30).result(60).authorized_operations
        ),
    }
    return {"asked": asked, "not_asked": not_asked}

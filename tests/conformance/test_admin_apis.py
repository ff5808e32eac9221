"""The admin APIs Kafka's admin clients offer beyond topics and configs, as a user observes them from Kafka
and from Lumber, through confluent-kafka's AdminClient and kafka-python's KafkaAdminClient.

* ``delete_records``: 100 records in partition 0 of a 2-partition topic; DeleteRecords to 40
  (confluent-kafka), then to the high watermark (-1, kafka-python) of partition 1 after 10 records; what the
  earliest and latest offsets then are, the first offset a consumer reads from the beginning, and the errors
  of an offset past the high watermark (OFFSET_OUT_OF_RANGE), an unknown partition (librdkafka's own _NOENT:
  no leader to ask) and a compacted topic (POLICY_VIOLATION).
* ``describe_cluster``: DescribeCluster through both clients (kafka-python asks for the cluster's authorized
  operations; confluent-kafka's ``include_authorized_operations``, through Metadata v8+, is compared in
  ``test_authorized_operations.py``), and the error a broker gives when
  asked for the controllers' endpoints (kafka-python's request, sent through its client).
* ``describe_log_dirs``: DescribeLogDirs through kafka-python (confluent-kafka has no call for it) of two
  partitions of a topic and one it does not have, and of every partition: the one log dir, each asked
  partition's size (non-zero once written), offset lag and future flag, the dir's usable and total bytes.
* ``describe_producers``: DescribeProducers through kafka-python of a partition an idempotent
  confluent-kafka producer wrote 20 records to, one a plain producer wrote to, and one the topic lacks:
  each producer's epoch, last sequence, whether its last timestamp is recent, no coordinator epoch and no
  transaction start (producer ids differ between any two clusters: only whether one is set).
* ``elect_leaders``: ElectLeaders through confluent-kafka on one broker, where every leader is already its
  partition's first replica: a preferred election of two partitions and one the topic lacks, of every
  partition (those needing none are left out), and an unclean one. The elections that move a leader need
  several brokers: tests/broker/server/test_admin_apis.py runs them on Lumber.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from tests.conformance.clients import consume, create_topic, error_name, produce
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, ElectionType, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError as KpError
    from kafka.protocol.admin import DescribeClusterRequest as KpDescribeClusterRequest
    from kafka.structs import TopicPartition as KpPartition


def _confluent_delete(bootstrap: str, topic: str, partition: int, offset: int) -> Any:
    """DeleteRecords through confluent-kafka: the low watermark, or the error's name."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], operation_timeout=30)
    try:
        (future,) = futures.values()
        return future.result(timeout=60).low_watermark
    except KafkaException as exc:
        return error_name(exc)


def _watermarks(bootstrap: str, topic: str, partition: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return [low, high]
    finally:
        consumer.close()


def delete_records(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    produce(target, topic, [{"value": f"v{i}".encode(), "partition": 0} for i in range(100)])
    produce(target, topic, [{"value": f"w{i}".encode(), "partition": 1} for i in range(10)])
    to_40 = _confluent_delete(target.bootstrap, topic, 0, 40)
    again_to_20 = _confluent_delete(target.bootstrap, topic, 0, 20)  # below the start: changes nothing
    past_end = _confluent_delete(target.bootstrap, topic, 0, 101)
    unknown = _confluent_delete(target.bootstrap, topic, 5, 1)
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        to_high_watermark = {
            str(tp.partition): answer
            for tp, answer in admin.delete_records({KpPartition(topic, 1): -1}).items()
        }
    except KpError as exc:
        to_high_watermark = {"error": type(exc).__name__}
    finally:
        admin.close()
    # from offset 0, now out of range: auto.offset.reset=earliest moves the consumer to the log start
    read = consume(target, topic, [0], 5, config={"auto.offset.reset": "earliest"})
    compacted = f"{topic}-compacted"
    create_topic(target, compacted, configs={"cleanup.policy": "compact"})
    produce(target, compacted, [{"key": b"k", "value": b"v", "partition": 0}])
    return {
        "created": created,
        "to_40": to_40,
        "again_to_20": again_to_20,
        "past_end": past_end,
        "unknown_partition": unknown,
        "partition_1_to_high_watermark": to_high_watermark,
        "watermarks": [_watermarks(target.bootstrap, topic, p) for p in (0, 1)],
        "first_offsets_read": [r["offset"] for r in read["records"]],
        "read_errors": read["errors"],
        "compacted": _confluent_delete(target.bootstrap, compacted, 0, 1),
    }


def test_delete_records(targets: tuple[Target, Target]) -> None:
    transcript = conform(delete_records, targets)
    assert transcript["to_40"] == transcript["again_to_20"] == 40
    assert transcript["watermarks"] == [[40, 100], [10, 10]]
    assert transcript["first_offsets_read"] == [40, 41, 42, 43, 44]
    assert (transcript["past_end"], transcript["unknown_partition"], transcript["compacted"]) == (
        "OFFSET_OUT_OF_RANGE",
        "_NOENT",
        "POLICY_VIOLATION",
    )
    assert transcript["partition_1_to_high_watermark"] == {
        "1": {"partition_index": 1, "low_watermark": 10, "error_code": 0}
    }


def _normalised_cluster(bootstrap: str, cluster_id: Any, controller_id: Any, nodes: list[Any]) -> Transcript:
    """What must be equal of two clusters' descriptions: not the ids (Kafka's node is 1, Lumber's 0, the
    cluster ids are random) but their shape, and every node at the bootstrap address."""
    return {
        "cluster_id_is_set": isinstance(cluster_id, str) and len(cluster_id) > 0,
        "controller_is_a_listed_broker": controller_id in [node[0] for node in nodes],
        "nodes": [f"{host}:{port}" == bootstrap for _, host, port, _ in nodes],
        "racks": [rack for *_, rack in nodes],
    }


def _sorted_or_none(values: Any) -> list[Any] | None:
    return None if values is None else sorted(getattr(v, "name", str(v)) for v in values)


def describe_cluster(target: Target, topic: str) -> Transcript:
    del topic
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    plain = admin.describe_cluster(request_timeout=30).result(timeout=60)
    python = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        described = python.describe_cluster()

        async def controllers() -> Any:
            return await python._manager.send(KpDescribeClusterRequest(endpoint_type=2))

        refused = python._manager.run(controllers)
    finally:
        python.close()
    return {
        "confluent": _normalised_cluster(
            target.bootstrap,
            plain.cluster_id,
            plain.controller.id,
            [(n.id, n.host, n.port, n.rack) for n in plain.nodes],
        ),
        "confluent_operations_not_asked": plain.authorized_operations,
        "kafka_python": _normalised_cluster(
            target.bootstrap,
            described["cluster_id"],
            described["controller_id"],
            [(b["broker_id"], b["host"], b["port"], b["rack"]) for b in described["brokers"]],
        ),
        "kafka_python_operations": _sorted_or_none(described.get("authorized_operations")),
        "controllers_asked_of_a_broker": [refused.error_code, refused.error_message],
    }


def test_describe_cluster(targets: tuple[Target, Target]) -> None:
    transcript = conform(describe_cluster, targets)
    assert transcript["confluent"] == {
        "cluster_id_is_set": True,
        "controller_is_a_listed_broker": True,
        "nodes": [True],
        "racks": [None],
    }
    assert transcript["kafka_python_operations"] == [
        "ALTER",
        "ALTER_CONFIGS",
        "CLUSTER_ACTION",
        "CREATE",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "IDEMPOTENT_WRITE",
    ]
    assert transcript["controllers_asked_of_a_broker"][0] == 114  # MISMATCHED_ENDPOINT_TYPE


def describe_log_dirs(target: Target, topic: str) -> Transcript:
    create_topic(target, topic, partitions=2)
    produce(target, topic, [{"value": b"x" * 100, "partition": 0} for _ in range(10)])
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        asked = admin.describe_log_dirs({topic: [0, 1, 7]})
        everything = admin.describe_log_dirs()
    finally:
        admin.close()
    (broker,) = asked
    (log_dir,) = broker["log_dirs"]
    (every_dir,) = everything[0]["log_dirs"]
    return {
        "log_dir_error": log_dir["error_code"],
        "log_dir_is_absolute": log_dir["log_dir"].startswith("/"),
        "same_dir_for_every_topic": every_dir["log_dir"] == log_dir["log_dir"],
        "topics": [
            {
                "name": t["name"] == topic,
                "partitions": sorted(
                    [p["partition_index"], p["partition_size"] > 0, p["offset_lag"], p["is_future_key"]]
                    for p in t["partitions"]
                ),
            }
            for t in log_dir["topics"]
        ],
        "topic_listed_when_every_partition_asked": topic in [t["name"] for t in every_dir["topics"]],
        "bytes": 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"],
    }


def test_describe_log_dirs(targets: tuple[Target, Target]) -> None:
    transcript = conform(describe_log_dirs, targets)
    assert transcript["topics"] == [{"name": True, "partitions": [[0, True, 0, False], [1, False, 0, False]]}]


def describe_producers(target: Target, topic: str) -> Transcript:
    create_topic(target, topic, partitions=2)
    idempotent = {"enable.idempotence": True, "acks": "all"}
    produce(target, topic, [{"value": b"i", "partition": 0} for _ in range(20)], idempotent)
    produce(target, topic, [{"value": b"p", "partition": 1} for _ in range(5)])
    now_ms = time.time() * 1000
    admin = KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        states = admin.describe_producers([KpPartition(topic, 0), KpPartition(topic, 1)])
        try:
            unknown: Any = admin.describe_producers([KpPartition(topic, 7)])
        except KpError as exc:
            unknown = type(exc).__name__
    finally:
        admin.close()
    return {
        str(tp.partition): [
            {
                "producer_id_set": p.producer_id >= 0,
                "epoch": p.producer_epoch,
                "last_sequence": p.last_sequence,
                "last_timestamp_recent": abs(p.last_timestamp - now_ms) < 60_000,
                "coordinator_epoch": p.coordinator_epoch,
                "transaction_start": p.current_transaction_start_offset,
            }
            for p in state.active_producers
        ]
        for tp, state in sorted(states.items())
    } | {"unknown_partition": unknown}


def test_describe_producers(targets: tuple[Target, Target]) -> None:
    transcript = conform(describe_producers, targets)
    assert transcript["0"] == [
        {
            "producer_id_set": True,
            "epoch": 0,
            "last_sequence": 19,
            "last_timestamp_recent": True,
            "coordinator_epoch": -1,
            "transaction_start": -1,
        }
    ]
    assert transcript["1"] == []


def _election(bootstrap: str, election_type: ElectionType, partitions: list[Any] | None, topic: str) -> Any:
    """ElectLeaders through confluent-kafka: each of ``topic``'s partitions' error name (None: elected)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        answers = admin.elect_leaders(election_type, partitions).result(timeout=60)
    except KafkaException as exc:
        return error_name(exc)
    return {
        str(tp.partition): None if error is None else str(error.name())
        for tp, error in sorted(answers.items(), key=lambda item: item[0].partition)
        if tp.topic == topic
    }


def elect_leaders(target: Target, topic: str) -> Transcript:
    create_topic(target, topic, partitions=2)
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 1), TopicPartition(topic, 9)]
    return {
        "preferred": _election(target.bootstrap, ElectionType.PREFERRED, asked, topic),
        "preferred_everywhere": _election(target.bootstrap, ElectionType.PREFERRED, None, topic),
        "unclean": _election(target.bootstrap, ElectionType.UNCLEAN, asked[:1], topic),
    }


def test_elect_leaders(targets: tuple[Target, Target]) -> None:
    transcript = conform(elect_leaders, targets)
    assert transcript == {
        "preferred": {
            "0": "ELECTION_NOT_NEEDED",
            "1": "ELECTION_NOT_NEEDED",
            "9": "UNKNOWN_TOPIC_OR_PART",  # librdkafka's name of UNKNOWN_TOPIC_OR_PARTITION
        },
        "preferred_everywhere": {},
        "unclean": {"0": "ELECTION_NOT_NEEDED"},
    }

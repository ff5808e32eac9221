"""Consumer groups as confluent-kafka members observe them on Kafka and on Lumber.

* ``three_members_then_one_leaves``: a 6-partition topic, three members of one group with an assignment
  strategy (``range``, the eager protocol, or ``cooperative-sticky``), polled in turn until their
  assignments cover the topic without overlap; then one member closes and the other two take over. The
  transcript holds the sorted sizes of the assignments at each stable point (which member gets which
  partitions depends on member ids, random on both brokers), and whether both covered all six.
* ``commit_with_metadata_then_delete_group``: a member commits offsets with metadata, a new consumer of the
  group reads them back (``committed``), then, once the group is empty, DeleteGroups.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from tests.conformance.clients import create_topic, error_name, produce
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

PARTITIONS = 6


def _member(target: Target, group: str, strategy: str) -> Any:
    return Consumer(
        {
            "bootstrap.servers": target.bootstrap,
            "group.id": group,
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
    )


def _stable(members: list[Any], timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll each member in turn until their assignments cover every partition once (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for member in members:
            member.poll(0.05)
        assigned = [sorted(tp.partition for tp in member.assignment()) for member in members]
        flat = sorted(p for partitions in assigned for p in partitions)
        if flat == list(range(PARTITIONS)) and all(assigned):
            # hold it a little: an eager rebalance in flight shows as a moment of full coverage
            settle = time.monotonic() + 1.0
            while time.monotonic() < settle:
                for member in members:
                    member.poll(0.05)
            again = [sorted(tp.partition for tp in member.assignment()) for member in members]
            if again == assigned:
                return {"covered": True, "sizes": sorted(len(a) for a in assigned)}
    return {"covered": False, "sizes": sorted(len(member.assignment()) for member in members)}


def three_members_then_one_leaves(target: Target, topic: str, strategy: str) -> Transcript:
    created = create_topic(target.bootstrap, topic, partitions=PARTITIONS)
    group = f"{topic}-group"
    members = [_member(target, group, strategy) for _ in range(3)]
    try:
        for member in members:
            member.subscribe([topic])
        three = _stable(members)
        members.pop().close()
        two = _stable(members)
    finally:
        for member in members:
            member.close()
    return {"created": created, "three": three, "two": two}


def commit_with_metadata_then_delete_group(target: Target, topic: str) -> Transcript:
    created = create_topic(target.bootstrap, topic, partitions=2)
    produce(target.bootstrap, topic, [{"value": b"x", "partition": p} for p in (0, 0, 1)])
    group = f"{topic}-group"
    member = _member(target, group, "range")
    try:
        member.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        member.commit(
            offsets=[TopicPartition(topic, 0, 2, metadata="first"), TopicPartition(topic, 1, 1)],
            asynchronous=False,
        )
    finally:
        member.close()
    reader = _member(target, group, "range")
    try:
        committed = reader.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        read_back = [[tp.partition, tp.offset, tp.metadata] for tp in committed]
    finally:
        reader.close()
    admin = AdminClient({"bootstrap.servers": target.bootstrap})
    try:
        admin.delete_consumer_groups([group], request_timeout=20)[group].result(timeout=30)
        deleted = None
    except KafkaException as exc:
        deleted = error_name(exc)
    try:
        admin.delete_consumer_groups([group], request_timeout=20)[group].result(timeout=30)
        deleted_again = None
    except KafkaException as exc:
        deleted_again = error_name(exc)
    return {"created": created, "committed": read_back, "deleted": deleted, "deleted_again": deleted_again}


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_then_one_leaves(targets: tuple[Target, Target], strategy: str) -> None:
    transcript = conform(three_members_then_one_leaves, targets, strategy=strategy)
    assert transcript["three"] == {"covered": True, "sizes": [2, 2, 2]}


def test_commit_with_metadata_then_delete_group(targets: tuple[Target, Target]) -> None:
    transcript = conform(commit_with_metadata_then_delete_group, targets)
    assert transcript["committed"] == [[0, 2, "first"], [1, 1, None]]

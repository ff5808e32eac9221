"""Consumer groups as confluent-kafka members observe them on Kafka and on Lumber.

* ``three_members_then_one_leaves``: a 6-partition topic, three members of one group with an assignment
  strategy (``range``, the eager protocol, or ``cooperative-sticky``), polled in turn until their
  assignments cover the topic without overlap; then one member closes and the other two take over. The
  transcript holds the sorted sizes of the assignments at each stable point (which member gets which
  partitions depends on member ids, random on both brokers), and whether both covered all six.
* ``static_member_returns``: a static member (``group.instance.id``, KIP-345) of a 2-partition topic is
  assigned both partitions, closes (a static member does not leave), and a new consumer with the same
  instance id takes its place: the group keeps one member, its instance id, and the same assignment. A
  consumer with a *new* instance id then joins: the group rebalances to two members, one partition each.
  (The generation is not in what confluent-kafka's describe shows; the states and members are.)
* ``admin_alters_then_lists_offsets``: the admin client's AlterConsumerGroupOffsets (an OffsetCommit of an
  empty group), ListConsumerGroupOffsets of all and of one partition, then a ``read_committed`` member (no
  transactions: it reads up to the high watermark) starting from the altered offsets.
* ``commit_with_metadata_then_delete_group``: a member commits offsets with metadata, a new consumer of the
  group reads them back (``committed``), then, once the group is empty, DeleteGroups.
* ``admin_deletes_one_partitions_offset``: an empty group's offsets altered on two partitions, then
  kafka-python's OffsetDelete of partition 0 (confluent-kafka 2.16's AdminClient has no such call) and of a
  group that does not exist; the group's offsets listed afterwards hold partition 1's alone. Then a member
  subscribed to the topic joins, and OffsetDelete of partition 1 is refused (GROUP_SUBSCRIBED_TO_TOPIC).
* ``consumer_group_protocol``: whether the broker advertises ConsumerGroupHeartbeat (KIP-848) in ApiVersions,
  then a ``group.protocol=consumer`` member of a 2-partition topic polled for 20 s: its assignment, the
  records it read and the errors its polls returned (DIFFERENCES.md: Lumber does not serve KIP-848).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from tests.conformance.clients import advertised_api_keys, create_topic, error_name, produce
from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpPartition
    from kafka.errors import KafkaError as KafkaPythonError

PARTITIONS = 6
CONSUMER_GROUP_HEARTBEAT = 68  # api key


def _member(target: Target, group: str, strategy: str) -> Any:
    return Consumer(
        {
            **target.client_config,
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
    created = create_topic(target, topic, partitions=PARTITIONS)
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


def _static(target: Target, group: str, instance: str) -> Any:
    return Consumer(
        {
            **target.client_config,
            "group.id": group,
            "group.instance.id": instance,
            "session.timeout.ms": 30_000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
    )


def _assigned(member: Any, timeout_s: float = 60.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        member.poll(0.1)
        if member.assignment():
            return sorted(tp.partition for tp in member.assignment())
    return []


def _described(admin: Any, group: str) -> dict[str, Any]:
    found = admin.describe_consumer_groups([group], request_timeout=20)[group].result(timeout=30)
    return {
        "state": str(found.state),
        "instances": sorted(str(m.group_instance_id) for m in found.members),
        "assignments": sorted(
            sorted(tp.partition for tp in m.assignment.topic_partitions) for m in found.members
        ),
    }


def static_member_returns(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    group = f"{topic}-group"
    admin = AdminClient(target.client_config)
    first = _static(target, group, "static-1")
    first.subscribe([topic])
    first_assigned = _assigned(first)
    before = _described(admin, group)
    first.close()  # a static member does not send LeaveGroup
    after_close = _described(admin, group)
    second = _static(target, group, "static-1")
    other = None
    try:
        second.subscribe([topic])
        second_assigned = _assigned(second)
        returned = _described(admin, group)
        other = _static(target, group, "static-2")
        other.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            second.poll(0.1)
            other.poll(0.1)
            sizes = sorted([len(second.assignment()), len(other.assignment())])
            if sizes == [1, 1]:
                break
        two = _described(admin, group)
    finally:
        second.close()
        if other is not None:
            other.close()
    return {
        "created": created,
        "first_assigned": first_assigned,
        "before": before,
        "after_close": after_close,
        "second_assigned": second_assigned,
        "returned": returned,
        "two": two,
    }


def admin_alters_then_lists_offsets(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    produce(target, topic, [{"value": b"r%d" % i, "partition": i % 2} for i in range(10)])
    group = f"{topic}-group"
    admin = AdminClient(target.client_config)

    def offsets(found: Any) -> list[list[Any]]:
        return sorted([tp.partition, tp.offset, tp.error.name() if tp.error else None] for tp in found)

    wanted = [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)]
    # a coordinator that has just started (Kafka creating __consumer_offsets) answers NOT_COORDINATOR at
    # first; until a commit lands, listing the group's offsets crashes confluent-kafka 2.16 (SIGSEGV)
    for _ in range(60):
        altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])
        alter = offsets(altered[group].result(timeout=30).topic_partitions)
        if all(error is None for _, _, error in alter):
            break
        time.sleep(0.5)
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    every = offsets(listed[group].result(timeout=30).topic_partitions)
    one = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 1)])])
    just_one = offsets(one[group].result(timeout=30).topic_partitions)
    member = Consumer(
        {
            **target.client_config,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    read: list[list[Any]] = []
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(read) < 3 and time.monotonic() < deadline:
            msg = member.poll(0.2)
            if msg is not None and msg.error() is None:
                read.append([msg.partition(), msg.offset(), bytes(msg.value() or b"").decode()])
    finally:
        member.close()
    return {
        "created": created,
        "altered": alter,
        "listed": every,
        "listed_one": just_one,
        "read_committed": sorted(read),
    }


def commit_with_metadata_then_delete_group(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    produce(target, topic, [{"value": b"x", "partition": p} for p in (0, 0, 1)])
    group = f"{topic}-group"
    member = _member(target, group, "range")
    try:
        member.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
        # the session's first group request on a fresh Kafka may find __consumer_offsets still loading
        deadline = time.monotonic() + 60
        while True:
            try:
                member.commit(
                    offsets=[TopicPartition(topic, 0, 2, metadata="first"), TopicPartition(topic, 1, 1)],
                    asynchronous=False,
                )
                break
            except KafkaException as exc:
                loading = error_name(exc) in ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")
                if not loading or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        member.close()
    reader = _member(target, group, "range")
    try:
        committed = reader.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        read_back = [[tp.partition, tp.offset, tp.metadata] for tp in committed]
    finally:
        reader.close()
    admin = AdminClient(target.client_config)
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


def test_static_member_returns(targets: tuple[Target, Target]) -> None:
    transcript = conform(static_member_returns, targets)
    assert transcript["first_assigned"] == transcript["second_assigned"] == [0, 1]
    assert transcript["after_close"]["instances"] == ["static-1"]
    assert transcript["two"]["instances"] == ["static-1", "static-2"]
    assert transcript["two"]["assignments"] == [[0], [1]]


def test_admin_alters_then_lists_offsets(targets: tuple[Target, Target]) -> None:
    transcript = conform(admin_alters_then_lists_offsets, targets)
    assert transcript["listed"] == [[0, 3, None], [1, 4, None]]
    assert transcript["read_committed"] == [[0, 3, "r6"], [0, 4, "r8"], [1, 4, "r9"]]


def admin_deletes_one_partitions_offset(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    group = f"{topic}-group"
    admin = AdminClient(target.client_config)
    wanted = [TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 4)]
    # NOT_COORDINATOR while a new coordinator loads (see admin_alters_then_lists_offsets); the session's first
    # group request waits for Kafka to create __consumer_offsets' 50 partitions, and librdkafka times it out
    # when that takes over its request timeout (the machine loaded: load 13 on 2 cores seen)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])
        try:
            if all(tp.error is None for tp in altered[group].result(timeout=90).topic_partitions):
                break
        except KafkaException as exc:
            if error_name(exc) != "_TIMED_OUT":
                raise
        time.sleep(0.5)
    raw = KafkaAdminClient(**target.kafka_python_config, request_timeout_ms=30_000)
    try:
        deleted = raw.delete_group_offsets(group, [KpPartition(topic, 0)])
        by_partition = sorted([tp.partition, error.__name__] for tp, error in deleted.items())
        try:
            raw.delete_group_offsets(f"{group}-never", [KpPartition(topic, 0)])
            unknown_group = None
        except KafkaPythonError as exc:
            unknown_group = type(exc).__name__
    finally:
        raw.close()
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    found = listed[group].result(timeout=30).topic_partitions
    remaining = sorted([tp.partition, tp.offset] for tp in found if tp.offset >= 0)
    member = _member(target, group, "range")
    raw = KafkaAdminClient(**target.kafka_python_config, request_timeout_ms=30_000)
    try:
        member.subscribe([topic])
        member_assigned = _assigned(member)
        refused = raw.delete_group_offsets(group, [KpPartition(topic, 1)])
        while_subscribed = sorted([tp.partition, error.__name__] for tp, error in refused.items())
    finally:
        raw.close()
        member.close()
    return {
        "created": created,
        "deleted": by_partition,
        "unknown_group": unknown_group,
        "listed": remaining,
        "member_assigned": member_assigned,
        "while_subscribed": while_subscribed,
    }


def consumer_group_protocol(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=2)
    advertises = CONSUMER_GROUP_HEARTBEAT in advertised_api_keys(target.bootstrap)
    produce(target, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(4)])
    member = Consumer(
        {
            **target.client_config,
            "group.id": f"{topic}-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    errors: list[str] = []
    values: list[str] = []
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 20
        while len(values) < 4 and time.monotonic() < deadline:
            msg = member.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.name() not in errors:
                    errors.append(error.name())
            else:
                values.append(bytes(msg.value() or b"").decode())
        assigned = sorted(tp.partition for tp in member.assignment())
    finally:
        member.close()
    return {
        "created": created,
        "advertises_consumer_group_heartbeat": advertises,
        "errors": errors,
        "assigned": assigned,
        "values": sorted(values),
    }


def test_admin_deletes_one_partitions_offset(targets: tuple[Target, Target]) -> None:
    transcript = conform(admin_deletes_one_partitions_offset, targets)
    assert transcript["deleted"] == [[0, "NoError"]]
    assert transcript["listed"] == [[1, 4]]
    assert transcript["while_subscribed"] == [[1, "GroupSubscribedToTopicError"]]


def test_consumer_group_protocol(targets: tuple[Target, Target]) -> None:
    transcript = conform(consumer_group_protocol, targets)
    assert transcript["member"] == "served by Kafka (both partitions, 4 records), not advertised by Lumber"

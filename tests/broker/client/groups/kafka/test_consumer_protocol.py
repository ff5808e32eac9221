"""broker/client/groups/kafka/consumer_protocol.py: Kafka's ConsumerProtocolSubscription and
ConsumerProtocolAssignment, byte for byte against kafka-python's codecs (generated from Kafka's own JSON
message definitions) at every version, in both directions; newer versions read with the newest layout known;
clear errors for bytes that are not the consumer protocol."""

from __future__ import annotations

import struct
import warnings

import pytest

from broker.client.groups.kafka.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    subscriptions_of,
)
from broker.record.topic_partition import TopicPartition

with warnings.catch_warnings():
    # kafka-python's protocol package reads its JSON schemas with importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

OWNED = (TopicPartition("clicks", 2), TopicPartition("events", 0), TopicPartition("events", 5))


def theirs_subscription(version: int) -> bytes:
    owned = [
        ConsumerProtocolSubscription.TopicPartition(topic="clicks", partitions=[2]),
        ConsumerProtocolSubscription.TopicPartition(topic="events", partitions=[0, 5]),
    ]
    body = ConsumerProtocolSubscription(
        topics=["clicks", "events"], user_data=b"ud", owned_partitions=owned, generation_id=7, rack_id="r1"
    )
    return bytes(body.encode(version=version))


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_bytes_are_kafkas(version: int) -> None:
    ours = Subscription(("events", "clicks"), b"ud", OWNED, 7, "r1")
    assert ours.encode(version) == theirs_subscription(version)
    decoded = Subscription.decode(theirs_subscription(version), "member m")
    assert decoded == Subscription(
        ("clicks", "events"),
        b"ud",
        OWNED if version >= 1 else (),
        7 if version >= 2 else -1,
        "r1" if version >= 3 else None,
    )


def test_version_0_subscription_exactly() -> None:
    assert Subscription(("t",)).encode(0) == struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", -1)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_bytes_are_kafkas(version: int) -> None:
    theirs = ConsumerProtocolAssignment(
        assigned_partitions=[
            ConsumerProtocolAssignment.TopicPartition(topic="clicks", partitions=[2]),
            ConsumerProtocolAssignment.TopicPartition(topic="events", partitions=[0, 5]),
        ],
        user_data=None,
    )
    data = bytes(theirs.encode(version=version))
    assert Assignment(OWNED).encode(version) == data
    assert Assignment.decode(data, "member m") == Assignment(OWNED)
    back = ConsumerProtocolAssignment.decode(Assignment(OWNED).encode(version))
    assert sorted(
        TopicPartition(tp.topic, p) for tp in back.assigned_partitions for p in tp.partitions
    ) == list(OWNED)


def test_a_newer_version_is_read_with_the_newest_layout() -> None:
    v3 = theirs_subscription(3)
    v9 = struct.pack(">h", 9) + v3[2:] + b"\x00\x00\x00\x2a"  # a future field after rack_id
    assert Subscription.decode(v9, "member m") == Subscription.decode(v3, "member m")


def test_an_empty_assignment_is_no_partitions() -> None:
    assert Assignment.decode(b"", "member m") == Assignment()


def test_bytes_that_are_not_the_consumer_protocol_are_named() -> None:
    with pytest.raises(ConsumerProtocolError, match=r"^group g member m: subscription: 1 bytes, too short"):
        Subscription.decode(b"\x00", "group g member m")
    with pytest.raises(ConsumerProtocolError, match=r"^member m: assignment: not Kafka's consumer protocol"):
        Assignment.decode(struct.pack(">hi", 0, 3) + b"\x00", "member m")


def test_each_member_is_one_unit_of_the_assignor() -> None:
    members = {"b": Subscription(("events",)), "a": Subscription(("clicks", "events"))}
    assert subscriptions_of(members) == {"b": {"events": 1}, "a": {"clicks": 1, "events": 1}}

"""The replicated tests' check of what an :class:`AckedProducer` was acknowledged, on records as
confluent-kafka hands them over (``confluent_kafka.Message``)."""

from __future__ import annotations

import warnings
from typing import Any, cast

import pytest

from tests.support.acked_producer import AckedProducer, check_every_acknowledged_record

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from confluent_kafka import Message


class Acknowledged:
    """What :func:`check_every_acknowledged_record` reads of an :class:`AckedProducer`."""

    def __init__(self, acknowledged: dict[bytes, tuple[int, int | None]], partitions: int) -> None:
        self.acknowledged = acknowledged
        self.partitions = partitions


def check(stored: list[tuple[int, int, bytes]], acknowledged: dict[bytes, tuple[int, int | None]]) -> None:
    records: list[Any] = [Message(topic="t", partition=p, offset=o, value=v) for p, o, v in stored]
    load = cast("AckedProducer", Acknowledged(acknowledged, 2))
    check_every_acknowledged_record(records, load, exactly_once=True)


STORED = [(0, 0, b"v0"), (1, 0, b"v1"), (0, 1, b"v2"), (1, 1, b"v3")]


def test_an_acknowledgement_without_an_offset_is_checked_at_its_partition_and_in_order() -> None:
    # v2 was acknowledged by librdkafka with no offset ("implicitly acked by subsequent batch success")
    check(STORED, {b"v0": (0, 0), b"v1": (1, 0), b"v2": (0, None), b"v3": (1, 1)})
    with pytest.raises(AssertionError, match="1 records not where they were acknowledged"):
        check(STORED, {b"v0": (0, 0), b"v2": (1, None)})
    with pytest.raises(AssertionError, match="1 of 2 acknowledged records lost"):
        check(STORED, {b"v0": (0, 0), b"v4": (0, None)})
    with pytest.raises(AssertionError, match="partition 0: out of order"):
        check([(0, 0, b"v2"), (0, 1, b"v0")], {b"v0": (0, None), b"v2": (0, None)})


def test_a_value_stored_twice_or_at_another_offset_fails() -> None:
    with pytest.raises(AssertionError, match="1 values stored twice"):
        check([*STORED, (0, 2, b"v0")], {b"v0": (0, 0)})
    with pytest.raises(AssertionError, match="1 records not where they were acknowledged"):
        check(STORED, {b"v0": (0, 0), b"v2": (0, 2)})

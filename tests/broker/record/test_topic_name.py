"""Kafka's topic-name rules."""

from __future__ import annotations

import pytest

from broker.record.errors import InvalidTopicError
from broker.record.topic_name import validate_partition, validate_topic_name


@pytest.mark.parametrize("topic", ["clicks", "a", "A.b_c-9", "x" * 249, "..."])
def test_valid_topic_names(topic: str) -> None:
    validate_topic_name(topic)


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        ("", "empty"),
        (".", "cannot be '.'"),
        ("..", "cannot be '..'"),
        ("../x", "contains '/'"),
        ("a/b", "contains '/'"),
        ("/etc", "contains '/'"),
        ("a\\b", "contains"),
        ("a b", "contains ' '"),
        ("x\x00y", "contains"),
        ("caf\u00e9", "contains"),
        ("x" * 250, "250 characters long, at most 249"),
    ],
)
def test_invalid_topic_names(topic: str, message: str) -> None:
    with pytest.raises(InvalidTopicError, match=message):
        validate_topic_name(topic)


@pytest.mark.parametrize(
    ("partition", "message"),
    [(-1, r"partition -1 is outside \[0, 2147483647\]"), (2**31, "outside"), (True, "must be an integer")],
)
def test_invalid_partitions(partition: int, message: str) -> None:
    with pytest.raises(InvalidTopicError, match=message):
        validate_partition(partition)

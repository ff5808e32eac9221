from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.file_names import (
    deleted_partition_dir_name,
    is_deleted_partition_dir_name,
    parse_partition_dir_name,
    parse_segment_file_name,
    partition_dir,
    segment_file_name,
)
from broker.record.errors import InvalidTopicError
from broker.record.topic_partition import TopicPartition


def test_segment_names_have_twenty_digits() -> None:
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(1234, ".index") == "00000000000000001234.index"
    assert segment_file_name(99, ".timeindex") == "00000000000000000099.timeindex"
    assert parse_segment_file_name("00000000000000001234.index") == (1234, ".index")
    assert parse_segment_file_name("00000000000000001234.log") == (1234, ".log")
    for name in (
        "0000000000000000123.log",
        "00000000000000001234.log.tmp",
        "x.log",
        "00000000000000001234.idx",
    ):
        assert parse_segment_file_name(name) is None
    with pytest.raises(ValueError, match="unknown segment file suffix"):
        segment_file_name(1, ".txt")
    with pytest.raises(ValueError, match="does not fit"):
        segment_file_name(-1, ".log")


def test_partition_dirs_stay_inside_the_log_dir(tmp_path: Path) -> None:
    assert partition_dir(tmp_path, TopicPartition("clicks", 3)) == tmp_path / "clicks-3"
    for topic in ("../x", "..", ".", "a/b", "/abs"):
        with pytest.raises(InvalidTopicError):
            partition_dir(tmp_path, TopicPartition(topic, 0))
    with pytest.raises(InvalidTopicError, match="partition -1"):
        partition_dir(tmp_path, TopicPartition("t", -1))


def test_parse_partition_dir_names() -> None:
    assert parse_partition_dir_name("clicks-3") == TopicPartition("clicks", 3)
    assert parse_partition_dir_name("my-topic-12") == TopicPartition("my-topic", 12)
    for name in ("clicks", "clicks-", "clicks-007", "..-1", "a b-1", "-1", ".lock"):
        assert parse_partition_dir_name(name) is None, name


def test_deleted_partition_dirs() -> None:
    name = deleted_partition_dir_name(TopicPartition("clicks", 3))
    assert name.startswith("clicks-3.")
    assert name.endswith("-delete")
    assert is_deleted_partition_dir_name(name)
    assert parse_partition_dir_name(name) is None
    assert not is_deleted_partition_dir_name("clicks-3")

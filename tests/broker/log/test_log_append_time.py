"""A log whose ``message_timestamp_type`` is ``LogAppendTime`` (Kafka's ``message.timestamp.type``): the
leader stamps each batch with its clock at the append; a follower keeps the leader's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.cluster.errors import InvalidTopicConfigError
from broker.cluster.topic_config import check_topic_configs, topic_log_config
from broker.log.log import Log
from broker.record.batch_header import TimestampType
from broker.record.batch_scan import scan_batches
from broker.record.record_batch import RecordBatch
from tests.broker.log.helpers import BASE_TS, config, make_batch

NOW_MS = BASE_TS + 86_400_000  # a day after the records' CreateTime


def stored(log: Log) -> list[RecordBatch]:
    region = log.read(log.log_start_offset, 1 << 20)
    assert region is not None
    batches = scan_batches(region.read_bytes()).batches
    for batch in batches:
        batch.validate()  # the CRC covers the new attributes and maxTimestamp
    return list(batches)


def open_log(tmp_path: Path, name: str, timestamp_type: str) -> Log:
    directory = tmp_path / name
    directory.mkdir()
    return Log(directory, config(tmp_path, message_timestamp_type=timestamp_type), clock=lambda: NOW_MS)


def test_the_leader_stamps_every_batch_with_its_clock(tmp_path: Path) -> None:
    log = open_log(tmp_path, "stamped-0", "LogAppendTime")
    first = log.append(make_batch(0, 3), leader_epoch=0)
    second = log.append(make_batch(3, 2, timestamp_ms=BASE_TS + 10), leader_epoch=0)
    assert (first.first_offset, first.last_offset, first.log_append_time_ms, first.max_timestamp_ms) == (
        0,
        2,
        NOW_MS,
        NOW_MS,
    )
    assert (second.first_offset, second.log_append_time_ms) == (3, NOW_MS)
    batches = stored(log)
    assert [(b.base_offset, b.timestamp_type, b.max_timestamp_ms) for b in batches] == [
        (0, TimestampType.LOG_APPEND_TIME, NOW_MS),
        (3, TimestampType.LOG_APPEND_TIME, NOW_MS),
    ]
    assert [b.first_timestamp_ms for b in batches] == [BASE_TS, BASE_TS + 10]  # baseTimestamp kept
    records = [r for b in batches for r in b.records()]
    assert [(r.offset, r.timestamp_ms) for r in records] == [(i, NOW_MS) for i in range(5)]
    assert log.offset_of_max_timestamp() == (0, NOW_MS)  # (offset, timestamp): the appends' time
    log.close()


def test_create_time_keeps_the_producers_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, "created-0", "CreateTime")
    info = log.append(make_batch(0, 3), leader_epoch=0)
    assert (info.log_append_time_ms, info.max_timestamp_ms) == (-1, BASE_TS + 2)
    (batch,) = stored(log)
    assert (batch.timestamp_type, batch.max_timestamp_ms) == (TimestampType.CREATE_TIME, BASE_TS + 2)
    log.close()


def test_a_follower_keeps_the_leaders_bytes(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader-0", "LogAppendTime")
    leader.append(make_batch(0, 4), leader_epoch=0)
    region = leader.read(0, 1 << 20)
    assert region is not None
    leaders_bytes = region.read_bytes()
    (tmp_path / "follower-0").mkdir()
    follower = Log(
        tmp_path / "follower-0", config(tmp_path, message_timestamp_type="LogAppendTime"), clock=lambda: 1
    )
    info = follower.append_as_follower(leaders_bytes)
    assert info.log_append_time_ms == -1
    again = follower.read(0, 1 << 20)
    assert again is not None
    assert again.read_bytes() == leaders_bytes
    leader.close()
    follower.close()


def test_the_topic_config_takes_kafkas_two_values(tmp_path: Path) -> None:
    key = "message.timestamp.type"
    assert check_topic_configs("t", {key: " LogAppendTime "}, 1) == {key: "LogAppendTime"}
    assert topic_log_config("t", config(tmp_path), {key: "LogAppendTime"}).message_timestamp_type == (
        "LogAppendTime"
    )
    with pytest.raises(InvalidTopicConfigError) as refused:
        check_topic_configs("t", {key: "logappendtime"}, 1)
    assert str(refused.value) == (
        "topic 't': message.timestamp.type='logappendtime': expected CreateTime or LogAppendTime"
    )

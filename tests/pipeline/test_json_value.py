"""The generic JSON of the load's value types: flattening, the format key, offsets, and the errors."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import ClassVar

import pytest

from broker.record.topic_partition import TopicPartition
from pipeline.json_value import JsonValue, Offsets, offsets_to_json
from pipeline.load_errors import MalformedJsonError
from pipeline.ranges import OffsetRange, PartitionOffsets


@dataclass(frozen=True, slots=True)
class Sample(JsonValue):
    JSON_WHAT: ClassVar[str] = "sample"
    JSON_FORMAT: ClassVar[int | None] = 3
    JSON_FLATTEN: ClassVar[tuple[str, ...]] = ("range",)

    name: str
    range: OffsetRange
    offsets: Offsets
    note: str | None = None


SAMPLE = Sample("s", OffsetRange("t", 1, 5, 9), {TopicPartition("t", 1): 9, TopicPartition("a", 0): 2})


def test_flattened_fields_format_first_and_offsets_nested() -> None:
    assert SAMPLE.to_json() == {
        "format": 3,
        "name": "s",
        "topic": "t",
        "partition": 1,
        "from_offset": 5,
        "until_offset": 9,
        "offsets": {"a": {"0": 2}, "t": {"1": 9}},
        "note": None,
    }
    assert list(SAMPLE.to_json()) == [
        "format", "name", "topic", "partition", "from_offset", "until_offset", "offsets", "note"
    ]  # fmt: skip
    assert Sample.loads(SAMPLE.dumps(), "x") == SAMPLE
    assert Sample.loads(SAMPLE.dumps(indent=None), "x") == SAMPLE
    assert SAMPLE.dumps(indent=None).startswith('{"format":3,"name":"s","topic":"t"')
    assert offsets_to_json({TopicPartition("b", 10): 1, TopicPartition("b", 2): 0}) == {
        "b": {"2": 0, "10": 1}
    }


def test_lax_numbers_and_defaults_as_the_hand_written_readers_had_them() -> None:
    value = {
        "format": 3,
        "name": "s",
        "topic": "t",
        "partition": "1",
        "from_offset": 5,
        "until_offset": "9",
        "offsets": {},
    }
    assert Sample.from_json(value) == Sample("s", OffsetRange("t", 1, 5, 9), {})


def test_errors_name_where_what_and_each_field() -> None:
    with pytest.raises(MalformedJsonError, match=r"^f\.json: not a valid sample: format 2, expected 3$"):
        Sample.from_json({**SAMPLE.to_json(), "format": 2}, "f.json")
    bad = {**SAMPLE.to_json(), "partition": -1}
    with pytest.raises(
        MalformedJsonError, match=r"^f\.json: not a valid sample: range: Value error, not a range: t--1"
    ):
        Sample.from_json(bad, "f.json")
    bad = {**SAMPLE.to_json(), "name": 5, "offsets": {"t": {"1": "end"}}}
    with pytest.raises(
        MalformedJsonError,
        match=r"^f\.json: not a valid sample: name: Input should be a valid string \(found 5\); "
        r"offsets\.t\.1: Input should be a valid integer, unable to parse string as an integer "
        r"\(found 'end'\)$",
    ):
        Sample.from_json(bad, "f.json")
    with pytest.raises(MalformedJsonError, match=r"^f\.json: not a valid sample: \(top level\): "):
        Sample.from_json([1, 2], "f.json")
    with pytest.raises(MalformedJsonError, match=r"^f\.json: not a valid offset range: not JSON: "):
        OffsetRange.loads("{", "f.json")


def test_a_nested_dataclass_flattens_too_and_values_still_pickle() -> None:
    value = PartitionOffsets(TopicPartition("t", 2), 3, 7, None)
    assert value.to_json() == {
        "topic": "t",
        "partition": 2,
        "log_start_offset": 3,
        "high_watermark": 7,
        "cutoff_offset": None,
    }
    assert PartitionOffsets.from_json(value.to_json()) == value
    assert pickle.loads(pickle.dumps(SAMPLE)) == SAMPLE

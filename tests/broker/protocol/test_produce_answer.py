"""The packed answer of a one-partition Produce (broker/protocol/produce_answer.py): byte for byte the
generic encoding at every Produce version the log takes, for any offsets and correlation id."""

from __future__ import annotations

import pytest

from broker.protocol import encode_response
from broker.protocol.messages.produce import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from broker.protocol.produce_answer import ProduceAnswer, produce_answer

VALUES = [
    (0, 0, -1, 0),
    (1, 123_456_789, 1_700_000_000_000, 42),
    (-7, 2**63 - 1, -1, 2**62),
    (2**31 - 1, 5, 0, 0),
]


@pytest.mark.parametrize("version", range(3, 10))
@pytest.mark.parametrize(("topic", "partition"), [("t", 0), ("a-longer.topic_name", 2**31 - 1), ("é", 7)])
def test_the_packed_answer_is_the_generic_encoding(version: int, topic: str, partition: int) -> None:
    answer = ProduceAnswer(version, topic, partition)
    for correlation_id, base_offset, log_append_time_ms, log_start_offset in VALUES:
        body = ProduceResponse(
            responses=[
                TopicProduceResponse(
                    topic,
                    [
                        PartitionProduceResponse(
                            partition, 0, base_offset, log_append_time_ms, log_start_offset
                        )
                    ],
                )
            ]
        )
        assert answer.encode(
            correlation_id, base_offset, log_append_time_ms, log_start_offset
        ) == encode_response(version, correlation_id, body)


def test_answers_are_cached_per_version_topic_and_partition() -> None:
    assert produce_answer(9, "t", 0) is produce_answer(9, "t", 0)
    assert produce_answer(9, "t", 0) is not produce_answer(8, "t", 0)
    assert produce_answer(9, "t", 0) is not produce_answer(9, "t", 1)

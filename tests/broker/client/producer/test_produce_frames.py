"""broker/client/producer/produce_frames.py: the acks=0 Produce requests framed from each partition's
template are byte for byte what the codec encodes for the same requests, at every Produce version, for
records whose length takes one or several bytes; correlation ids in order, masked to 31 bits."""

from __future__ import annotations

import itertools

import pytest

from broker.client.producer.produce_frames import ProduceFrames
from broker.client.producer.producer_batch import ProducerBatch
from broker.protocol.apis import APIS_BY_KEY
from broker.protocol.codec import encode_request
from broker.protocol.messages.produce import PartitionProduceData, ProduceRequest, TopicProduceData
from broker.record.compression import CompressionType

PRODUCE = APIS_BY_KEY[0]


def _batch(topic: str, partition: int, values: list[bytes]) -> ProducerBatch:
    batch = ProducerBatch(topic, partition, CompressionType.NONE, 0.0)
    for i, value in enumerate(values):
        assert batch.append(1_700_000_000_000 + i, None, value, b"\x00", 1 << 20) == i
    batch.mark_drained()
    return batch


def _expected(version: int, client_id: str, correlation_id: int, batch: ProducerBatch) -> bytes:
    assert batch.encoded is not None
    body = ProduceRequest(
        None,
        0,
        30_000,
        (TopicProduceData(batch.topic, (PartitionProduceData(batch.partition, batch.encoded),)),),
    )
    return encode_request(version, correlation_id, client_id, body)


@pytest.mark.parametrize("version", list(PRODUCE.versions))
def test_frames_are_the_codec_encoding_at_every_version(version: int) -> None:
    # records of 1 to 50 values: the records' length takes one uvarint byte (under 127) or two or three
    batches = [
        _batch("events", 0, [b"a"]),
        _batch("events", 0, [b"b" * 90]),
        _batch("other-topic", 7, [b"c" * 200] * 50),
        _batch("events", 3, [b""]),
    ]
    frames = ProduceFrames(0, 30_000).frames(version, "paper-producer", itertools.count(41), batches)
    assert frames == [_expected(version, "paper-producer", 41 + i, batch) for i, batch in enumerate(batches)]
    # each batch's bytes were built by its first attempt
    assert [batch.attempts for batch in batches] == [1, 1, 1, 1]
    assert len(frames[2]) > 50 * 200


def test_correlation_ids_are_masked_to_31_bits() -> None:
    batch = _batch("events", 0, [b"v"])
    (frame,) = ProduceFrames(0, 30_000).frames(9, "c", itertools.count(2**31 + 5), [batch])
    assert frame == _expected(9, "c", 5, batch)
    assert frame[8:12] == b"\x00\x00\x00\x05"


def test_a_template_per_version_client_and_partition() -> None:
    frames = ProduceFrames(0, 1_000)
    first = frames.template(9, "a", "events", 0)
    assert frames.template(9, "a", "events", 0) is first
    assert frames.template(9, "a", "events", 1) is not first
    assert frames.template(8, "a", "events", 0) is not first
    assert frames.template(9, "b", "events", 0) is not first
    head, middle, tail, flexible, fixed = first
    assert head == b"\x00\x00\x00\x09"  # Produce (api key 0), v9
    assert flexible is True
    assert tail == b"\x00\x00\x00"  # the partition's, the topic's and the body's empty tagged fields
    assert fixed == 8 + len(middle) + len(tail)

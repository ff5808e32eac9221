"""Whole requests and responses: dispatch, headers, the ApiVersions fallback and Fetch responses as chunks."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import cast

import pytest

from broker.protocol import (
    ApiKey,
    EncodeError,
    ErrorCode,
    MalformedMessageError,
    RequestHeader,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_response,
    codec,
    compile_all,
    compiler,
    decode_request,
    decode_response,
    encode_api_versions_fallback,
    encode_fetch_response,
    encode_request,
    encode_response,
    supported_api_versions,
)
from broker.protocol.codec import decode_request_reference
from broker.protocol.messages.api_versions import ApiVersion, ApiVersionsRequest, ApiVersionsResponse
from broker.protocol.messages.fetch import FetchableTopicResponse, FetchResponse, PartitionData
from broker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from broker.protocol.messages.produce import (
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
)
from broker.server.error_codes import error_code_of
from tests.broker.protocol.strategies import normalize

RECORDS = bytes(range(256)) * 4


def produce_request() -> ProduceRequest:
    partition = PartitionProduceData(index=3, records=RECORDS)
    return ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[TopicProduceData("t", [partition])]
    )


@dataclass(frozen=True)
class FakeRegion:
    """A stand-in for a file region in encoder tests: just the bytes it stands for."""

    data: bytes

    @property
    def size_bytes(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("version", [0, 3, 7, 8, 9])
def test_produce_request_frame(version):
    frame = encode_request(version, 42, "producer-1", produce_request())
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    request = decode_request(frame[4:])
    assert request.header == RequestHeader(0, version, 42, "producer-1")
    assert isinstance(request.body, ProduceRequest)
    records = request.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    assert records.obj is not None
    assert bytes(records) == RECORDS
    assert normalize(request) == normalize(decode_request_reference(frame[4:]))


def test_decoded_records_are_views_of_the_frame():
    frame = bytearray(encode_request(7, 1, "c", produce_request())[4:])
    body = decode_request(frame).body
    assert isinstance(body, ProduceRequest)
    records = body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview)
    frame[-1] ^= 0xFF
    assert records[-1] == RECORDS[-1] ^ 0xFF


def test_unknown_api_key():
    frame = struct.pack(">hhih", ApiKey.WRITE_TXN_MARKERS, 5, 77, -1)
    with pytest.raises(
        UnknownApiKeyError, match=r"correlation id 77: api key 27 \(WriteTxnMarkers\) v5"
    ) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.correlation_id) == (27, 77)
    with pytest.raises(UnknownApiKeyError, match=r"api key 999 \(unknown\)"):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


@pytest.mark.parametrize(("key", "version"), [(ApiKey.FETCH, 3), (ApiKey.FETCH, 13), (ApiKey.PRODUCE, 10)])
def test_unsupported_version(key, version):
    frame = struct.pack(">hhih", key, version, 9, -1) + b"\x00" * 20
    with pytest.raises(
        UnsupportedVersionError, match=rf"correlation id 9: {key.title} v{version} is not supported"
    ):
        decode_request(frame)


def test_api_versions_request_newer_than_ours():
    # An ApiVersions v7 request, flexible: header v2 with tags, then a body Lumber cannot know.
    frame = struct.pack(">hhih", 18, 7, 1234, 3) + b"cli" + b"\x00" + b"\x05\xff\xff"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (18, 7, 1234)
    assert (info.value.min_version, info.value.max_version) == (0, 4)
    assert error_code_of(info.value) == ErrorCode.UNSUPPORTED_VERSION


def test_api_versions_fallback_bytes():
    body = struct.pack(">hi", 35, 36)
    for key, low, high in [
        (0, 0, 9),
        (1, 4, 12),
        (2, 1, 7),
        (3, 0, 12),
        (8, 2, 9),
        (9, 1, 9),
        (10, 0, 2),
        (11, 0, 9),
        (12, 0, 4),
        (13, 0, 5),
        (14, 0, 5),
        (15, 0, 5),
        (16, 0, 5),
        (17, 0, 1),
        (18, 0, 4),
        (19, 2, 7),
        (20, 1, 6),
        (21, 0, 2),
        (22, 0, 4),
        (23, 2, 4),
        (29, 0, 2),
        (30, 0, 2),
        (31, 0, 2),
        (32, 1, 4),
        (33, 0, 2),
        (35, 1, 4),
        (36, 0, 2),
        (37, 0, 3),
        (42, 0, 2),
        (43, 0, 2),
        (44, 0, 1),
        (45, 0, 0),
        (46, 0, 0),
        (47, 0, 0),
        (60, 0, 2),
        (61, 0, 0),
    ]:
        body += struct.pack(">hhh", key, low, high)
    payload = struct.pack(">i", 1234) + body  # response header v0, then the v0 body (no throttle time)
    assert encode_api_versions_fallback(1234) == struct.pack(">i", len(payload)) + payload


def test_api_versions_response_lists_every_api():
    response = api_versions_response(3)
    assert response.error_code == 0
    assert response.api_keys == supported_api_versions()
    assert [v.api_key for v in response.api_keys] == [
        0,
        1,
        2,
        3,
        8,
        9,
        10,
        11,
        12,
        13,
        14,
        15,
        16,
        17,
        18,
        19,
        20,
        21,
        22,
        23,
        29,
        30,
        31,
        32,
        33,
        35,
        36,
        37,
        42,
        43,
        44,
        45,
        46,
        47,
        60,
        61,
    ]
    with pytest.raises(EncodeError, match=r"ApiVersions v5 is outside v0-v4"):
        api_versions_response(5)


def test_api_versions_response_header_is_always_v0():
    frame = encode_response(3, 5, ApiVersionsResponse(api_keys=[ApiVersion(0, 0, 9)]))
    # size, correlation id, then the body at once: error code, compact array of one, entry, its tags,
    # throttle time, tags. No tagged-fields byte after the correlation id.
    assert (
        frame[4:]
        == struct.pack(">ih", 5, 0) + b"\x02" + struct.pack(">hhh", 0, 0, 9) + b"\x00" + b"\x00" * 4 + b"\x00"
    )


@pytest.mark.parametrize(("version", "header"), [(8, b"\x00\x00\x00\x06"), (9, b"\x00\x00\x00\x06\x00")])
def test_response_header_version_follows_flexibility(version, header):
    body = b"".join(
        compiler.encode(MetadataResponse(), MetadataResponse, version, flexible=version >= 9, context="x")
    )
    frame = encode_response(version, 6, MetadataResponse())
    assert frame[4:] == header + body
    response = decode_response(ApiKey.METADATA, version, frame[4:])
    assert response.header.correlation_id == 6
    assert normalize(response.body) == normalize(MetadataResponse())


def test_decode_response_reads_the_fallback_in_v0():
    response = decode_response(ApiKey.API_VERSIONS, 4, encode_api_versions_fallback(8)[4:])
    assert response.header.correlation_id == 8
    assert isinstance(response.body, ApiVersionsResponse)
    assert response.body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert response.body.api_keys == supported_api_versions()


def test_request_round_trip_client_side():
    frame = encode_request(4, 3, None, ApiVersionsRequest("lumber", "0.1"))
    request = decode_request(frame[4:])
    assert request.header == RequestHeader(18, 4, 3, None)
    assert request.body == ApiVersionsRequest("lumber", "0.1")


def test_librdkafka_all_topics_metadata_request_with_stray_bytes():
    # Captured from librdkafka 2.16.0 (AdminClient.list_topics): Metadata v12, header v2, then the body:
    # topics null (0x00) followed by the three unused bytes of its 4-byte count placeholder, then the
    # rest. Kafka reads it as below and ignores what follows; so does Lumber.
    frame = bytes.fromhex("0003000c00000004000772646b61666b610000000000010000")
    request = decode_request(frame)
    assert request.header == RequestHeader(3, 12, 4, "rdkafka")
    assert request.body == MetadataRequest(topics=None, allow_auto_topic_creation=False)


def test_response_with_trailing_bytes_is_malformed():
    frame = encode_response(7, 1, ProduceResponse())
    with pytest.raises(
        MalformedMessageError, match=r"Produce v7 response: 2 bytes follow the end of the message"
    ):
        decode_response(ApiKey.PRODUCE, 7, frame[4:] + b"\x00\x00")


def test_encode_errors_name_the_field():
    partition = PartitionProduceResponse(index=0, base_offset=2**63)
    response = ProduceResponse(responses=[TopicProduceResponse("t", [partition])])
    with pytest.raises(
        EncodeError,
        match=r"Produce v7 response: responses\[0\].partition_responses\[0\].base_offset: "
        r"9223372036854775808 does not fit int64",
    ):
        encode_response(7, 1, response)
    with pytest.raises(EncodeError, match=r"Produce v7 response: responses\[0\].name: null is not allowed"):
        encode_response(7, 1, ProduceResponse(responses=[TopicProduceResponse(None, [])]))  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match=r"ProduceRequest is not the response of an API Lumber implements"):
        encode_response(7, 1, produce_request())  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match=r"Produce v10 is outside Lumber's range v0 to v9"):
        encode_response(10, 1, ProduceResponse())


def fetch_response(*records: object) -> FetchResponse:
    partitions = [
        PartitionData(partition_index=i, high_watermark=100 + i, last_stable_offset=100 + i, records=r)  # type: ignore[arg-type]
        for i, r in enumerate(records)
    ]
    return FetchResponse(responses=[FetchableTopicResponse("events", partitions)])


@pytest.mark.parametrize("version", [4, 7, 11, 12])
def test_fetch_response_chunks_leave_regions_to_the_caller(version):
    first, second = FakeRegion(b"A" * 1000), FakeRegion(b"B" * 70000)
    chunks = encode_fetch_response(
        version, 55, fetch_response(first, None, b"inline", second, FakeRegion(b""))
    )
    kinds = [type(chunk).__name__ for chunk in chunks]
    assert kinds == ["bytes", "FakeRegion", "bytes", "FakeRegion", "bytes"]
    assert chunks[1] is first
    assert chunks[3] is second
    wire = b"".join(chunk if isinstance(chunk, bytes) else cast(FakeRegion, chunk).data for chunk in chunks)
    in_memory = encode_response(version, 55, fetch_response(first.data, None, b"inline", second.data, b""))
    assert wire == in_memory
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    decoded = decode_response(ApiKey.FETCH, version, wire[4:]).body
    assert isinstance(decoded, FetchResponse)
    partitions = decoded.responses[0].partitions
    assert [None if p.records is None else bytes(cast(memoryview, p.records)) for p in partitions] == [
        first.data,
        None,
        b"inline",
        second.data,
        b"",
    ]


def test_fetch_response_ending_in_a_region_has_no_empty_chunk():
    chunks = encode_fetch_response(4, 1, fetch_response(FakeRegion(b"xyz")))
    assert [type(chunk).__name__ for chunk in chunks] == ["bytes", "FakeRegion"]


def test_regions_are_refused_where_bytes_are_needed():
    with pytest.raises(
        EncodeError,
        match=r"^Fetch v11 response: records hold a FakeRegion region, which only encode_fetch_response "
        r"can send$",
    ):
        encode_response(11, 1, fetch_response(FakeRegion(b"x")))
    with pytest.raises(
        EncodeError, match=r"responses\[0\].partitions\[0\].records: object is neither bytes nor a region"
    ):
        encode_fetch_response(11, 1, fetch_response(object()))


def test_compile_all_compiles_every_version():
    compile_all()
    for version in range(10):
        assert (
            decode_request(encode_request(version, 1, "c", produce_request())[4:]).header.api_version
            == version
        )


@pytest.mark.parametrize("version", range(10))
@pytest.mark.parametrize("records_bytes", [0, 1, 126, 127, 128, 16_383, 16_384, 70_000])
def test_a_single_partition_produce_encodes_byte_for_byte_like_any_request(
    version: int, records_bytes: int
) -> None:
    """The template fast path of one-partition Produce requests against the generic encoder, across
    versions (int32 and varint record lengths, their boundaries), client ids and transactional ids."""
    records = bytes(range(256)) * (records_bytes // 256) + bytes(records_bytes % 256)
    for client_id, transactional_id in (("producer-1", None), (None, "tx-7"), ("", None)):
        body = ProduceRequest(
            transactional_id=transactional_id if version >= 3 else None,
            acks=-1,
            timeout_ms=30_000,
            topic_data=[TopicProduceData("events", [PartitionProduceData(index=11, records=records)])],
        )
        for correlation_id in (0, 1, 2**31 - 1):
            fast = encode_request(version, correlation_id, client_id, body)
            assert fast == codec._encode_request(version, correlation_id, client_id, body)
            decoded = decode_request_reference(fast[4:])
            assert decoded.header.correlation_id == correlation_id
            body_back = decoded.body
            assert isinstance(body_back, ProduceRequest)
            records_back = body_back.topic_data[0].partition_data[0].records
            assert isinstance(records_back, bytes | memoryview)
            assert bytes(records_back) == records


@pytest.mark.parametrize("version", [3, 8, 9])
def test_a_produce_template_recognises_only_the_same_request_with_other_records(version: int) -> None:
    def body(records: bytes | None, partition: int = 11, acks: int = 0) -> ProduceRequest:
        return ProduceRequest(
            acks=acks,
            timeout_ms=30_000,
            topic_data=[TopicProduceData("events", [PartitionProduceData(index=partition, records=records)])],
        )

    template = codec.produce_template(version, "producer-1", body(b""))
    for size in (0, 1, 127, 128, 5000, 20_000):  # lengths of one, two and three bytes at v9
        records = bytes(range(256)) * (size // 256) + bytes(size % 256)
        for correlation_id in (0, 77, 2**31 - 1):
            frame = encode_request(version, correlation_id, "producer-1", body(records))[4:]
            found = template.records_of(frame)
            assert found is not None
            assert bytes(found) == records
            # cut short or longer by a byte: not this request any more
            assert template.records_of(frame[:-1]) is None
            assert template.records_of(frame + b"\x00") is None
    others = [
        encode_request(version, 1, "producer-1", body(b"x", partition=12)),
        encode_request(version, 1, "producer-1", body(b"x", acks=1)),
        encode_request(version, 1, "producer-2", body(b"x")),
        encode_request(version, 1, "producer-1", body(None)),
        encode_request(version - 1, 1, "producer-1", body(b"x")),
    ]
    assert [template.records_of(frame[4:]) for frame in others] == [None] * len(others)
    assert template.records_of(b"") is None
    assert template.records_of(encode_request(version, 1, "producer-1", body(b""))[4:30]) is None
    # any partition of the topic: its index and records; the same others but the partition: not it
    for partition in (0, 11, 12, 2**31 - 1, -1):
        frame = encode_request(version, 5, "producer-1", body(b"abc", partition=partition))[4:]
        found_any = template.partition_records_of(frame)
        assert found_any is not None
        assert (found_any[0], bytes(found_any[1])) == (partition, b"abc")
        assert template.partition_records_of(frame[:-1]) is None
        assert template.same_but_partition(
            codec.produce_template(version, "producer-1", body(b"", partition))
        )
    assert [template.partition_records_of(frame[4:]) for frame in others[1:]] == [None] * (len(others) - 1)
    assert [
        template.same_but_partition(codec.produce_template(version, client, body(b"", acks=acks)))
        for client, acks in (("producer-1", 1), ("producer-2", 0))
    ] == [False, False]
    assert template.partition_records_of(b"") is None
    assert template.partition_records_of(frame[: 8 + len(template.middle) - 2]) is None  # the index cut


@pytest.mark.parametrize("version", range(3, 10))
def test_produce_acks_reads_acks_without_decoding_every_header_and_transactional_id(version: int) -> None:
    records = bytes(range(200))
    for client_id in (None, "", "rdkafka", "c" * 300):
        for transactional_id in (None, "", "tx", "t" * 200, "é" * 70):
            for acks in (0, 1, -1, 7):
                body = ProduceRequest(
                    transactional_id=transactional_id,
                    acks=acks,
                    timeout_ms=30_000,
                    topic_data=[TopicProduceData("events", [PartitionProduceData(index=3, records=records)])],
                )
                frame = encode_request(version, 99, client_id, body)[4:]
                assert codec.produce_acks(frame) == acks
                assert codec.produce_acks(memoryview(frame)) == acks
                # cut anywhere: acks read whole or not at all, never a wrong value, never an exception
                cuts = {codec.produce_acks(frame[:cut]) for cut in range(0, len(frame) - len(records), 3)}
                assert cuts == {None, acks}


def test_the_produce_fast_paths_read_lengths_with_the_codecs_uvarint_reader() -> None:
    """``produce_acks`` and ``ProduceTemplate.records_of`` read a compact length as the codec does
    (``primitives.read_uvarint``: at most 5 bytes, at most 2**32 - 1): a longer one is no such request."""
    body = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=30_000,
        topic_data=[TopicProduceData("events", [PartitionProduceData(index=3, records=b"x" * 200)])],
    )
    frame = encode_request(9, 5, "c", body)[4:]
    at = 10 + 1 + 1  # after the header (client id "c") and its tagged fields: the transactional id
    assert frame[at] == 0  # null
    too_long = frame[:at] + b"\x80" * 5 + b"\x00" + frame[at + 1 :]
    assert codec.produce_acks(frame) == 1
    assert codec.produce_acks(too_long) is None
    template = codec.produce_template(9, "c", body)
    found = template.records_of(frame)
    assert found is not None
    assert bytes(found) == b"x" * 200
    records_at = len(frame) - 200 - 3 - 2  # the records' length (2 bytes: 201), the tagged fields after
    assert frame[records_at : records_at + 2] == bytes((0xC9, 0x01))
    padded = frame[:records_at] + bytes((0xC9, 0x81, 0x80, 0x80, 0x80, 0x00)) + frame[records_at + 2 :]
    assert template.records_of(padded) is None  # six bytes: longer than a uvarint may be


def test_produce_acks_of_anything_else_is_none() -> None:
    body = ProduceRequest(acks=0, topic_data=[TopicProduceData("t", [PartitionProduceData(0, b"x")])])
    old = encode_request(2, 1, "old", body)[4:]  # message sets: no transactional id
    metadata = encode_request(9, 1, "c", MetadataRequest(topics=None))[4:]
    flexible = bytearray(encode_request(9, 1, "c", body)[4:])
    flexible[10 + 1] = 1  # one header tagged field: left to the decoder
    past = bytearray(encode_request(9, 1, "c", body)[4:])
    past[2:4] = (10).to_bytes(2, "big")
    assert [codec.produce_acks(f) for f in (old, metadata, bytes(flexible), bytes(past), b"")] == [None] * 5

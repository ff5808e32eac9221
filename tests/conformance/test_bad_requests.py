"""Requests no standard client sends, written on a raw socket: what Kafka and Lumber answer, and whether the
connection stays open.

Frames are Kafka's: a 4-byte size, then request header v1 (``api_key`` int16, ``api_version`` int16,
``correlation_id`` int32, ``client_id`` as an int16-length string) and the body. Each scenario sends one
frame and then reads until a whole response arrives or the broker closes the connection (2 s at most),
then sends a valid ApiVersions v0 on the same connection to see whether it still serves.

* ``unknown_api_key``: api key 1000.
* ``unsupported_api_versions_version``: ApiVersions v127 in a flexible (v2) header, as a client newer than
  the broker sends it: Kafka answers with a v0 response, UNSUPPORTED_VERSION (35), so the client can fall
  back.
* ``unsupported_metadata_version``: Metadata v127.
* ``truncated_header``: a frame that holds only the api key and version.
* ``unknown_partition``: a 1-partition topic; kafka-python's Produce v9 (acks=1) of one record and Fetch v12
  naming partition 5, on one connection, then acks=0's Produce on a second: each answer's error code, and
  whether the connection still serves afterwards (Kafka closes an acks=0 producer's connection when its
  produce fails, the only way it has to tell it).
"""

from __future__ import annotations

import socket
import struct
import warnings
from typing import Any

import pytest

from tests.conformance.clients import create_topic
from tests.conformance.conformance import Transcript, conform
from tests.conformance.raw_requests import fetch_frame, produce_frame, read_response
from tests.conformance.target import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer import FetchResponse
    from kafka.protocol.producer import ProduceResponse

API_VERSIONS = 18
METADATA = 3


def _frame(
    api_key: int, api_version: int, correlation_id: int, body: bytes = b"", flexible: bool = False
) -> bytes:
    """A request frame; ``flexible``: header v2 (its empty tagged fields), as clients send ApiVersions v3+."""
    client = b"conformance"
    payload = struct.pack(">hhih", api_key, api_version, correlation_id, len(client)) + client
    payload += (b"\x00" if flexible else b"") + body
    return struct.pack(">i", len(payload)) + payload


def _api_versions_answer(response: bytes) -> dict[str, Any]:
    """An ApiVersions v0 response: correlation id, error code, and whether ApiVersions itself is listed."""
    correlation_id, error_code, count = struct.unpack_from(">ihi", response, 4)
    keys = {struct.unpack_from(">h", response, 14 + 6 * i)[0] for i in range(max(count, 0))}
    return {
        "correlation_id": correlation_id,
        "error_code": error_code,
        "lists_api_versions": API_VERSIONS in keys,
    }


def _exchange(target: Target, frame: bytes) -> Transcript:
    host, port = target.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(frame)
        response, closed = read_response(sock)
        answer: Any = None
        if response is not None:
            (correlation_id,) = struct.unpack_from(">i", response, 4)
            answer = {
                "size": "whole" if len(response) > 8 else len(response),
                "correlation_id": correlation_id,
            }
        still_serves: Any = False
        if not closed:
            try:
                sock.sendall(_frame(API_VERSIONS, 0, 99))
                follow, _ = read_response(sock)
                still_serves = _api_versions_answer(follow) if follow else False
            except OSError:
                still_serves = False
    return {"answer": answer, "closed": closed, "still_serves": still_serves}


def unknown_api_key(target: Target, topic: str) -> Transcript:
    return _exchange(target, _frame(1000, 0, 7))


def unsupported_api_versions_version(target: Target, topic: str) -> Transcript:
    host, port = target.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        # as librdkafka and the Java client send it: header v2, the body's client software name and version
        sock.sendall(_frame(API_VERSIONS, 127, 7, b"\x05lumb\x021\x00", flexible=True))
        response, closed = read_response(sock)
    return {"answer": _api_versions_answer(response) if response else None, "closed": closed}


def unsupported_metadata_version(target: Target, topic: str) -> Transcript:
    return _exchange(target, _frame(METADATA, 127, 7, struct.pack(">i", -1)))


def truncated_header(target: Target, topic: str) -> Transcript:
    return _exchange(target, struct.pack(">ihh", 4, API_VERSIONS, 0))


def _still_serves(sock: socket.socket) -> Any:
    try:
        sock.sendall(_frame(API_VERSIONS, 0, 99))
        follow, _ = read_response(sock)
    except OSError:
        return False
    return _api_versions_answer(follow) if follow else False


def unknown_partition(target: Target, topic: str) -> Transcript:
    created = create_topic(target, topic, partitions=1)
    host, port = target.bootstrap.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(produce_frame(topic, 5, 1, 11))
        response, produce_closed = read_response(sock, 10.0)
        produced: Any = None
        if response is not None:
            decoded = ProduceResponse.decode(response, version=9, header=True, framed=True)
            produced = [
                [t.name == topic, p.index, p.error_code, p.base_offset]
                for t in decoded.responses
                for p in t.partition_responses
            ]
        sock.sendall(fetch_frame(topic, 5, 12))
        response, fetch_closed = read_response(sock, 10.0)
        fetched: Any = None
        if response is not None:
            answer = FetchResponse.decode(response, version=12, header=True, framed=True)
            fetched = {
                "error_code": answer.error_code,
                "partitions": [
                    [t.topic == topic, p.partition_index, p.error_code, p.high_watermark]
                    for t in answer.responses
                    for p in t.partitions
                ],
            }
        serves = False if fetch_closed else _still_serves(sock)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(produce_frame(topic, 5, 0, 13))
        unacked, unacked_closed = read_response(sock)
        unacked_serves = False if unacked_closed else _still_serves(sock)
    return {
        "created": created,
        "produce": produced,
        "produce_closed": produce_closed,
        "fetch": fetched,
        "fetch_closed": fetch_closed,
        "still_serves": serves,
        "acks_0_answer": unacked,
        "acks_0_closed": unacked_closed,
        "acks_0_still_serves": unacked_serves,
    }


def test_unknown_partition(targets: tuple[Target, Target]) -> None:
    transcript = conform(unknown_partition, targets)
    assert transcript["produce"] == [[True, 5, 3, -1]]  # UNKNOWN_TOPIC_OR_PARTITION
    assert transcript["fetch"]["partitions"] == [[True, 5, 3, -1]]
    assert transcript["acks_0_closed"] is True


@pytest.mark.parametrize(
    "scenario",
    [unknown_api_key, unsupported_api_versions_version, unsupported_metadata_version, truncated_header],
    ids=lambda s: s.__name__,
)
def test_bad_request(targets: tuple[Target, Target], scenario: Any) -> None:
    conform(scenario, targets)

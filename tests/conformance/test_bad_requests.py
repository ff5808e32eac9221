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
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest

from tests.conformance.conformance import Transcript, conform
from tests.conformance.target import Target

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


def _read_response(sock: socket.socket, timeout_s: float = 2.0) -> tuple[bytes | None, bool]:
    """One response's bytes (None if none came), and whether the broker closed the connection."""
    sock.settimeout(timeout_s)
    data = b""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                return (data or None), True
            data += chunk
            if len(data) >= 4 and len(data) >= 4 + struct.unpack_from(">i", data)[0]:
                return data, False
    except TimeoutError:
        return (data or None), False
    except ConnectionResetError:
        return (data or None), True
    return (data or None), False


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
        response, closed = _read_response(sock)
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
                follow, _ = _read_response(sock)
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
        response, closed = _read_response(sock)
    return {"answer": _api_versions_answer(response) if response else None, "closed": closed}


def unsupported_metadata_version(target: Target, topic: str) -> Transcript:
    return _exchange(target, _frame(METADATA, 127, 7, struct.pack(">i", -1)))


def truncated_header(target: Target, topic: str) -> Transcript:
    return _exchange(target, struct.pack(">ihh", 4, API_VERSIONS, 0))


@pytest.mark.parametrize(
    "scenario",
    [unknown_api_key, unsupported_api_versions_version, unsupported_metadata_version, truncated_header],
    ids=lambda s: s.__name__,
)
def test_bad_request(targets: tuple[Target, Target], scenario: Any) -> None:
    conform(scenario, targets)

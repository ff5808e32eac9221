"""The request header that precedes every request body.

=======  =========================================================================================
version  layout
=======  =========================================================================================
v0       request_api_key int16, request_api_version int16, correlation_id int32
v1       v0, then client_id nullable_string (int16 length, -1 null)
v2       v1, then a tagged-fields section (client_id stays a non-compact string, for compatibility)
=======  =========================================================================================

Which version a request uses follows from its API and version (:meth:`ApiSpec.request_header_version`):
v2 for flexible versions, v1 otherwise. The first 8 bytes are the same in every version, which is what
lets a server name the API and answer the correlation id of a request it cannot otherwise parse.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.protocol import primitives
from broker.protocol.errors import EncodeError, MalformedMessageError

_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_CONTEXT = "request header"


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None


def peek_request_header(buf: memoryview) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the first 8 bytes, common to all header versions."""
    if len(buf) < _KEY_VERSION_CORRELATION.size:
        raise MalformedMessageError(
            f"needs at least {_KEY_VERSION_CORRELATION.size} bytes, the frame has {len(buf)}",
            position=0,
            context=_CONTEXT,
        )
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(buf, 0)
    return api_key, api_version, correlation_id


def decode_request_header(buf: memoryview, header_version: int) -> tuple[RequestHeader, int]:
    """Decode the header at the start of ``buf``; returns it and the position of the body."""
    api_key, api_version, correlation_id = peek_request_header(buf)
    pos = _KEY_VERSION_CORRELATION.size
    client_id = None
    if header_version >= 1:
        try:
            client_id, pos = primitives.NULLABLE_STRING.decode(buf, pos)
        except MalformedMessageError as exc:
            raise exc.located(_CONTEXT, "client_id") from None
    if header_version >= 2:
        try:
            _, pos = primitives.TAGGED_FIELDS.decode_spans(buf, pos)
        except MalformedMessageError as exc:
            raise exc.located(_CONTEXT, "<tagged fields>") from None
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def encode_request_header(header: RequestHeader, header_version: int) -> bytes:
    """The bytes of ``header`` in ``header_version`` (0, 1 or 2)."""
    try:
        data = _KEY_VERSION_CORRELATION.pack(header.api_key, header.api_version, header.correlation_id)
    except struct.error as exc:
        raise EncodeError(f"{header!r} does not fit int16/int16/int32: {exc}", context=_CONTEXT) from exc
    if header_version >= 1:
        try:
            data += primitives.NULLABLE_STRING.encode(header.client_id)
        except EncodeError as exc:
            raise exc.located(_CONTEXT, "client_id") from None
    if header_version >= 2:
        data += b"\x00"
    return data

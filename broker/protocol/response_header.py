"""The response header that precedes every response body.

=======  =====================================================
version  layout
=======  =====================================================
v0       correlation_id int32
v1       correlation_id int32, then a tagged-fields section
=======  =====================================================

v1 for flexible versions, v0 otherwise, except ApiVersions, whose response header is always v0
(:meth:`ApiSpec.response_header_version`).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from broker.protocol import primitives
from broker.protocol.errors import EncodeError, MalformedMessageError

_CORRELATION = struct.Struct(">i")
_CONTEXT = "response header"


class ResponseHeader(NamedTuple):
    correlation_id: int


def decode_response_header(buf: memoryview, header_version: int) -> tuple[ResponseHeader, int]:
    """Decode the header at the start of ``buf``; returns it and the position of the body."""
    try:
        correlation_id, pos = primitives.INT32.decode(buf, 0)
    except MalformedMessageError as exc:
        raise exc.located(_CONTEXT, "correlation_id") from None
    if header_version >= 1:
        try:
            _, pos = primitives.TAGGED_FIELDS.decode_spans(buf, pos)
        except MalformedMessageError as exc:
            raise exc.located(_CONTEXT, "<tagged fields>") from None
    return ResponseHeader(correlation_id), pos


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """The bytes of a response header in ``header_version`` (0 or 1)."""
    try:
        data = _CORRELATION.pack(correlation_id)
    except struct.error as exc:
        raise EncodeError(f"correlation id {correlation_id!r} does not fit int32", context=_CONTEXT) from exc
    return data + b"\x00" if header_version >= 1 else data

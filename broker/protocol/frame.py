"""Framing: every request and response on the wire is an int32 size N (big-endian) followed by N bytes.

The N bytes are a header and a body (:mod:`broker.protocol.request_header`,
:mod:`broker.protocol.response_header`). Decoders in this package take the N bytes (the *frame*, size prefix
removed) and byte positions in their errors count from the frame's first byte; encoders return the size
prefix and the frame together, ready to send.
"""

from __future__ import annotations

import struct

from broker.protocol.errors import FrameSizeError

SIZE_PREFIX = struct.Struct(">i")
#: The number of bytes of the size prefix.
SIZE_PREFIX_BYTES = SIZE_PREFIX.size


def frame_size(prefix: bytes | bytearray | memoryview, max_bytes: int) -> int:
    """The frame size announced by a 4-byte ``prefix``; a negative size or one above ``max_bytes`` raises
    :class:`FrameSizeError` (check this before buffering anything)."""
    (size,) = SIZE_PREFIX.unpack_from(prefix, 0)
    if size < 0 or size > max_bytes:
        raise FrameSizeError(size, max_bytes)
    return int(size)


def framed(payload: bytes) -> bytes:
    """``payload`` with its size prefix."""
    return SIZE_PREFIX.pack(len(payload)) + payload

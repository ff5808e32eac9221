"""Zigzag varints: Kafka's ``varint`` and ``varlong`` in record bodies (protobuf's sint32/sint64).

A value ``v`` is zigzag-mapped to ``(v << 1) ^ (v >> 63)`` (0, -1, 1, -2 ... become 0, 1, 2, 3 ...) and
written little-endian base 128, 7 bits a byte, the high bit set on every byte but the last: 1 to 10 bytes
for the int64 range. ``-1`` (a null key, value or header value) is the single byte ``0x01``.

The values a record's small fields usually take (deltas, lengths up to 16 KiB) are encoded once, into
:data:`VARINTS`; the builder and the encoder index it directly in their loops (see
:func:`encode_varint`).
"""

from __future__ import annotations

__all__ = [
    "VARINTS",
    "VARINT_CACHE_HIGH",
    "VARINT_CACHE_LOW",
    "Buffer",
    "decode_varint",
    "encode_varint",
    "encode_varint_uncached",
    "size_of_varint",
]

#: Anything a record body can be read from.
Buffer = bytes | bytearray | memoryview


def encode_varint_uncached(value: int) -> bytes:
    """``value`` as a zigzag varint, computed (see :func:`encode_varint`)."""
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while zigzag > 0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


#: :data:`VARINTS` holds the varints of ``VARINT_CACHE_LOW .. VARINT_CACHE_HIGH - 1``, the one of ``v`` at
#: ``VARINTS[v - VARINT_CACHE_LOW]``.
VARINT_CACHE_LOW = -(1 << 10)
VARINT_CACHE_HIGH = 1 << 14
VARINTS: tuple[bytes, ...] = tuple(
    encode_varint_uncached(v) for v in range(VARINT_CACHE_LOW, VARINT_CACHE_HIGH)
)


def encode_varint(value: int) -> bytes:
    """``value`` as a zigzag varint (Kafka's varint and varlong; any value in the int64 range)."""
    if VARINT_CACHE_LOW <= value < VARINT_CACHE_HIGH:
        return VARINTS[value - VARINT_CACHE_LOW]
    return encode_varint_uncached(value)


def size_of_varint(value: int) -> int:
    """How many bytes :func:`encode_varint` writes for ``value``."""
    zigzag = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while zigzag > 0x7F:
        size += 1
        zigzag >>= 7
    return size


def decode_varint(buffer: Buffer, position: int) -> tuple[int, int]:
    """The zigzag varint at ``position``: ``(value, position after it)``.

    Raises :class:`IndexError` when the buffer ends inside the varint and :class:`ValueError` when it is
    longer than 10 bytes; callers turn both into :class:`~broker.record.errors.CorruptRecordError` with
    their context.
    """
    result = 0
    shift = 0
    while True:
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), position
        shift += 7
        if shift > 63:
            raise ValueError(f"varint longer than 10 bytes ending at byte {position}")

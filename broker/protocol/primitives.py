"""The Kafka protocol's primitive types, each a small class over :class:`struct.Struct`.

Byte layouts (all integers big-endian, as in Kafka's protocol guide):

=========================  ===============================================================================
type                       encoding
=========================  ===============================================================================
int8/16/32/64, uint16      1/2/4/8 and 2 bytes, two's complement (uint16 unsigned)
float64                    8 bytes, IEEE 754 double
boolean                    1 byte, 0 is false, anything else true (written as 1)
uuid                       16 bytes
unsigned_varint            7 bits per byte, least significant group first, high bit set on all but the
                           last byte; at most 5 bytes and 2**32 - 1
varint / varlong           zigzag ``(n << 1) ^ (n >> 31|63)`` then as unsigned_varint; at most 5 / 10 bytes
string                     int16 length N >= 0, then N bytes of UTF-8
nullable_string            as string; length -1 is null
compact_string             unsigned_varint N + 1, then N bytes of UTF-8 (unsigned_varint 0 is malformed)
compact_nullable_string    as compact_string; unsigned_varint 0 is null
bytes / nullable_bytes     int32 length N (-1 null), then N bytes
compact(_nullable)_bytes   unsigned_varint N + 1 (0 null), then N bytes
records                    nullable bytes (compact in flexible versions) holding record batches; decoded as a
                           zero-copy ``memoryview`` of the frame
array / compact_array      int32 count N (-1 null) / unsigned_varint N + 1 (0 null), then N elements
tagged_fields              unsigned_varint count, then per field: unsigned_varint tag (strictly ascending),
                           unsigned_varint size, size bytes of value
=========================  ===============================================================================

Every ``decode(buf, pos)`` takes a 1-D unsigned-byte ``memoryview`` and returns ``(value, next_pos)``; a
length that runs past the end of ``buf`` is reported before anything is allocated, so a huge length prefix
costs nothing. Failures raise :class:`~broker.protocol.errors.MalformedMessageError` naming the position;
``encode(value)`` raises :class:`~broker.protocol.errors.EncodeError`. These classes are the reference
semantics: :mod:`broker.protocol.compiler` generates inline code that must agree with them byte for byte.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from broker.protocol.errors import EncodeError, MalformedMessageError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)

#: What the codec accepts as encoded bytes.
BytesLike = bytes | bytearray | memoryview

#: The uvarint encodings of 0..127 are single bytes; a table avoids building them.
_SMALL_UVARINTS = tuple(bytes((n,)) for n in range(128))

INT16_MAX = 2**15 - 1
INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1


class PrimitiveType(Protocol[T]):
    """What every primitive type offers."""

    name: str

    def encode(self, value: T) -> bytes: ...

    def decode(self, buf: memoryview, pos: int) -> tuple[T, int]: ...


def byte_view(data: BytesLike) -> memoryview:
    """``data`` as a 1-D unsigned-byte memoryview without copying."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def byte_length(data: BytesLike) -> int:
    """The number of bytes in ``data`` (a memoryview's ``len`` counts items, not bytes)."""
    return data.nbytes if isinstance(data, memoryview) else len(data)


def _need(buf: memoryview, pos: int, size: int, what: str) -> None:
    remaining = len(buf) - pos
    if size > remaining:
        raise MalformedMessageError(f"{what} needs {size} bytes, {max(remaining, 0)} remain", position=pos)


class FixedWidth(Generic[T]):
    """A fixed-size number: int8, int16, uint16, int32, int64 or float64."""

    def __init__(self, name: str, fmt: str) -> None:
        self.name = name
        self.struct = struct.Struct(">" + fmt)
        self.size = self.struct.size
        self.fmt = fmt

    def encode(self, value: T) -> bytes:
        try:
            return self.struct.pack(value)
        except struct.error as exc:
            raise EncodeError(f"{value!r} does not fit {self.name}: {exc}") from exc

    def decode(self, buf: memoryview, pos: int) -> tuple[T, int]:
        _need(buf, pos, self.size, self.name)
        value: T = self.struct.unpack_from(buf, pos)[0]
        return value, pos + self.size

    def __repr__(self) -> str:
        return self.name


INT8: FixedWidth[int] = FixedWidth("int8", "b")
INT16: FixedWidth[int] = FixedWidth("int16", "h")
UINT16: FixedWidth[int] = FixedWidth("uint16", "H")
INT32: FixedWidth[int] = FixedWidth("int32", "i")
INT64: FixedWidth[int] = FixedWidth("int64", "q")
FLOAT64: FixedWidth[float] = FixedWidth("float64", "d")


class Boolean:
    """One byte: 0 is false, any other value true; true is written as 1."""

    name = "boolean"
    size = 1

    def encode(self, value: bool) -> bytes:
        return b"\x01" if value else b"\x00"

    def decode(self, buf: memoryview, pos: int) -> tuple[bool, int]:
        _need(buf, pos, 1, self.name)
        return buf[pos] != 0, pos + 1

    def __repr__(self) -> str:
        return self.name


BOOLEAN = Boolean()


class Uuid:
    """16 bytes, as :class:`uuid.UUID` (Kafka's topic ids; the zero UUID means "none")."""

    name = "uuid"
    size = 16
    ZERO = uuid.UUID(int=0)

    def encode(self, value: uuid.UUID) -> bytes:
        if not isinstance(value, uuid.UUID):
            raise EncodeError(f"{value!r} is not a uuid.UUID")
        return value.bytes

    def decode(self, buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
        _need(buf, pos, 16, self.name)
        return uuid.UUID(bytes=bytes(buf[pos : pos + 16])), pos + 16

    def __repr__(self) -> str:
        return self.name


UUID = Uuid()


def encode_uvarint(value: int) -> bytes:
    """The unsigned varint encoding of ``0 <= value``; callers check the upper bound."""
    if value < 128:
        return _SMALL_UVARINTS[value]
    if value < 16384:  # two bytes: the lengths of most records and requests
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: BytesLike, pos: int, max_bytes: int, max_value: int, name: str) -> tuple[int, int]:
    """Decode an unsigned varint of at most ``max_bytes`` bytes and ``max_value``: the protocol's one
    reader of them (the codecs', and the Produce fast paths' of :mod:`broker.protocol.codec` past the one
    or two bytes they test inline)."""
    start = pos
    end = len(buf)
    result = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedMessageError(f"{name} is cut off after {pos - start} bytes", position=start)
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            raise MalformedMessageError(f"{name} is longer than {max_bytes} bytes", position=start)
    if result > max_value:
        raise MalformedMessageError(f"{name} value {result} exceeds {max_value}", position=start)
    return result, pos


class UnsignedVarInt:
    """An unsigned 32-bit varint (lengths and tags of the flexible versions)."""

    name = "unsigned_varint"

    def encode(self, value: int) -> bytes:
        if not isinstance(value, int) or not 0 <= value <= UINT32_MAX:
            raise EncodeError(f"{value!r} does not fit {self.name} (0 to {UINT32_MAX})")
        return encode_uvarint(value)

    def decode(self, buf: memoryview, pos: int) -> tuple[int, int]:
        return read_uvarint(buf, pos, 5, UINT32_MAX, self.name)

    def __repr__(self) -> str:
        return self.name


UNSIGNED_VARINT = UnsignedVarInt()


class ZigZagVarInt:
    """A signed varint (``bits`` 32) or varlong (``bits`` 64), zigzag-encoded as in protobuf."""

    def __init__(self, name: str, bits: int) -> None:
        self.name = name
        self.bits = bits
        self.min_value = -(2 ** (bits - 1))
        self.max_value = 2 ** (bits - 1) - 1
        self.max_bytes = (bits + 6) // 7

    def encode(self, value: int) -> bytes:
        if not isinstance(value, int) or not self.min_value <= value <= self.max_value:
            raise EncodeError(f"{value!r} does not fit {self.name} ({self.min_value} to {self.max_value})")
        return encode_uvarint((value << 1) ^ (value >> (self.bits - 1)))

    def decode(self, buf: memoryview, pos: int) -> tuple[int, int]:
        raw, end = read_uvarint(buf, pos, self.max_bytes, 2**self.bits - 1, self.name)
        return (raw >> 1) ^ -(raw & 1), end

    def __repr__(self) -> str:
        return self.name


VARINT = ZigZagVarInt("varint", 32)
VARLONG = ZigZagVarInt("varlong", 64)


class LengthPrefix:
    """The length prefix of strings, bytes and arrays: int16/int32, or unsigned_varint N + 1 when compact.

    ``decode`` returns -1 for null; any other negative length, or a null where the type is not nullable,
    is malformed.
    """

    def __init__(self, width: FixedWidth[int] | None, *, nullable: bool, what: str) -> None:
        self.width = width
        self.nullable = nullable
        self.what = what

    def encode(self, length: int) -> bytes:
        if length < 0 and not self.nullable:
            raise EncodeError(f"null is not allowed for non-nullable {self.what}")
        if self.width is None:
            if length + 1 > UINT32_MAX:
                raise EncodeError(f"{self.what} of length {length} exceeds {UINT32_MAX - 1}")
            return encode_uvarint(length + 1)
        return self.width.encode(length)

    def decode(self, buf: memoryview, pos: int) -> tuple[int, int]:
        if self.width is None:
            raw, end = read_uvarint(buf, pos, 5, UINT32_MAX, f"{self.what} length")
            length = raw - 1
        else:
            length, end = self.width.decode(buf, pos)
        if length < 0:
            if length != -1:
                raise MalformedMessageError(f"{self.what} has invalid length {length}", position=pos)
            if not self.nullable:
                raise MalformedMessageError(f"null {self.what} where it is not nullable", position=pos)
        return length, end

    def decode_count(self, buf: memoryview, pos: int, min_element_bytes: int) -> tuple[int, int]:
        """An array's element count (-1 for null), checked against the bytes left at ``min_element_bytes``
        each, so a huge count fails before anything is allocated."""
        count, start = self.decode(buf, pos)
        if count > 0 and count * min_element_bytes > len(buf) - start:
            raise MalformedMessageError(
                f"{self.what} of {count} elements needs at least {count * min_element_bytes} bytes, "
                f"{len(buf) - start} remain",
                position=pos,
            )
        return count, start


def array_length(*, compact: bool, nullable: bool, what: str) -> LengthPrefix:
    """The count prefix of an array: int32, or unsigned_varint N + 1 when compact."""
    return LengthPrefix(None if compact else INT32, nullable=nullable, what=what)


class String:
    """A UTF-8 string with an int16 (or compact) length; ``None`` is null where nullable."""

    def __init__(self, *, compact: bool, nullable: bool) -> None:
        self.compact = compact
        self.nullable = nullable
        self.name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + "string"
        self._length = LengthPrefix(None if compact else INT16, nullable=nullable, what=self.name)

    def encode(self, value: str | None) -> bytes:
        if value is None:
            return self._length.encode(-1)
        if not isinstance(value, str):
            raise EncodeError(f"{value!r} is not a str")
        data = value.encode("utf-8")
        if not self.compact and len(data) > INT16_MAX:
            raise EncodeError(f"{self.name} of {len(data)} bytes exceeds {INT16_MAX}")
        return self._length.encode(len(data)) + data

    def decode(self, buf: memoryview, pos: int) -> tuple[str | None, int]:
        length, start = self._length.decode(buf, pos)
        if length < 0:
            return None, start
        end = start + length
        if end > len(buf):
            raise MalformedMessageError(
                f"length {length} exceeds remaining {len(buf) - start} bytes", position=pos
            )
        try:
            return str(buf[start:end], "utf-8"), end
        except UnicodeDecodeError as exc:
            raise MalformedMessageError(
                f"{self.name} is not valid UTF-8 ({exc.reason})", position=pos
            ) from exc

    def __repr__(self) -> str:
        return self.name


STRING = String(compact=False, nullable=False)
NULLABLE_STRING = String(compact=False, nullable=True)
COMPACT_STRING = String(compact=True, nullable=False)
COMPACT_NULLABLE_STRING = String(compact=True, nullable=True)


class Bytes:
    """Bytes with an int32 (or compact) length; ``None`` is null where nullable.

    With ``zero_copy`` (the ``records`` type) a decoded value is a ``memoryview`` slice of the input.
    """

    def __init__(
        self, *, compact: bool, nullable: bool, zero_copy: bool = False, name: str = "bytes"
    ) -> None:
        self.compact = compact
        self.nullable = nullable
        self.zero_copy = zero_copy
        self.name = ("compact_" if compact else "") + ("nullable_" if nullable else "") + name
        self._length = LengthPrefix(None if compact else INT32, nullable=nullable, what=self.name)

    def encode(self, value: BytesLike | None) -> bytes:
        if value is None:
            return self._length.encode(-1)
        if not isinstance(value, bytes | bytearray | memoryview):
            raise EncodeError(f"{type(value).__name__} is not bytes, bytearray or memoryview")
        size = byte_length(value)
        if not self.compact and size > INT32_MAX:
            raise EncodeError(f"{self.name} of {size} bytes exceeds {INT32_MAX}")
        return self._length.encode(size) + bytes(value)

    def decode(self, buf: memoryview, pos: int) -> tuple[bytes | memoryview | None, int]:
        length, start = self._length.decode(buf, pos)
        if length < 0:
            return None, start
        end = start + length
        if end > len(buf):
            raise MalformedMessageError(
                f"length {length} exceeds remaining {len(buf) - start} bytes", position=pos
            )
        return (buf[start:end] if self.zero_copy else bytes(buf[start:end])), end

    def __repr__(self) -> str:
        return self.name


BYTES = Bytes(compact=False, nullable=False)
NULLABLE_BYTES = Bytes(compact=False, nullable=True)
COMPACT_BYTES = Bytes(compact=True, nullable=False)
COMPACT_NULLABLE_BYTES = Bytes(compact=True, nullable=True)
RECORDS = Bytes(compact=False, nullable=True, zero_copy=True, name="records")
COMPACT_RECORDS = Bytes(compact=True, nullable=True, zero_copy=True, name="records")


class Array(Generic[T]):
    """An array of a primitive element type, with an int32 (or compact) count; ``None`` is null.

    Arrays of structs are built by :mod:`broker.protocol.compiler` and :mod:`broker.protocol.interpreter`
    on top of :func:`array_length`, whose ``decode_count`` rejects a count that cannot fit in the bytes left.
    """

    def __init__(self, element: PrimitiveType[T], *, compact: bool, nullable: bool) -> None:
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.name = (
            ("compact_" if compact else "") + ("nullable_" if nullable else "") + f"array[{element.name}]"
        )
        self._length = array_length(compact=compact, nullable=nullable, what=self.name)

    def encode(self, values: Sequence[T] | None) -> bytes:
        if values is not None and not isinstance(values, Sequence):
            raise EncodeError(f"{type(values).__name__} is not a sequence")
        head = self._length.encode(-1 if values is None else len(values))
        if not values:
            return head
        return head + b"".join(self.element.encode(value) for value in values)

    def decode(self, buf: memoryview, pos: int) -> tuple[list[T] | None, int]:
        count, pos = self._length.decode_count(buf, pos, min_size(self.element))
        if count < 0:
            return None, pos
        values: list[T] = []
        for _ in range(count):
            value, pos = self.element.decode(buf, pos)
            values.append(value)
        return values, pos

    def __repr__(self) -> str:
        return self.name


def min_size(primitive: object) -> int:
    """The fewest bytes an encoded value of ``primitive`` can take."""
    if isinstance(primitive, FixedWidth | Boolean | Uuid):
        return int(primitive.size)
    if isinstance(primitive, String):
        return 1 if primitive.compact else 2
    if isinstance(primitive, Bytes):
        return 1 if primitive.compact else 4
    if isinstance(primitive, Array):
        return 1 if primitive.compact else 4
    return 1


class TaggedFields:
    """The tagged-fields section that ends every struct in a flexible version, as raw values by tag."""

    name = "tagged_fields"

    def encode(self, fields: dict[int, BytesLike]) -> bytes:
        parts = [encode_uvarint(len(fields))]
        for tag in sorted(fields):
            if not 0 <= tag <= UINT32_MAX:
                raise EncodeError(f"tag {tag} does not fit unsigned_varint")
            value = fields[tag]
            parts += (encode_uvarint(tag), encode_uvarint(byte_length(value)), bytes(value))
        return b"".join(parts)

    def decode(self, buf: memoryview, pos: int) -> tuple[dict[int, memoryview], int]:
        spans, end = self.decode_spans(buf, pos)
        return {tag: buf[start : start + size] for tag, start, size in spans}, end

    def decode_spans(self, buf: memoryview, pos: int) -> tuple[list[tuple[int, int, int]], int]:
        """The section as ``(tag, value_position, value_size)`` triples, checked but not decoded."""
        count, pos = read_uvarint(buf, pos, 5, UINT32_MAX, "tagged field count")
        if count * 2 > len(buf) - pos:
            raise MalformedMessageError(
                f"{count} tagged fields need at least {count * 2} bytes, {len(buf) - pos} remain",
                position=pos,
            )
        spans: list[tuple[int, int, int]] = []
        previous = -1
        for _ in range(count):
            tag_pos = pos
            tag, pos = read_uvarint(buf, pos, 5, UINT32_MAX, "tag")
            if tag <= previous:
                raise MalformedMessageError(
                    f"tag {tag} follows tag {previous}: tags must be strictly ascending", position=tag_pos
                )
            previous = tag
            size_pos = pos
            size, pos = read_uvarint(buf, pos, 5, UINT32_MAX, f"size of tag {tag}")
            if size > len(buf) - pos:
                raise MalformedMessageError(
                    f"tag {tag}: length {size} exceeds remaining {len(buf) - pos} bytes", position=size_pos
                )
            spans.append((tag, pos, size))
            pos += size
        return spans, pos

    def __repr__(self) -> str:
        return self.name


TAGGED_FIELDS = TaggedFields()

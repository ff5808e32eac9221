"""What the protocol compiler (:mod:`broker.protocol.compiler`) builds generated code with.

* :class:`Source`: the lines of one generated function and the globals they refer to (constants are
  passed by name, never printed into the source), compiled with one ``exec``;
* :data:`BASE_GLOBALS`: the helpers every generated function may call (``_InvalidError``, varint
  reading and writing, struct packing, the region size check);
* :class:`InvalidInputError`, :data:`DECODE_FAILURES` and :data:`ENCODE_FAILURES`: what generated code
  raises on bad input (it never builds a message: the compiler asks the reference codec to explain);
* the schema checks both builders share (:func:`check_field`, :func:`min_element_size`,
  :func:`length_format`).

The two builders are :mod:`broker.protocol.decoder_builder` and :mod:`broker.protocol.encoder_builder`.
Thread-safe: the struct cache may compile a format twice in a race, harmlessly.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from broker.protocol import primitives
from broker.protocol.errors import ProtocolError, SchemaDefinitionError
from broker.protocol.schema import (
    ArrayOf,
    Field,
    WireType,
    is_struct_class,
    min_bytes,
)

#: ``decode(buf, view, pos) -> (message, next_pos)``: ``view`` is a 1-D byte memoryview of the input and
#: ``buf`` either the same view or, faster, the ``bytes`` it views; may raise any of :data:`DECODE_FAILURES`.
Decoder = Callable[[Any, memoryview, int], tuple[tuple[Any, ...], int]]
#: ``encode(message, append, region)``: calls ``append`` with each piece of bytes of the encoding, and
#: ``region`` with each ``records`` value that is a region (after its length was appended); may raise
#: :data:`ENCODE_FAILURES`.
Encoder = Callable[[tuple[Any, ...], Callable[[Any], None], Callable[[Any], None]], None]


class InvalidInputError(Exception):
    """Raised by generated decoders on an impossible length; the reference codec then explains it."""


#: What a generated decoder can raise on bad input.
DECODE_FAILURES: tuple[type[BaseException], ...] = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    InvalidInputError,
    ProtocolError,
)
#: What a generated encoder can raise on a value that does not fit.
ENCODE_FAILURES: tuple[type[BaseException], ...] = (
    struct.error,
    TypeError,
    AttributeError,
    ValueError,
    OverflowError,
    IndexError,
    ProtocolError,
)

_STRUCTS: dict[str, struct.Struct] = {}
_SMALL_UVARINTS = tuple(bytes((n,)) for n in range(128))


def packer(fmt: str) -> struct.Struct:
    compiled = _STRUCTS.get(fmt)
    if compiled is None:
        compiled = _STRUCTS[fmt] = struct.Struct(fmt)
    return compiled


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    return primitives.read_uvarint(buf, pos, 5, primitives.UINT32_MAX, "unsigned_varint")


def _region_size(value: Any) -> int:
    size = value.size_bytes
    if type(size) is not int or size < 0:
        raise InvalidInputError
    return size


BASE_GLOBALS: dict[str, Any] = {
    "_tnew": tuple.__new__,
    "_InvalidError": InvalidInputError,
    "_ruv": _read_uvarint,
    "_UV": _SMALL_UVARINTS,
    "_uvenc": primitives.encode_uvarint,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_UUID": uuid.UUID,
    "_mv": memoryview,
    "_BL": (bytes, bytearray, memoryview),
    "_rsize": _region_size,
    "_str": str,
    "_bytes": bytes,
    "_len": len,
}


class Source:
    """Lines of generated code and the globals they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.globals: dict[str, Any] = dict(BASE_GLOBALS)
        self._consts: dict[int, str] = {}
        self._count = 0

    def var(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: Any, hint: str = "k") -> str:
        key = id(value)
        name = self._consts.get(key)
        if name is None:
            self._count += 1
            name = self._consts[key] = f"_{hint}{self._count}"
            self.globals[name] = value
        return name

    def emit(self, level: int, line: str) -> None:
        self.lines.append("    " * level + line)

    def compile(self, function: str, filename: str) -> tuple[str, Callable[..., Any]]:
        source = "\n".join(self.lines) + "\n"
        namespace = self.globals
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - our own generated code
        return source, namespace[function]


def check_field(field: Field, version: int, flexible: bool, where: str) -> None:
    if field.tagged_in(version) and not flexible:
        raise SchemaDefinitionError(f"{where}.{field.name}: tagged at v{version}, which is not flexible")
    type_ = field.wire.type
    if is_struct_class(type_) and field.nullable_in(version) and not field.tagged_in(version):
        raise SchemaDefinitionError(f"{where}.{field.name}: nullable struct fields are not supported")


def min_element_size(type_: ArrayOf, version: int, flexible: bool, where: str) -> int:
    size = min_bytes(type_.element, version, flexible=flexible)
    if size < 1:
        raise SchemaDefinitionError(
            f"{where}: array elements can be empty at v{version}, so a count is unbounded"
        )
    return size


def length_format(type_: WireType, flexible: bool) -> str | None:
    """The struct format of a non-compact length prefix, or ``None``."""
    if flexible:
        return None
    if type_ == "string":
        return "h"
    if type_ in ("bytes", "records") or isinstance(type_, ArrayOf):
        return "i"
    return None

"""The reference codec: walks a struct's schema field by field, checks everything, and names what failed.

It is the plain reading of :mod:`broker.protocol.schema` on top of :mod:`broker.protocol.primitives`, and it
does three jobs:

* diagnosis: the compiled codecs (:mod:`broker.protocol.compiler`) do only the checks that keep them safe
  and, when one fails, hand the same bytes to this codec, whose error names the message, the field path
  (``topic_data[0].partition_data[2].records``) and the byte position;
* tagged fields: the rare tagged values of flexible versions are decoded and encoded here;
* a second implementation for the tests, which check that both codecs produce the same bytes and values.

Decoding rules shared with the compiled codecs: a field outside its versions takes its default; unknown
tagged fields are skipped (Kafka's rule, they are optional by definition); a tagged value must be exactly as
long as its size says. Encoding leaves out fields that do not exist at the version, and tagged fields equal
to their default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from broker.protocol import primitives
from broker.protocol.errors import EncodeError, MalformedMessageError, SchemaDefinitionError
from broker.protocol.schema import ArrayOf, Field, StructClass, WireType, min_bytes, primitive_for, schema_of

#: An encoder's output: bytes, or objects standing for record data the caller sends itself (regions).
Chunks = list[Any]


def decode_message(
    cls: StructClass, buf: memoryview, pos: int, version: int, *, flexible: bool, context: str
) -> tuple[tuple[Any, ...], int]:
    """Decode one ``cls`` at ``pos``; errors name ``context`` ("Produce v7 request") and the field."""
    try:
        return decode_struct(cls, buf, pos, version, flexible=flexible, path="")
    except MalformedMessageError as exc:
        raise exc.located(context) from None


def encode_message(
    obj: tuple[Any, ...], cls: StructClass, version: int, *, flexible: bool, context: str
) -> Chunks:
    """Encode ``obj`` (a ``cls``) as chunks; errors name ``context`` and the field."""
    out: Chunks = []
    try:
        encode_struct(obj, cls, version, flexible=flexible, out=out, path="")
    except EncodeError as exc:
        raise exc.located(context) from None
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def decode_struct(
    cls: StructClass, buf: memoryview, pos: int, version: int, *, flexible: bool, path: str
) -> tuple[tuple[Any, ...], int]:
    schema = schema_of(cls)
    values = [field.default for field in schema.fields]
    for field in schema.positional(version):
        values[field.index], pos = decode_value(
            field.wire.type,
            buf,
            pos,
            version,
            flexible=flexible,
            nullable=field.nullable_in(version),
            path=_join(path, field.name),
        )
    if flexible:
        pos = _decode_tagged(schema.tagged(version), values, buf, pos, version, path)
    return tuple.__new__(cls, values), pos


def decode_value(
    type_: WireType, buf: memoryview, pos: int, version: int, *, flexible: bool, nullable: bool, path: str
) -> tuple[Any, int]:
    if isinstance(type_, str):
        try:
            return primitive_for(type_, flexible=flexible, nullable=nullable).decode(buf, pos)
        except MalformedMessageError as exc:
            raise exc.located(path=path) from None
    if isinstance(type_, ArrayOf):
        length = primitives.array_length(compact=flexible, nullable=nullable, what="array")
        try:
            count, pos = length.decode_count(buf, pos, min_bytes(type_.element, version, flexible=flexible))
        except MalformedMessageError as exc:
            raise exc.located(path=path) from None
        if count < 0:
            return None, pos
        items: list[Any] = []
        for i in range(count):
            item, pos = decode_value(
                type_.element, buf, pos, version, flexible=flexible, nullable=False, path=f"{path}[{i}]"
            )
            items.append(item)
        return items, pos
    if nullable:
        raise SchemaDefinitionError(f"{path}: nullable struct fields are not supported")
    return decode_struct(type_, buf, pos, version, flexible=flexible, path=path)


def _decode_tagged(
    fields: list[Field], values: list[Any], buf: memoryview, pos: int, version: int, path: str
) -> int:
    where = _join(path, "<tagged fields>")
    try:
        spans, end = primitives.TAGGED_FIELDS.decode_spans(buf, pos)
    except MalformedMessageError as exc:
        raise exc.located(path=where) from None
    by_tag = {field.wire.tag: field for field in fields}
    for tag, start, size in spans:
        field = by_tag.get(tag)
        if field is None:
            continue
        field_path = _join(path, field.name)
        bounded = buf[: start + size]
        value, value_end = decode_value(
            field.wire.type,
            bounded,
            start,
            version,
            flexible=True,
            nullable=field.nullable_in(version),
            path=field_path,
        )
        if value_end != start + size:
            raise MalformedMessageError(
                f"tagged value is {value_end - start} bytes but its size says {size}",
                position=start,
                path=field_path,
            )
        values[field.index] = value
    return end


def encode_struct(
    obj: tuple[Any, ...], cls: StructClass, version: int, *, flexible: bool, out: Chunks, path: str
) -> None:
    if type(obj) is not cls:
        raise EncodeError(f"expected a {cls.__name__}, got {type(obj).__name__}", path=path)
    schema = schema_of(cls)
    for field in schema.positional(version):
        encode_value(
            field.wire.type,
            obj[field.index],
            version,
            flexible=flexible,
            nullable=field.nullable_in(version),
            out=out,
            path=_join(path, field.name),
        )
    if flexible:
        tagged: dict[int, bytes] = {}
        for field in schema.tagged(version):
            value = obj[field.index]
            if field.is_default(value):
                continue
            field_path = _join(path, field.name)
            value_out: Chunks = []
            encode_value(
                field.wire.type,
                value,
                version,
                flexible=True,
                nullable=field.nullable_in(version),
                out=value_out,
                path=field_path,
            )
            if not all(isinstance(chunk, bytes | bytearray | memoryview) for chunk in value_out):
                raise EncodeError("a tagged field cannot hold a region", path=field_path)
            tagged[field.wire.tag or 0] = b"".join(value_out)
        out.append(primitives.TAGGED_FIELDS.encode(tagged))  # type: ignore[arg-type]


def encode_value(
    type_: WireType, value: Any, version: int, *, flexible: bool, nullable: bool, out: Chunks, path: str
) -> None:
    if isinstance(type_, str):
        if type_ == "records" and value is not None and not isinstance(value, bytes | bytearray | memoryview):
            _encode_region(value, flexible=flexible, out=out, path=path)
            return
        try:
            out.append(primitive_for(type_, flexible=flexible, nullable=nullable).encode(value))
        except EncodeError as exc:
            raise exc.located(path=path) from None
        return
    if isinstance(type_, ArrayOf):
        length = primitives.array_length(compact=flexible, nullable=nullable, what="array")
        if value is not None and (not isinstance(value, Sequence) or isinstance(value, str | bytes)):
            raise EncodeError(f"{type(value).__name__} is not a sequence", path=path)
        try:
            out.append(length.encode(-1 if value is None else len(value)))
        except EncodeError as exc:
            raise exc.located(path=path) from None
        for i, item in enumerate(value or ()):
            encode_value(
                type_.element, item, version, flexible=flexible, nullable=False, out=out, path=f"{path}[{i}]"
            )
        return
    if nullable:
        raise SchemaDefinitionError(f"{path}: nullable struct fields are not supported")
    encode_struct(value, type_, version, flexible=flexible, out=out, path=path)


def _encode_region(value: Any, *, flexible: bool, out: Chunks, path: str) -> None:
    size = getattr(value, "size_bytes", None)
    if not isinstance(size, int) or size < 0:
        raise EncodeError(
            f"{type(value).__name__} is neither bytes nor a region with a non-negative size_bytes", path=path
        )
    length = primitives.LengthPrefix(None if flexible else primitives.INT32, nullable=True, what="records")
    try:
        out.append(length.encode(size))
    except EncodeError as exc:
        raise exc.located(path=path) from None
    if size:
        out.append(value)

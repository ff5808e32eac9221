"""Compiles a struct class at one version into a pair of fast, straight-line Python functions.

For each ``(struct class, version, flexible)`` the first use generates the source of a decoder and an
encoder with every branch on the schema already taken (absent fields are constants, nested structs and
arrays are inlined as loops), and ``exec``s it once. What the generated code does per message:

* consecutive fixed-size fields, together with the int16/int32 length prefix of the string, bytes or array
  that follows them, are read or written with **one** precompiled :class:`struct.Struct` call;
* a struct is built with one ``tuple.__new__`` (messages are NamedTuples) and read with one unpacking;
* ``records`` decode as a ``memoryview`` slice of the frame (zero copy); when encoding, a ``records`` value
  that is not bytes is a region (any object with ``size_bytes``): its length is written and the object
  itself is handed to the encoder's ``region`` callback, for the caller to ``sendfile``;
* every length is checked against the bytes that remain before it is used, and an array's count against
  the smallest size its elements can have, so a huge length never allocates or loops;
* tagged-field sections are one byte test on the common path (no tags); present tags go to
  :mod:`broker.protocol.interpreter`.

The generated code does not build error messages. When it fails (``struct.error`` on a short read, an
impossible length, bad UTF-8, a value that does not fit), the wrapper runs the reference codec
(:mod:`broker.protocol.interpreter`) on the same input, whose error names the message, field path and byte
position. If the reference codec does not fail too, the two disagree: that raises an error saying so
rather than returning either result. Compilation is thread-safe (a race compiles twice, harmlessly).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker.protocol import interpreter, primitives
from broker.protocol.errors import EncodeError, MalformedMessageError, ProtocolError, SchemaDefinitionError
from broker.protocol.schema import (
    ArrayOf,
    Field,
    StructClass,
    WireType,
    fixed_format,
    is_struct_class,
    min_bytes,
    schema_of,
)

#: ``decode(buf, view, pos) -> (message, next_pos)``: ``view`` is a 1-D byte memoryview of the input and
#: ``buf`` either the same view or, faster, the ``bytes`` it views; may raise any of :data:`DECODE_FAILURES`.
Decoder = Callable[[Any, memoryview, int], tuple[tuple[Any, ...], int]]
#: ``encode(message, append, region)``: calls ``append`` with each piece of bytes of the encoding, and
#: ``region`` with each ``records`` value that is a region (after its length was appended); may raise
#: :data:`ENCODE_FAILURES`.
Encoder = Callable[[tuple[Any, ...], Callable[[Any], None], Callable[[Any], None]], None]


class _InvalidError(Exception):
    """Raised by generated decoders on an impossible length; the reference codec then explains it."""


#: What a generated decoder can raise on bad input.
DECODE_FAILURES: tuple[type[BaseException], ...] = (
    struct.error,
    IndexError,
    ValueError,
    TypeError,
    _InvalidError,
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


def _struct(fmt: str) -> struct.Struct:
    compiled = _STRUCTS.get(fmt)
    if compiled is None:
        compiled = _STRUCTS[fmt] = struct.Struct(fmt)
    return compiled


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    return primitives.read_uvarint(buf, pos, 5, primitives.UINT32_MAX, "unsigned_varint")


def _region_size(value: Any) -> int:
    size = value.size_bytes
    if type(size) is not int or size < 0:
        raise _InvalidError
    return size


_BASE_GLOBALS: dict[str, Any] = {
    "_tnew": tuple.__new__,
    "_InvalidError": _InvalidError,
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


@dataclass(frozen=True, slots=True)
class StructCodec:
    """The compiled codec of one struct class at one version."""

    cls: StructClass
    version: int
    flexible: bool
    decode: Decoder
    encode: Encoder
    decoder_source: str
    encoder_source: str


_CODECS: dict[tuple[StructClass, int, bool], StructCodec] = {}


def codec_for(cls: StructClass, version: int, *, flexible: bool) -> StructCodec:
    """The compiled codec of ``cls`` at ``version`` (compiled on first use, then cached)."""
    key = (cls, version, flexible)
    codec = _CODECS.get(key)
    if codec is None:
        decoder_source, decoder = _DecoderBuilder(cls, version, flexible).build()
        encoder_source, encoder = _EncoderBuilder(cls, version, flexible).build()
        codec = _CODECS[key] = StructCodec(
            cls, version, flexible, decoder, encoder, decoder_source, encoder_source
        )
    return codec


def decode(
    cls: StructClass, buf: memoryview, pos: int, version: int, *, flexible: bool, context: str
) -> tuple[Any, int]:
    """Decode one ``cls`` at ``pos`` of ``buf`` with the compiled codec; failures are diagnosed."""
    try:
        return codec_for(cls, version, flexible=flexible).decode(buf, buf, pos)
    except DECODE_FAILURES as exc:
        raise diagnose_decode(cls, buf, pos, version, flexible=flexible, context=context, cause=exc) from None


def encode(
    obj: tuple[Any, ...], cls: StructClass, version: int, *, flexible: bool, context: str
) -> list[Any]:
    """Encode ``obj`` as chunks (bytes, and regions) with the compiled codec; failures are diagnosed."""
    if type(obj) is not cls:
        raise EncodeError(f"expected a {cls.__name__}, got {type(obj).__name__}", context=context)
    out: list[Any] = []
    try:
        codec_for(cls, version, flexible=flexible).encode(obj, out.append, out.append)
    except ENCODE_FAILURES as exc:
        raise diagnose_encode(obj, cls, version, flexible=flexible, context=context, cause=exc) from None
    return out


def diagnose_decode(
    cls: StructClass,
    buf: memoryview,
    pos: int,
    version: int,
    *,
    flexible: bool,
    context: str,
    cause: BaseException,
) -> ProtocolError:
    """The error explaining why the compiled decoder failed on ``buf``, from the reference codec."""
    try:
        interpreter.decode_message(cls, buf, pos, version, flexible=flexible, context=context)
    except MalformedMessageError as exc:
        return exc
    return ProtocolError(
        f"{context}: the compiled decoder failed ({type(cause).__name__}: {cause}) where the reference "
        "decoder succeeds: a bug in broker.protocol.compiler"
    )


def diagnose_encode(
    obj: tuple[Any, ...],
    cls: StructClass,
    version: int,
    *,
    flexible: bool,
    context: str,
    cause: BaseException,
) -> ProtocolError:
    """The error explaining why the compiled encoder failed on ``obj``, from the reference codec."""
    try:
        interpreter.encode_message(obj, cls, version, flexible=flexible, context=context)
    except EncodeError as exc:
        return exc
    return ProtocolError(
        f"{context}: the compiled encoder failed ({type(cause).__name__}: {cause}) where the reference "
        "encoder succeeds: a bug in broker.protocol.compiler"
    )


class _Source:
    """Lines of generated code and the globals they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.globals: dict[str, Any] = dict(_BASE_GLOBALS)
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


def _check_field(field: Field, version: int, flexible: bool, where: str) -> None:
    if field.tagged_in(version) and not flexible:
        raise SchemaDefinitionError(f"{where}.{field.name}: tagged at v{version}, which is not flexible")
    type_ = field.wire.type
    if is_struct_class(type_) and field.nullable_in(version) and not field.tagged_in(version):
        raise SchemaDefinitionError(f"{where}.{field.name}: nullable struct fields are not supported")


def _element_min(type_: ArrayOf, version: int, flexible: bool, where: str) -> int:
    size = min_bytes(type_.element, version, flexible=flexible)
    if size < 1:
        raise SchemaDefinitionError(
            f"{where}: array elements can be empty at v{version}, so a count is unbounded"
        )
    return size


def _length_format(type_: WireType, flexible: bool) -> str | None:
    """The struct format of a non-compact length prefix, or ``None``."""
    if flexible:
        return None
    if type_ == "string":
        return "h"
    if type_ in ("bytes", "records") or isinstance(type_, ArrayOf):
        return "i"
    return None


class _DecoderBuilder:
    def __init__(self, cls: StructClass, version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.src = _Source()

    def build(self) -> tuple[str, Decoder]:
        src = self.src
        src.emit(0, "def _decode(buf, view, pos):")
        src.emit(1, "end = _len(buf)")
        result = self.struct(self.cls, 1)
        src.emit(1, f"return {result}, pos")
        filename = f"<decode {self.cls.__name__} v{self.version}>"
        source, function = src.compile("_decode", filename)
        return source, function

    def flush(self, pending: list[tuple[str, str]], level: int) -> None:
        if not pending:
            return
        compiled = _struct(">" + "".join(fmt for fmt, _ in pending))
        reader = self.src.const(compiled.unpack_from, "u")
        targets = ", ".join(target for _, target in pending)
        self.src.emit(level, f"{targets}, = {reader}(buf, pos)")
        self.src.emit(level, f"pos += {compiled.size}")
        pending.clear()

    def struct(self, cls: StructClass, level: int) -> str:
        src = self.src
        schema = schema_of(cls)
        version = self.version
        values: list[str] = []
        for field in schema.fields:
            _check_field(field, version, self.flexible, schema.name)
            values.append(src.const(field.default, "d"))
        pending: list[tuple[str, str]] = []
        for field in schema.positional(version):
            type_ = field.wire.type
            fmt = fixed_format(type_)
            if fmt is not None:
                target = src.var(field.name)
                pending.append((fmt, target))
                values[field.index] = target
                continue
            prefix = _length_format(type_, self.flexible)
            length = None
            if prefix is not None:
                length = src.var("n")
                pending.append((prefix, length))
            self.flush(pending, level)
            values[field.index] = self.value(
                type_, field.nullable_in(version), level, length, f"{schema.name}.{field.name}"
            )
        self.flush(pending, level)
        if self.flexible:
            self.tagged(schema.tagged(version), values, level)
        result = src.var(cls.__name__)
        src.emit(level, f"{result} = _tnew({src.const(cls, 'C')}, ({', '.join(values)},))")
        return result

    def tagged(self, fields: list[Field], values: list[str], level: int) -> None:
        src = self.src
        targets = [src.var(field.name) for field in fields]
        reader = src.const(_tag_reader(fields, self.version), "tags")
        src.emit(level, "if buf[pos]:")
        src.emit(level + 1, f"{', '.join([*targets, 'pos'])}, = {reader}(view, pos)")
        src.emit(level, "else:")
        for field, target in zip(fields, targets, strict=True):
            src.emit(level + 1, f"{target} = {src.const(field.default, 'd')}")
            values[field.index] = target
        src.emit(level + 1, "pos += 1")

    def read_length(self, level: int, fmt: str | None) -> str:
        """Emit code reading a length prefix (non-compact ``fmt``, or compact) into a new variable."""
        src = self.src
        length = src.var("n")
        if fmt is not None:
            compiled = _struct(">" + fmt)
            src.emit(level, f"{length}, = {src.const(compiled.unpack_from, 'u')}(buf, pos)")
            src.emit(level, f"pos += {compiled.size}")
        else:
            src.emit(level, f"{length} = buf[pos]")
            src.emit(level, f"if {length} & 128:")
            src.emit(level + 1, f"{length}, pos = _ruv(buf, pos)")
            src.emit(level, "else:")
            src.emit(level + 1, "pos += 1")
            src.emit(level, f"{length} -= 1")
        return length

    def null_check(self, length: str, nullable: bool, target: str, level: int) -> None:
        """Emit ``if length < 0``: null where allowed, else invalid; the caller continues in the else."""
        src = self.src
        src.emit(level, f"if {length} < 0:")
        if nullable:
            src.emit(level + 1, f"if {length} != -1:")
            src.emit(level + 2, "raise _InvalidError")
            src.emit(level + 1, f"{target} = None")
        else:
            src.emit(level + 1, "raise _InvalidError")
        src.emit(level, "else:")

    def value(self, type_: WireType, nullable: bool, level: int, length: str | None, where: str) -> str:
        src = self.src
        target = src.var("v")
        if isinstance(type_, str):
            if type_ == "uuid":
                stop = src.var("e")
                src.emit(level, f"{stop} = pos + 16")
                src.emit(level, f"if {stop} > end:")
                src.emit(level + 1, "raise _InvalidError")
                src.emit(level, f"{target} = _UUID(bytes=_bytes(buf[pos:{stop}]))")
                src.emit(level, f"pos = {stop}")
                return target
            if length is None:
                length = self.read_length(level, _length_format(type_, self.flexible))
            self.null_check(length, nullable, target, level)
            inner = level + 1
            stop = src.var("e")
            src.emit(inner, f"{stop} = pos + {length}")
            src.emit(inner, f"if {stop} > end:")
            src.emit(inner + 1, "raise _InvalidError")
            if type_ == "string":
                src.emit(inner, f'{target} = _str(buf[pos:{stop}], "utf-8")')
            elif type_ == "bytes":
                src.emit(inner, f"{target} = _bytes(buf[pos:{stop}])")
            else:
                src.emit(inner, f"{target} = view[pos:{stop}]")
            src.emit(inner, f"pos = {stop}")
            return target
        if isinstance(type_, ArrayOf):
            if length is None:
                length = self.read_length(level, _length_format(type_, self.flexible))
            element_min = _element_min(type_, self.version, self.flexible, where)
            self.null_check(length, nullable, target, level)
            inner = level + 1
            src.emit(inner, f"if {length} * {element_min} > end - pos:")
            src.emit(inner + 1, "raise _InvalidError")
            element = type_.element
            fmt = fixed_format(element)
            if fmt is not None:
                pattern = src.const(">%d" + fmt, "fmt")
                size = _struct(">" + fmt).size
                src.emit(inner, f"{target} = list(_unpack_from({pattern} % {length}, buf, pos))")
                src.emit(inner, f"pos += {length} * {size}")
                return target
            append = src.var("append")
            src.emit(inner, f"{target} = []")
            src.emit(inner, f"{append} = {target}.append")
            src.emit(inner, f"for _ in range({length}):")
            if isinstance(element, str):
                item = self.value(element, False, inner + 1, None, where)
            else:
                item = self.struct(element, inner + 1)
            src.emit(inner + 1, f"{append}({item})")
            return target
        return self.struct(type_, level)


class _EncoderBuilder:
    def __init__(self, cls: StructClass, version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.src = _Source()

    def build(self) -> tuple[str, Encoder]:
        src = self.src
        src.emit(0, "def _encode(obj, app, region):")
        pending = self.struct(self.cls, "obj", 1, [])
        self.flush(pending, 1)
        src.emit(1, "return None")
        filename = f"<encode {self.cls.__name__} v{self.version}>"
        source, function = src.compile("_encode", filename)
        return source, function

    def flush(self, pending: list[tuple[str, str | None]], level: int) -> None:
        if not pending:
            return
        compiled = _struct(">" + "".join(fmt for fmt, _ in pending))
        args = [value for _, value in pending if value is not None]
        if args:
            writer = self.src.const(compiled.pack, "p")
            self.src.emit(level, f"app({writer}({', '.join(args)}))")
        else:
            self.src.emit(level, f"app({self.src.const(compiled.pack(), 'b')})")
        pending.clear()

    def struct(
        self, cls: StructClass, expr: str, level: int, pending: list[tuple[str, str | None]]
    ) -> list[tuple[str, str | None]]:
        """Emit the encoding of struct ``expr``; returns the fixed fields still pending (for what follows)."""
        src = self.src
        schema = schema_of(cls)
        version = self.version
        names = [src.var(field.name) for field in schema.fields]
        for field in schema.fields:
            _check_field(field, version, self.flexible, schema.name)
        src.emit(level, f"{', '.join(names)}, = {expr}")
        for field in schema.positional(version):
            type_ = field.wire.type
            value = names[field.index]
            where = f"{schema.name}.{field.name}"
            fmt = fixed_format(type_)
            if fmt is not None:
                pending.append((fmt, value))
            elif type_ == "uuid":
                pending.append(("16s", f"{value}.bytes"))
            elif is_struct_class(type_):
                pending = self.struct(type_, value, level, pending)  # type: ignore[arg-type]
            else:
                self.value(type_, value, field.nullable_in(version), level, pending, where)
        if self.flexible:
            tagged = schema.tagged(version)
            if tagged:
                self.flush(pending, level)
                writer = src.const(_tag_writer(tagged, version), "tags")
                src.emit(level, f"app({writer}({', '.join(names[field.index] for field in tagged)}))")
            else:
                pending.append(("x", None))
        return pending

    def write_length(
        self, length: str, level: int, pending: list[tuple[str, str | None]], fmt: str | None
    ) -> None:
        """Emit the length prefix ``length``: merged into the pending fixed fields, or as a compact varint."""
        if fmt is not None:
            pending.append((fmt, length))
            self.flush(pending, level)
        else:
            self.flush(pending, level)
            count = self.src.var("c")
            self.src.emit(level, f"{count} = {length} + 1")
            self.src.emit(level, f"app(_UV[{count}] if {count} < 128 else _uvenc({count}))")

    def value(
        self,
        type_: WireType,
        value: str,
        nullable: bool,
        level: int,
        pending: list[tuple[str, str | None]],
        where: str,
    ) -> None:
        """Emit a variable-size value (string, bytes, records or array); flushes ``pending`` first."""
        src = self.src
        fmt = _length_format(type_, self.flexible)
        length = src.var("n")
        if type_ in ("string", "bytes"):
            payload = src.var("s")
            if nullable:
                src.emit(level, f"if {value} is None:")
                src.emit(level + 1, f"{length} = -1")
                src.emit(level + 1, f'{payload} = b""')
                src.emit(level, "else:")
                inner = level + 1
            else:
                inner = level
            if type_ == "string":
                src.emit(inner, f'{payload} = {value}.encode("utf-8")')
                src.emit(inner, f"{length} = _len({payload})")
            else:
                src.emit(inner, f"{payload} = {value}")
                src.emit(inner, f"{length} = {value}.nbytes if type({value}) is _mv else _len({value})")
            self.write_length(length, level, pending, fmt)
            src.emit(level, f"app({payload})")
            return
        if type_ == "records":
            in_memory = src.var("m")
            src.emit(level, f"{in_memory} = True")
            src.emit(level, f"if {value} is None:")
            src.emit(level + 1, f"{length} = -1")
            src.emit(level, f"elif type({value}) is _bytes:")
            src.emit(level + 1, f"{length} = _len({value})")
            src.emit(level, f"elif isinstance({value}, _BL):")
            src.emit(level + 1, f"{length} = {value}.nbytes if type({value}) is _mv else _len({value})")
            src.emit(level, "else:")
            src.emit(level + 1, f"{length} = _rsize({value})")
            src.emit(level + 1, f"{in_memory} = False")
            self.write_length(length, level, pending, fmt)
            src.emit(level, f"if {length} > 0:")
            src.emit(level + 1, f"app({value}) if {in_memory} else region({value})")
            return
        if not isinstance(type_, ArrayOf):
            raise SchemaDefinitionError(f"{where}: cannot encode type {type_!r}")
        if nullable:
            src.emit(level, f"{length} = -1 if {value} is None else _len({value})")
        else:
            src.emit(level, f"{length} = _len({value})")
        self.write_length(length, level, pending, fmt)
        element = type_.element
        element_fmt = fixed_format(element)
        if element_fmt is not None:
            pattern = src.const(">%d" + element_fmt, "fmt")
            src.emit(level, f"if {length} > 0:")
            src.emit(level + 1, f"app(_pack({pattern} % {length}, *{value}))")
            return
        item = src.var("item")
        src.emit(level, f"for {item} in {value} or ():" if nullable else f"for {item} in {value}:")
        if element == "uuid":
            src.emit(level + 1, f"app({item}.bytes)")
        elif isinstance(element, str):
            inner_pending: list[tuple[str, str | None]] = []
            self.value(element, item, False, level + 1, inner_pending, where)
            self.flush(inner_pending, level + 1)
        else:
            inner_pending = self.struct(element, item, level + 1, [])
            self.flush(inner_pending, level + 1)


def _tag_reader(fields: list[Field], version: int) -> Callable[[memoryview, int], tuple[Any, ...]]:
    """A function reading a tagged-fields section: the values of ``fields`` (defaults when absent), then
    the position after the section. Unknown tags are skipped."""
    defaults = [field.default for field in fields]
    by_tag = {field.wire.tag: i for i, field in enumerate(fields)}

    def read(buf: memoryview, pos: int) -> tuple[Any, ...]:
        values = list(defaults)
        spans, end = primitives.TAGGED_FIELDS.decode_spans(buf, pos)
        for tag, start, size in spans:
            i = by_tag.get(tag)
            if i is None:
                continue
            field = fields[i]
            value, value_end = interpreter.decode_value(
                field.wire.type,
                buf[: start + size],
                start,
                version,
                flexible=True,
                nullable=field.nullable_in(version),
                path=field.name,
            )
            if value_end != start + size:
                raise _InvalidError
            values[i] = value
        return (*values, end)

    return read


def _tag_writer(fields: list[Field], version: int) -> Callable[..., bytes]:
    """A function writing the tagged-fields section holding those of ``fields`` that are not default."""

    def write(*values: Any) -> bytes:
        tagged: dict[int, bytes] = {}
        for field, value in zip(fields, values, strict=True):
            if field.is_default(value):
                continue
            out: list[Any] = []
            interpreter.encode_value(
                field.wire.type,
                value,
                version,
                flexible=True,
                nullable=field.nullable_in(version),
                out=out,
                path=field.name,
            )
            tagged[field.wire.tag or 0] = b"".join(out)
        return primitives.TAGGED_FIELDS.encode(tagged)  # type: ignore[arg-type]

    return write

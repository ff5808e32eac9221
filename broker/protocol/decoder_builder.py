"""Generates the straight-line decoder of one struct class at one version (see :mod:`broker.protocol.compiler`
for what the generated code does, :mod:`broker.protocol.codegen` for what it is built with).

Fixed-size fields are read with one precompiled ``struct`` call per run (with the length prefix that
follows them), every length is checked against the bytes left before use, an array's count against its
elements' smallest size, and tagged fields go to :func:`tag_reader` (the reference codec's decoders).
Not thread-safe: one builder per compilation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.protocol import interpreter, primitives
from broker.protocol.codegen import (
    Decoder,
    InvalidInputError,
    Source,
    check_field,
    length_format,
    min_element_size,
    packer,
)
from broker.protocol.schema import (
    ArrayOf,
    Field,
    StructClass,
    WireType,
    fixed_format,
    schema_of,
)


class DecoderBuilder:
    def __init__(self, cls: StructClass, version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.src = Source()

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
        compiled = packer(">" + "".join(fmt for fmt, _ in pending))
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
            check_field(field, version, self.flexible, schema.name)
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
            prefix = length_format(type_, self.flexible)
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
        reader = src.const(tag_reader(fields, self.version), "tags")
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
            compiled = packer(">" + fmt)
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
                length = self.read_length(level, length_format(type_, self.flexible))
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
                length = self.read_length(level, length_format(type_, self.flexible))
            element_min = min_element_size(type_, self.version, self.flexible, where)
            self.null_check(length, nullable, target, level)
            inner = level + 1
            src.emit(inner, f"if {length} * {element_min} > end - pos:")
            src.emit(inner + 1, "raise _InvalidError")
            element = type_.element
            fmt = fixed_format(element)
            if fmt is not None:
                pattern = src.const(">%d" + fmt, "fmt")
                size = packer(">" + fmt).size
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


def tag_reader(fields: list[Field], version: int) -> Callable[[memoryview, int], tuple[Any, ...]]:
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
                raise InvalidInputError
            values[i] = value
        return (*values, end)

    return read

"""Generates the straight-line encoder of one struct class at one version (see :mod:`broker.protocol.compiler`
for what the generated code does, :mod:`broker.protocol.codegen` for what it is built with).

Fixed-size fields are written with one precompiled ``struct`` call per run, ``records`` values that are
regions are handed to the ``region`` callback after their length, and tagged fields go to
:func:`tag_writer` (the reference codec's encoders). Not thread-safe: one builder per compilation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.protocol import interpreter, primitives
from broker.protocol.codegen import (
    Encoder,
    Source,
    check_field,
    length_format,
    packer,
)
from broker.protocol.errors import SchemaDefinitionError
from broker.protocol.schema import (
    ArrayOf,
    Field,
    StructClass,
    WireType,
    fixed_format,
    is_struct_class,
    schema_of,
)


class EncoderBuilder:
    def __init__(self, cls: StructClass, version: int, flexible: bool) -> None:
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.src = Source()

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
        compiled = packer(">" + "".join(fmt for fmt, _ in pending))
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
            check_field(field, version, self.flexible, schema.name)
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
                writer = src.const(tag_writer(tagged, version), "tags")
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
        fmt = length_format(type_, self.flexible)
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


def tag_writer(fields: list[Field], version: int) -> Callable[..., bytes]:
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

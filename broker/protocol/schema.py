"""Kafka messages declared as data: typed fields with version ranges, like Kafka's JSON message definitions.

A message (or a struct inside one) is a :class:`typing.NamedTuple` whose fields are all annotated with
:func:`wire` and have a default::

    class PartitionProduceData(NamedTuple):
        index: Annotated[int, wire("int32")] = 0
        records: Annotated[RecordsData | None, wire("records", nullable="0+")] = None

    class ProduceRequest(NamedTuple):
        transactional_id: Annotated[str | None, wire("string", "3+", nullable="3+")] = None
        acks: Annotated[int, wire("int16")] = 0
        ...
        topic_data: Annotated[Sequence[TopicProduceData], wire(array(TopicProduceData))] = ()

which reads like Kafka's ``ProduceRequest.json``: a Kafka type name (``int8`` ``int16`` ``uint16``
``int32`` ``int64`` ``float64`` ``bool`` ``uuid`` ``string`` ``bytes`` ``records``, an :func:`array` of one
of them or of a struct, or a struct class), the versions the field exists in (``"0+"``, ``"3-12"``, ``"7"``),
the versions it is nullable in, and for tagged fields the tag. A field outside its versions is neither
written nor read and takes its default; in a *flexible* version (``flexibleVersions`` in Kafka's JSON: the
API decides, see :class:`~broker.protocol.api_spec.ApiSpec`) strings, bytes and arrays use the compact
encodings and every struct ends with a tagged-fields section, where tagged fields are written only when they
differ from their default. The field order of the class is the wire order.

Messages are NamedTuples rather than dataclasses: immutable value objects all the same, but a decoder
builds one with a single ``tuple.__new__`` call and an encoder reads all fields with one unpacking, which is
most of what makes the compiled codecs (:mod:`broker.protocol.compiler`) fast. Arrays are any sequence when
encoding and lists when decoded.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

from broker.protocol import primitives
from broker.protocol.errors import SchemaDefinitionError

#: Kafka's scalar type names.
Scalar = Literal[
    "int8", "int16", "uint16", "int32", "int64", "float64", "bool", "uuid", "string", "bytes", "records"
]

#: A struct class: a NamedTuple whose fields are annotated with :func:`wire`.
StructClass = type[tuple[Any, ...]]

#: The highest version a Kafka message can have ("3+" means 3 up to this).
MAX_VERSION = 32767

_SCALARS: frozenset[str] = frozenset(typing.get_args(Scalar))
_FIXED_FORMATS: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "int64": "q",
    "float64": "d",
    "bool": "?",
}


@dataclass(frozen=True, slots=True)
class VersionRange:
    """Versions ``low`` to ``high``, both inclusive; Kafka writes them "3+", "3-12" or "7"."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        spec = text.strip()
        try:
            if spec.endswith("+"):
                return cls(int(spec[:-1]), MAX_VERSION)
            if "-" in spec:
                low, high = spec.split("-", 1)
                return cls(int(low), int(high))
            return cls(int(spec), int(spec))
        except ValueError:
            raise SchemaDefinitionError(f"bad version range {text!r}: expected '3+', '3-12' or '7'") from None

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def __str__(self) -> str:
        if self.high == MAX_VERSION:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """An array of a scalar type or of a struct class."""

    element: Scalar | StructClass


def array(element: Scalar | StructClass) -> ArrayOf:
    """The type of an array field: ``wire(array("int32"))``, ``wire(array(TopicProduceData))``."""
    return ArrayOf(element)


#: What a field's wire type can be.
WireType = Scalar | ArrayOf | StructClass


@dataclass(frozen=True, slots=True)
class Wire:
    """How one field is encoded: see :func:`wire`."""

    type: WireType
    versions: VersionRange
    nullable: VersionRange | None
    tag: int | None
    tagged: VersionRange | None


def wire(
    type_: WireType,
    versions: str = "0+",
    *,
    nullable: str | None = None,
    tag: int | None = None,
    tagged: str | None = None,
) -> Wire:
    """Declare a field's wire type and versions; ``tag`` makes it a tagged field (in ``tagged`` versions,
    by default all of ``versions``)."""
    present = VersionRange.parse(versions)
    tagged_range = None
    if tag is not None:
        tagged_range = VersionRange.parse(tagged) if tagged is not None else present
    elif tagged is not None:
        raise SchemaDefinitionError(f"tagged versions {tagged!r} given without a tag")
    return Wire(
        type=type_,
        versions=present,
        nullable=VersionRange.parse(nullable) if nullable is not None else None,
        tag=tag,
        tagged=tagged_range,
    )


@dataclass(frozen=True, slots=True)
class Field:
    """A field of a struct: its name, position in the tuple, wire declaration and default."""

    name: str
    index: int
    wire: Wire
    default: Any

    def present_in(self, version: int) -> bool:
        return version in self.wire.versions

    def nullable_in(self, version: int) -> bool:
        return self.wire.nullable is not None and version in self.wire.nullable

    def tagged_in(self, version: int) -> bool:
        return self.wire.tagged is not None and version in self.wire.tagged

    def is_default(self, value: object) -> bool:
        """Whether ``value`` is the default (a tagged field is then left out); arrays compare by content."""
        if isinstance(self.wire.type, ArrayOf) and isinstance(value, Sequence) and self.default is not None:
            return list(value) == list(self.default)
        return bool(value == self.default)


@dataclass(frozen=True, slots=True)
class StructSchema:
    """The fields of one struct class, in wire order."""

    cls: StructClass
    fields: tuple[Field, ...]

    @property
    def name(self) -> str:
        return self.cls.__name__

    def positional(self, version: int) -> list[Field]:
        """The fields written in order at ``version`` (present and not tagged)."""
        return [f for f in self.fields if f.present_in(version) and not f.tagged_in(version)]

    def tagged(self, version: int) -> list[Field]:
        """The tagged fields that exist at ``version``, by ascending tag."""
        fields = [f for f in self.fields if f.present_in(version) and f.tagged_in(version)]
        return sorted(fields, key=lambda f: f.wire.tag or 0)


def is_struct_class(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, tuple) and hasattr(value, "_field_defaults")


@functools.cache
def schema_of(cls: StructClass) -> StructSchema:
    """The checked schema of a struct class (cached)."""
    if not is_struct_class(cls):
        raise SchemaDefinitionError(f"{cls!r} is not a NamedTuple struct class")
    field_names: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    defaults: dict[str, Any] = cls._field_defaults  # type: ignore[attr-defined]
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError as exc:
        raise SchemaDefinitionError(f"{cls.__name__}: cannot resolve annotations: {exc}") from exc
    fields: list[Field] = []
    tags: dict[int, str] = {}
    for index, name in enumerate(field_names):
        where = f"{cls.__name__}.{name}"
        hint = hints.get(name)
        specs = (
            [m for m in get_args(hint)[1:] if isinstance(m, Wire)]
            if get_origin(hint) is typing.Annotated
            else []
        )
        if len(specs) != 1:
            raise SchemaDefinitionError(f"{where}: annotate with Annotated[<type>, wire(...)] exactly once")
        if name not in defaults:
            raise SchemaDefinitionError(f"{where}: every field needs a default (Kafka's default for it)")
        spec = specs[0]
        _check_type(spec.type, where)
        if spec.tag is not None:
            if spec.tag in tags:
                raise SchemaDefinitionError(f"{where}: tag {spec.tag} is already used by {tags[spec.tag]}")
            tags[spec.tag] = name
        fields.append(Field(name=name, index=index, wire=spec, default=defaults[name]))
    return StructSchema(cls=cls, fields=tuple(fields))


def _check_type(type_: object, where: str) -> None:
    if isinstance(type_, ArrayOf):
        _check_type(type_.element, where)
    elif isinstance(type_, str):
        if type_ not in _SCALARS:
            raise SchemaDefinitionError(f"{where}: unknown type {type_!r}")
    elif not is_struct_class(type_):
        raise SchemaDefinitionError(
            f"{where}: type {type_!r} is neither a Kafka type name nor a struct class"
        )


def fixed_format(type_: WireType) -> str | None:
    """The :mod:`struct` format character of a fixed-size scalar, else ``None``."""
    return _FIXED_FORMATS.get(type_) if isinstance(type_, str) else None


@functools.cache
def primitive_for(scalar: Scalar, *, flexible: bool, nullable: bool) -> primitives.PrimitiveType[Any]:
    """The primitive type that encodes ``scalar`` in a (non-)flexible version."""
    fixed: dict[str, primitives.PrimitiveType[Any]] = {
        "int8": primitives.INT8,
        "int16": primitives.INT16,
        "uint16": primitives.UINT16,
        "int32": primitives.INT32,
        "int64": primitives.INT64,
        "float64": primitives.FLOAT64,
        "bool": primitives.BOOLEAN,
        "uuid": primitives.UUID,
    }
    if scalar in fixed:
        return fixed[scalar]
    if scalar == "string":
        return primitives.String(compact=flexible, nullable=nullable)
    if scalar == "bytes":
        return primitives.Bytes(compact=flexible, nullable=nullable)
    return primitives.Bytes(compact=flexible, nullable=nullable, zero_copy=True, name="records")


def min_bytes(type_: WireType, version: int, *, flexible: bool) -> int:
    """The fewest bytes a value of ``type_`` takes at ``version`` (bounds array counts before allocating)."""
    if isinstance(type_, ArrayOf):
        return 1 if flexible else 4
    if isinstance(type_, str):
        return primitives.min_size(primitive_for(type_, flexible=flexible, nullable=True))
    schema = schema_of(type_)
    total = sum(min_bytes(f.wire.type, version, flexible=flexible) for f in schema.positional(version))
    return total + (1 if flexible else 0)

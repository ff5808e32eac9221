"""Hypothesis strategies for protocol values, built from the message schemas themselves.

``struct_values(cls, version, flexible)`` draws a message in which every field that exists at ``version``
holds a random valid value and every other field its default, so an encode/decode round trip must give it
back exactly (after :func:`normalize`).
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from broker.protocol.schema import ArrayOf, StructClass, WireType, schema_of

_SCALARS: dict[str, st.SearchStrategy[Any]] = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=16),
    "records": st.binary(max_size=48),
}


def value_strategy(
    type_: WireType, version: int, *, flexible: bool, nullable: bool
) -> st.SearchStrategy[Any]:
    if isinstance(type_, str):
        strategy = _SCALARS[type_]
    elif isinstance(type_, ArrayOf):
        element = value_strategy(type_.element, version, flexible=flexible, nullable=False)
        strategy = st.lists(element, max_size=3)
    else:
        strategy = struct_values(type_, version, flexible=flexible)
    return st.none() | strategy if nullable else strategy


def struct_values(cls: StructClass, version: int, *, flexible: bool) -> st.SearchStrategy[Any]:
    fields = []
    for field in schema_of(cls).fields:
        if not field.present_in(version):
            fields.append(st.just(field.default))
            continue
        # A tagged struct field is absent (None) or present; a positional one is never null.
        nullable = field.nullable_in(version) or (field.tagged_in(version) and field.default is None)
        fields.append(value_strategy(field.wire.type, version, flexible=flexible, nullable=nullable))
    return st.tuples(*fields).map(lambda values: cls(*values))


def normalize(value: Any) -> Any:
    """A comparable form: structs as (class name, fields), sequences as lists, buffers as bytes."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return (type(value).__name__, *(normalize(item) for item in value))
    if isinstance(value, list | tuple):
        return [normalize(item) for item in value]
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def filled(cls: StructClass, version: int) -> Any:
    """A deterministic message with every field that exists at ``version`` set to a non-default value
    (arrays of two elements), for tests that walk every byte of an encoding."""
    values = [
        _filled_value(field.wire.type, version) if field.present_in(version) else field.default
        for field in schema_of(cls).fields
    ]
    return cls(*values)


def _filled_value(type_: WireType, version: int) -> Any:
    if isinstance(type_, ArrayOf):
        return [_filled_value(type_.element, version) for _ in range(2)]
    if not isinstance(type_, str):
        return filled(type_, version)
    return {
        "int8": 5,
        "int16": 300,
        "uint16": 60000,
        "int32": 70000,
        "int64": 2**40,
        "float64": 0.25,
        "bool": True,
        "uuid": uuid.UUID(int=0x1234),
        "string": "tópico",
        "bytes": b"\x00\x01",
        "records": b"record-batch",
    }[type_]

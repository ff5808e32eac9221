"""Declaring messages: version ranges, field specs, and the declarations the compiler refuses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, NamedTuple

import pytest

from broker.protocol import compiler
from broker.protocol.errors import SchemaDefinitionError
from broker.protocol.schema import MAX_VERSION, VersionRange, array, min_bytes, schema_of, wire


@pytest.mark.parametrize(
    ("text", "low", "high"), [("0+", 0, MAX_VERSION), ("3-12", 3, 12), ("7", 7, 7), (" 5+ ", 5, MAX_VERSION)]
)
def test_version_ranges(text, low, high):
    versions = VersionRange.parse(text)
    assert (versions.low, versions.high) == (low, high)
    assert low in versions
    assert high in versions
    assert low - 1 not in versions


def test_bad_version_range():
    with pytest.raises(SchemaDefinitionError, match=r"bad version range 'x\+'"):
        VersionRange.parse("x+")


class Inner(NamedTuple):
    a: Annotated[int, wire("int32")] = 0


class Outer(NamedTuple):
    tagged_int: Annotated[int, wire("int32", "1+", tag=3)] = -1
    name: Annotated[str | None, wire("string", nullable="2+")] = ""
    inners: Annotated[Sequence[Inner], wire(array(Inner), "1+")] = ()


def test_schema_of_reads_the_annotations():
    schema = schema_of(Outer)
    assert [f.name for f in schema.fields] == ["tagged_int", "name", "inners"]
    assert [f.name for f in schema.positional(0)] == ["name"]
    assert [f.name for f in schema.positional(1)] == ["name", "inners"]
    assert [f.name for f in schema.tagged(1)] == ["tagged_int"]
    assert schema.fields[1].nullable_in(2)
    assert not schema.fields[1].nullable_in(1)
    assert min_bytes(Outer, 1, flexible=False) == 2 + 4
    assert min_bytes(Outer, 1, flexible=True) == 1 + 1 + 1


class Unannotated(NamedTuple):
    a: int = 0


class NoDefault(NamedTuple):
    a: Annotated[int, wire("int32")]


class BadType(NamedTuple):
    a: Annotated[int, wire("int24")] = 0


class DuplicateTag(NamedTuple):
    a: Annotated[int, wire("int32", tag=1)] = 0
    b: Annotated[int, wire("int32", tag=1)] = 0


class Empty(NamedTuple):
    a: Annotated[int, wire("int32", "5+")] = 0


class ArrayOfEmpty(NamedTuple):
    items: Annotated[Sequence[Empty], wire(array(Empty))] = ()


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (Unannotated, r"Unannotated.a: annotate with Annotated\[<type>, wire\(...\)\] exactly once"),
        (NoDefault, r"NoDefault.a: every field needs a default"),
        (BadType, r"BadType.a: unknown type 'int24'"),
        (DuplicateTag, r"DuplicateTag.b: tag 1 is already used by a"),
        (int, r"is not a NamedTuple struct class"),
    ],
)
def test_refused_declarations(cls, message):
    with pytest.raises(SchemaDefinitionError, match=message):
        schema_of(cls)


def test_tagged_field_in_a_non_flexible_version_is_refused():
    with pytest.raises(SchemaDefinitionError, match=r"Outer.tagged_int: tagged at v1, which is not flexible"):
        compiler.codec_for(Outer, 1, flexible=False)


def test_array_of_possibly_empty_structs_is_refused():
    # At v0 an Empty has no bytes, so a count of 2**31 could not be bounded by the bytes left.
    with pytest.raises(SchemaDefinitionError, match=r"array elements can be empty at v0"):
        compiler.codec_for(ArrayOfEmpty, 0, flexible=False)


def test_wire_needs_a_tag_for_tagged_versions():
    with pytest.raises(SchemaDefinitionError, match=r"tagged versions '3\+' given without a tag"):
        wire("int32", tagged="3+")

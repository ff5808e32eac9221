"""Every Avro resolution rule, table-driven; each case is also decoded by fastavro to prove the checker right.

For a case the checker calls compatible, fastavro must decode the datum (written with the writer schema) with
the reader schema, giving exactly ``decoded``. For an incompatible one, the datum exercises the broken rule,
and fastavro must refuse to decode it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import fastavro
import pytest
from fastavro.read import SchemaResolutionError

from schemas.avro_schema import AvroSchema
from schemas.errors import InvalidCompatibilityLevelError
from schemas.registry.compatibility import Rule, check_compatibility, incompatibilities
from schemas.registry.compatibility_level import CompatibilityLevel

_UNSET = object()


@dataclass(frozen=True)
class Case:
    id: str
    writer: Any
    reader: Any
    datum: Any
    rules: tuple[Rule, ...] = ()  # () = compatible
    message: str = ""  # str() of the single incompatibility, exactly
    decoded: Any = _UNSET  # what fastavro reads (compatible cases); default: the datum itself


def rec(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def f(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def enum(name: str, symbols: list[str], **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": symbols, **extra}


def fixed(name: str, size: int) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size}


def node(value_type: str) -> dict[str, Any]:
    return rec("Node", f("value", value_type), f("next", ["null", "Node"], default=None))


CASES = [
    # -- primitives: same type and the promotions -------------------------------------------------------
    Case("same-int", "int", "int", 7),
    Case("int-to-long", "int", "long", 7),
    Case("int-to-float", "int", "float", 7, decoded=7.0),
    Case("int-to-double", "int", "double", 7, decoded=7.0),
    Case("long-to-float", "long", "float", 2**40, decoded=float(2**40)),
    Case("long-to-double", "long", "double", 2**40, decoded=float(2**40)),
    Case("float-to-double", "float", "double", 1.5),
    Case("string-to-bytes", "string", "bytes", "hé", decoded="hé".encode()),
    Case("bytes-to-string", "bytes", "string", b"h\xc3\xa9", decoded="hé"),
    Case(
        "long-to-int",
        "long",
        "int",
        7,
        (Rule.TYPE_MISMATCH,),
        "at 'int': writer type long cannot be promoted to reader type int",
    ),
    Case(
        "double-to-float",
        "double",
        "float",
        1.5,
        (Rule.TYPE_MISMATCH,),
        "at 'float': writer type double cannot be promoted to reader type float",
    ),
    Case(
        "float-to-long",
        "float",
        "long",
        1.5,
        (Rule.TYPE_MISMATCH,),
        "at 'long': writer type float cannot be promoted to reader type long",
    ),
    Case(
        "boolean-to-int",
        "boolean",
        "int",
        True,
        (Rule.TYPE_MISMATCH,),
        "at 'int': writer type boolean cannot be promoted to reader type int",
    ),
    Case(
        "null-to-string",
        "null",
        "string",
        None,
        (Rule.TYPE_MISMATCH,),
        "at 'string': writer type null cannot be promoted to reader type string",
    ),
    # -- records: fields with and without defaults ------------------------------------------------------
    Case(
        "reader-adds-field-with-default",
        rec("User", f("name", "string")),
        rec("User", f("name", "string"), f("age", "int", default=-1)),
        {"name": "ann"},
        decoded={"name": "ann", "age": -1},
    ),
    Case(
        "reader-adds-field-without-default",
        rec("User", f("name", "string")),
        rec("User", f("name", "string"), f("age", "int")),
        {"name": "ann"},
        (Rule.MISSING_FIELD_DEFAULT,),
        "field 'User.age': reader field 'age' has no default and the writer has no field 'age'",
    ),
    Case(
        "reader-drops-field",
        rec("User", f("name", "string"), f("age", "int")),
        rec("User", f("name", "string")),
        {"name": "ann", "age": 3},
        decoded={"name": "ann"},
    ),
    Case(
        "field-type-mismatch",
        rec("User", f("name", "string"), f("age", "string")),
        rec("User", f("name", "string"), f("age", "int")),
        {"name": "ann", "age": "3"},
        (Rule.TYPE_MISMATCH,),
        "field 'User.age': writer type string cannot be promoted to reader type int",
    ),
    Case(
        "field-promoted",
        rec("User", f("age", "int")),
        rec("User", f("age", "double")),
        {"age": 3},
        decoded={"age": 3.0},
    ),
    Case(
        "field-renamed-with-alias",
        rec("User", f("full_name", "string")),
        rec("User", f("name", "string", aliases=["full_name"])),
        {"full_name": "ann"},
        decoded={"name": "ann"},
    ),
    Case(
        "field-renamed-without-alias",
        rec("User", f("full_name", "string")),
        rec("User", f("name", "string")),
        {"full_name": "ann"},
        (Rule.MISSING_FIELD_DEFAULT,),
        "field 'User.name': reader field 'name' has no default and the writer has no field 'name'",
    ),
    # -- named types: names, namespaces and aliases -----------------------------------------------------
    Case(
        "record-name-differs",
        rec("User", f("name", "string")),
        rec("Member", f("name", "string")),
        {"name": "ann"},
        (Rule.NAME_MISMATCH,),
        "at 'Member': writer record User does not match reader record Member: the names differ and 'User' "
        "is not among the reader's aliases",
    ),
    Case(
        "record-renamed-with-alias",
        rec("User", f("name", "string"), namespace="a"),
        rec("Member", f("name", "string"), namespace="a", aliases=["User"]),
        {"name": "ann"},
    ),
    Case(
        "record-namespace-differs",
        rec("User", f("name", "string"), namespace="old.ns"),
        rec("User", f("name", "string"), namespace="new.ns"),
        {"name": "ann"},
    ),
    Case(
        "nested-record-field-mismatch",
        rec("Outer", f("inner", rec("Inner", f("x", "string")))),
        rec("Outer", f("inner", rec("Inner", f("x", "long")))),
        {"inner": {"x": "1"}},
        (Rule.TYPE_MISMATCH,),
        "field 'Outer.inner.x': writer type string cannot be promoted to reader type long",
    ),
    Case(
        "nested-record-adds-field-without-default",
        rec("Outer", f("inner", rec("Inner", f("x", "int")))),
        rec("Outer", f("inner", rec("Inner", f("x", "int"), f("y", "int")))),
        {"inner": {"x": 1}},
        (Rule.MISSING_FIELD_DEFAULT,),
        "field 'Outer.inner.y': reader field 'y' has no default and the writer has no field 'y'",
    ),
    Case(
        "nested-record-adds-field-with-default",
        rec("Outer", f("inner", rec("Inner", f("x", "int")))),
        rec("Outer", f("inner", rec("Inner", f("x", "long"), f("y", "string", default="none")))),
        {"inner": {"x": 1}},
        decoded={"inner": {"x": 1, "y": "none"}},
    ),
    # -- enums ---------------------------------------------------------------------------------------------
    Case(
        "enum-reader-superset",
        enum("Color", ["RED", "GREEN"]),
        enum("Color", ["RED", "GREEN", "BLUE"]),
        "GREEN",
    ),
    Case(
        "enum-writer-symbol-missing",
        enum("Color", ["RED", "GREEN", "BLUE"]),
        enum("Color", ["RED", "GREEN"]),
        "BLUE",
        (Rule.MISSING_ENUM_SYMBOLS,),
        "at 'Color': writer symbols ['BLUE'] are not in reader enum Color, which has no default",
    ),
    Case(
        "enum-writer-symbol-missing-reader-default",
        enum("Color", ["RED", "GREEN", "BLUE"]),
        enum("Color", ["UNKNOWN", "RED", "GREEN"], default="UNKNOWN"),
        "BLUE",
        decoded="UNKNOWN",
    ),
    Case(
        "enum-name-differs",
        enum("Color", ["RED"]),
        enum("Colour", ["RED"]),
        "RED",
        (Rule.NAME_MISMATCH,),
        "at 'Colour': writer enum Color does not match reader enum Colour: the names differ and 'Color' is "
        "not among the reader's aliases",
    ),
    Case(
        "enum-in-field-symbol-missing",
        rec("Event", f("color", enum("Color", ["RED", "BLUE"]))),
        rec("Event", f("color", enum("Color", ["RED"]))),
        {"color": "BLUE"},
        (Rule.MISSING_ENUM_SYMBOLS,),
        "field 'Event.color': writer symbols ['BLUE'] are not in reader enum Color, which has no default",
    ),
    # -- fixed ---------------------------------------------------------------------------------------------
    Case("fixed-same", fixed("Md5", 16), fixed("Md5", 16), b"0123456789abcdef"),
    Case(
        "fixed-size-differs",
        fixed("Hash", 16),
        fixed("Hash", 32),
        b"0123456789abcdef",
        (Rule.FIXED_SIZE_MISMATCH,),
        "at 'Hash': writer fixed Hash has size 16, reader fixed Hash has size 32",
    ),
    Case(
        "fixed-name-differs",
        fixed("Md5", 16),
        fixed("Digest", 16),
        b"0123456789abcdef",
        (Rule.NAME_MISMATCH,),
        "at 'Digest': writer fixed Md5 does not match reader fixed Digest: the names differ and 'Md5' is not "
        "among the reader's aliases",
    ),
    # -- arrays and maps -----------------------------------------------------------------------------------
    Case(
        "array-items-promoted",
        rec("R", f("xs", {"type": "array", "items": "int"})),
        rec("R", f("xs", {"type": "array", "items": "long"})),
        {"xs": [1, 2]},
    ),
    Case(
        "array-items-mismatch",
        rec("R", f("xs", {"type": "array", "items": "string"})),
        rec("R", f("xs", {"type": "array", "items": "int"})),
        {"xs": ["1"]},
        (Rule.TYPE_MISMATCH,),
        "at 'R.xs[]': writer type string cannot be promoted to reader type int",
    ),
    Case(
        "map-values-promoted",
        rec("R", f("m", {"type": "map", "values": "int"})),
        rec("R", f("m", {"type": "map", "values": "double"})),
        {"m": {"a": 1}},
        decoded={"m": {"a": 1.0}},
    ),
    Case(
        "map-values-mismatch",
        rec("R", f("m", {"type": "map", "values": "string"})),
        rec("R", f("m", {"type": "map", "values": "boolean"})),
        {"m": {"a": "x"}},
        (Rule.TYPE_MISMATCH,),
        "at 'R.m{}': writer type string cannot be promoted to reader type boolean",
    ),
    Case(
        "array-of-records-field-missing",
        {"type": "array", "items": rec("Item", f("id", "long"))},
        {"type": "array", "items": rec("Item", f("id", "long"), f("qty", "int"))},
        [{"id": 1}],
        (Rule.MISSING_FIELD_DEFAULT,),
        "field 'array[].qty': reader field 'qty' has no default and the writer has no field 'qty'",
    ),
    Case(
        "array-vs-map",
        rec("R", f("xs", {"type": "array", "items": "int"})),
        rec("R", f("xs", {"type": "map", "values": "int"})),
        {"xs": [1]},
        (Rule.TYPE_MISMATCH,),
        "field 'R.xs': writer type array cannot be read as reader type map",
    ),
    Case(
        "record-vs-string",
        rec("R", f("x", rec("Inner", f("a", "int")))),
        rec("R", f("x", "string")),
        {"x": {"a": 1}},
        (Rule.TYPE_MISMATCH,),
        "field 'R.x': writer type record Inner cannot be read as reader type string",
    ),
    # -- unions --------------------------------------------------------------------------------------------
    Case("union-reader-gains-branch", ["null", "string"], ["null", "string", "int"], "x"),
    Case(
        "union-writer-branch-missing",
        ["null", "string", "int"],
        ["null", "string"],
        5,
        (Rule.MISSING_UNION_BRANCH,),
        "at 'union': writer type int is not in the reader's union [null, string]",
    ),
    Case("plain-into-union", "string", ["null", "string"], "x"),
    Case("plain-promoted-into-union", "int", ["null", "long"], 5),
    Case(
        "plain-not-in-union",
        "int",
        ["null", "string"],
        5,
        (Rule.MISSING_UNION_BRANCH,),
        "at 'union': writer type int is not in the reader's union [null, string]",
    ),
    Case(
        "union-into-plain",
        ["null", "int"],
        "int",
        None,
        (Rule.TYPE_MISMATCH,),
        "at 'int': writer type null cannot be promoted to reader type int",
    ),
    Case("union-all-promote-into-plain", ["int", "long"], "double", 5, decoded=5.0),
    Case(
        "nullable-field-becomes-required",
        rec("R", f("x", ["null", "string"], default=None)),
        rec("R", f("x", "string")),
        {"x": None},
        (Rule.TYPE_MISMATCH,),
        "field 'R.x': writer type null cannot be promoted to reader type string",
    ),
    Case(
        "union-of-records-evolves",
        rec("R", f("x", ["null", rec("Inner", f("a", "int"))], default=None)),
        rec("R", f("x", ["null", rec("Inner", f("a", "int"), f("b", "int", default=0))], default=None)),
        {"x": {"a": 1}},
        decoded={"x": {"a": 1, "b": 0}},
    ),
    Case(
        "union-record-branch-breaks",
        rec("R", f("x", ["null", rec("Inner", f("a", "int"))], default=None)),
        rec("R", f("x", ["null", rec("Inner", f("a", "int"), f("b", "int"))], default=None)),
        {"x": {"a": 1}},
        (Rule.MISSING_FIELD_DEFAULT,),
        "field 'R.x.b': reader field 'b' has no default and the writer has no field 'b'",
    ),
    # -- recursive types -----------------------------------------------------------------------------------
    Case(
        "recursive-promoted",
        node("int"),
        node("long"),
        {"value": 1, "next": {"value": 2, "next": None}},
    ),
    Case(
        "recursive-mismatch",
        node("int"),
        node("string"),
        {"value": 1, "next": None},
        (Rule.TYPE_MISMATCH,),
        "field 'Node.value': writer type int cannot be promoted to reader type string",
    ),
]


def fastavro_decode(writer: AvroSchema, reader: AvroSchema, datum: Any) -> Any:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, writer.fastavro_schema, datum)
    buffer.seek(0)
    value = fastavro.schemaless_reader(buffer, writer.fastavro_schema, reader.fastavro_schema)
    assert buffer.tell() == len(buffer.getvalue())
    return value


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_and_fastavro_agree(case: Case) -> None:
    writer = AvroSchema.from_json(case.writer)
    reader = AvroSchema.from_json(case.reader)
    found = incompatibilities(reader=reader, writer=writer)
    assert tuple(i.rule for i in found) == case.rules
    if case.rules:
        assert [str(i) for i in found] == [case.message]
        with pytest.raises((SchemaResolutionError, ValueError, TypeError, KeyError)):
            fastavro_decode(writer, reader, case.datum)
    else:
        expected = case.datum if case.decoded is _UNSET else case.decoded
        decoded = fastavro_decode(writer, reader, case.datum)
        assert decoded == expected
        assert type(decoded) is type(expected)


def test_every_rule_is_covered() -> None:
    covered = {rule for case in CASES for rule in case.rules}
    assert covered == set(Rule)


def test_all_problems_are_reported_with_their_paths() -> None:
    writer = AvroSchema.from_json(
        rec(
            "Event",
            f("a", "string"),
            f("b", {"type": "array", "items": "long"}),
            f("c", enum("E", ["X", "Y"])),
        )
    )
    reader = AvroSchema.from_json(
        rec(
            "Event",
            f("a", "int"),
            f("b", {"type": "array", "items": "int"}),
            f("c", enum("E", ["X"])),
            f("d", "string"),
        )
    )
    assert [str(i) for i in incompatibilities(reader=reader, writer=writer)] == [
        "field 'Event.a': writer type string cannot be promoted to reader type int",
        "at 'Event.b[]': writer type long cannot be promoted to reader type int",
        "field 'Event.c': writer symbols ['Y'] are not in reader enum E, which has no default",
        "field 'Event.d': reader field 'd' has no default and the writer has no field 'd'",
    ]


# -- levels: which versions, which direction ---------------------------------------------------------------

V1 = AvroSchema.from_json(rec("Doc", f("a", "int")))
V2 = AvroSchema.from_json(rec("Doc", f("a", "int"), f("b", "string", default="")))
# b loses its default: reads v2 data (it has b) but not v1 data
NEW = AvroSchema.from_json(rec("Doc", f("a", "int"), f("b", "string")))
BACKWARD_V1 = (
    "BACKWARD: the new schema cannot read data written with version 1: field 'Doc.b': reader field 'b' has "
    "no default and the writer has no field 'b'"
)


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (CompatibilityLevel.NONE, []),
        (CompatibilityLevel.BACKWARD, []),
        (CompatibilityLevel.BACKWARD_TRANSITIVE, [BACKWARD_V1]),
        (CompatibilityLevel.FORWARD, []),
        (CompatibilityLevel.FORWARD_TRANSITIVE, []),
        (CompatibilityLevel.FULL, []),
        (CompatibilityLevel.FULL_TRANSITIVE, [BACKWARD_V1]),
    ],
)
def test_levels_choose_versions_and_directions(level: CompatibilityLevel, expected: list[str]) -> None:
    assert check_compatibility(NEW, [(1, V1), (2, V2)], level) == expected


def test_forward_breaks_when_an_old_reader_needs_a_removed_field() -> None:
    dropped = AvroSchema.from_json(rec("Doc", f("b", "string", default="")))
    message = (
        "FORWARD: version 2 cannot read data written with the new schema: field 'Doc.a': reader field 'a' "
        "has no default and the writer has no field 'a'"
    )
    assert check_compatibility(dropped, [(1, V1), (2, V2)], CompatibilityLevel.BACKWARD) == []
    assert check_compatibility(dropped, [(1, V1), (2, V2)], CompatibilityLevel.FORWARD) == [message]
    assert check_compatibility(dropped, [(1, V1), (2, V2)], CompatibilityLevel.FULL) == [message]


def test_nothing_to_check_against_is_compatible() -> None:
    assert check_compatibility(NEW, [], CompatibilityLevel.FULL_TRANSITIVE) == []


def test_level_parsing() -> None:
    assert CompatibilityLevel.parse("full_transitive") is CompatibilityLevel.FULL_TRANSITIVE
    assert CompatibilityLevel.BACKWARD.as_transitive() is CompatibilityLevel.BACKWARD_TRANSITIVE
    assert CompatibilityLevel.NONE.as_transitive() is CompatibilityLevel.NONE
    with pytest.raises(InvalidCompatibilityLevelError) as info:
        CompatibilityLevel.parse("SIDEWAYS")
    assert info.value.error_code == 42203
    assert str(info.value) == (
        "Invalid compatibility level 'SIDEWAYS'. Valid values are BACKWARD, BACKWARD_TRANSITIVE, FORWARD, "
        "FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE, NONE"
    )

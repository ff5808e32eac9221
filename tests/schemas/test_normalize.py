from __future__ import annotations

import json

import pytest

from schemas.avro_schema import AvroSchema
from schemas.errors import InvalidSchemaError
from schemas.shipped import SHIPPED, shipped_schema_text

BASE = (
    '{"type": "record", "name": "PageView", "namespace": "lumber.t", "fields": ['
    '{"name": "id", "type": "string"}, {"name": "n", "type": ["null", "long"], "default": null}]}'
)
BASE_CANONICAL = (
    '{"fields":[{"name":"id","type":"string"},{"default":null,"name":"n","type":["null","long"]}],'
    '"name":"lumber.t.PageView","type":"record"}'
)


def canonical(text: str) -> str:
    return AvroSchema.parse(text).canonical


def test_exact_normalized_form() -> None:
    assert canonical(BASE) == BASE_CANONICAL


@pytest.mark.parametrize(
    "spelling",
    [
        # whitespace and key order
        (
            '{"fields":[{"type":"string","name":"id"},{"default":null,"type":["null","long"],"name":"n"}],'
            '"namespace":"lumber.t","name":"PageView","type":"record"}'
        ),
        "\n\n" + BASE.replace(" ", "\n  ") + "\n",
        # full name instead of namespace; namespace ignored when the name is qualified
        BASE.replace('"name": "PageView", "namespace": "lumber.t"', '"name": "lumber.t.PageView"'),
        BASE.replace(
            '"name": "PageView", "namespace": "lumber.t"', '"name": "lumber.t.PageView", "namespace": "x"'
        ),
        # {"type": "string"} is "string"; "order": "ascending" and empty aliases are the defaults
        BASE.replace('"type": "string"}', '"type": {"type": "string"}, "order": "ascending", "aliases": []}'),
    ],
)
def test_spellings_of_one_schema_normalize_equal(spelling: str) -> None:
    assert canonical(spelling) == BASE_CANONICAL


@pytest.mark.parametrize(
    "variant",
    [
        BASE.replace('"fields"', '"doc": "views", "fields"'),  # a doc is kept
        BASE.replace('"default": null', '"default": null, "doc": "count"'),
        BASE.replace('"name": "id", "type": "string"', '"name": "id", "type": "string", "aliases": ["uuid"]'),
        BASE.replace('"fields"', '"connect.name": "x", "fields"'),  # custom properties are kept
        BASE.replace('"type": "string"}', '"type": {"type": "string", "logicalType": "uuid"}}'),
        BASE.replace(
            '"name": "id", "type": "string"', '"name": "id", "type": "string", "order": "descending"'
        ),
        BASE.replace('"namespace": "lumber.t"', '"namespace": "lumber.u"'),
        # field order matters (it is the binary layout)
        (
            '{"type": "record", "name": "PageView", "namespace": "lumber.t", "fields": ['
            '{"name": "n", "type": ["null", "long"], "default": null}, {"name": "id", "type": "string"}]}'
        ),
    ],
)
def test_meaningful_differences_are_kept(variant: str) -> None:
    assert canonical(variant) != BASE_CANONICAL


def test_names_references_and_aliases_are_fully_qualified() -> None:
    text = json.dumps(
        {
            "type": "record",
            "name": "Outer",
            "namespace": "a.b",
            "aliases": ["OldOuter", "x.Other"],
            "fields": [
                {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X"]}},
                {"name": "e2", "type": "E"},
                {"name": "top", "type": {"type": "fixed", "name": "Top", "namespace": "", "size": 2}},
                {"name": "d", "type": "double", "default": 1},
            ],
        }
    )
    assert canonical(text) == (
        '{"aliases":["a.b.OldOuter","x.Other"],"fields":['
        '{"name":"e","type":{"name":"a.b.E","symbols":["X"],"type":"enum"}},'
        '{"name":"e2","type":"a.b.E"},'
        '{"name":"top","type":{"name":"Top","namespace":"","size":2,"type":"fixed"}},'
        '{"default":1.0,"name":"d","type":"double"}],"name":"a.b.Outer","type":"record"}'
    )


@pytest.mark.parametrize("name", SHIPPED)
def test_normalizing_is_idempotent_and_fastavro_reads_the_result(name: str) -> None:
    once = AvroSchema.parse(shipped_schema_text(name))
    twice = AvroSchema.parse(once.canonical)
    assert twice.canonical == once.canonical
    assert twice.fingerprint == once.fingerprint
    assert twice == once
    assert hash(twice) == hash(once)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "Invalid schema: not valid JSON: Expecting property name enclosed in double quotes"),
        ('{"type": "int", "type": "long"}', "duplicate key 'type' in a JSON object"),
        (
            '{"type": "record", "name": "R", "fields": [{"name": "x", "type": "float", "default": NaN}]}',
            "NaN is not",
        ),
        ('"nope"', "at schema: unknown type 'nope'"),
        ("42", "at schema: a schema is a JSON string, object or array, got 42"),
        ('{"type": "record", "fields": []}', "a record needs a 'name' string, got None"),
        ('{"type": "record", "name": "1R", "fields": []}', "invalid name '1R'"),
        ('{"type": "record", "name": "R"}', "a record needs a 'fields' array"),
        (
            (
                '{"type": "record", "name": "R", "fields": '
                '[{"name": "x", "type": "int"}, {"name": "x", "type": "int"}]}'
            ),
            "at R.fields[1] 'x': duplicate field name 'x'",
        ),
        (
            '{"type": "record", "name": "R", "fields": [{"name": "x", "type": "Missing"}]}',
            "at R.fields[0] 'x'.type: unknown type 'Missing'",
        ),
        (
            '{"type": "record", "name": "R", "fields": [{"name": "x", "type": "int", "default": "1"}]}',
            "at R.fields[0] 'x'.default: default '1' does not match type int",
        ),
        (
            (
                '{"type": "record", "name": "R", "fields": '
                '[{"name": "x", "type": "int", "default": 4294967296}]}'
            ),
            "default 4294967296 does not match type int",
        ),
        (
            (
                '{"type": "record", "name": "R", "fields": '
                '[{"name": "x", "type": ["null", "int"], "default": 1}]}'
            ),
            "a union's default must match its first branch (null)",
        ),
        ('{"type": "enum", "name": "E", "symbols": ["A", "A"]}', "enum E: duplicate symbols"),
        ('{"type": "enum", "name": "E", "symbols": ["A"], "default": "B"}', "enum E: default 'B' is not one"),
        ('{"type": "fixed", "name": "F", "size": -1}', "fixed F needs a non-negative integer 'size', got -1"),
        ('["int", "int"]', "the union has two branches of type int (branches 0 and 1)"),
        ('["null", ["int"]]', "a union cannot directly contain another union"),
        ("[]", "a union needs at least one branch"),
        ('{"type": "array"}', "an array needs 'items'"),
        ('{"type": "int", "name": "x"', "not valid JSON"),
        ('{"type": "record", "name": "int", "fields": []}', "a named type cannot be called 'int'"),
        (
            '[{"type": "fixed", "name": "F", "size": 1}, {"type": "fixed", "name": "F", "size": 2}]',
            "the name 'F' is defined twice",
        ),
        ('{"type": "whatever"}', "unknown type 'whatever'"),
        ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ],
)
def test_invalid_schemas_say_why_and_where(text: str, message: str) -> None:
    with pytest.raises(InvalidSchemaError) as info:
        AvroSchema.parse(text)
    assert info.value.error_code == 42201
    assert message in str(info.value)
    assert str(info.value).startswith("Invalid schema: ")


def test_deep_but_legal_nesting_is_bounded() -> None:
    text = '{"type": "array", "items": ' * 300 + '"int"' + "}" * 300
    with pytest.raises(InvalidSchemaError, match="nested more than 200 levels deep"):
        AvroSchema.parse(text)


def test_recursive_type() -> None:
    schema = AvroSchema.parse(
        '{"type": "record", "name": "Node", "fields": [{"name": "v", "type": "int"}, '
        '{"name": "next", "type": ["null", "Node"], "default": null}]}'
    )
    assert schema.canonical == (
        '{"fields":[{"name":"v","type":"int"},{"default":null,"name":"next","type":["null","Node"]}],'
        '"name":"Node","type":"record"}'
    )
    assert schema.type_name == "Node"

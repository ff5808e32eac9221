"""Avro reader schemas as Arrow schemas, and decoded records as Arrow columns (the load job's table shape).

Type mapping (every column nullable; Avro's ``["null", T]`` unions are how a field is optional):

==========================================  ==============================================
Avro                                        Arrow (Spark, Parquet)
==========================================  ==============================================
boolean, int, long, float, double           bool, int32, int64, float32, float64
string, enum; ``uuid`` strings              string
bytes, fixed                                binary
record                                      struct (the same field names)
array, map                                  list, map<string, _>
``["null", T]`` / ``[T, "null"]``           T
``date`` (int)                              date32
``timestamp-millis``/``-micros`` (long)     timestamp[us, UTC]
``local-timestamp-millis``/``-micros``      timestamp[us] (no zone)
``decimal`` (bytes or fixed)                decimal128(precision, scale)
==========================================  ==============================================

Other unions (two or more non-null branches) and the ``time-*`` logical types have no faithful column type:
:func:`payload_schema` raises :class:`~pipeline.load_errors.UnsupportedSchemaError` naming the field, when
the run is planned, before anything is read. Payload fields may not use the names of the load's own
columns (:data:`META_COLUMNS`, ``dt``, ``hr``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from pipeline.load_errors import UnsupportedSchemaError
from schemas.avro_schema import AvroSchema

#: The load's own columns, after the payload's.
META_COLUMNS = ("_topic", "_partition", "_offset", "_timestamp", "_schema_id", "_host")
#: Columns only staging has (they become folder names).
PARTITION_COLUMNS = ("_task", "dt", "hr")

META_FIELDS = (
    pa.field("_topic", pa.string()),
    pa.field("_partition", pa.int32()),
    pa.field("_offset", pa.int64()),
    pa.field("_timestamp", pa.int64()),
    pa.field("_schema_id", pa.int32()),
    pa.field("_host", pa.string()),
)
STAGING_FIELDS = (pa.field("_task", pa.int32()), pa.field("dt", pa.string()), pa.field("hr", pa.string()))
#: The error dataset: the metadata of the record, its raw key and value, why it was quarantined.
ERROR_SCHEMA = pa.schema(
    [
        *META_FIELDS,
        pa.field("_key", pa.binary()),
        pa.field("_value", pa.binary()),
        pa.field("_reason", pa.string()),
        pa.field("_error", pa.string()),
    ]
)

_PRIMITIVES: Mapping[str, pa.DataType] = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
_TIMESTAMP_UTC = pa.timestamp("us", tz="UTC")
_TIMESTAMP_LOCAL = pa.timestamp("us")


def payload_schema(schema: AvroSchema) -> pa.Schema:
    """The Arrow schema of a record schema's fields (raises :class:`UnsupportedSchemaError`)."""
    tree = _resolve(schema.tree, schema.names)
    if not isinstance(tree, Mapping) or tree.get("type") != "record":
        raise UnsupportedSchemaError(f"the reader schema must be a record, got {schema.type_name}")
    fields = [pa.field(f["name"], _arrow_type(f["type"], schema.names, f["name"])) for f in tree["fields"]]
    reserved = set(META_COLUMNS) | set(PARTITION_COLUMNS)
    for f in fields:
        if f.name in reserved:
            raise UnsupportedSchemaError(
                f"field {f.name!r} of {schema.type_name} has the name of one of the load's own columns "
                f"({', '.join(sorted(reserved))})"
            )
    return pa.schema(fields)


def data_schema(payload: pa.Schema) -> pa.Schema:
    """The output table: payload columns, then :data:`META_FIELDS`."""
    return pa.schema([*payload, *META_FIELDS])


def staging_schema(table: pa.Schema) -> pa.Schema:
    """``table`` plus the columns staging is partitioned by."""
    return pa.schema([*table, *STAGING_FIELDS])


def event_time_type(schema: AvroSchema, field_name: str) -> str:
    """How to read ``field_name`` as an event time: ``"ms"`` (int/long in ms) or ``"datetime"``.

    Raises :class:`UnsupportedSchemaError` when the field is missing or of another type.
    """
    tree = _resolve(schema.tree, schema.names)
    for f in tree["fields"]:
        if f["name"] == field_name:
            arrow = _arrow_type(f["type"], schema.names, field_name)
            if pa.types.is_integer(arrow):
                return "ms"
            if pa.types.is_timestamp(arrow):
                return "datetime"
            raise UnsupportedSchemaError(
                f"event time field {field_name!r} of {schema.type_name} is {arrow}, expected a long "
                "(ms since the epoch) or an Avro timestamp"
            )
    raise UnsupportedSchemaError(
        f"event time field {field_name!r} is not a field of {schema.type_name} (the topic's reader schema)"
    )


def columns(records: Sequence[Mapping[str, Any]], payload: pa.Schema) -> list[pa.Array]:
    """One Arrow array per payload field, from decoded records (fastavro's dicts)."""
    out = []
    for f in payload:
        name = f.name
        values = [record.get(name) for record in records]
        out.append(pa.array(_prepare(values, f.type), type=f.type))
    return out


def _prepare(values: list[Any], arrow: pa.DataType) -> list[Any]:
    """Shape Python values for ``pa.array``: maps become lists of pairs (recursively)."""
    if pa.types.is_map(arrow):
        item = arrow.item_type
        return [
            None if v is None else list(zip(v.keys(), _prepare(list(v.values()), item), strict=True))
            for v in values
        ]
    if pa.types.is_list(arrow) and _needs_prepare(arrow.value_type):
        return [None if v is None else _prepare(list(v), arrow.value_type) for v in values]
    if pa.types.is_struct(arrow) and _needs_prepare(arrow):
        out: list[Any] = []
        for v in values:
            if v is None:
                out.append(None)
                continue
            out.append(
                {
                    arrow.field(i).name: _prepare([v.get(arrow.field(i).name)], arrow.field(i).type)[0]
                    for i in range(arrow.num_fields)
                }
            )
        return out
    return values


def _needs_prepare(arrow: pa.DataType) -> bool:
    if pa.types.is_map(arrow):
        return True
    if pa.types.is_list(arrow):
        return _needs_prepare(arrow.value_type)
    if pa.types.is_struct(arrow):
        return any(_needs_prepare(arrow.field(i).type) for i in range(arrow.num_fields))
    return False


def _resolve(node: Any, names: Mapping[str, Mapping[str, Any]]) -> Any:
    if isinstance(node, str) and node in names:
        return names[node]
    return node


def _arrow_type(node: Any, names: Mapping[str, Mapping[str, Any]], path: str) -> pa.DataType:
    node = _resolve(node, names)
    if isinstance(node, list):
        branches = [b for b in node if b != "null"]
        if len(branches) != 1:
            raise UnsupportedSchemaError(
                f"field {path!r}: union {node} has {len(branches)} non-null branches; the output supports "
                "optional fields (['null', T]) only"
            )
        return _arrow_type(branches[0], names, path)
    if isinstance(node, str):
        if node == "null":
            raise UnsupportedSchemaError(f"field {path!r} is of type null: it has no column type")
        if node in _PRIMITIVES:
            return _PRIMITIVES[node]
        raise UnsupportedSchemaError(f"field {path!r}: unknown type {node!r}")
    kind = node["type"]
    logical = node.get("logicalType")
    if logical is not None:
        found = _logical_type(node, kind, logical, path)
        if found is not None:
            return found
    if isinstance(kind, str) and kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "record":
        return pa.struct(
            [
                pa.field(f["name"], _arrow_type(f["type"], names, f"{path}.{f['name']}"))
                for f in node["fields"]
            ]
        )
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    if kind == "array":
        return pa.list_(_arrow_type(node["items"], names, f"{path}[]"))
    if kind == "map":
        return pa.map_(pa.string(), _arrow_type(node["values"], names, f"{path}{{}}"))
    return _arrow_type(kind, names, path)


def _logical_type(node: Mapping[str, Any], kind: Any, logical: str, path: str) -> pa.DataType | None:
    if logical == "date" and kind == "int":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return _TIMESTAMP_UTC
    if logical in ("local-timestamp-millis", "local-timestamp-micros") and kind == "long":
        return _TIMESTAMP_LOCAL
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision = int(node.get("precision", 0))
        scale = int(node.get("scale", 0))
        if not 1 <= precision <= 38:
            raise UnsupportedSchemaError(f"field {path!r}: decimal precision {precision} is outside 1..38")
        return pa.decimal128(precision, scale)
    if logical in ("time-millis", "time-micros"):
        raise UnsupportedSchemaError(f"field {path!r}: logical type {logical} has no column type here")
    return None  # uuid and unknown logical types: the underlying type (as Avro readers must)

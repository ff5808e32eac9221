"""A validated Avro schema in the registry's normalized form (see :mod:`schemas.normalize`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fastavro import parse_schema as fastavro_parse_schema
from fastavro.schema import SchemaParseException, UnknownType

from schemas.errors import InvalidSchemaError
from schemas.normalize import NAMED_KINDS, PRIMITIVES, normalize, parse_json


@dataclass(frozen=True, eq=False)
class AvroSchema:
    """An immutable, validated Avro schema. Equal (and hashed) by its normalized text.

    ``tree`` is the normalized JSON value (each named type defined at its first occurrence, referenced by
    full name afterwards) and ``names`` maps each full name to its definition inside ``tree``; neither may be
    mutated. ``fastavro_schema`` is the same schema parsed by fastavro, ready for its readers and writers.
    Thread-safe (immutable).
    """

    canonical: str
    tree: Any = field(repr=False)
    names: Mapping[str, Mapping[str, Any]] = field(repr=False)
    fingerprint: str = field(repr=False)
    fastavro_schema: Any = field(repr=False)

    @classmethod
    def parse(cls, text: str) -> AvroSchema:
        """Parse, validate and normalize a schema text. Raises :class:`InvalidSchemaError` saying why."""
        if not isinstance(text, str):
            raise InvalidSchemaError(
                f"Invalid schema: expected the schema as a JSON string, got {type(text).__name__}"
            )
        return cls.from_json(parse_json(text))

    @classmethod
    def from_json(cls, value: Any) -> AvroSchema:
        """Validate and normalize a schema given as a parsed JSON value."""
        normalized = normalize(value)
        canonical = normalized.text()
        try:
            parsed = fastavro_parse_schema(json.loads(canonical), _write_hint=False)
        except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
            raise InvalidSchemaError(f"Invalid schema: fastavro rejects it: {exc}") from exc
        return cls(
            canonical=canonical,
            tree=normalized.tree,
            names=normalized.names,
            fingerprint=hashlib.sha256(canonical.encode("utf-8")).hexdigest(),
            fastavro_schema=parsed,
        )

    @property
    def type_name(self) -> str:
        """The root's full name for a named type, else its type (``"array"``, ``"union"``, ``"string"``)."""
        tree = self.tree
        if isinstance(tree, list):
            return "union"
        if isinstance(tree, str):
            return tree
        kind = str(tree["type"])
        return str(tree["name"]) if kind in NAMED_KINDS else kind

    def to_json(self) -> Any:
        """A fresh (mutable) copy of the normalized JSON value."""
        return json.loads(self.canonical)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and other.canonical == self.canonical

    def __hash__(self) -> int:
        return hash(self.canonical)


def is_primitive(schema: Any) -> bool:
    """True for a primitive type, bare (``"int"``) or with attributes (``{"type": "int", ...}``)."""
    if isinstance(schema, str):
        return schema in PRIMITIVES
    return isinstance(schema, dict) and schema.get("type") in PRIMITIVES

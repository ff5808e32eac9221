"""Avro schema resolution as a compatibility check: can a reader schema read data written with a writer one?

The rules are those of the Avro specification ("Schema Resolution"), checked statically, with the choices
fastavro makes where the spec leaves room (fastavro decodes our data, so the checker agrees with it):

=====================  ===================================================================================
rule                   the reader can read the writer's data when ...
=====================  ===================================================================================
TYPE_MISMATCH          both have the same type, or the writer's primitive promotes to the reader's:
                       int -> long, float, double; long -> float, double; float -> double;
                       string -> bytes; bytes -> string.
NAME_MISMATCH          records, enums and fixed match by name: equal unqualified names, or the writer's
                       full name (or unqualified name) is among the reader type's aliases.
MISSING_FIELD_DEFAULT  every reader field exists in the writer (by name, or by one of the reader field's
                       aliases) or has a default. Writer fields the reader lacks are skipped.
MISSING_ENUM_SYMBOLS   every writer symbol is a reader symbol, or the reader enum has a ``default``.
FIXED_SIZE_MISMATCH    fixed types have the same size.
MISSING_UNION_BRANCH   writer union: every branch must resolve against the reader; reader union (writer
                       not a union): a branch must match the writer (the first of the same type or name,
                       else the first the writer promotes to) and resolve.
=====================  ===================================================================================

Arrays resolve their ``items`` and maps their ``values`` recursively; record fields recursively, with
recursive types checked once per pair of names. Each :class:`Incompatibility` names the rule and the path of
the spot, e.g. ``field 'PageView.user.age': writer type string cannot be promoted to reader type int``. Paths
start at the root type's unqualified name (or its type for an unnamed root); ``.name`` steps into a field,
``[]`` into array items, ``{}`` into map values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from schemas.avro_schema import AvroSchema
from schemas.normalize import NAMED_KINDS, PRIMITIVES, split_name
from schemas.registry.compatibility_level import CompatibilityLevel

#: writer primitive -> the reader primitives it is promoted to
PROMOTIONS: Mapping[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


class Rule(StrEnum):
    """The resolution rule an :class:`Incompatibility` breaks (see the module docstring)."""

    TYPE_MISMATCH = "TYPE_MISMATCH"
    NAME_MISMATCH = "NAME_MISMATCH"
    MISSING_FIELD_DEFAULT = "MISSING_FIELD_DEFAULT"
    MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
    FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
    MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"


@dataclass(frozen=True)
class Incompatibility:
    """One spot where the reader cannot read the writer's data."""

    rule: Rule
    path: str
    is_field: bool
    message: str

    def __str__(self) -> str:
        where = "field" if self.is_field else "at"
        return f"{where} '{self.path}': {self.message}"


def incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[Incompatibility]:
    """Every reason why ``reader`` cannot read data written with ``writer`` ([] when it can)."""
    checker = _Checker(reader.names, writer.names)
    checker.check(reader.tree, writer.tree, _root_label(reader.tree, reader.names), is_field=False)
    return checker.found


def can_read(reader: AvroSchema, writer: AvroSchema) -> bool:
    return not incompatibilities(reader, writer)


def check_compatibility(
    new: AvroSchema, previous: Sequence[tuple[int, AvroSchema]], level: CompatibilityLevel
) -> list[str]:
    """Messages for every way ``new`` breaks ``level`` against ``previous`` ((version, schema), oldest first).

    Non-transitive levels check the last of ``previous`` only; ``[]`` means compatible.
    """
    if level is CompatibilityLevel.NONE or not previous:
        return []
    targets = previous if level.transitive else previous[-1:]
    messages: list[str] = []
    for version, old in reversed(targets):
        if level.backward:
            messages.extend(
                f"BACKWARD: the new schema cannot read data written with version {version}: {problem}"
                for problem in incompatibilities(reader=new, writer=old)
            )
        if level.forward:
            messages.extend(
                f"FORWARD: version {version} cannot read data written with the new schema: {problem}"
                for problem in incompatibilities(reader=old, writer=new)
            )
    return messages


def _root_label(tree: Any, names: Mapping[str, Mapping[str, Any]]) -> str:
    node = _deref(tree, names)
    if isinstance(node, list):
        return "union"
    if isinstance(node, str):
        return node
    kind = node["type"]
    return split_name(node["name"])[1] if kind in NAMED_KINDS else str(kind)


def _deref(node: Any, names: Mapping[str, Mapping[str, Any]]) -> Any:
    if isinstance(node, str) and node not in PRIMITIVES:
        return names[node]
    return node


def _kind(node: Any) -> str:
    """``"union"``, a primitive name, or the complex type (``error`` counts as ``record``)."""
    if isinstance(node, list):
        return "union"
    if isinstance(node, str):
        return node
    kind = str(node["type"])
    return "record" if kind == "error" else kind


def _label(node: Any) -> str:
    kind = _kind(node)
    if kind in ("record", "enum", "fixed"):
        return f"{kind} {node['name']}"
    if kind == "union":
        return "union [" + ", ".join(_label(b) if not isinstance(b, str) else b for b in node) + "]"
    return kind


def _names_match(reader: Mapping[str, Any], writer: Mapping[str, Any]) -> bool:
    writer_name = str(writer["name"])
    reader_name = str(reader["name"])
    aliases = reader.get("aliases", ())
    return (
        split_name(reader_name)[1] == split_name(writer_name)[1]
        or writer_name in aliases
        or split_name(writer_name)[1] in aliases
    )


class _Checker:
    def __init__(
        self, reader_names: Mapping[str, Mapping[str, Any]], writer_names: Mapping[str, Mapping[str, Any]]
    ) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.found: list[Incompatibility] = []
        self._visited: set[tuple[str, str]] = set()

    def _add(self, rule: Rule, path: str, is_field: bool, message: str) -> None:
        self.found.append(Incompatibility(rule, path, is_field, message))

    def check(self, reader: Any, writer: Any, path: str, is_field: bool) -> None:
        reader = _deref(reader, self.reader_names)
        writer = _deref(writer, self.writer_names)
        if isinstance(writer, list):
            for branch in writer:
                self.check(reader, branch, path, is_field)
            return
        if isinstance(reader, list):
            branch = self._select_branch(reader, writer)
            if branch is None:
                self._add(
                    Rule.MISSING_UNION_BRANCH,
                    path,
                    is_field,
                    f"writer type {_label(writer)} is not in the reader's "
                    f"{_label([_deref(b, self.reader_names) for b in reader])}",
                )
                return
            self.check(branch, writer, path, is_field)
            return
        reader_kind, writer_kind = _kind(reader), _kind(writer)
        if reader_kind in PRIMITIVES and writer_kind in PRIMITIVES:
            if reader_kind != writer_kind and reader_kind not in PROMOTIONS.get(writer_kind, ()):
                self._add(
                    Rule.TYPE_MISMATCH,
                    path,
                    is_field,
                    f"writer type {writer_kind} cannot be promoted to reader type {reader_kind}",
                )
            return
        if reader_kind != writer_kind:
            self._add(
                Rule.TYPE_MISMATCH,
                path,
                is_field,
                f"writer type {_label(writer)} cannot be read as reader type {_label(reader)}",
            )
            return
        if reader_kind == "array":
            self.check(reader["items"], writer["items"], f"{path}[]", is_field=False)
            return
        if reader_kind == "map":
            self.check(reader["values"], writer["values"], f"{path}{{}}", is_field=False)
            return
        # record, enum, fixed: named types
        if not _names_match(reader, writer):
            self._add(
                Rule.NAME_MISMATCH,
                path,
                is_field,
                f"writer {_label(writer)} does not match reader {_label(reader)}: the names differ and "
                f"{writer['name']!r} is not among the reader's aliases",
            )
            return
        if reader_kind == "fixed":
            if reader["size"] != writer["size"]:
                self._add(
                    Rule.FIXED_SIZE_MISMATCH,
                    path,
                    is_field,
                    f"writer {_label(writer)} has size {writer['size']}, "
                    f"reader {_label(reader)} has size {reader['size']}",
                )
            return
        if reader_kind == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                self._add(
                    Rule.MISSING_ENUM_SYMBOLS,
                    path,
                    is_field,
                    f"writer symbols {missing} are not in reader {_label(reader)}, which has no default",
                )
            return
        self._record(reader, writer, path)

    def _record(self, reader: Mapping[str, Any], writer: Mapping[str, Any], path: str) -> None:
        key = (str(reader["name"]), str(writer["name"]))
        if key in self._visited:  # a recursive type: this pair is being checked further up
            return
        self._visited.add(key)
        writer_fields = {f["name"]: f for f in writer["fields"]}
        for field in reader["fields"]:
            name = field["name"]
            field_path = f"{path}.{name}"
            match = writer_fields.get(name)
            if match is None:
                match = next((writer_fields[a] for a in field.get("aliases", ()) if a in writer_fields), None)
            if match is None:
                if "default" not in field:
                    self._add(
                        Rule.MISSING_FIELD_DEFAULT,
                        field_path,
                        True,
                        f"reader field {name!r} has no default and the writer has no field {name!r}"
                        + (
                            f" (nor {', '.join(map(repr, field['aliases']))})" if field.get("aliases") else ""
                        ),
                    )
                continue
            self.check(field["type"], match["type"], field_path, is_field=True)

    def _select_branch(self, reader_union: list[Any], writer: Any) -> Any | None:
        """The reader branch that a (non-union) writer type resolves to, or None."""
        writer_kind = _kind(writer)
        branches = [_deref(b, self.reader_names) for b in reader_union]
        for branch in branches:  # same type (same name for named types)
            branch_kind = _kind(branch)
            if branch_kind != writer_kind:
                continue
            if branch_kind in ("record", "enum", "fixed") and not _names_match(branch, writer):
                continue
            return branch
        for branch in branches:  # then the first the writer's primitive promotes to
            if _kind(branch) in PROMOTIONS.get(writer_kind, ()):
                return branch
        return None

"""Validation and normalization of Avro schemas: the registry's identity for a schema.

Two schema texts are *the same schema* (one id, one version) exactly when their normalized forms are equal.
The normalized form is a compact JSON text:

What it keeps (everything the writer wrote that carries meaning):

* every type, field (in its order), symbol (in its order), size, ``items``/``values`` and union branch (in
  its order);
* field ``default`` values, ``doc`` strings, ``aliases``, a field ``order`` other than ``ascending``, enum
  ``default`` symbols, ``logicalType`` with its attributes (``precision``, ``scale``, ...), and every custom
  property (``"connect.name"``, ...), untouched. Docs, aliases and defaults are kept on purpose: Avro's
  Parsing Canonical Form drops them, but defaults and aliases decide compatibility, and dropping a doc would
  lose what the writer registered.

What it rewrites (different spellings of one schema):

* whitespace is removed and object keys are sorted (``json.dumps(sort_keys=True, separators=(",", ":"))``,
  non-ASCII characters kept as they are);
* every named type's ``name`` becomes its full name and the ``namespace`` attribute is dropped (written as
  ``"namespace": ""`` only where a name without namespace sits inside a namespaced type, so that re-reading
  gives the same full name); aliases become full names (resolved in the type's namespace);
* a named type is defined at its first occurrence (document order: fields, union branches, items, values)
  and referenced by its full name afterwards; a reference written with a short name becomes the full name;
* ``{"type": "int"}`` without other attributes becomes ``"int"``; ``{"type": "<defined name>"}`` becomes the
  name;
* attributes equal to the spec's default are dropped: field ``"order": "ascending"``, empty ``aliases``;
* ``default`` values of ``float``/``double`` (also as first union branch) are written as JSON numbers with a
  fraction (``1`` becomes ``1.0``).

Validation follows the Avro 1.11 specification: names match ``[A-Za-z_][A-Za-z0-9_]*``, a full name is defined
once, references must be defined first, records have unique field names, enums unique symbols (and a
``default`` among them), fixed a non-negative ``size``, unions no nested union and no two branches of the same
unnamed type or the same name, and every ``default`` matches its field's type (for a union, the first
branch). JSON documents with duplicate keys, ``NaN`` or ``Infinity`` are rejected. Every error names the path
inside the schema where it was found, e.g. ``lumber.tracking.PageView.fields[2] 'host'.type``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.errors import InvalidSchemaError

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_ORDERS = ("ascending", "descending", "ignore")
#: Nesting deeper than this is rejected (no Avro schema in practice comes close; it keeps recursion bounded).
MAX_DEPTH = 200

_RECORD_KEYS = {"type", "name", "namespace", "doc", "aliases", "fields"}
_FIELD_KEYS = {"name", "type", "default", "doc", "aliases", "order"}
_ENUM_KEYS = {"type", "name", "namespace", "doc", "aliases", "symbols", "default"}
_FIXED_KEYS = {"type", "name", "namespace", "doc", "aliases", "size"}


@dataclass
class Normalized:
    """The result of :func:`normalize`: the normalized JSON value and its named types by full name."""

    tree: Any
    names: dict[str, dict[str, Any]] = field(default_factory=dict)

    def text(self) -> str:
        return canonical_json(self.tree)


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the textual normalized form."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r} in a JSON object")
        out[key] = value
    return out


def parse_json(text: str) -> Any:
    """Strict JSON: no duplicate keys, no NaN/Infinity. Raises :class:`InvalidSchemaError`."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except RecursionError as exc:
        raise InvalidSchemaError("Invalid schema: the JSON document is nested too deeply") from exc
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise InvalidSchemaError(f"Invalid schema: not valid JSON: {exc}") from exc


def normalize(value: Any) -> Normalized:
    """Validate an Avro schema given as parsed JSON and return its normalized form."""
    result = Normalized(tree=None)
    result.tree = _Normalizer(result.names).schema(value, namespace="", path="schema", depth=0)
    return result


def split_name(fullname: str) -> tuple[str, str]:
    """``("ns.sub", "Name")`` for ``"ns.sub.Name"``; ``("", "Name")`` without a namespace."""
    namespace, _, name = fullname.rpartition(".")
    return namespace, name


def _invalid(path: str, message: str) -> InvalidSchemaError:
    return InvalidSchemaError(f"Invalid schema: at {path}: {message}")


class _Normalizer:
    """One pass over a schema: validates, qualifies names, and builds the normalized tree."""

    def __init__(self, names: dict[str, dict[str, Any]]) -> None:
        self.names = names

    # -- names -----------------------------------------------------------------------------------------

    def _fullname(self, node: Mapping[str, Any], namespace: str, path: str) -> str:
        name = node.get("name")
        if not isinstance(name, str):
            raise _invalid(path, f"a {node.get('type')} needs a 'name' string, got {name!r}")
        if "." in name:
            fullname = name
        else:
            ns = node.get("namespace", namespace)
            if ns is None:
                ns = ""
            if not isinstance(ns, str):
                raise _invalid(path, f"'namespace' must be a string, got {ns!r}")
            fullname = f"{ns}.{name}" if ns else name
        for part in fullname.split("."):
            if not _NAME.match(part):
                raise _invalid(
                    path, f"invalid name {fullname!r}: each part must match [A-Za-z_][A-Za-z0-9_]*"
                )
        if fullname in PRIMITIVES:
            raise _invalid(path, f"a named type cannot be called {fullname!r}, the name of a primitive type")
        if fullname in self.names:
            raise _invalid(path, f"the name {fullname!r} is defined twice")
        return fullname

    def _aliases(self, raw: Any, namespace: str, path: str, qualify: bool) -> list[str]:
        if raw is None:
            return []
        if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
            raise _invalid(path, f"'aliases' must be an array of strings, got {raw!r}")
        out = []
        for alias in raw:
            full = alias if "." in alias or not qualify or not namespace else f"{namespace}.{alias}"
            parts = full.split(".") if qualify else [full]
            if not all(_NAME.match(p) for p in parts):
                raise _invalid(path, f"invalid alias {alias!r}")
            out.append(full)
        if len(set(out)) != len(out):
            raise _invalid(path, f"duplicate aliases in {raw!r}")
        return out

    def _resolve_reference(self, name: str, namespace: str, path: str) -> str:
        # the spec's rule (and fastavro's): a short name is in the enclosing namespace; no fallback to the
        # null namespace (Java's parser has one; fastavro, which reads our data, does not)
        fullname = f"{namespace}.{name}" if "." not in name and namespace else name
        if fullname in self.names:
            return fullname
        raise _invalid(path, f"unknown type {fullname!r} (a named type must be defined before it is used)")

    # -- schemas ---------------------------------------------------------------------------------------

    def schema(self, node: Any, namespace: str, path: str, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise _invalid(path, f"the schema is nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            if node in NAMED_KINDS or node in ("array", "map"):
                raise _invalid(path, f"{node!r} must be written as an object with its attributes")
            return self._resolve_reference(node, namespace, path)
        if isinstance(node, list):
            return self._union(node, namespace, path, depth)
        if not isinstance(node, dict):
            raise _invalid(path, f"a schema is a JSON string, object or array, got {node!r}")
        kind = node.get("type")
        if isinstance(kind, dict | list):
            raise _invalid(path, "'type' of a schema object must be a type name (nest schemas in fields)")
        if not isinstance(kind, str):
            raise _invalid(path, f"a schema object needs a 'type' string, got {kind!r}")
        if kind in PRIMITIVES:
            extra = {k: v for k, v in node.items() if k != "type"}
            return {"type": kind, **extra} if extra else kind
        if kind in ("record", "error"):
            return self._record(node, namespace, path, depth)
        if kind == "enum":
            return self._enum(node, namespace, path)
        if kind == "fixed":
            return self._fixed(node, namespace, path)
        if kind == "array":
            if "items" not in node:
                raise _invalid(path, "an array needs 'items'")
            items = self.schema(node["items"], namespace, f"{path}.items", depth + 1)
            return {**_custom(node, {"type", "items"}), "type": "array", "items": items}
        if kind == "map":
            if "values" not in node:
                raise _invalid(path, "a map needs 'values'")
            values = self.schema(node["values"], namespace, f"{path}.values", depth + 1)
            return {**_custom(node, {"type", "values"}), "type": "map", "values": values}
        # {"type": "SomeName"}: a reference to a defined named type, written as an object
        if len(node) == 1:
            return self._resolve_reference(kind, namespace, path)
        raise _invalid(path, f"unknown type {kind!r}")

    def _named_header(
        self, node: Mapping[str, Any], namespace: str, path: str, kind: str
    ) -> tuple[str, dict[str, Any]]:
        fullname = self._fullname(node, namespace, path)
        out: dict[str, Any] = {"type": kind, "name": fullname}
        own_ns, _ = split_name(fullname)
        if not own_ns and namespace:
            out["namespace"] = ""  # keeps the empty namespace when re-read inside a namespaced type
        if "doc" in node:
            if not isinstance(node["doc"], str):
                raise _invalid(path, f"'doc' must be a string, got {node['doc']!r}")
            out["doc"] = node["doc"]
        aliases = self._aliases(node.get("aliases"), own_ns, f"{path}.aliases", qualify=True)
        if aliases:
            out["aliases"] = aliases
        return fullname, out

    def _record(self, node: Mapping[str, Any], namespace: str, path: str, depth: int) -> dict[str, Any]:
        kind = node["type"]
        fullname, out = self._named_header(node, namespace, path, kind)
        path = f"{fullname}" if path == "schema" else f"{path}<{fullname}>"
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise _invalid(path, f"a record needs a 'fields' array, got {fields!r}")
        # registered before its fields, so that fields may refer to the record itself (recursive types)
        self.names[fullname] = out
        own_ns, _ = split_name(fullname)
        seen: set[str] = set()
        normalized_fields = []
        for index, raw in enumerate(fields):
            where = f"{path}.fields[{index}]"
            if not isinstance(raw, dict):
                raise _invalid(where, f"a field is a JSON object, got {raw!r}")
            name = raw.get("name")
            if not isinstance(name, str) or not _NAME.match(name):
                raise _invalid(where, f"a field needs a 'name' matching [A-Za-z_][A-Za-z0-9_]*, got {name!r}")
            where = f"{where} '{name}'"
            if name in seen:
                raise _invalid(where, f"duplicate field name {name!r}")
            seen.add(name)
            if "type" not in raw:
                raise _invalid(where, "a field needs a 'type'")
            ftype = self.schema(raw["type"], own_ns, f"{where}.type", depth + 1)
            nf: dict[str, Any] = {**_custom(raw, _FIELD_KEYS), "name": name, "type": ftype}
            if "doc" in raw:
                if not isinstance(raw["doc"], str):
                    raise _invalid(where, f"'doc' must be a string, got {raw['doc']!r}")
                nf["doc"] = raw["doc"]
            if "default" in raw:
                nf["default"] = self.default(ftype, raw["default"], f"{where}.default", depth + 1)
            order = raw.get("order", "ascending")
            if order not in _ORDERS:
                raise _invalid(where, f"'order' must be one of {', '.join(_ORDERS)}, got {order!r}")
            if order != "ascending":
                nf["order"] = order
            aliases = self._aliases(raw.get("aliases"), "", f"{where}.aliases", qualify=False)
            if aliases:
                nf["aliases"] = aliases
            normalized_fields.append(nf)
        out.update(_custom(node, _RECORD_KEYS))
        out["fields"] = normalized_fields
        return out

    def _enum(self, node: Mapping[str, Any], namespace: str, path: str) -> dict[str, Any]:
        fullname, out = self._named_header(node, namespace, path, "enum")
        symbols = node.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
            raise _invalid(path, f"enum {fullname} needs a 'symbols' array of strings, got {symbols!r}")
        for symbol in symbols:
            if not _NAME.match(symbol):
                raise _invalid(path, f"enum {fullname}: invalid symbol {symbol!r}")
        if len(set(symbols)) != len(symbols):
            raise _invalid(path, f"enum {fullname}: duplicate symbols in {symbols!r}")
        out.update(_custom(node, _ENUM_KEYS))
        out["symbols"] = list(symbols)
        if "default" in node:
            if node["default"] not in symbols:
                raise _invalid(
                    path, f"enum {fullname}: default {node['default']!r} is not one of its symbols"
                )
            out["default"] = node["default"]
        self.names[fullname] = out
        return out

    def _fixed(self, node: Mapping[str, Any], namespace: str, path: str) -> dict[str, Any]:
        fullname, out = self._named_header(node, namespace, path, "fixed")
        size = node.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise _invalid(path, f"fixed {fullname} needs a non-negative integer 'size', got {size!r}")
        out.update(_custom(node, _FIXED_KEYS))
        out["size"] = size
        self.names[fullname] = out
        return out

    def _union(self, branches: list[Any], namespace: str, path: str, depth: int) -> list[Any]:
        if not branches:
            raise _invalid(path, "a union needs at least one branch")
        out = []
        seen: dict[str, int] = {}
        for index, branch in enumerate(branches):
            where = f"{path}[{index}]"
            if isinstance(branch, list):
                raise _invalid(where, "a union cannot directly contain another union")
            normalized = self.schema(branch, namespace, where, depth + 1)
            key = self._branch_key(normalized)
            if key in seen:
                raise _invalid(
                    where, f"the union has two branches of type {key} (branches {seen[key]} and {index})"
                )
            seen[key] = index
            out.append(normalized)
        return out

    def _branch_key(self, normalized: Any) -> str:
        if isinstance(normalized, str):
            return normalized  # a primitive or a named type's full name
        kind = normalized["type"]
        if kind in NAMED_KINDS:
            return str(normalized["name"])
        return str(kind)

    # -- defaults --------------------------------------------------------------------------------------

    def default(self, schema: Any, value: Any, path: str, depth: int) -> Any:
        """Check a default against its (normalized) schema; return its normalized JSON value."""
        if depth > MAX_DEPTH:
            raise _invalid(path, f"the default is nested more than {MAX_DEPTH} levels deep")
        if isinstance(schema, list):
            try:
                return self.default(schema[0], value, path, depth + 1)
            except InvalidSchemaError as exc:
                raise _invalid(
                    path, f"a union's default must match its first branch ({_type_label(schema[0])}): {exc}"
                ) from exc
        kind = schema if isinstance(schema, str) else schema["type"]
        if isinstance(schema, str) and kind not in PRIMITIVES:
            schema = self.names[kind]
            kind = schema["type"]
        bad = _invalid(path, f"default {value!r} does not match type {kind}")
        if kind == "null":
            if value is not None:
                raise bad
            return None
        if kind == "boolean":
            if not isinstance(value, bool):
                raise bad
            return value
        if kind in ("int", "long"):
            low, high = (_INT_MIN, _INT_MAX) if kind == "int" else (_LONG_MIN, _LONG_MAX)
            if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
                raise bad
            return value
        if kind in ("float", "double"):
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise bad
            return float(value)
        if kind in ("string", "bytes", "enum", "fixed"):
            if not isinstance(value, str):
                raise bad
            if kind in ("bytes", "fixed") and any(ord(c) > 255 for c in value):
                raise _invalid(path, f"a {kind} default is a string of code points 0-255, got {value!r}")
            if kind == "fixed" and len(value) != schema["size"]:
                raise _invalid(
                    path, f"default {value!r} has {len(value)} bytes, fixed size is {schema['size']}"
                )
            if kind == "enum" and value not in schema["symbols"]:
                raise _invalid(path, f"default {value!r} is not a symbol of enum {schema['name']}")
            return value
        if kind == "array":
            if not isinstance(value, list):
                raise bad
            return [self.default(schema["items"], v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
        if kind == "map":
            if not isinstance(value, dict):
                raise bad
            return {k: self.default(schema["values"], v, f"{path}.{k}", depth + 1) for k, v in value.items()}
        if kind in ("record", "error"):
            if not isinstance(value, dict):
                raise bad
            known = {f["name"] for f in schema["fields"]}
            unknown = sorted(set(value) - known)
            if unknown:
                raise _invalid(
                    path, f"default has fields {unknown} that record {schema['name']} does not have"
                )
            out = {}
            for f in schema["fields"]:
                if f["name"] in value:
                    out[f["name"]] = self.default(
                        f["type"], value[f["name"]], f"{path}.{f['name']}", depth + 1
                    )
                elif "default" in f:
                    out[f["name"]] = f["default"]
                else:
                    raise _invalid(
                        path, f"default lacks field {f['name']!r}, which has no default of its own"
                    )
            return out
        raise bad


def _custom(node: Mapping[str, Any], reserved: set[str]) -> dict[str, Any]:
    """The custom properties of a schema object (kept as written)."""
    return {k: v for k, v in node.items() if k not in reserved}


def _type_label(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    kind = schema["type"]
    return f"{kind} {schema['name']}" if kind in NAMED_KINDS else str(kind)

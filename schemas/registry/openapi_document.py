"""The registry's OpenAPI document says what the server checks itself (issue 40: the document is true).

FastAPI describes path parameters and bodies by their Python types (``subject: str``, ``version: str``);
the registry checks more, in its own code, so that a refusal carries Confluent's error code (42208 invalid
subject, 42202 invalid version, 42203 invalid level) rather than FastAPI's generic 422. :func:`true_document`
writes those same rules into the generated document, so that a client (or schemathesis, which the tests
run with every check) generating requests from it sends only what the server accepts, and what it refuses
is exactly what the document excludes:

* ``{subject}``: 1 to 255 characters, none a control character or a surrogate
  (:func:`~schemas.registry.schema_registry.check_subject`);
* ``{version}``: ``latest`` (any case) or ``-1``, or 1 to 2^31-1 with optional leading zeros, surrounding
  blanks allowed (:func:`~schemas.registry.schema_registry.parse_version`);
* ``compatibility``: one of :class:`~schemas.registry.compatibility_level.CompatibilityLevel`, any case;
* ``schemaType``: ``AVRO``, any case (or absent); ``references``: empty (or absent).

What a document cannot say stays a documented 422 of the operation: that the ``schema`` text is a valid
Avro schema (42201), whose rules are Avro's.
"""

from __future__ import annotations

from typing import Any

from schemas.registry.compatibility_level import CompatibilityLevel
from schemas.registry.schema_registry import MAX_SUBJECT_CHARS

#: check_subject: no Cc (C0, DEL, C1) or Cs (surrogates) character
SUBJECT_PATTERN = f"^[^\\u0000-\\u001f\\u007f-\\u009f\\ud800-\\udfff]{{1,{MAX_SUBJECT_CHARS}}}$"
#: parse_version: [1, 2^31-1] (2147483647) digit by digit, or latest / -1
_UP_TO_MAX = (
    "[1-9][0-9]{0,8}|1[0-9]{9}|20[0-9]{8}|21[0-3][0-9]{7}|214[0-6][0-9]{6}|2147[0-3][0-9]{5}"
    "|21474[0-7][0-9]{4}|214748[0-2][0-9]{3}|2147483[0-5][0-9]{2}|21474836[0-3][0-9]|214748364[0-7]"
)
VERSION_PATTERN = (
    f"^[ \\t\\n\\r\\f\\v]*(?:[lL][aA][tT][eE][sS][tT]|-1|0*(?:{_UP_TO_MAX}))[ \\t\\n\\r\\f\\v]*$"
)


def true_document(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (FastAPI's) with the server's own checks written in (see the module docstring)."""
    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()):
                if parameter.get("in") != "path":
                    continue
                if parameter["name"] == "subject":
                    parameter["schema"] = {"type": "string", "pattern": SUBJECT_PATTERN, "title": "Subject"}
                elif parameter["name"] == "version":
                    parameter["schema"] = {"type": "string", "pattern": VERSION_PATTERN, "title": "Version"}
    schemas = document.get("components", {}).get("schemas", {})
    config = schemas.get("ConfigRequest", {}).get("properties", {}).get("compatibility")
    if config is not None:
        config["pattern"] = "^(?:" + "|".join(_any_case(level.value) for level in CompatibilityLevel) + ")$"
    request = schemas.get("SchemaRequest", {}).get("properties", {})
    if "schemaType" in request:
        request["schemaType"] = {
            "anyOf": [{"type": "string", "pattern": f"^{_any_case('AVRO')}$"}, {"type": "null"}],
            "description": "AVRO (the only type supported); default AVRO",
        }
    if "references" in request:
        request["references"] = {
            "anyOf": [{"type": "array", "maxItems": 0, "items": {}}, {"type": "null"}],
            "description": "not supported: must be empty",
        }
    return document


def _any_case(word: str) -> str:
    """A pattern of ``word`` in any case (``[aA][vV]...``: JSON Schema patterns have no flags)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)

"""A schema as registered under a subject: the registry's answer to version and lookup requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from schemas.errors import RegistryRequestError


@dataclass(frozen=True)
class RegisteredSchema:
    """One version of one subject. ``schema`` is the registry's normalized schema text."""

    subject: str
    version: int
    schema_id: int
    schema: str

    def to_json(self) -> dict[str, Any]:
        """Confluent's JSON for ``GET /subjects/{subject}/versions/{version}``."""
        return {"subject": self.subject, "version": self.version, "id": self.schema_id, "schema": self.schema}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RegisteredSchema:
        try:
            return cls(
                subject=str(data["subject"]),
                version=int(data["version"]),
                schema_id=int(data["id"]),
                schema=str(data["schema"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RegistryRequestError(f"malformed registered-schema answer {dict(data)!r}: {exc}") from exc

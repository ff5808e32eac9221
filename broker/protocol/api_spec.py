"""One API as Lumber implements it: key, request and response classes, version range, flexible versions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from broker.protocol.api_key import ApiKey
from broker.protocol.errors import SchemaDefinitionError


@dataclass(frozen=True)
class ApiSpec:
    """An API Lumber implements at versions ``min_version`` to ``max_version``.

    Versions from ``flexible_from`` on (``None``: none in the range) are *flexible* (KIP-482): compact
    strings, bytes and arrays, a tagged-fields section ending every struct, request header v2 and response
    header v1. ApiVersions is the exception whose response header stays v0 at every version
    (``response_header_always_v0``).
    """

    key: ApiKey
    request: type[tuple[Any, ...]]
    response: type[tuple[Any, ...]]
    min_version: int
    max_version: int
    flexible_from: int | None
    response_header_always_v0: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.min_version <= self.max_version:
            raise SchemaDefinitionError(
                f"{self.name}: bad version range {self.min_version}-{self.max_version}"
            )

    @property
    def name(self) -> str:
        """Kafka's name of the API, e.g. ``Produce``."""
        return self.key.title

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def request_header_version(self, version: int) -> int:
        """2 for flexible versions, else 1 (v0, without a client id, only serves ControlledShutdown v0)."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """1 for flexible versions, else 0; always 0 for ApiVersions."""
        return 1 if self.is_flexible(version) and not self.response_header_always_v0 else 0

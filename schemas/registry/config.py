"""The schema registry's config section (``[registry]`` in ``lumber.toml``).

A frozen dataclass whose fields are the TOML keys; ``metadata`` documents each key (``doc``) and bounds it
(``min``, ``max``, ``choices``), which :mod:`lumber.config` reads to check a file and to print
``lumber config defaults``. The registry reaches ZooKeeper through the ``[zookeeper]`` section (``connect``,
timeouts). This module must not import :mod:`pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Compatibility = Literal[
    "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"
]
COMPATIBILITY_CHOICES: tuple[str, ...] = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
#: ZooKeeper refuses znodes over 1 MiB (jute.maxbuffer); a schema is stored in one znode.
ZNODE_LIMIT_BYTES = 1_000_000


@dataclass(frozen=True)
class RegistryConfig:
    """The Avro schema registry: where it listens, where it keeps its state, and how clients reach it."""

    host: str = field(
        default="127.0.0.1",
        metadata={"doc": "Address `lumber schemas serve` listens on (loopback by default)."},
    )
    port: int = field(
        default=8081, metadata={"doc": "Port `lumber schemas serve` listens on.", "min": 1, "max": 65535}
    )
    url: str = field(
        default="http://127.0.0.1:8081",
        metadata={"doc": "Base URL that clients (the `lumber schemas` commands, the serde, load jobs) use."},
    )
    zookeeper_path: str = field(
        default="/schema_registry",
        metadata={
            "doc": "ZooKeeper path (below the [zookeeper] connect string's chroot) under which the registry "
            "keeps ids, schemas, subjects and config. Registries sharing it share one id space."
        },
    )
    default_compatibility: Compatibility = field(
        default="BACKWARD",
        metadata={
            "doc": "Compatibility level of subjects without their own, until `PUT /config` sets a global "
            "one.",
            "choices": COMPATIBILITY_CHOICES,
        },
    )
    max_schema_bytes: int = field(
        default=512 * 1024,
        metadata={
            "doc": "Largest schema (normalized, UTF-8) the registry accepts; larger ones get 42201.",
            "min": 64,
            "max": ZNODE_LIMIT_BYTES,
        },
    )
    request_timeout_ms: int = field(
        default=10_000, metadata={"doc": "Clients' timeout for one HTTP request to the registry.", "min": 1}
    )
    subject_cache_ttl_ms: int = field(
        default=60_000,
        metadata={
            "doc": "How long clients cache lookups by subject (latest version, lookup of a schema). Lookups "
            "by id are cached for good: an id's schema never changes.",
            "min": 0,
        },
    )

    def __post_init__(self) -> None:
        path = self.zookeeper_path
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise ValueError(
                f"zookeeper_path must be an absolute ZooKeeper path like '/schema_registry', got {path!r}"
            )
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")

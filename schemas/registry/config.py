"""The schema registry's config section (``[registry]`` in ``lumber.toml``).

A :class:`~broker.config_section.ConfigSection` (a frozen pydantic model) whose fields are the TOML keys,
each with its default, documentation and bounds, which :mod:`lumber.config` reads to check a file and to
print ``lumber config defaults``. ``url`` is the one key every client of the registry reads: the
producers' and mirrors' audit, the load job and the console (the old ``[producer] audit_registry_url`` and
``[load] registry_url`` are read as this key, with a warning). The registry reaches ZooKeeper through the
``[zookeeper]`` section (``connect``, timeouts). This module must not import :mod:`pipeline`.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import model_validator

from broker.config_section import ConfigSection, setting

Compatibility = Literal[
    "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"
]
#: ZooKeeper refuses znodes over 1 MiB (jute.maxbuffer); a schema is stored in one znode.
ZNODE_LIMIT_BYTES = 1_000_000


class RegistryConfig(ConfigSection):
    """The Avro schema registry: where it listens, where it keeps its state, and how clients reach it."""

    host: str = setting("127.0.0.1", "Address `lumber schemas serve` listens on (loopback by default).")
    port: int = setting(8081, "Port `lumber schemas serve` listens on.", ge=1, le=65535)
    url: str = setting(
        "http://127.0.0.1:8081",
        "Base URL that clients (the `lumber schemas` commands, the serde, load jobs) use.",
    )
    zookeeper_path: str = setting(
        "/schema_registry",
        "ZooKeeper path (below the [zookeeper] connect string's chroot) under which the registry "
        "keeps ids, schemas, subjects and config. Registries sharing it share one id space.",
    )
    default_compatibility: Compatibility = setting(
        "BACKWARD",
        "Compatibility level of subjects without their own, until `PUT /config` sets a global one.",
    )
    max_schema_bytes: int = setting(
        512 * 1024,
        "Largest schema (normalized, UTF-8) the registry accepts; larger ones get 42201.",
        ge=64,
        le=ZNODE_LIMIT_BYTES,
    )
    request_timeout_ms: int = setting(10_000, "Clients' timeout for one HTTP request to the registry.", ge=1)
    subject_cache_ttl_ms: int = setting(
        60_000,
        "How long clients cache lookups by subject (latest version, lookup of a schema). Lookups "
        "by id are cached for good: an id's schema never changes.",
        ge=0,
    )

    @model_validator(mode="after")
    def _check(self) -> Self:
        path = self.zookeeper_path
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise ValueError(
                "registry.zookeeper_path must be an absolute ZooKeeper path like '/schema_registry', "
                f"got {path!r}"
            )
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"registry.url must start with http:// or https://, got {self.url!r}")
        return self

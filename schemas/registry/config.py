"""The schema registry's config section (``[registry]`` in ``lumber.toml``).

A :class:`~broker.config_section.ConfigSection` (a frozen pydantic model) whose fields are the TOML keys,
each with its default, documentation and bounds, which :mod:`lumber.config` reads to check a file and to
print ``lumber config defaults``. ``url`` is the one key every client of the registry reads: the
producers' and mirrors' audit, the load job and the console (the old ``[producer] audit_registry_url`` and
``[load] registry_url`` are read as this key, with a warning). The registry reaches ZooKeeper through the
``[zookeeper]`` section (``connect``, timeouts). This module must not import :mod:`pipeline`.

HTTPS (``ssl_certfile``) and HTTP Basic authentication (``auth_users_file``,
:mod:`schemas.registry.basic_auth`) are the server's; ``basic_auth_username`` with its password (given one
way: ``basic_auth_password``, a masked secret, or ``basic_auth_password_file`` or ``basic_auth_password_env``,
read when a client is made) and ``ssl_cafile`` are what every Lumber client sends and trusts: each is made by
the one factory :meth:`schemas.client.SchemaRegistryClient.from_config`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Self

from pydantic import SecretStr, model_validator

from broker.config_section import ConfigSection, setting
from schemas.errors import RegistryCredentialsError

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

    ssl_certfile: str = setting(
        "", "PEM certificate (and chain) of `lumber schemas serve`: set, it serves HTTPS instead of HTTP."
    )
    ssl_keyfile: str = setting("", "Its private key (PEM); empty: inside ssl_certfile.")
    auth_users_file: str = setting(
        "",
        "Users of HTTP Basic authentication, one 'user: password,role' a line (role readonly or admin; "
        "keep the file mode 0600): set, every request must authenticate (401 without), and only admin may "
        "register, delete or change compatibility (403). Empty: no authentication.",
    )
    basic_auth_username: str = setting(
        "",
        "The user every Lumber client of the registry authenticates as (HTTP Basic): the `lumber schemas` "
        "commands, producers' and mirrors' audit, the audit, the load job and its Spark tasks, the console, "
        "the demo. Empty: none.",
    )
    basic_auth_password: SecretStr = setting(
        SecretStr(""),
        "Its password (a secret: masked by `lumber config show`; prefer basic_auth_password_file or "
        "basic_auth_password_env).",
    )
    basic_auth_password_file: str = setting(
        "", "A file whose first line is basic_auth_password (keep it mode 0600)."
    )
    basic_auth_password_env: str = setting("", "An environment variable holding basic_auth_password.")
    ssl_cafile: str = setting(
        "",
        "CA certificates (PEM) clients check an https:// registry's certificate against; empty: the "
        "system's.",
    )

    def basic_auth(self) -> tuple[str, str] | None:
        """``(user, password)`` clients send, the password read now from its file or variable; ``None``
        without ``basic_auth_username``. :class:`~schemas.errors.RegistryCredentialsError` names the key and
        the file or variable that cannot be read, never a value."""
        if not self.basic_auth_username:
            return None
        if self.basic_auth_password_file:
            path = self.basic_auth_password_file
            try:
                lines = Path(path).read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                raise RegistryCredentialsError(
                    f"registry.basic_auth_password_file: cannot read {path!r}: {reason}"
                ) from None
            if not lines or not lines[0]:
                raise RegistryCredentialsError(
                    f"registry.basic_auth_password_file: the first line of {path!r} is empty"
                )
            return self.basic_auth_username, lines[0]
        if self.basic_auth_password_env:
            value = os.environ.get(self.basic_auth_password_env, "")
            if not value:
                raise RegistryCredentialsError(
                    f"registry.basic_auth_password_env: the environment variable "
                    f"{self.basic_auth_password_env} is not set or empty"
                )
            return self.basic_auth_username, value
        return self.basic_auth_username, self.basic_auth_password.get_secret_value()

    def with_secrets_read(self) -> RegistryConfig:
        """A copy holding the password itself (read now from its file or variable, which are then left
        out), as :meth:`broker.client.security_settings.SecuritySettings.with_secrets_read` does for SASL:
        for a process that has neither, such as a Spark task on another machine."""
        auth = self.basic_auth()
        if auth is None:
            return self
        return self.replace(
            basic_auth_password=SecretStr(auth[1]), basic_auth_password_file="", basic_auth_password_env=""
        )

    @model_validator(mode="after")
    def _check(self) -> Self:
        given = [
            key
            for key, value in (
                ("basic_auth_password", self.basic_auth_password.get_secret_value()),
                ("basic_auth_password_file", self.basic_auth_password_file),
                ("basic_auth_password_env", self.basic_auth_password_env),
            )
            if value
        ]
        if len(given) > 1:
            raise ValueError(f"registry: give at most one of {', '.join(given)}")
        if given and not self.basic_auth_username:
            raise ValueError(f"registry: {given[0]} needs basic_auth_username")
        path = self.zookeeper_path
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise ValueError(
                "registry.zookeeper_path must be an absolute ZooKeeper path like '/schema_registry', "
                f"got {path!r}"
            )
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"registry.url must start with http:// or https://, got {self.url!r}")
        return self

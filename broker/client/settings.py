"""Checks shared by the client config sections: every field's ``min``/``max``/``choices`` metadata.

:mod:`lumber.config` checks the same limits when it reads ``lumber.toml``; checking them again in
``__post_init__`` makes a section built in Python (``ProducerConfig(linger_ms=-1)``) fail just as clearly.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from broker.client.errors import ClientConfigError


def check_limits(section: Any) -> None:
    """Raise :class:`ClientConfigError` naming the first field of ``section`` outside its limits."""
    name = type(section).__name__
    for spec in dataclasses.fields(section):
        value = getattr(section, spec.name)
        meta = spec.metadata
        low, high, choices = meta.get("min"), meta.get("max"), meta.get("choices")
        if low is not None and value < low:
            raise ClientConfigError(f"{name}.{spec.name} must be at least {low}, got {value!r}")
        if high is not None and value > high:
            raise ClientConfigError(f"{name}.{spec.name} must be at most {high}, got {value!r}")
        if choices is not None and value not in choices:
            raise ClientConfigError(
                f"{name}.{spec.name} must be one of {', '.join(map(repr, choices))}, got {value!r}"
            )


def check_servers(section_name: str, servers: list[str]) -> None:
    """Each bootstrap server must be ``host:port`` with a port in 1-65535."""
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ClientConfigError(
                f"{section_name}.bootstrap_servers: {server!r} is not host:port with a port in 1-65535"
            )


def parse_server(server: str) -> tuple[str, int]:
    """``'host:port'`` as ``(host, port)`` (checked by :func:`check_servers`)."""
    host, _, port = server.rpartition(":")
    return host.strip("[]"), int(port)

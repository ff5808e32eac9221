"""Checks shared by the client config sections: bootstrap servers as ``host:port``.

Bounds and choices of every key are checked by pydantic (:mod:`broker.config_section`).
"""

from __future__ import annotations

from broker.client.errors import ClientConfigError


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

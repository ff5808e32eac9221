"""A broker's listeners: where it listens, under which name, with which security protocol (Kafka's EndPoint).

Syntax (Kafka's ``listeners`` and ``advertised.listeners``)::

    NAME://host:port            PLAINTEXT://127.0.0.1:9092   SASL_SSL://0.0.0.0:9094   INTERNAL://[::1]:9093

``NAME`` is the listener name: one of the four security protocols (then it is also the listener's
protocol), or a name of one's own mapped to a protocol by ``listener_security_protocol_map``
(``{"INTERNAL" = "SSL"}``). ``host`` may be empty (all interfaces, as ``0.0.0.0``); an IPv6 address is written
in brackets; ``port`` 0 picks a free port when listening (an advertised port 0 means the bound one).

The security protocols (Kafka's ``SecurityProtocol``):

=================  ======  =======================================================================
protocol           TLS     who the client is
=================  ======  =======================================================================
PLAINTEXT          no      ``User:ANONYMOUS``
SSL                yes     ``User:<the client certificate's subject>``, or ANONYMOUS without one
SASL_PLAINTEXT     no      ``User:<name>`` authenticated by SaslHandshake + SaslAuthenticate
SASL_SSL           yes     the same, inside TLS
=================  ======  =======================================================================

A top-level module of :mod:`broker` (like the config sections), because the ``[broker]`` config, the network
layer and the ZooKeeper registration all read listeners. Value objects only; thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from broker.errors import BrokerError


class InvalidListenerError(BrokerError, ValueError):
    """A listener that is not ``NAME://host:port`` with a known security protocol (message names it)."""


class SecurityProtocol(enum.StrEnum):
    """How a listener's connections are secured."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener: its name, host, port and security protocol."""

    listener_name: str
    host: str
    port: int
    security_protocol: SecurityProtocol

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @property
    def address(self) -> str:
        """``host:port``."""
        return f"{self.host}:{self.port}"

    def with_port(self, port: int) -> Endpoint:
        return Endpoint(self.listener_name, self.host, port, self.security_protocol)

    def replace_host(self, host: str) -> Endpoint:
        return Endpoint(self.listener_name, host, self.port, self.security_protocol)

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> Endpoint:
        """``NAME://host:port`` (see the module docstring); :class:`InvalidListenerError` naming ``text``."""
        name, sep, rest = text.partition("://")
        if not sep or not name:
            raise InvalidListenerError(f"listener {text!r} is not NAME://host:port")
        name = name.upper()
        mapped = {k.upper(): v for k, v in (protocol_map or {}).items()}.get(name, name)
        try:
            protocol = SecurityProtocol(mapped.upper())
        except ValueError:
            raise InvalidListenerError(
                f"listener {text!r}: {name!r} is neither a security protocol "
                f"({', '.join(p.value for p in SecurityProtocol)}) nor a name of "
                "listener_security_protocol_map"
            ) from None
        if rest.startswith("["):
            host, bracket, port_text = rest[1:].partition("]")
            if not bracket or not port_text.startswith(":"):
                raise InvalidListenerError(f"listener {text!r}: an IPv6 host is written [address]:port")
            port_text = port_text[1:]
        else:
            host, colon, port_text = rest.rpartition(":")
            if not colon:
                raise InvalidListenerError(f"listener {text!r} has no port")
        if "/" in host or "/" in port_text:
            raise InvalidListenerError(f"listener {text!r} is not NAME://host:port")
        try:
            port = int(port_text)
        except ValueError:
            raise InvalidListenerError(f"listener {text!r}: port {port_text!r} is not a number") from None
        if not 0 <= port <= 65535:
            raise InvalidListenerError(f"listener {text!r}: port {port} is not in [0, 65535]")
        return cls(name, host, port, protocol)


def parse_endpoints(texts: list[str], protocol_map: Mapping[str, str] | None = None) -> list[Endpoint]:
    """Every listener of ``texts``; :class:`InvalidListenerError` for a bad one or a name given twice."""
    endpoints = [Endpoint.parse(text, protocol_map) for text in texts]
    names = [e.listener_name for e in endpoints]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidListenerError(
            f"listener name(s) {', '.join(duplicates)} given more than once: {texts!r}"
        )
    return endpoints

"""Who is on the other end of a connection, and through which listener (Kafka's Session and KafkaPrincipal).

A :class:`Session` is made once per connection, when its client is known: at accept time on a PLAINTEXT
listener (``User:ANONYMOUS``), after the TLS handshake on an SSL listener (``User:`` and the client
certificate's subject in RFC 2253 form, e.g. ``User:CN=alice,O=Lumber``, or ANONYMOUS without a client
certificate, as Kafka's DefaultKafkaPrincipalBuilder), after SaslAuthenticate on a SASL listener
(``User:<name>``). Every request the connection sends carries it
(:attr:`~broker.network.request_channel.NetworkRequest.session`): the authorizer reads the principal, the
Metadata and FindCoordinator answers the listener name (a client is told the addresses of the listener it
came in on).

Value objects; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.endpoint import SecurityProtocol

#: Kafka's principal type for users (the only one Kafka's brokers make).
USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """``type:name``, Kafka's way of naming who a client is: ``User:alice``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` (the type is everything before the first colon); ValueError otherwise."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"principal {text!r} is not type:name (e.g. User:alice)")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


#: The principal of a client nobody authenticated (Kafka's ``User:ANONYMOUS``).
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


@dataclass(frozen=True, slots=True)
class Session:
    """One connection's client: its principal, the listener it came in on, and its address."""

    principal: KafkaPrincipal
    listener_name: str
    security_protocol: SecurityProtocol
    client_host: str


#: The session of requests made without a connection (tests, benchmarks) and of a PLAINTEXT listener's.
PLAINTEXT_SESSION = Session(ANONYMOUS, "PLAINTEXT", SecurityProtocol.PLAINTEXT, "")

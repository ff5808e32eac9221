"""A client's SASL login on a connection, as Kafka's ``SaslClientAuthenticator`` does it: SaslHandshake v1
names the mechanism, then one SaslAuthenticate per token of :mod:`broker.network.sasl_client` until the
mechanism completes.

A refused handshake (the listener does not enable the mechanism, whose enabled ones are named), a refused
token (the broker's error and message), a SCRAM exchange that fails its own checks and a connection lost
midway each raise :class:`~broker.client.errors.AuthenticationError` naming the broker, the mechanism and
the user, never the password. Runs on the connecting thread, before any other request of the connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.client.client_security import ClientSecurity
from broker.client.errors import AuthenticationError, BrokerConnectionError
from broker.network.sasl_client import ScramError, sasl_client
from broker.protocol import RequestBody
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from broker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

#: Sends a request at a version and waits for its answer (the connection's own request path).
Exchange = Callable[[RequestBody, int], Any]


def sasl_login(broker: str, security: ClientSecurity, exchange: Exchange, authenticate_version: int) -> None:
    """Log in to ``broker`` (its name in errors) with ``security``'s mechanism and user; SaslAuthenticate
    at ``authenticate_version``."""
    mechanism = security.sasl_mechanism
    who = f"SASL {mechanism} login as {security.sasl_username!r}"
    handshake: SaslHandshakeResponse = exchange(SaslHandshakeRequest(mechanism), 1)
    if handshake.error_code != ErrorCode.NONE:
        enabled = ", ".join(handshake.mechanisms) or "none"
        raise AuthenticationError(
            broker,
            f"{who} refused: {ErrorCode.name_of(handshake.error_code)} (the broker's listener enables: "
            f"{enabled})",
        )
    client = sasl_client(mechanism, security.sasl_username, security.sasl_password)
    token: bytes | None = client.initial()
    try:
        while token is not None:
            answer: SaslAuthenticateResponse = exchange(SaslAuthenticateRequest(token), authenticate_version)
            if answer.error_code != ErrorCode.NONE:
                raise AuthenticationError(
                    broker,
                    f"{who} refused: {ErrorCode.name_of(answer.error_code)}: "
                    f"{answer.error_message or 'no message'}",
                )
            token = client.evaluate(answer.auth_bytes)
            if client.complete and token is None:
                return
    except ScramError as exc:
        raise AuthenticationError(broker, f"{who} failed: {exc}") from None
    except BrokerConnectionError as exc:
        if isinstance(exc, AuthenticationError):
            raise
        raise AuthenticationError(broker, f"{who} failed: {exc.reason}") from None

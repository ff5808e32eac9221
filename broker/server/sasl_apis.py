"""SaslHandshake and SaslAuthenticate as KafkaApis sees them: only ever too late (Kafka's
``handleSaslHandshakeRequest`` and ``handleSaslAuthenticateRequest``).

A SASL listener's exchange is answered by the network layer before the connection is authenticated
(:mod:`broker.network.sasl_authenticator`), so one of these reaching the request handlers comes from an
authenticated connection (re-authentication, KIP-368, is not supported) or from a listener without SASL:
it is answered ILLEGAL_SASL_STATE, as Kafka answers it, and the connection stays open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.network.request_channel import NetworkRequest
from broker.protocol import ApiKey, ErrorCode, RequestHeader
from broker.protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from broker.protocol.messages.sasl_handshake import SaslHandshakeResponse

Respond = Callable[[NetworkRequest, RequestHeader, Any], None]


class SaslApis:
    """The handlers of the two SASL APIs (see the module docstring)."""

    def __init__(self, *, respond: Respond) -> None:
        self._respond = respond

    def handlers(self) -> dict[int, Callable[[NetworkRequest, RequestHeader, Any], None]]:
        return {
            int(ApiKey.SASL_HANDSHAKE): self._handshake,
            int(ApiKey.SASL_AUTHENTICATE): self._authenticate,
        }

    def _handshake(self, request: NetworkRequest, header: RequestHeader, _body: Any) -> None:
        self._respond(request, header, SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE)))

    def _authenticate(self, request: NetworkRequest, header: RequestHeader, _body: Any) -> None:
        self._respond(
            request,
            header,
            SaslAuthenticateResponse(
                error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
                error_message="SaslAuthenticate request received after successful authentication",
            ),
        )

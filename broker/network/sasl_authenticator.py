"""A SASL listener's connection before it is authenticated (Kafka's SaslServerAuthenticator).

The processor hands every request frame of a connection that has not authenticated yet to its
:class:`SaslAuthenticator` (never to KafkaApis) and sends back what :meth:`SaslAuthenticator.handle` returns.
The states, as Kafka's (re-authentication, KIP-368, is not supported)::

    HANDSHAKE_OR_VERSIONS ──ApiVersions──▶ HANDSHAKE ──SaslHandshake v1, mechanism enabled──▶ AUTHENTICATE
            └────────────────── SaslHandshake v1, mechanism enabled ──────────────────────────▲
    AUTHENTICATE ──SaslAuthenticate (one per token)──▶ ... ──last token accepted──▶ COMPLETE (a principal)
    any state ──anything else──▶ FAILED: the connection is closed

* Before any frame is decoded its api key is checked: only ApiVersions, SaslHandshake and SaslAuthenticate
  are decoded at all (Kafka's rule: a client that skips the handshake meets no other schema); a frame
  that is not a request, another api key, a second handshake, or SaslHandshake v0 (raw tokens) closes
  the connection without an answer.
* An unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM with the enabled ones, then closed.
* A failed SaslAuthenticate (:class:`~broker.network.errors.SaslAuthenticationError`) is answered
  SASL_AUTHENTICATION_FAILED with Kafka's message (SCRAM: "Authentication failed during authentication due
  to invalid credentials with SASL mechanism SCRAM-SHA-512"; PLAIN: PlainSaslServer's own, e.g.
  "Authentication failed: Invalid username or password"), then closed; the log line names the client's
  address, the mechanism and why (the user, never the password).
* **Throttling**: every failure from a host is recorded in the listener's
  :class:`~broker.network.failed_authentications.FailedAuthentications`; while a host has failed too often
  recently, its SaslAuthenticate requests fail at once without looking at the credentials.

Frames are bounded by the processor at :data:`MAX_RECEIVE_BYTES` until authentication completes (Kafka's
``sasl.server.max.receive.size``), so an unauthenticated client cannot make the broker buffer a 100 MB
request. Not thread-safe: one authenticator per connection, used by its processor's thread.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from broker.network.errors import SaslAuthenticationError
from broker.network.failed_authentications import FailedAuthentications
from broker.network.sasl_server import CredentialLookup, SaslServer, sasl_server
from broker.network.session import KafkaPrincipal
from broker.protocol import (
    ApiKey,
    ErrorCode,
    ProtocolError,
    UnsupportedVersionError,
    api_versions_response,
    decode_request,
    encode_api_versions_fallback,
    encode_response,
)
from broker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from broker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse

#: The largest request frame read before authentication (Kafka's sasl.server.max.receive.size default).
MAX_RECEIVE_BYTES = 512 * 1024

_API_VERSIONS = int(ApiKey.API_VERSIONS)
_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)


class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What to do after one frame: send ``response`` (if any); then close, naming ``close_reason``, or, with a
    ``principal``, the connection is authenticated."""

    response: bytes | None = None
    close_reason: str | None = None
    principal: KafkaPrincipal | None = None
    #: The close is an authentication failure (counted, and recorded for the host's throttling).
    failed: bool = False


@dataclass(frozen=True, slots=True)
class SaslSettings:
    """A SASL listener's settings, shared by its connections' authenticators."""

    mechanisms: tuple[str, ...]
    credentials: CredentialLookup
    failures: FailedAuthentications


class SaslAuthenticator:
    """One connection's authentication (see the module docstring)."""

    __slots__ = ("_host", "_mechanism", "_server", "_settings", "_state")

    def __init__(self, settings: SaslSettings, client_host: str) -> None:
        self._settings = settings
        self._host = client_host
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._mechanism = ""
        self._server: SaslServer | None = None

    def handle(self, frame: bytes) -> SaslStep:
        """The answer to one request frame (see the module docstring)."""
        state = self._state
        api_key = (frame[0] << 8) | frame[1] if len(frame) >= 2 else -1
        allowed = {
            _State.HANDSHAKE_OR_VERSIONS: (_API_VERSIONS, _HANDSHAKE),
            _State.HANDSHAKE: (_HANDSHAKE,),
            _State.AUTHENTICATE: (_AUTHENTICATE,),
        }.get(state, ())
        if api_key not in allowed:
            self._state = _State.FAILED
            return SaslStep(close_reason=f"{_api_name(api_key)} request during the SASL {state.value} step")
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            if api_key == _API_VERSIONS:
                return SaslStep(response=encode_api_versions_fallback(exc.correlation_id))
            self._state = _State.FAILED
            return SaslStep(close_reason=f"SASL: {exc}")
        except ProtocolError as exc:
            self._state = _State.FAILED
            return SaslStep(close_reason=f"SASL: malformed {_api_name(api_key)} request: {exc}")
        version, correlation_id = header.api_version, header.correlation_id
        if api_key == _API_VERSIONS:
            self._state = _State.HANDSHAKE
            return SaslStep(response=encode_response(version, correlation_id, api_versions_response(version)))
        if isinstance(body, SaslHandshakeRequest):
            return self._handshake(version, correlation_id, body)
        assert isinstance(body, SaslAuthenticateRequest)
        return self._authenticate(version, correlation_id, body)

    def _handshake(self, version: int, correlation_id: int, body: SaslHandshakeRequest) -> SaslStep:
        mechanisms = self._settings.mechanisms
        if body.mechanism not in mechanisms:
            self._state = _State.FAILED
            response = SaslHandshakeResponse(int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), list(mechanisms))
            return SaslStep(
                response=encode_response(version, correlation_id, response),
                close_reason=f"SASL mechanism {body.mechanism[:100]!r} is not enabled "
                f"({', '.join(mechanisms)})",
            )
        if version < 1:
            self._state = _State.FAILED
            return SaslStep(close_reason="SaslHandshake v0 (raw SASL tokens) is not supported: use v1")
        self._mechanism = body.mechanism
        self._server = sasl_server(body.mechanism, self._settings.credentials)
        self._state = _State.AUTHENTICATE
        response = SaslHandshakeResponse(int(ErrorCode.NONE), list(mechanisms))
        return SaslStep(response=encode_response(version, correlation_id, response))

    def _check_not_throttled(self) -> None:
        failures = self._settings.failures
        throttled_s = failures.throttled_s(self._host)
        if throttled_s > 0:
            raise SaslAuthenticationError(
                f"{failures.max_failures} or more failed authentications from {self._host} in the last "
                f"{failures.window_s:.0f} s: refused without checking for {throttled_s:.1f} s more"
            )

    def _authenticate(self, version: int, correlation_id: int, body: SaslAuthenticateRequest) -> SaslStep:
        server = self._server
        assert server is not None
        failures = self._settings.failures
        try:
            self._check_not_throttled()
            challenge = server.evaluate(bytes(body.auth_bytes))
        except SaslAuthenticationError as exc:
            self._state = _State.FAILED
            failures.record_failure(self._host)
            response = SaslAuthenticateResponse(
                error_code=int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                error_message=exc.client_message
                or "Authentication failed during authentication due to invalid credentials with "
                f"SASL mechanism {self._mechanism}",
            )
            return SaslStep(
                response=encode_response(version, correlation_id, response),
                close_reason=f"SASL {self._mechanism} authentication failed: {exc}",
                failed=True,
            )
        response = SaslAuthenticateResponse(error_code=int(ErrorCode.NONE), auth_bytes=challenge)
        encoded = encode_response(version, correlation_id, response)
        if not server.complete:
            return SaslStep(response=encoded)
        self._state = _State.COMPLETE
        username = server.username
        assert username is not None
        return SaslStep(response=encoded, principal=KafkaPrincipal.user(username))


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).title
    except ValueError:
        return f"an unknown (api key {api_key})"

"""The client's side of the SASL mechanisms: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677)
(Kafka's PlainSaslClient and ScramSaslClient).

A connection on a SASL listener (a client's, :mod:`broker.client.network.connection`, and a broker's to
another, :mod:`broker.server.inter_broker_send`) names the mechanism in SaslHandshake v1, then sends
:meth:`SaslClient.initial` in a SaslAuthenticate request, and each answer of the broker to
:meth:`SaslClient.evaluate`, sending what it returns, until :attr:`SaslClient.complete`.

SCRAM, as Kafka's ScramSaslClient, in states::

    SEND_CLIENT_FIRST ──initial()──▶ RECEIVE_SERVER_FIRST ──evaluate()──▶ RECEIVE_SERVER_FINAL
        ──evaluate()──▶ COMPLETE;    any check failing ──▶ FAILED (ScramError)

    client-first   n,,n=<user, "," as =2C and "=" as =3D>,r=<client nonce>
    server-first   r=<client nonce + server nonce>,s=<salt>,i=<iterations>     the nonce must start with ours,
                                                                              iterations >= 4096
    client-final   c=biws,r=<nonce>,p=<ClientProof>                           (biws: base64 of "n,,")
    server-final   v=<ServerSignature>                                        checked: the broker knew the
                                                                              credential; "e=..." is an error

The math is :mod:`broker.network.scram_credential`'s (one module for the broker and the clients). Errors are
:class:`ScramError` (a :class:`~broker.network.errors.NetworkError`) naming the step, never the password; a
client's connection turns them into an :class:`~broker.client.errors.AuthenticationError` naming the broker
and the mechanism, a broker's into an ``InterBrokerSendError``.

Not thread-safe: one client per connection attempt, used by the thread that connects.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hmac
import secrets
from typing import Protocol

from broker.network.errors import NetworkError
from broker.network.scram_credential import MIN_ITERATIONS, ScramMechanism

_NONCE_BYTES = 24


class ScramError(NetworkError):
    """The broker's SCRAM message is malformed or fails a check (the message says which)."""


class SaslClient(Protocol):
    """One login with one mechanism."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    def initial(self) -> bytes:
        """The first token."""
        ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The answer to the broker's ``challenge``; ``None`` once complete (nothing more to send)."""
        ...


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A new client of ``mechanism`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)."""
    if mechanism == "PLAIN":
        return PlainSaslClient(username, password)
    return ScramSaslClient(ScramMechanism.of(mechanism), username, password)


class PlainSaslClient:
    """SASL/PLAIN: one message ``NUL user NUL password``; the broker's empty answer completes it."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._complete = False

    def __repr__(self) -> str:
        return f"PlainSaslClient({self._username!r})"

    @property
    def complete(self) -> bool:
        return self._complete

    def initial(self) -> bytes:
        return f"\0{self._username}\0{self._password}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        self._complete = True
        return None


class _State(enum.Enum):
    SEND_CLIENT_FIRST = "send client-first"
    RECEIVE_SERVER_FIRST = "receive server-first"
    RECEIVE_SERVER_FINAL = "receive server-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramSaslClient:
    """SCRAM-SHA-256 or -512, client side (see the module docstring)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str = "") -> None:
        self._scram = mechanism
        self._username = username
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(_NONCE_BYTES).replace("-", "x").replace("_", "y")
        self._state = _State.SEND_CLIENT_FIRST
        self._client_first_bare = ""
        self._server_signature = b""

    def __repr__(self) -> str:
        return f"ScramSaslClient({self._scram.mechanism_name}, {self._username!r}, {self._state.value})"

    @property
    def mechanism(self) -> str:
        return self._scram.mechanism_name

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def initial(self) -> bytes:
        if self._state is not _State.SEND_CLIENT_FIRST:
            raise ScramError(f"SCRAM: initial() in state {self._state.value}")
        name = self._username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._nonce}"
        self._state = _State.RECEIVE_SERVER_FIRST
        return f"n,,{self._client_first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        try:
            if self._state is _State.RECEIVE_SERVER_FIRST:
                return self._client_final(_text(challenge, "server-first"))
            if self._state is _State.RECEIVE_SERVER_FINAL:
                self._check_server_final(_text(challenge, "server-final"))
                return None
        except ScramError:
            self._state = _State.FAILED
            raise
        raise ScramError(f"SCRAM: a challenge in state {self._state.value}")

    def _client_final(self, server_first: str) -> bytes:
        attributes = _attributes(server_first, "server-first")
        nonce, salt_text, iterations_text = attributes.get("r"), attributes.get("s"), attributes.get("i")
        if nonce is None or salt_text is None or iterations_text is None:
            raise ScramError("SCRAM: the server-first message lacks r=, s= or i=")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("SCRAM: the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_text, validate=True)
            iterations = int(iterations_text)
        except (binascii.Error, ValueError):
            raise ScramError(
                "SCRAM: the server-first salt is not base64 or iterations not a number"
            ) from None
        if iterations < MIN_ITERATIONS:
            raise ScramError(
                f"SCRAM: the server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}"
            )
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        salted = self._scram.salted_password(self._password, salt, iterations)
        proof = self._scram.client_proof(salted, auth_message)
        server_key = self._scram.hmac(salted, b"Server Key")
        self._server_signature = self._scram.server_signature(server_key, auth_message)
        self._state = _State.RECEIVE_SERVER_FINAL
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final: str) -> None:
        attributes = _attributes(server_final, "server-final")
        if "e" in attributes:
            raise ScramError(f"SCRAM: the server refused the login: {attributes['e']}")
        try:
            signature = base64.b64decode(attributes.get("v", ""), validate=True)
        except binascii.Error:
            raise ScramError("SCRAM: the server signature is not base64") from None
        if not signature or not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("SCRAM: the server's signature is wrong (it does not know the credential)")
        self._server_signature = b""
        self._state = _State.COMPLETE


def _text(challenge: bytes, what: str) -> str:
    try:
        return challenge.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"SCRAM: the {what} message is not UTF-8") from None


def _attributes(message: str, what: str) -> dict[str, str]:
    """``k=v,k=v`` as a dict (a value may hold ``=``, as base64 does)."""
    found: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"SCRAM: the {what} message is not k=v,k=v...")
        found.setdefault(key, value)
    return found

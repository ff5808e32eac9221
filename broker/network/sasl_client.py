"""The client side of SASL PLAIN and SCRAM-SHA-256/512 (RFC 4616, RFC 5802/7677): the messages a client
sends and how it checks the server's (Kafka's ``PlainSaslClient`` and ``ScramSaslClient``).

A :class:`SaslClient` is a state machine driven by whoever carries the bytes (the brokers' own connections
to each other, :mod:`broker.server.inter_broker_send`, in SaslAuthenticate requests)::

    PLAIN   first() -> "\\0user\\0password"                          -> server: empty      done
    SCRAM   first() -> "n,,n=user,r=<client nonce>"                 -> server-first
            step(server-first) -> "c=biws,r=<nonce>,p=<proof>"     -> server-final
            step(server-final "v=<signature>") -> None (checked)       done

A server-first whose nonce does not extend the client's, an iteration count below 4096, or a server
signature that does not match raises :class:`SaslClientError` (the server did not prove it knows the
credential). Messages never hold the password in an error. Not thread-safe: one per login.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets

from broker.network.errors import NetworkError
from broker.network.scram_credential import MIN_ITERATIONS, ScramMechanism


class SaslClientError(NetworkError):
    """The server's SASL message is not what the mechanism allows (the message says what, never a secret)."""


def _escape(name: str) -> str:
    """RFC 5802's saslname: ``=`` and ``,`` escaped."""
    return name.replace("=", "=3D").replace(",", "=2C")


class SaslClient:
    """One login with ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) as ``username``."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.mechanism = mechanism
        self._username = username
        self._password = password
        self._scram = None if mechanism == "PLAIN" else ScramMechanism.of(mechanism)
        self._nonce = secrets.token_urlsafe(24)
        self._first_bare = ""
        self._server_signature = b""
        self.done = False

    def first(self) -> bytes:
        """The client's first message."""
        if self._scram is None:
            self.done = True
            return f"\0{self._username}\0{self._password}".encode()
        self._first_bare = f"n={_escape(self._username)},r={self._nonce}"
        return f"n,,{self._first_bare}".encode()

    def step(self, challenge: bytes) -> bytes | None:
        """The answer to the server's ``challenge``; None once the login is done (PLAIN's empty answer,
        SCRAM's checked server-final)."""
        scram = self._scram
        if scram is None or self.done:
            return None
        fields = self._fields(challenge)
        if not self._server_signature:
            return self._client_final(scram, challenge.decode("utf-8", "replace"), fields)
        if "e" in fields:
            raise SaslClientError(f"the server refused the login: {fields['e']}")
        try:
            signature = base64.b64decode(fields.get("v", ""), validate=True)
        except binascii.Error as exc:
            raise SaslClientError("the server's final message has no valid signature") from exc
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("the server's signature does not match: it does not know the credential")
        self.done = True
        return None

    def _client_final(self, scram: ScramMechanism, server_first: str, fields: dict[str, str]) -> bytes:
        nonce = fields.get("r", "")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslClientError("the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(fields["s"], validate=True)
            iterations = int(fields["i"])
        except (KeyError, ValueError, binascii.Error) as exc:
            raise SaslClientError(
                f"the server's first message lacks a valid salt or iteration count: {exc}"
            ) from exc
        if iterations < MIN_ITERATIONS:
            raise SaslClientError(f"the server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}")
        salted = scram.salted_password(self._password, salt, iterations)
        client_key = scram.hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = scram.hmac(scram.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = scram.hmac(scram.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    @staticmethod
    def _fields(message: bytes) -> dict[str, str]:
        fields: dict[str, str] = {}
        for part in message.decode("utf-8", "replace").split(","):
            key, sep, value = part.partition("=")
            if sep:
                fields.setdefault(key, value)
        return fields

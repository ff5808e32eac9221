"""The broker's side of the SASL mechanisms: SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and PLAIN (RFC 4616)
(Kafka's ScramSaslServer and PlainSaslServer).

Each connection that authenticates gets a new server of its mechanism; :meth:`SaslServer.evaluate` takes
one client token and returns the server's answer; :attr:`SaslServer.username` is set once it completes.

SCRAM, two rounds (``,``-separated ``key=value`` attributes)::

    client-first   n,,n=<user>,r=<client nonce>            (gs2 header "n,," or "y,,"; "n,a=<user>,"
                                                            with an authorization id equal to the user)
    server-first   r=<client nonce><server nonce>,s=<salt, base64>,i=<iterations>
    client-final   c=<gs2 header, base64>,r=<nonce>,p=<ClientProof, base64>
    server-final   v=<ServerSignature, base64>

    AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
    ClientSignature = HMAC(stored_key, AuthMessage);  ClientKey = ClientProof XOR ClientSignature
    accepted iff H(ClientKey) == stored_key;  ServerSignature = HMAC(server_key, AuthMessage)

The client-final nonce must end with the server's full nonce: Kafka 3.x's check, which librdkafka before
2.6.1 (kcat's on Debian) relies on by sending the client nonce twice; Kafka 4 requires the nonce to equal the
server's (RFC 5802) and refuses those clients (tests/conformance/DIFFERENCES.md,
``old_librdkafka_scram_nonce``). Channel binding ("p=") is refused, extensions after the nonce are ignored
(Kafka's: tokenauth is for delegation tokens, which Lumber has not). PLAIN is one message
``authzid NUL user NUL password``, checked against the user's SCRAM credential (Lumber keeps one
credential store; Kafka's PLAIN reads passwords from its JAAS file instead): PBKDF2 with the credential's
salt and iterations, so a PLAIN login costs the broker what a SCRAM login costs the client. A refused PLAIN
login is told PlainSaslServer's words (``Authentication failed: Invalid username or password``, ``...:
username not specified``, ``...: password not specified``, the authorization id, ``Invalid SASL/PLAIN
response: expected 3 tokens, got N``), a refused SCRAM login Kafka's generic message.

Failures raise :class:`~broker.network.errors.SaslAuthenticationError`, whose message may be logged (it names
the user, never a password or key); the client is told only that its credentials were invalid. An unknown
user fails like a wrong password (Kafka does the same), at the first round for SCRAM.

Not thread-safe: one server per connection, used by its processor's thread.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable
from typing import Protocol

from broker.network.errors import SaslAuthenticationError
from broker.network.scram_credential import MIN_ITERATIONS, ScramCredential, ScramMechanism, xor

#: Finds a user's credential for a mechanism (``None``: no such user, or none for that mechanism).
CredentialLookup = Callable[[str, ScramMechanism], ScramCredential | None]

PLAIN = "PLAIN"
#: Every mechanism Lumber's brokers implement.
MECHANISMS = (PLAIN, *(m.mechanism_name for m in ScramMechanism))
_NONCE_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: The longest user name a client may give (a longer one fails before anything is looked up).
_MAX_USERNAME = 256
#: what Kafka's PlainSaslServer tells a client whose user or password is wrong (Lumber tells the same)
_PLAIN_INVALID = "Authentication failed: Invalid username or password"


class SaslServer(Protocol):
    """One connection's mechanism."""

    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's ``token``; raises SaslAuthenticationError."""
        ...


def sasl_server(mechanism: str, credentials: CredentialLookup) -> SaslServer:
    """A new server of ``mechanism`` (one of :data:`MECHANISMS`)."""
    if mechanism == PLAIN:
        return PlainSaslServer(credentials)
    return ScramSaslServer(ScramMechanism.of(mechanism), credentials)


def _text(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationError(f"the {what} is not UTF-8") from None


def _username(sasl_name: str) -> str:
    """RFC 5802's saslname: ``=2C`` is a comma, ``=3D`` an equals sign, any other ``=`` is invalid."""
    name = sasl_name.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslAuthenticationError("the user name has an '=' that is not =2C or =3D")
    return name.replace("=3D", "=")


class ScramSaslServer:
    """SCRAM-SHA-256 or -512, server side (see the module docstring)."""

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup) -> None:
        self._mechanism = mechanism
        self._credentials = credentials
        self._credential: ScramCredential | None = None
        self._user: str | None = None
        self._client_first_bare = ""
        self._gs2_header = ""
        self._server_first = ""
        self._nonce = ""
        self._complete = False
        self._failed = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def username(self) -> str | None:
        return self._user if self._complete else None

    def evaluate(self, token: bytes) -> bytes:
        if self._failed or self._complete:
            raise SaslAuthenticationError("SCRAM: no more tokens are expected")
        try:
            if self._credential is None:
                return self._first(_text(token, "client-first message"))
            return self._final(_text(token, "client-final message"))
        except SaslAuthenticationError:
            self._failed = True
            self._credential = None
            raise

    def _first(self, message: str) -> bytes:
        parts = message.split(",", 2)
        if len(parts) != 3:
            raise SaslAuthenticationError("the client-first message is not gs2-header,client-first-bare")
        cbind, authzid, bare = parts
        if cbind.startswith("p="):
            raise SaslAuthenticationError("SCRAM channel binding is not supported")
        if cbind not in ("n", "y") or (authzid and not authzid.startswith("a=")):
            raise SaslAuthenticationError("the client-first message has no valid gs2 header")
        attributes = bare.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("n=") or not attributes[1].startswith("r="):
            raise SaslAuthenticationError("the client-first message does not start with n=<user>,r=<nonce>")
        user = _username(attributes[0][2:])
        client_nonce = attributes[1][2:]
        if not user or len(user) > _MAX_USERNAME or not client_nonce or "," in client_nonce:
            raise SaslAuthenticationError("the client-first message has an empty or invalid user or nonce")
        if authzid and _username(authzid[2:]) != user:
            raise SaslAuthenticationError(f"user {user!r} asked for another authorization id")
        credential = self._credentials(user, self._mechanism)
        if credential is None:
            raise SaslAuthenticationError(f"user {user!r} has no {self._mechanism.mechanism_name} credential")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslAuthenticationError(f"user {user!r}'s credential has too few iterations")
        self._user = user
        self._credential = credential
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        # letters and digits only, as Kafka's nonces (base 36)
        self._nonce = client_nonce + "".join(secrets.choice(_NONCE_ALPHABET) for _ in range(32))
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        without_proof, sep, proof_text = message.rpartition(",p=")
        if not sep:
            raise SaslAuthenticationError("the client-final message has no proof")
        attributes = without_proof.split(",")
        if len(attributes) < 2 or not attributes[0].startswith("c=") or not attributes[1].startswith("r="):
            raise SaslAuthenticationError("the client-final message does not start with c=...,r=...")
        try:
            binding = base64.b64decode(attributes[0][2:], validate=True)
            proof = base64.b64decode(proof_text, validate=True)
        except binascii.Error:
            raise SaslAuthenticationError(
                "the client-final message's binding or proof is not base64"
            ) from None
        if binding != self._gs2_header.encode():
            raise SaslAuthenticationError(
                "the client-final message's channel binding differs from its header"
            )
        # Kafka 3.x's check, the nonce *ends with* the server's (librdkafka < 2.6.1, kcat's, sends the client
        # nonce twice; Kafka 4 wants equality); the proof covers the nonce as sent, so a replay still fails
        if not attributes[1][2:].endswith(self._nonce):
            raise SaslAuthenticationError("the client-final message's nonce is not the server's")
        mechanism = self._mechanism
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = mechanism.client_signature(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslAuthenticationError(f"user {self._user!r}: invalid credentials")
        client_key = xor(proof, signature)
        if not hmac.compare_digest(mechanism.hash(client_key), credential.stored_key):
            raise SaslAuthenticationError(f"user {self._user!r}: invalid credentials")
        server_signature = mechanism.server_signature(credential.server_key, auth_message)
        self._credential = None
        self._complete = True
        return b"v=" + base64.b64encode(server_signature)


class PlainSaslServer:
    """SASL/PLAIN, server side: one token, checked against the user's SCRAM credential."""

    def __init__(self, credentials: CredentialLookup) -> None:
        self._credentials = credentials
        self._user: str | None = None
        self._done = False

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def username(self) -> str | None:
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        if self._done:
            raise SaslAuthenticationError("PLAIN: no more tokens are expected")
        self._done = True
        parts = _text(token, "PLAIN message").split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationError(
                "the PLAIN message is not authzid NUL user NUL password",
                client_message=f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}",
            )
        authzid, user, password = parts
        if not user or len(user) > _MAX_USERNAME:
            raise SaslAuthenticationError(
                "the PLAIN message has an empty or invalid user",
                client_message="Authentication failed: username not specified"
                if not user
                else _PLAIN_INVALID,
            )
        if not password:
            raise SaslAuthenticationError(
                f"user {user!r} sent an empty password",
                client_message="Authentication failed: password not specified",
            )
        for mechanism in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256):
            credential = self._credentials(user, mechanism)
            if credential is not None:
                if not credential.matches_password(password, mechanism):
                    raise SaslAuthenticationError(
                        f"user {user!r}: invalid credentials", client_message=_PLAIN_INVALID
                    )
                if authzid and authzid != user:  # checked after the password, as Kafka does
                    raise SaslAuthenticationError(
                        f"user {user!r} asked for another authorization id",
                        client_message="Authentication failed: Client requested an authorization id that "
                        "is different from username",
                    )
                self._user = user
                return b""
        raise SaslAuthenticationError(f"user {user!r} has no credential", client_message=_PLAIN_INVALID)

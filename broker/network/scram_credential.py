"""SCRAM credentials (RFC 5802, RFC 7677): what a broker keeps of a password, and the math on it (Kafka's
ScramFormatter, ScramCredential and ScramCredentialUtils).

A broker never keeps a password. For each SCRAM mechanism a user has a credential::

    salt            random bytes, new for every credential
    iterations      PBKDF2 rounds (at least 4096, Kafka's minimum; 8192 by default here)
    SaltedPassword  = Hi(password, salt, iterations)            PBKDF2-HMAC with the mechanism's hash
    stored_key      = H(HMAC(SaltedPassword, "Client Key"))     checks the client's proof
    server_key      = HMAC(SaltedPassword, "Server Key")        proves the server to the client

Its text form is Kafka's, as ZooKeeper stores it under ``/config/users/<name>``
(:mod:`broker.cluster.zk_paths`)::

    salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=8192

The exchange itself (``sasl_server``'s docstring draws it) computes, on both sides::

    AuthMessage      = client-first-bare "," server-first "," client-final-without-proof
    ClientSignature  = HMAC(stored_key, AuthMessage)
    ClientProof      = ClientKey XOR ClientSignature        the client sends it; the server recovers ClientKey
    ServerSignature  = HMAC(server_key, AuthMessage)        the server sends it; the client checks it

This module is the one place of that math: the broker's :mod:`broker.network.sasl_server` and the clients'
:mod:`broker.network.sasl_client` both use it.

Knowing a credential does not let one log in (the client's proof needs SaltedPassword), but it does allow an
offline guess of the password: keep the znode as private as a password file.

Value objects and pure functions; thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
from dataclasses import dataclass

#: Kafka's ``ScramMechanism.minIterations``: fewer is refused when a credential is made or used.
MIN_ITERATIONS = 4096
#: The iterations of a credential made by ``lumber users add`` unless told otherwise.
DEFAULT_ITERATIONS = 8192
_SALT_BYTES = 24


class ScramMechanism(enum.Enum):
    """A SCRAM mechanism: its SASL name and its hash."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512")

    @property
    def mechanism_name(self) -> str:
        return self.value[0]

    @property
    def hash_name(self) -> str:
        return self.value[1]

    @classmethod
    def of(cls, name: str) -> ScramMechanism:
        """The mechanism called ``name`` (``SCRAM-SHA-512``); ValueError for another name."""
        for mechanism in cls:
            if mechanism.mechanism_name == name:
                return mechanism
        raise ValueError(f"{name!r} is not a SCRAM mechanism (SCRAM-SHA-256, SCRAM-SHA-512)")

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, iterations): PBKDF2 (RFC 5802 section 2.2); the password as UTF-8 (Kafka
        does not apply SASLprep either)."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def client_signature(self, stored_key: bytes, auth_message: bytes) -> bytes:
        """HMAC(stored_key, AuthMessage)."""
        return self.hmac(stored_key, auth_message)

    def client_proof(self, salted: bytes, auth_message: bytes) -> bytes:
        """ClientProof = ClientKey XOR ClientSignature, from SaltedPassword: what a client sends."""
        client_key = self.hmac(salted, b"Client Key")
        return xor(client_key, self.client_signature(self.hash(client_key), auth_message))

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        """HMAC(server_key, AuthMessage): what the server proves itself with."""
        return self.hmac(server_key, auth_message)


def xor(left: bytes, right: bytes) -> bytes:
    """``left`` XOR ``right``, two strings of one length (ValueError otherwise)."""
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's credential for one mechanism (see the module docstring)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys, even in a traceback's locals
        return f"ScramCredential(iterations={self.iterations})"

    @classmethod
    def generate(
        cls, password: str, mechanism: ScramMechanism, iterations: int = DEFAULT_ITERATIONS
    ) -> ScramCredential:
        """A new credential for ``password`` with a fresh random salt."""
        if iterations < MIN_ITERATIONS:
            raise ValueError(
                f"{mechanism.mechanism_name} needs at least {MIN_ITERATIONS} iterations, got {iterations}"
            )
        salt = secrets.token_bytes(_SALT_BYTES)
        return cls.from_salted_password(
            mechanism, mechanism.salted_password(password, salt, iterations), salt, iterations
        )

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salted: bytes, salt: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted, b"Client Key")
        return cls(salt, mechanism.hash(client_key), mechanism.hmac(salted, b"Server Key"), iterations)

    def matches_password(self, password: str, mechanism: ScramMechanism) -> bool:
        """Whether ``password`` is the one this credential was made from (SASL/PLAIN's check; PBKDF2 with
        the credential's iterations, so as slow as a SCRAM client's own work)."""
        salted = mechanism.salted_password(password, self.salt, self.iterations)
        stored = mechanism.hash(mechanism.hmac(salted, b"Client Key"))
        return hmac.compare_digest(stored, self.stored_key)

    def to_text(self) -> str:
        """Kafka's text form (see the module docstring)."""
        encode = base64.b64encode
        return (
            f"salt={encode(self.salt).decode()},stored_key={encode(self.stored_key).decode()},"
            f"server_key={encode(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """A credential from Kafka's text form; ValueError naming what is wrong (never the keys)."""
        fields: dict[str, str] = {}
        for token in text.split(","):
            key, sep, value = token.partition("=")
            if not sep or not key:
                raise ValueError(
                    "a SCRAM credential is salt=...,stored_key=...,server_key=...,iterations=..."
                )
            fields[key] = value
        if sorted(fields) != ["iterations", "salt", "server_key", "stored_key"]:
            raise ValueError(
                f"a SCRAM credential has salt, stored_key, server_key and iterations, found {sorted(fields)}"
            )
        try:
            credential = cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (binascii.Error, ValueError) as exc:
            raise ValueError(
                f"a SCRAM credential's salt or keys are not base64, or iterations not a number: {exc}"
            ) from None
        if credential.iterations < MIN_ITERATIONS:
            raise ValueError(
                f"a SCRAM credential with {credential.iterations} iterations (fewer than {MIN_ITERATIONS})"
            )
        return credential

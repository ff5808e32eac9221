"""A SASL connection's states before authentication (broker/network/sasl_authenticator.py), frame by frame,
with the SCRAM exchange computed by the test from RFC 5802's formulas (the end-to-end tests use real
clients: tests/broker/network/test_sasl.py)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
from typing import Any

from broker.network.failed_authentications import FailedAuthentications
from broker.network.sasl_authenticator import SaslAuthenticator, SaslSettings
from broker.network.scram_credential import ScramCredential, ScramMechanism
from broker.network.session import KafkaPrincipal
from broker.protocol import ErrorCode, decode_response
from broker.protocol.codec import encode_request
from broker.protocol.messages.api_versions import ApiVersionsRequest
from broker.protocol.messages.metadata import MetadataRequest
from broker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from broker.protocol.messages.sasl_handshake import SaslHandshakeRequest

MECHANISM = ScramMechanism.SCRAM_SHA_256
SALT = b"0123456789abcdef"
CREDENTIAL = ScramCredential.from_salted_password(
    MECHANISM, MECHANISM.salted_password("pw", SALT, 4096), SALT, 4096
)


def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
    return CREDENTIAL if (user, mechanism) == ("alice", MECHANISM) else None


def authenticator(settings: SaslSettings | None = None) -> SaslAuthenticator:
    """A connection's authenticator on a listener with ``settings`` (default: 10 failures allowed)."""
    if settings is None:
        settings = SaslSettings(("PLAIN", "SCRAM-SHA-256"), lookup, FailedAuthentications(10, 60.0))
    return SaslAuthenticator(settings, "10.0.0.9")


def frame(body: object, version: int, correlation_id: int = 1) -> bytes:
    return encode_request(version, correlation_id, "test", body)[4:]  # type: ignore[arg-type]


def answer(response: bytes | None, api_key: int, version: int) -> Any:
    assert response is not None
    return decode_response(api_key, version, response[4:]).body


def scram_final(server_first: bytes, client_first_bare: str, password: str) -> bytes:
    attributes = dict(part.split("=", 1) for part in server_first.decode().split(","))
    salted = hashlib.pbkdf2_hmac(
        "sha256", password.encode(), base64.b64decode(attributes["s"]), int(attributes["i"])
    )
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = f"c=biws,r={attributes['r']}"
    auth_message = f"{client_first_bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_api_versions_handshake_and_scram_authenticate_the_user() -> None:
    auth = authenticator()
    step = auth.handle(frame(ApiVersionsRequest(), 3))
    assert step.close_reason is None
    assert answer(step.response, 18, 3).error_code == 0
    step = auth.handle(frame(SaslHandshakeRequest("SCRAM-SHA-256"), 1))
    assert answer(step.response, 17, 1) == (0, ["PLAIN", "SCRAM-SHA-256"])
    bare = "n=alice,r=clientnonce"
    step = auth.handle(frame(SaslAuthenticateRequest(f"n,,{bare}".encode()), 2))
    first = answer(step.response, 36, 2)
    assert first.error_code == 0
    server_first = bytes(first.auth_bytes)
    assert server_first.startswith(b"r=clientnonce")
    step = auth.handle(frame(SaslAuthenticateRequest(scram_final(server_first, bare, "pw")), 2))
    final = answer(step.response, 36, 2)
    assert final.error_code == 0
    assert bytes(final.auth_bytes).startswith(b"v=")
    assert step.principal == KafkaPrincipal("User", "alice")
    assert step.close_reason is None


def test_a_wrong_proof_fails_with_kafkas_message_and_is_recorded() -> None:
    settings = SaslSettings(("PLAIN", "SCRAM-SHA-256"), lookup, FailedAuthentications(1, 60.0))
    auth = authenticator(settings)
    auth.handle(frame(SaslHandshakeRequest("SCRAM-SHA-256"), 1))
    bare = "n=alice,r=abc"
    first = auth.handle(frame(SaslAuthenticateRequest(f"n,,{bare}".encode()), 1))
    server_first = bytes(answer(first.response, 36, 1).auth_bytes)
    step = auth.handle(frame(SaslAuthenticateRequest(scram_final(server_first, bare, "not-pw")), 1))
    failed = answer(step.response, 36, 1)
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-256"
    )
    assert step.failed
    assert step.close_reason == "SASL SCRAM-SHA-256 authentication failed: user 'alice': invalid credentials"
    assert step.principal is None
    # the host is throttled now: the right password is refused without being checked
    again = authenticator(settings)  # another connection from the host, on the same listener
    again.handle(frame(SaslHandshakeRequest("PLAIN"), 1))
    step = again.handle(frame(SaslAuthenticateRequest(b"\0alice\0pw"), 1))
    assert step.failed
    assert "refused without checking" in (step.close_reason or "")


def test_skipping_the_handshake_an_unknown_mechanism_and_v0_close_the_connection() -> None:
    step = authenticator().handle(frame(MetadataRequest(topics=None), 1))
    assert (step.response, step.close_reason) == (
        None,
        "Metadata request during the SASL handshake or versions step",
    )
    step = authenticator().handle(frame(SaslHandshakeRequest("GSSAPI"), 1))
    assert answer(step.response, 17, 1) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["PLAIN", "SCRAM-SHA-256"])
    assert step.close_reason == "SASL mechanism 'GSSAPI' is not enabled (PLAIN, SCRAM-SHA-256)"
    step = authenticator().handle(frame(SaslHandshakeRequest("PLAIN"), 0))
    assert step.close_reason == "SaslHandshake v0 (raw SASL tokens) is not supported: use v1"
    auth = authenticator()
    auth.handle(frame(SaslHandshakeRequest("PLAIN"), 1))
    step = auth.handle(frame(SaslHandshakeRequest("PLAIN"), 1))  # a second handshake
    assert step.close_reason == "SaslHandshake request during the SASL authenticate step"
    step = authenticator().handle(struct.pack(">hhi", 36, 9, 1) + b"\xff\xff")  # garbage after a header
    assert step.close_reason is not None
    assert step.response is None
    step = authenticator().handle(b"\x00")
    assert step.close_reason == "an unknown (api key -1) request during the SASL handshake or versions step"


def _plain_refusal(token: bytes) -> tuple[int, str | None, str | None]:
    auth = authenticator()
    auth.handle(frame(SaslHandshakeRequest("PLAIN"), 1))
    step = auth.handle(frame(SaslAuthenticateRequest(token), 1))
    failed = answer(step.response, 36, 1)
    assert step.failed
    return failed.error_code, failed.error_message, step.close_reason


def test_a_refused_plain_login_is_told_kafkas_plain_messages() -> None:
    """Kafka 4.4's PlainSaslServer's words for each refusal (not the SCRAM servers' generic message); the
    log line keeps Lumber's reason, which names the user and never the password."""
    invalid = "Authentication failed: Invalid username or password"
    cases = {
        b"\0alice\0not-pw": (invalid, "user 'alice': invalid credentials"),
        b"\0mallory\0pw": (invalid, "user 'mallory' has no credential"),
        b"\0\0pw": ("Authentication failed: username not specified", "an empty or invalid user"),
        b"\0alice\0": (
            "Authentication failed: password not specified",
            "user 'alice' sent an empty password",
        ),
        b"bob\0alice\0pw": (
            "Authentication failed: Client requested an authorization id that is different from username",
            "user 'alice' asked for another authorization id",
        ),
        b"alice\0pw": ("Invalid SASL/PLAIN response: expected 3 tokens, got 2", "not authzid NUL user NUL"),
        b"a\0b\0c\0d\0e\0f": ("Invalid SASL/PLAIN response: expected 3 tokens, got 4", "not authzid NUL"),
    }
    for token, (message, reason) in cases.items():
        code, told, logged = _plain_refusal(token)
        assert (code, told) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message), token
        assert logged is not None
        assert reason in logged, (token, logged)
        assert b"not-pw" not in logged.encode()
    # the authorization id is checked after the password, as Kafka does: a wrong password says so
    assert _plain_refusal(b"bob\0alice\0not-pw")[1] == invalid

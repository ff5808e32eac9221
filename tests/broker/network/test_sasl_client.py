"""The client side of SASL (broker/network/sasl_client.py) against the broker's own servers
(broker/network/sasl_server.py), in process: PLAIN and both SCRAMs log in; a wrong password, a server
that does not know the credential, and a forged nonce are each refused, the password in no message."""

from __future__ import annotations

import base64

import pytest

from broker.network.errors import NetworkError
from broker.network.sasl_client import SaslClient, SaslClientError
from broker.network.sasl_server import CredentialLookup, sasl_server
from broker.network.scram_credential import ScramCredential, ScramMechanism

PASSWORD = "s3cret-never-in-a-message"


def lookup_for(password: str) -> CredentialLookup:
    credentials = {m: ScramCredential.generate(password, m, iterations=4096) for m in ScramMechanism}
    return lambda user, mechanism: credentials[mechanism] if user == "broker" else None


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_logs_in(mechanism: str) -> None:
    server = sasl_server(mechanism, lookup_for(PASSWORD))
    client = SaslClient(mechanism, "broker", PASSWORD)
    token: bytes | None = client.first()
    rounds = 0
    while token is not None:
        rounds += 1
        token = client.step(server.evaluate(token))
    assert server.complete
    assert server.username == "broker"
    assert client.done
    assert rounds == (1 if mechanism == "PLAIN" else 2)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused_by_the_server(mechanism: str) -> None:
    server = sasl_server(mechanism, lookup_for(PASSWORD))
    client = SaslClient(mechanism, "broker", "wrong")

    def login() -> None:
        token: bytes | None = client.first()
        while token is not None:
            token = client.step(server.evaluate(token))

    with pytest.raises(NetworkError) as info:
        login()
    assert PASSWORD not in str(info.value)
    assert "wrong" not in str(info.value)
    assert not server.complete


def test_a_server_without_the_credential_is_refused_by_the_client() -> None:
    real = sasl_server("SCRAM-SHA-256", lookup_for(PASSWORD))
    impostor = sasl_server("SCRAM-SHA-256", lookup_for("another password"))
    client = SaslClient("SCRAM-SHA-256", "broker", PASSWORD)
    first = client.first()
    # the impostor answers with its own salt; the client's proof fails there, so replay the real server's
    # final message to the client after the impostor's first: its signature cannot match
    client_final = client.step(impostor.evaluate(first))
    assert client_final is not None
    other = SaslClient("SCRAM-SHA-256", "broker", PASSWORD)
    real_final = real.evaluate(other.step(real.evaluate(other.first())) or b"")
    with pytest.raises(SaslClientError, match="does not match: it does not know the credential"):
        client.step(real_final)


def test_a_nonce_that_does_not_extend_the_clients_is_refused() -> None:
    client = SaslClient("SCRAM-SHA-512", "broker", PASSWORD)
    client.first()
    salt = base64.b64encode(b"salt").decode()
    with pytest.raises(SaslClientError, match="nonce does not extend"):
        client.step(f"r=forged,s={salt},i=4096".encode())


def test_too_few_iterations_are_refused() -> None:
    client = SaslClient("SCRAM-SHA-512", "broker", PASSWORD)
    nonce = client.first().decode().split("r=")[1]
    salt = base64.b64encode(b"salt").decode()
    with pytest.raises(SaslClientError, match="asks for 100 iterations, fewer than 4096"):
        client.step(f"r={nonce}xyz,s={salt},i=100".encode())

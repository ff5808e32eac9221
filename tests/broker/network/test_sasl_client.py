"""The SASL client mechanisms (broker/network/sasl_client.py: a client's logins and a broker's to another):
RFC 7677's SCRAM-SHA-256 example to the byte, and logins against the broker's own servers
(broker/network/sasl_server.py) for every mechanism, with the right and a wrong password, and a server that
does not know the credential."""

from __future__ import annotations

import pytest

from broker.network.errors import SaslAuthenticationError
from broker.network.sasl_client import PlainSaslClient, ScramError, ScramSaslClient, sasl_client
from broker.network.sasl_server import sasl_server
from broker.network.scram_credential import ScramCredential, ScramMechanism

PASSWORD = "pencil"


def test_rfc_7677_example() -> None:
    client = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "user", PASSWORD, nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.initial() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert not client.complete
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


def login(mechanism: str, password: str, stored: dict[ScramMechanism, ScramCredential]) -> str | None:
    """One login of the client against the broker's server; the user the server accepted."""
    server = sasl_server(mechanism, lambda user, m: stored.get(m) if user == "al,i=ce" else None)
    client = sasl_client(mechanism, "al,i=ce", password)
    token: bytes | None = client.initial()
    while token is not None:
        token = client.evaluate(server.evaluate(token))
    assert client.complete
    return server.username


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_logins_against_the_brokers_servers(mechanism: str) -> None:
    stored = {m: ScramCredential.generate(PASSWORD, m, 4096) for m in ScramMechanism}
    assert login(mechanism, PASSWORD, stored) == "al,i=ce"
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        login(mechanism, "wrong", stored)


def test_a_server_that_does_not_know_the_credential_is_caught() -> None:
    """A server-final signature made from another credential fails the client (a broker impersonated)."""
    mechanism = ScramMechanism.SCRAM_SHA_512
    real = ScramCredential.generate(PASSWORD, mechanism, 4096)
    client = ScramSaslClient(mechanism, "bob", PASSWORD)
    server = sasl_server(mechanism.mechanism_name, lambda _u, _m: real)
    first = server.evaluate(client.initial())
    final = client.evaluate(first)
    assert final is not None
    server.evaluate(final)
    with pytest.raises(ScramError, match="server's signature is wrong"):
        client.evaluate(b"v=" + b"A" * 88)
    assert not client.complete


@pytest.mark.parametrize(
    ("server_first", "words"),
    [
        (b"r=someone-else,s=QUJD,i=4096", "does not extend"),
        (b"r=NONCEmore,s=QUJD,i=1000", "fewer than 4096"),
        (b"r=NONCEmore,s=not base64!,i=4096", "not base64"),
        (b"garbage", "not k=v"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_server_first_messages(server_first: bytes, words: str) -> None:
    client = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "bob", PASSWORD, nonce="NONCE")
    client.initial()
    with pytest.raises(ScramError, match=words):
        client.evaluate(server_first)


def test_plain_and_reprs_never_show_the_password() -> None:
    plain = PlainSaslClient("bob", "s3cr3t")
    assert plain.initial() == b"\0bob\0s3cr3t"
    assert "s3cr3t" not in repr(plain)
    assert "s3cr3t" not in repr(ScramSaslClient(ScramMechanism.SCRAM_SHA_256, "bob", "s3cr3t"))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_refused_login_names_no_password(mechanism: str) -> None:
    stored = {m: ScramCredential.generate(PASSWORD, m, 4096) for m in ScramMechanism}
    with pytest.raises(SaslAuthenticationError) as info:
        login(mechanism, "wr0ng-guess", stored)
    assert PASSWORD not in str(info.value)
    assert "wr0ng-guess" not in str(info.value)

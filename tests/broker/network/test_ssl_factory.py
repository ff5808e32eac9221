"""The TLS listeners' context and the principal of a client certificate (broker/network/ssl_factory.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.network.errors import NetworkConfigError
from broker.network.session import ANONYMOUS, KafkaPrincipal
from broker.network.ssl_factory import principal_of, server_ssl_context
from lumber.dev.dev_certificates import CertificateAuthority


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS handshake between two in-memory ends; the server's end once it is done."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    server_end = server.wrap_bio(s_in, s_out, server_side=True)
    client_end = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            client_end.write(b"x")  # TLS 1.3: the server checks the client's certificate on its first read
            s_in.write(c_out.read())
            server_end.read(1)
            return server_end
    raise AssertionError("the handshake did not finish")


def test_a_client_certificate_names_the_principal_by_its_subject(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    broker, alice = ca.issue("broker"), ca.issue("alice", client=True)
    server = server_ssl_context(
        certfile=str(broker.certfile),
        keyfile=str(broker.keyfile),
        cafile=str(ca.cafile),
        client_auth="required",
    )
    client = ssl.create_default_context(cafile=str(ca.cafile))
    client.load_cert_chain(alice.certfile, alice.keyfile)
    end = handshake(server, client)
    assert principal_of(end.getpeercert()) == KafkaPrincipal("User", "CN=alice,O=Lumber")
    assert str(principal_of(end.getpeercert())) == "User:CN=alice,O=Lumber"
    assert end.version() in ("TLSv1.2", "TLSv1.3")


def test_no_certificate_is_anonymous_and_special_characters_are_escaped() -> None:
    assert principal_of(None) is ANONYMOUS
    assert principal_of({}) is ANONYMOUS
    subject = ((("countryName", "NL"),), (("organizationName", "A, B+C"),), (("commonName", " x;y "),))
    assert str(principal_of({"subject": subject})) == "User:CN=\\ x\\;y\\ ,O=A\\, B\\+C,C=NL"


def test_settings_that_cannot_work_are_named(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    broker = ca.issue("broker")
    with pytest.raises(NetworkConfigError, match=r"cannot load the broker's certificate '/nonexistent\.pem'"):
        server_ssl_context(certfile="/nonexistent.pem", keyfile="")
    with pytest.raises(NetworkConfigError, match="needs ssl_cafile"):
        server_ssl_context(certfile=str(broker.certfile), keyfile=str(broker.keyfile), client_auth="required")
    with pytest.raises(NetworkConfigError, match="ssl_ciphers 'NOTACIPHER' names no cipher"):
        server_ssl_context(certfile=str(broker.certfile), keyfile=str(broker.keyfile), ciphers="NOTACIPHER")
    context = server_ssl_context(
        certfile=str(broker.certfile), keyfile=str(broker.keyfile), min_version="TLSv1.3"
    )
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3
    assert context.verify_mode == ssl.CERT_NONE

"""A certificate authority of one's own for a dev stack and the tests: a CA, broker and client certificates.

Files (PEM, written by :meth:`CertificateAuthority.issue`, keys mode 0600, unencrypted unless a key password
is given)::

    <folder>/ca.pem                  the CA's certificate: what clients (ssl.ca.location) and brokers
                                     (ssl_cafile) trust
    <folder>/ca-key.pem              the CA's private key (kept only to issue more certificates)
    <folder>/<name>.pem              a certificate signed by the CA: subject O=Lumber, CN=<name>
    <folder>/<name>-key.pem          its private key

Server certificates name their hosts as subjectAltNames (``localhost``, ``127.0.0.1`` by default), which is
what clients check, and serve for clientAuth too (a broker presents its own to the leaders it replicates
from); client certificates are for ``clientAuth`` and name their holder in the subject, which
is the principal a broker gives them (``User:CN=<name>,O=Lumber``). Keys are ECDSA P-256 (fast to make,
accepted by OpenSSL, librdkafka and Java); certificates last ``valid_days`` from an hour ago.

Not for production: a real deployment uses its organisation's CA (README, "Securing a cluster").
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class IssuedCertificate:
    """A certificate and key written by the CA."""

    certfile: Path
    keyfile: Path


class CertificateAuthority:
    """A CA whose certificate and key live in ``folder`` (made on first use, read again after)."""

    def __init__(self, folder: Path, *, valid_days: int = 30) -> None:
        self.folder = folder
        self.valid_days = valid_days
        self.cafile = folder / "ca.pem"
        self._keyfile = folder / "ca-key.pem"
        self._key: Any = None
        self._cert: Any = None

    def _load_or_create(self) -> None:
        from cryptography import x509  # noqa: PLC0415 - only the secure stack and its tests pay for it
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
        from cryptography.x509.oid import NameOID  # noqa: PLC0415

        if self._cert is not None:
            return
        if self.cafile.exists() and self._keyfile.exists():
            self._cert = x509.load_pem_x509_certificate(self.cafile.read_bytes())
            self._key = serialization.load_pem_private_key(self._keyfile.read_bytes(), password=None)
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Lumber"),
                x509.NameAttribute(NameOID.COMMON_NAME, "Lumber dev CA"),
            ]
        )
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=self.valid_days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        _write_private(self._keyfile, _key_pem(key))
        self.cafile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._key, self._cert = key, cert

    def issue(
        self,
        name: str,
        *,
        hosts: Sequence[str] = ("localhost", "127.0.0.1"),
        client: bool = False,
        organization: str = "Lumber",
        key_password: str = "",
    ) -> IssuedCertificate:
        """A certificate for ``name`` signed by this CA: a server's for ``hosts``, or a client's; its key
        encrypted with ``key_password`` when one is given."""
        from cryptography import x509  # noqa: PLC0415
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415

        self._load_or_create()
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name(
                    [
                        x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                        x509.NameAttribute(NameOID.COMMON_NAME, name),
                    ]
                )
            )
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=self.valid_days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.CLIENT_AUTH]
                    if client
                    else [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if not client:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        issued = IssuedCertificate(self.folder / f"{name}.pem", self.folder / f"{name}-key.pem")
        _write_private(issued.keyfile, _key_pem(key, key_password))
        issued.certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return issued


def _key_pem(key: Any, password: str = "") -> bytes:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415

    encryption: Any = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption()
    )
    pem: bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    return pem


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (created 0600, never wider for a moment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)

"""The TLS side of a listener (Kafka's SslFactory and DefaultSslEngineFactory), with Python's ``ssl`` module.

:func:`server_ssl_context` builds the one :class:`ssl.SSLContext` every SSL and SASL_SSL listener of a broker
shares, from ``[broker]``'s ``ssl_*`` keys:

* the broker's certificate chain and private key (PEM files; ``ssl_keyfile`` may be the certificate file);
* TLS 1.2 at least (``ssl_min_version`` may raise it to TLS 1.3); SSLv3, TLS 1.0 and 1.1 never;
* ``ssl_ciphers``: an OpenSSL cipher list for TLS 1.2 (TLS 1.3's suites are OpenSSL's; Python cannot set
  them); empty keeps Python's defaults;
* ``ssl_client_auth`` (Kafka's ``ssl.client.auth``): ``none`` asks for no client certificate; ``requested``
  asks and checks one that is sent against ``ssl_cafile``; ``required`` refuses a client without one.

:func:`principal_of` names a client by its certificate, as Kafka's DefaultKafkaPrincipalBuilder does
without ``ssl.principal.mapping.rules``: ``User:`` and the subject's distinguished name in RFC 2253 form,
its last RDN first (``CN=alice,OU=ops,O=Lumber``), or ``User:ANONYMOUS`` without a certificate.

Thread-safe: a context is shared by every processor thread (OpenSSL's contexts are).
"""

from __future__ import annotations

import ssl
from typing import Any, Literal

from broker.network.errors import NetworkConfigError
from broker.network.session import ANONYMOUS, KafkaPrincipal

ClientAuth = Literal["none", "requested", "required"]
TlsVersion = Literal["TLSv1.2", "TLSv1.3"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

#: OpenSSL's long attribute names (as ``getpeercert()`` gives them) -> RFC 2253's short ones.
_SHORT_NAMES = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "stateOrProvinceName": "ST",
    "localityName": "L",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
_ESCAPED = frozenset(',+"\\<>;')


def server_ssl_context(
    *,
    certfile: str,
    keyfile: str,
    cafile: str = "",
    client_auth: ClientAuth = "none",
    ciphers: str = "",
    min_version: TlsVersion = "TLSv1.2",
) -> ssl.SSLContext:
    """The context of a broker's TLS listeners; :class:`NetworkConfigError` naming the file or setting that
    cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[min_version]
    try:
        context.load_cert_chain(certfile, keyfile or None)
    except (OSError, ssl.SSLError) as exc:
        raise NetworkConfigError(
            f"cannot load the broker's certificate {certfile!r} and key {keyfile or certfile!r}: {exc}"
        ) from exc
    if client_auth != "none":
        if not cafile:
            raise NetworkConfigError(
                f"ssl_client_auth = {client_auth!r} needs ssl_cafile to check client certificates"
            )
        try:
            context.load_verify_locations(cafile)
        except (OSError, ssl.SSLError) as exc:
            raise NetworkConfigError(f"cannot load the CA certificates {cafile!r}: {exc}") from exc
    context.verify_mode = _VERIFY[client_auth]
    if ciphers:
        try:
            context.set_ciphers(ciphers)
        except ssl.SSLError as exc:
            raise NetworkConfigError(f"ssl_ciphers {ciphers!r} names no cipher OpenSSL has: {exc}") from exc
    # no session tickets: a resumed session carries no client certificate to name the principal by
    context.options |= ssl.OP_NO_TICKET
    return context


def principal_of(certificate: dict[str, Any] | None) -> KafkaPrincipal:
    """The principal of a client certificate as ``SSLSocket.getpeercert()`` gives it (see the module)."""
    if not certificate or not certificate.get("subject"):
        return ANONYMOUS
    rdns = [
        "+".join(f"{_SHORT_NAMES.get(name, name)}={_escape(value)}" for name, value in rdn)
        for rdn in reversed(certificate["subject"])
    ]
    return KafkaPrincipal.user(",".join(rdns))


def _escape(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in _ESCAPED else c for c in value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped

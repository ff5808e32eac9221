"""How a client secures its connections to a broker's listener, resolved: protocol, SASL login, TLS files.

A :class:`ClientSecurity` is what a connection needs (Kafka's ``security.protocol``, ``sasl.*`` and ``ssl.*``
client settings), with its secrets already read from wherever the config said
(:mod:`broker.client.security_settings` reads them from the config, a file or an environment variable):

=================  ======  ================================================================================
protocol           TLS     after ApiVersions
=================  ======  ================================================================================
PLAINTEXT          no      nothing
SSL                yes     nothing (with ``certfile``/``keyfile`` the broker names the client by it)
SASL_PLAINTEXT     no      SaslHandshake v1 + SaslAuthenticate with ``sasl_mechanism`` as ``sasl_username``
SASL_SSL           yes     the same, inside TLS
=================  ======  ================================================================================

TLS (:meth:`ClientSecurity.ssl_context`): TLS 1.2 at least; the broker's certificate is checked against
``cafile`` (empty: the system's trusted CAs) and, with ``check_hostname`` (Kafka's
``ssl.endpoint.identification.algorithm=https``, on by default), must name the host the client connects to.

**Secrets** (the SASL password, the key's password) are never shown: :meth:`ClientSecurity.__repr__` leaves
them out, and no error of the client quotes them. The value is picklable (a Spark task of the load gets it
inside its task, never in Spark's conf or on a command line). Immutable; thread-safe.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from broker.client.errors import ClientConfigError
from broker.endpoint import SecurityProtocol

#: Every SASL mechanism Lumber's clients speak (those its brokers implement).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """A client's security settings with their secrets (see the module docstring)."""

    protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: str = "SCRAM-SHA-512"
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""
    key_password: str = field(default="", repr=False)
    check_hostname: bool = True
    #: what the settings came from (``producer``, ``load``): errors name it
    section: str = "client"

    def __post_init__(self) -> None:
        if self.protocol.uses_sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ClientConfigError(
                    f"{self.section}.sasl_mechanism: {self.sasl_mechanism!r} is not one of "
                    f"{', '.join(SASL_MECHANISMS)}"
                )
            if not self.sasl_username or not self.sasl_password:
                raise ClientConfigError(
                    f"{self.section}.security_protocol = {self.protocol.value!r} needs sasl_username and a "
                    "password (sasl_password, sasl_password_file or sasl_password_env)"
                )

    def __repr__(self) -> str:  # never a password, even in a traceback's locals
        login = f", {self.sasl_mechanism} as {self.sasl_username!r}" if self.protocol.uses_sasl else ""
        return f"ClientSecurity({self.protocol.value}{login})"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The context of this client's TLS connections (one per client: its pool's); ``None`` without TLS.
        :class:`ClientConfigError` naming the file that cannot be read (never the key's password)."""
        if not self.protocol.uses_tls:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            if self.cafile:
                context.load_verify_locations(self.cafile)
            else:
                context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        except (OSError, ssl.SSLError) as exc:
            raise ClientConfigError(
                f"{self.section}.ssl_cafile: cannot load the CA certificates {self.cafile!r}: {_reason(exc)}"
            ) from None
        if self.certfile:
            try:
                context.load_cert_chain(
                    self.certfile, self.keyfile or None, password=self.key_password or None
                )
            except (OSError, ssl.SSLError) as exc:
                raise ClientConfigError(
                    f"{self.section}.ssl_certfile / ssl_keyfile: cannot load the client certificate "
                    f"{self.certfile!r} and key {self.keyfile or self.certfile!r}: {_reason(exc)}"
                ) from None
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        return context


#: A client of a PLAINTEXT listener: no TLS, no login.
PLAINTEXT = ClientSecurity()


def _reason(exc: BaseException) -> str:
    """An OpenSSL or OS error in words, without its arguments (a password callback's text never shows)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else type(exc).__name__

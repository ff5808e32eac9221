"""How one HTTP server is secured, from its config keys: who may connect (a users file, or nobody asked), TLS,
and the rule that guards an open door.

The rule: a server whose host reaches beyond this machine (anything but ``localhost``, ``127.0.0.0/8`` and
``::1``; ``0.0.0.0`` and ``""`` are every interface) must authenticate its clients, unless its config says
``allow_unauthenticated = true``. :meth:`WebSecurity.check` raises :class:`UnsafeBindError` with one line
naming the keys, and returns the warnings a server logs (or prints) at start: serving beyond 127.0.0.1
without authentication, or authenticating without TLS (Basic credentials cross the network readable).

The keys of each server (one vocabulary, named in every message as ``[section] key``):

=========================== ==================================== =========================================
server                      section and keys                     who
=========================== ==================================== =========================================
the web console             ``[console] host``, ``users_file``,  ``lumber console``
                            ``ssl_certfile``, ``ssl_keyfile``,
                            ``allow_unauthenticated``
a broker's metrics          ``[broker] host``, ``metrics_*``     ``lumber broker start``
the lag exporter            ``[lag_exporter] host`` (or          ``lumber groups lag --watch
                            ``--metrics-host``) and the same     --metrics-port``
=========================== ==================================== =========================================

Immutable; the authenticator and TLS context it builds are shared by a server's threads.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from dataclasses import dataclass

from broker.network.failed_authentications import FailedAuthentications
from broker.web.basic_auth import BasicAuthenticator
from broker.web.errors import TlsConfigError, UnsafeBindError, UsersFileError
from broker.web.users_file import UsersFile


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (every address it resolves to is loopback)."""
    if host in ("", "0.0.0.0", "::"):  # noqa: S104 - this is the check for it
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in found)


@dataclass(frozen=True)
class WebSecurity:
    """One server's security settings; ``section`` and ``prefix`` name its keys in messages."""

    server: str
    section: str
    host: str
    users_file: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    allow_unauthenticated: bool = False
    prefix: str = ""
    #: where ``host`` came from, if not ``[section] host`` (a command-line flag)
    host_key: str = ""

    def key(self, name: str) -> str:
        return f"[{self.section}] {self.prefix}{name}"

    @property
    def scheme(self) -> str:
        return "https" if self.ssl_certfile else "http"

    def check(self) -> list[str]:
        """The warnings to give at start; :class:`UnsafeBindError` when the server may not start."""
        host_key = self.host_key or f"[{self.section}] host"
        if self.ssl_keyfile and not self.ssl_certfile:
            raise UnsafeBindError(
                f"{self.server}: {self.key('ssl_keyfile')} is set without {self.key('ssl_certfile')}"
            )
        if is_loopback(self.host):
            return []
        if not self.users_file:
            if not self.allow_unauthenticated:
                raise UnsafeBindError(
                    f"{self.server}: {host_key} = {self.host!r} reaches beyond 127.0.0.1 and "
                    f"{self.key('users_file')} is not set: give it users (lumber http-users add) or set "
                    f"{self.key('allow_unauthenticated')} = true"
                )
            unauthenticated = (
                f"{self.server}: serving {self.host!r} WITHOUT authentication "
                f"({self.key('allow_unauthenticated')} = true): anyone who reaches it is served"
            )
            return [unauthenticated]
        if not self.ssl_certfile:
            clear = (
                f"{self.server}: serving {self.host!r} with passwords but without TLS: credentials cross "
                f"the network readable; set {self.key('ssl_certfile')} and {self.key('ssl_keyfile')}"
            )
            return [clear]
        return []

    def authenticator(self, failures: FailedAuthentications | None = None) -> BasicAuthenticator | None:
        """The authenticator of ``users_file`` (``None``: no authentication); :class:`UsersFileError`."""
        if not self.users_file:
            return None
        try:
            users = UsersFile(self.users_file)
        except UsersFileError as exc:
            raise UsersFileError(f"{self.server}: {self.key('users_file')}: {exc}") from exc
        return BasicAuthenticator(users, self.server, failures)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (TLS 1.2 or later), ``None`` without ``ssl_certfile``."""
        if not self.ssl_certfile:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile or None)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(
                f"{self.server}: cannot load {self.key('ssl_certfile')} {self.ssl_certfile!r} and "
                f"{self.key('ssl_keyfile')} {self.ssl_keyfile or self.ssl_certfile!r}: {exc}"
            ) from exc
        return context

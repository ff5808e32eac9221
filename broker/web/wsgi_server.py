"""A WSGI application served from a daemon thread with the security of a
:class:`~broker.web.web_security.WebSecurity`: the broker's metrics and the lag exporter.

One thread accepts; each connection gets a thread of its own (``socketserver.ThreadingMixIn``, daemon
threads), which first completes the TLS handshake, with :data:`CONNECTION_TIMEOUT_S` on every read, so a
client that stalls holds its own thread only. Each request then passes Basic authentication (when a users
file is configured): without valid credentials the answer is 401 with ``WWW-Authenticate: Basic``; the
application sees the user's role in ``environ["lumber.role"]`` (``admin`` when the server does not
authenticate). No line per request is logged; a failed handshake is logged at INFO with the client's
address, a failed authentication at WARNING (:mod:`~broker.web.basic_auth`).
"""

from __future__ import annotations

import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from broker.web.basic_auth import WWW_AUTHENTICATE, BasicAuthenticator
from broker.web.users_file import Role
from broker.web.web_security import WebSecurity

logger = logging.getLogger(__name__)

CONNECTION_TIMEOUT_S = 30.0
ROLE_KEY = "lumber.role"

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def with_basic_auth(app: WsgiApp, authenticator: BasicAuthenticator | None) -> WsgiApp:
    """``app`` behind Basic authentication (``None``: everyone is admin)."""

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if authenticator is None:
            environ[ROLE_KEY] = Role.ADMIN.value
            return app(environ, start_response)
        role = authenticator.authenticate(environ.get("HTTP_AUTHORIZATION"), environ.get("REMOTE_ADDR", "?"))
        if role is None:
            body = b"401 Unauthorized: this server needs a user name and password (HTTP Basic)\n"
            start_response(
                "401 Unauthorized",
                [
                    ("WWW-Authenticate", WWW_AUTHENTICATE),
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Content-Length", str(len(body))),
                ],
            )
            return [body]
        environ[ROLE_KEY] = role.value
        return app(environ, start_response)

    return guarded


class _Handler(WSGIRequestHandler):
    """Completes the TLS handshake in the connection's own thread; no line per request."""

    timeout = CONNECTION_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    name = "http server"

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        logger.info("%s: connection from %s failed: %r", self.name, client_address[0], error)


class _Server6(_Server):
    address_family = socket.AF_INET6


class WsgiServer:
    """``app`` on ``security.host:port`` from a daemon thread until :meth:`stop`."""

    def __init__(self, app: WsgiApp, port: int, security: WebSecurity, thread_name: str) -> None:
        authenticator = security.authenticator()
        context = security.ssl_context()
        server_class = _Server6 if ":" in security.host else _Server
        self._server = make_server(
            security.host, port, with_basic_auth(app, authenticator), server_class, handler_class=_Handler
        )
        self._server.name = security.server
        if context is not None:
            self._server.socket = context.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.security = security
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=thread_name, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{self.security.scheme}://{self.security.host}:{self.port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

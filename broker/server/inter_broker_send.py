"""A blocking request-response connection to another broker (Kafka's ``ReplicaFetcherBlockingSend``).

The replica fetchers talk to their leaders through it: one connection per fetcher thread, one request at a
time, each answered before the next is sent. It speaks the same codec as every client
(:func:`broker.protocol.encode_request`, :func:`broker.protocol.decode_response`) at fixed versions, the
highest Lumber implements (both ends are Lumber brokers of one release; Kafka negotiates its inter-broker
versions with ``inter.broker.protocol.version``, Lumber has one release at a time in a cluster).

Why not :class:`broker.client.network.connection.BrokerConnection`: the server sits below the clients in the
package layering (DESIGN.md), and a fetcher needs neither pipelining nor a reader thread.

On a TLS inter-broker listener (``[broker] inter_broker_listener_name`` an SSL listener) the connection is
wrapped in TLS with :func:`inter_broker_ssl_context`: it trusts ``ssl_cafile``, checks the leader's host
name against its certificate, and presents the broker's own certificate, so that a leader with
``ssl_client_auth`` knows its followers as ``User:<the broker certificate's subject>``. On a SASL
inter-broker listener (SASL_PLAINTEXT, SASL_SSL) each new connection logs in first, as
``[broker] inter_broker_sasl_username`` with ``inter_broker_sasl_mechanism``
(:func:`~broker.network.sasl_client.sasl_client`: SaslHandshake, then SaslAuthenticate until done), the
password read from ``inter_broker_sasl_password_file`` at each connection; the leader then knows its
followers as ``User:<that name>`` (a super user, or one with CLUSTER_ACTION on the cluster, when the leader
has an authorizer). A refused login is an :class:`InterBrokerSendError` naming the user, never the
password.

Failures (connect, send, receive, a frame that does not decode, a timeout) raise
:class:`InterBrokerSendError` naming the broker, and close the connection; the caller backs off and
connects again. Not thread-safe: one fetcher thread owns it; only :meth:`InterBrokerSend.abort` may be called
from another thread (to stop a fetcher waiting for an answer).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.network.errors import NetworkError
from broker.network.sasl_client import sasl_client
from broker.protocol import ProtocolError, RequestBody, decode_response, encode_request
from broker.protocol.apis import api_for_request
from broker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from broker.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from broker.server.errors import ServerError

_SIZE = struct.Struct(">i")
#: The largest response accepted (a fetch answers at most ``replica_fetch_max_bytes`` per partition).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class InterBrokerSendError(ServerError):
    """A request to another broker failed (the message names the broker and why)."""


class InterBrokerSend:
    """One blocking connection to broker ``broker_id`` at ``host:port`` (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        *,
        client_id: str,
        timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        sasl: tuple[str, str, str] | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self._client_id = client_id
        self._timeout_s = timeout_s
        self._ssl_context = ssl_context
        self._sasl = sasl  # (mechanism, username, password file)
        self._sock: socket.socket | None = None
        self._correlation_ids = itertools.count(1)

    @property
    def name(self) -> str:
        return f"broker {self.broker_id} at {self.host}:{self.port}"

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self._timeout_s)
        except OSError as exc:
            raise InterBrokerSendError(f"{self.name}: cannot connect: {exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._ssl_context is not None:
            try:
                sock = self._ssl_context.wrap_socket(sock, server_hostname=self.host)
            except (ssl.SSLError, OSError) as exc:
                with contextlib.suppress(OSError):
                    sock.close()
                raise InterBrokerSendError(f"{self.name}: TLS handshake failed: {exc}") from exc
        self._sock = sock
        if self._sasl is not None:
            try:
                self._login(*self._sasl)
            except BaseException:
                self.close()
                raise
        return sock

    def _login(self, mechanism: str, username: str, password_file: str) -> None:
        """SaslHandshake and SaslAuthenticate on the new connection (see the module docstring)."""
        try:
            with Path(password_file).open(encoding="utf-8") as file:
                password = file.readline().rstrip("\r\n")
        except OSError as exc:
            raise InterBrokerSendError(
                f"cannot read inter_broker_sasl_password_file {password_file!r}: {exc.strerror or exc}"
            ) from exc
        handshake: SaslHandshakeResponse = self.send_and_receive(SaslHandshakeRequest(mechanism=mechanism))
        if handshake.error_code != 0:
            raise InterBrokerSendError(
                f"{self.name}: SASL mechanism {mechanism} refused (error {handshake.error_code}; the "
                f"listener offers {', '.join(handshake.mechanisms) or 'none'})"
            )
        client = sasl_client(mechanism, username, password)
        token: bytes | None = client.initial()
        try:
            while token is not None:
                answer: SaslAuthenticateResponse = self.send_and_receive(
                    SaslAuthenticateRequest(auth_bytes=token)
                )
                if answer.error_code != 0:
                    raise InterBrokerSendError(
                        f"{self.name}: login as {username!r} ({mechanism}) refused: error "
                        f"{answer.error_code} {answer.error_message or ''}".rstrip()
                    )
                token = client.evaluate(bytes(answer.auth_bytes))
        except NetworkError as exc:
            raise InterBrokerSendError(f"{self.name}: login as {username!r} ({mechanism}): {exc}") from exc

    def send_and_receive(self, body: RequestBody, *, timeout_s: float | None = None) -> Any:
        """Send ``body`` at the highest version Lumber implements and return the decoded response body."""
        spec = api_for_request(body)
        version = spec.max_version
        sock = self._sock or self._connect()
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        try:
            frame = encode_request(version, correlation_id, self._client_id, body)
        except ProtocolError as exc:
            raise InterBrokerSendError(f"{self.name}: cannot encode {spec.name}: {exc}") from exc
        try:
            sock.settimeout(self._timeout_s if timeout_s is None else timeout_s)
            sock.sendall(frame)
            (size,) = _SIZE.unpack(self._receive(sock, 4))
            response = self._receive(sock, self._checked_size(size))
        except OSError as exc:
            self.close()
            raise InterBrokerSendError(f"{self.name}: {spec.name} failed: {exc.strerror or exc}") from exc
        except InterBrokerSendError:
            self.close()
            raise
        try:
            decoded = decode_response(int(spec.key), version, response)
        except ProtocolError as exc:
            self.close()
            raise InterBrokerSendError(f"{self.name}: cannot decode the {spec.name} response: {exc}") from exc
        if decoded.header.correlation_id != correlation_id:
            self.close()
            raise InterBrokerSendError(
                f"{self.name}: response correlation id {decoded.header.correlation_id}, expected "
                f"{correlation_id}"
            )
        return decoded.body

    def _checked_size(self, size: int) -> int:
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise InterBrokerSendError(f"{self.name}: response size {size} outside [4, {MAX_RESPONSE_BYTES}]")
        return size

    def _receive(self, sock: socket.socket, size: int) -> bytearray:
        buffer = bytearray(size)
        view = memoryview(buffer)
        got = 0
        while got < size:
            n = sock.recv_into(view[got:], size - got)
            if n == 0:
                raise InterBrokerSendError(f"{self.name}: connection closed after {got} of {size} bytes")
            got += n
        return buffer

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def abort(self) -> None:
        """Wake a request blocked on this connection from another thread (it fails at once): the
        connection is shut down, and the owning thread closes it."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def inter_broker_sasl(config: BrokerConfig) -> tuple[str, str, str] | None:
    """(mechanism, username, password file) of the brokers' SASL login; None when not configured."""
    if not config.inter_broker_sasl_username:
        return None
    return (
        config.inter_broker_sasl_mechanism,
        config.inter_broker_sasl_username,
        config.inter_broker_sasl_password_file,
    )


def inter_broker_ssl_context(config: BrokerConfig) -> ssl.SSLContext:
    """The client side of a TLS inter-broker connection: trusts ``ssl_cafile`` (the system's CAs without
    it), TLS 1.2+, and presents the broker's own certificate (``ssl_certfile``, ``ssl_keyfile``)."""
    context = ssl.create_default_context(cafile=config.ssl_cafile or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(config.ssl_certfile, config.ssl_keyfile or None)
    except (OSError, ssl.SSLError) as exc:
        raise InterBrokerSendError(
            f"cannot load the broker's certificate {config.ssl_certfile!r}: {exc}"
        ) from exc
    return context

"""One TCP connection to a broker: pipelined requests, responses matched by correlation id.

Life of a connection::

    NEW --connect()--> TCP up --TLS handshake (SSL, SASL_SSL)--> reader thread running --ApiVersions-->
        --SaslHandshake + SaslAuthenticate (SASL_*)--> READY --close()--> CLOSED
          \\_________ any I/O error, timeout, bad frame or refused login ____________/

* **Security** (:mod:`broker.client.client_security`): on SSL and SASL_SSL listeners the bytes go through a
  :class:`~broker.client.network.tls_channel.TlsChannel` (TLS from several threads safely); on SASL
  listeners the client logs in after ApiVersions (:mod:`~broker.client.network.sasl_login`, as Kafka's
  SaslClientAuthenticator). A refused login or a failed TLS handshake raises
  :class:`~broker.client.errors.AuthenticationError` naming the broker, the mechanism and the user (never
  the password); it is not retriable.

* **Negotiation.** The first request is ApiVersions at the highest version Lumber implements. A broker that
  does not know that version answers UNSUPPORTED_VERSION in the v0 format with its own range, and the
  request is repeated at the highest version both sides implement. Every later request of an API uses the
  highest version in both ranges (:meth:`BrokerConnection.api_version`); an API the broker lacks raises
  :class:`~broker.client.errors.UnsupportedApiError` when it is first needed.
* **Pipelining.** :meth:`BrokerConnection.send` writes a request and returns at once with a
  :class:`PendingRequest`; any number of requests may be in flight (callers bound it, e.g. the producer's
  ``max_in_flight_requests_per_connection``). Each response is matched to its request by correlation id.
  A response whose correlation id matches nothing in flight is a protocol violation: the connection closes.
* **Threads.** Any thread may send (writes are serialised by a lock). One reader thread per connection
  receives frames, decodes them and completes their requests, running their callbacks; a callback must be
  quick and must not block on this connection. Frames larger than the read buffer are received straight
  into a buffer of their own, which the decoded response's ``records`` views then share (no copy).
* **Timeouts.** A request with no response after ``request_timeout_ms`` closes the connection, as Kafka's
  clients do (the stream can no longer be trusted): every request in flight fails with
  :class:`~broker.client.errors.RequestTimeoutError`. Connecting has its own ``connect_timeout_ms``.
* **Failures.** When the connection breaks, every request in flight fails with
  :class:`~broker.client.errors.BrokerConnectionError` naming the broker and the cause; later sends fail
  the same way. A closed connection is never reused: make a new one.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from broker.client.client_security import PLAINTEXT, ClientSecurity
from broker.client.errors import (
    AuthenticationError,
    BrokerConnectionError,
    ClientError,
    RequestTimeoutError,
    UnsupportedApiError,
)
from broker.client.network.pending_request import Callback, PendingRequest
from broker.client.network.sasl_login import sasl_login
from broker.client.network.tls_channel import TlsChannel
from broker.protocol import (
    ApiKey,
    ProtocolError,
    RequestBody,
    decode_response,
    encode_request,
)
from broker.protocol.apis import APIS_BY_KEY, api_for_request
from broker.protocol.error_code import ErrorCode
from broker.protocol.messages.api_versions import API_VERSIONS, ApiVersionsRequest, ApiVersionsResponse

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
#: Bytes the reader asks the socket for at once; larger frames get a buffer of their own.
_READ_CHUNK_BYTES = 256 * 1024
#: How often an idle reader wakes to check deadlines and the closed flag.
_IDLE_WAKE_S = 0.5
_SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
#: Lumber's own client software name and version, as ApiVersions v3+ reports them.
_SOFTWARE_NAME = "lumber-python"
_SOFTWARE_VERSION = "0.1.0"


class BrokerConnection:
    """A connection to one broker (see the module docstring). ``node_id`` is -1 for a bootstrap server."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "lumber",
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        max_response_bytes: int = 1024 * 1024 * 1024,
        security: ClientSecurity = PLAINTEXT,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_s = request_timeout_ms / 1000
        self.connect_timeout_s = connect_timeout_ms / 1000
        self.max_response_bytes = max_response_bytes
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._pending: dict[int, PendingRequest] = {}
        self._correlation_ids = itertools.count(1)
        self._closed = False
        self._close_error: ClientError | None = None
        self._reader: threading.Thread | None = None
        self._versions: dict[int, int] = {}
        self._broker_ranges: dict[int, tuple[int, int]] = {}
        self.security = security
        self._ready = False
        self._ssl_context = ssl_context
        if security.protocol.uses_tls and ssl_context is None:
            self._ssl_context = security.ssl_context()
        self._sendall: Callable[[bytes | bytearray | memoryview], None] = _unconnected
        self._recv_into: Callable[[memoryview], int | None] = _unconnected
        self._more: Callable[[], bool] = _nothing_more

    @property
    def name(self) -> str:
        """``host:port``, with the broker id when known: how errors name this broker."""
        address = f"{self.host}:{self.port}"
        return address if self.node_id < 0 else f"{address} (broker {self.node_id})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._pending)

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("ready" if self._versions else "new")
        return f"BrokerConnection({self.name}, {state}, in_flight={len(self._pending)})"

    # ------------------------------------------------------------------------------------------- setup

    def connect(self) -> None:
        """Open the TCP connection and negotiate API versions; raises :class:`BrokerConnectionError`."""
        if self._sock is not None:
            raise BrokerConnectionError(self.name, "connect() was already called on this connection")
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except OSError as exc:
            self._closed = True
            raise BrokerConnectionError(self.name, f"cannot connect: {exc.strerror or exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):  # the kernel may keep its own limit
                sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER_BYTES)
        # sends block at most this long (a broker that stops reading); the reader selects before recv
        sock.settimeout(self.request_timeout_s)
        self._sock = sock
        self._sendall, self._recv_into = sock.sendall, sock.recv_into
        if self._ssl_context is not None:
            self._start_tls(sock, self._ssl_context)
        self._reader = threading.Thread(
            target=self._read_loop, name=f"lumber-conn-{self.host}:{self.port}", daemon=True
        )
        self._reader.start()
        try:
            self._negotiate()
            if self.security.protocol.uses_sasl:
                sasl_login(
                    self.name,
                    self.security,
                    lambda body, version: self._send_at(body, version, None, True).wait(),
                    self.api_version(int(ApiKey.SASL_AUTHENTICATE)),
                )
            self._ready = True
        except BaseException:
            self.close()
            raise

    def _start_tls(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        channel = TlsChannel(sock, context, self.host)
        try:
            channel.handshake(self.connect_timeout_s)
        except ssl.SSLError as exc:
            self._closed = True
            sock.close()
            raise AuthenticationError(
                self.name,
                f"TLS handshake failed: {exc.reason or exc.__class__.__name__}: {exc.strerror or exc}",
            ) from None
        except OSError as exc:
            self._closed = True
            sock.close()
            raise BrokerConnectionError(self.name, f"TLS handshake failed: {exc.strerror or exc}") from exc
        self._sendall, self._recv_into, self._more = channel.sendall, channel.recv_into, channel.pending

    def _negotiate(self) -> None:
        version = API_VERSIONS.max_version
        body = ApiVersionsRequest(
            client_software_name=_SOFTWARE_NAME, client_software_version=_SOFTWARE_VERSION
        )
        for _ in range(2):
            response: ApiVersionsResponse = self._send_at(body, version, None, True).wait()
            ranges = {item.api_key: (item.min_version, item.max_version) for item in response.api_keys}
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                theirs = ranges.get(int(ApiKey.API_VERSIONS))
                if theirs is None or theirs[1] >= version:
                    break
                version = min(theirs[1], API_VERSIONS.max_version)
                continue
            if response.error_code != ErrorCode.NONE:
                break
            self._broker_ranges = ranges
            versions = {}
            for key, spec in APIS_BY_KEY.items():
                found = ranges.get(key)
                if found is None:
                    continue
                low, high = max(found[0], spec.min_version), min(found[1], spec.max_version)
                if low <= high:
                    versions[key] = high
            self._versions = versions
            return
        raise BrokerConnectionError(
            self.name,
            f"ApiVersions negotiation failed: {ErrorCode.name_of(response.error_code)} "
            f"(error code {response.error_code})",
        )

    def api_version(self, api_key: int) -> int:
        """The version this connection uses for ``api_key``: the highest both sides implement."""
        version = self._versions.get(api_key)
        if version is None:
            spec = APIS_BY_KEY[api_key]
            raise UnsupportedApiError(
                self.name, spec.name, (spec.min_version, spec.max_version), self._broker_ranges.get(api_key)
            )
        return version

    # ------------------------------------------------------------------------------------------ requests

    def send(
        self,
        body: RequestBody,
        *,
        callback: Callback | None = None,
        expect_response: bool = True,
        version: int | None = None,
    ) -> PendingRequest:
        """Write ``body`` at the negotiated version (or ``version``); return at once.

        ``callback`` runs in the reader thread once the response (or failure) is there. Without
        ``expect_response`` (Produce with acks 0) the request is complete once written. A request that
        cannot be written fails once: :class:`BrokerConnectionError` is raised, unless the reader saw the
        connection end first and already failed it through ``callback``.
        """
        api_key = int(api_for_request(body).key)
        if version is None:
            version = self.api_version(api_key)
        return self._send_at(body, version, callback, expect_response)

    def send_unanswered(self, bodies: Sequence[RequestBody]) -> None:
        """Write requests that get no response (Produce with acks 0), in order, in one write.

        A pipelining producer hands over everything it has ready at once: one syscall (and one wake-up
        of the broker) for many requests. Raises :class:`BrokerConnectionError` like :meth:`send`; the
        requests may then have been written in part.
        """
        if not bodies:
            return
        api_key = int(api_for_request(bodies[0]).key)
        version = self.api_version(api_key)
        client_id = self.client_id
        ids = self._correlation_ids
        try:
            frames = [encode_request(version, next(ids) & 0x7FFFFFFF, client_id, body) for body in bodies]
        except ProtocolError as exc:
            raise BrokerConnectionError(self.name, f"cannot encode the request: {exc}") from exc
        self._write_unanswered(frames)

    def send_unanswered_frames(
        self, api_key: int, encode: Callable[[int, str | None, Iterator[int]], list[bytes]]
    ) -> None:
        """:meth:`send_unanswered` of requests the caller frames itself (the producer's ``acks=0`` Produce
        requests, :mod:`broker.client.producer.produce_frames`): ``encode(version, client_id, ids)``
        returns whole frames (size prefix included) of API ``api_key`` at the negotiated ``version`` with
        this connection's client id, each with the next of ``ids``, the connection's correlation ids,
        masked to 31 bits."""
        version = self.api_version(api_key)
        try:
            frames = encode(version, self.client_id, self._correlation_ids)
        except ProtocolError as exc:
            raise BrokerConnectionError(self.name, f"cannot encode the request: {exc}") from exc
        if frames:
            self._write_unanswered(frames)

    def _write_unanswered(self, frames: list[bytes]) -> None:
        wire = frames[0] if len(frames) == 1 else b"".join(frames)
        sock = self._sock
        with self._send_lock:
            with self._lock:
                if self._closed or sock is None:
                    raise self._closed_error()
            try:
                self._sendall(wire)
            except OSError as exc:
                error = self._write_error(exc, f"{len(frames)} requests ({len(wire)} bytes)")
                self._fail(error)
                raise error from exc

    def _closed_error(self) -> BrokerConnectionError:
        closed_by = self._close_error
        cause = f": {closed_by.reason}" if isinstance(closed_by, BrokerConnectionError) else ""
        return BrokerConnectionError(self.name, f"the connection is closed{cause}")

    def _write_error(self, exc: OSError, what: str) -> BrokerConnectionError:
        if isinstance(exc, TimeoutError):
            return RequestTimeoutError(self.name, f"could not write {what} in {self.request_timeout_s} s")
        return BrokerConnectionError(self.name, f"connection lost while sending: {exc.strerror or exc}")

    def request(self, body: RequestBody, *, version: int | None = None) -> Any:
        """Send ``body`` and wait for its response (bounded by the request timeout)."""
        return self.send(body, version=version).wait()

    def _send_at(
        self, body: RequestBody, version: int, callback: Callback | None, expect_response: bool
    ) -> PendingRequest:
        api_key = int(api_for_request(body).key)
        correlation_id = next(self._correlation_ids) & 0x7FFFFFFF
        try:
            frame = encode_request(version, correlation_id, self.client_id, body)
        except ProtocolError as exc:
            raise BrokerConnectionError(self.name, f"cannot encode the request: {exc}") from exc
        now = time.monotonic()
        pending = PendingRequest(
            api_key, version, correlation_id, now + self.request_timeout_s, callback, self._lock, self.name
        )
        pending.sent_at = now
        sock = self._sock
        with self._send_lock:
            with self._lock:
                if self._closed or sock is None:
                    raise self._closed_error()
                if expect_response:
                    self._pending[correlation_id] = pending
            try:
                self._sendall(frame)
            except OSError as exc:
                error = self._write_error(exc, f"a {len(frame)}-byte request")
                with self._lock:  # this request fails here, by raising: not through its callback too
                    ours = not expect_response or self._pending.pop(correlation_id, None) is not None
                self._fail(error)
                if ours:
                    raise error from exc
                # the reader saw the connection end first and failed the request through its callback,
                # once: raising too would fail it twice (a producer retried its batch twice, then died of
                # the second requeue, when kill -9 met a write in progress)
        if not expect_response:
            pending._complete(None, None)
        return pending

    # -------------------------------------------------------------------------------------------- reader

    def _read_loop(self) -> None:
        sock = self._sock
        if sock is None:  # pragma: no cover - started by connect() only
            return
        buffer = bytearray(_READ_CHUNK_BYTES)
        view = memoryview(buffer)
        start = end = 0
        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)
        recv_into, more = self._recv_into, self._more
        try:
            while not self._closed:
                timeout = self._next_wake()
                if timeout is None:
                    return
                if not more() and not selector.select(timeout):
                    continue
                if end == len(buffer):  # the buffer is full of one partial frame header: move it
                    view[: end - start] = view[start:end]
                    end -= start
                    start = 0
                try:
                    received = recv_into(view[end:])
                except (BlockingIOError, InterruptedError, TimeoutError, ssl.SSLWantReadError):
                    continue
                except OSError as exc:
                    self._fail(self._read_error(exc))
                    return
                if received is None:  # TLS: no whole record yet
                    continue
                if received == 0:
                    self._fail(BrokerConnectionError(self.name, "the broker closed the connection"))
                    return
                end += received
                # complete frames in the buffer
                while end - start >= 4:
                    (size,) = _SIZE.unpack_from(buffer, start)
                    if size < 4 or size > self.max_response_bytes:
                        self._fail(
                            BrokerConnectionError(
                                self.name,
                                f"response size prefix {size} is outside 4-{self.max_response_bytes} bytes",
                            )
                        )
                        return
                    frame_end = start + 4 + size
                    if frame_end <= end:
                        self._dispatch(bytes(view[start + 4 : frame_end]))
                        start = frame_end
                        continue
                    if 4 + size > len(buffer):
                        # a large frame: receive it into a buffer of its own, no copy later
                        frame = bytearray(size)
                        have = end - start - 4
                        frame[:have] = view[start + 4 : end]
                        start = end = 0
                        if not self._receive_exactly(sock, selector, memoryview(frame)[have:]):
                            return
                        self._dispatch(frame)
                    break
                if start == end:
                    start = end = 0
                elif len(buffer) - end < 4096:
                    view[: end - start] = view[start:end]
                    end -= start
                    start = 0
        except Exception as exc:
            if not self._closed:
                log.exception("reader of %s failed", self.name)
            self._fail(BrokerConnectionError(self.name, f"reader failed: {exc!r}"))
        finally:
            selector.close()
            sock.close()

    def _receive_exactly(
        self, sock: socket.socket, selector: selectors.BaseSelector, target: memoryview
    ) -> bool:
        got = 0
        total = len(target)
        recv_into, more = self._recv_into, self._more
        while got < total:
            if self._closed:
                return False
            timeout = self._next_wake()
            if timeout is None:
                return False
            if not more() and not selector.select(timeout):
                continue
            try:
                received = recv_into(target[got:])
            except (BlockingIOError, InterruptedError, TimeoutError, ssl.SSLWantReadError):
                continue
            except OSError as exc:
                self._fail(self._read_error(exc))
                return False
            if received is None:
                continue
            if received == 0:
                self._fail(
                    BrokerConnectionError(
                        self.name,
                        f"the broker closed the connection mid-response ({got} of {total} bytes received)",
                    )
                )
                return False
            got += received
        return True

    def _read_error(self, exc: OSError) -> BrokerConnectionError:
        """A failed read in words; a TLS alert before the connection is ready (a broker that wants a client
        certificate) is an :class:`AuthenticationError`."""
        if isinstance(exc, ssl.SSLError) and not self._ready:
            return AuthenticationError(
                self.name, f"TLS refused: {exc.reason or exc.__class__.__name__}: {exc.strerror or exc}"
            )
        return BrokerConnectionError(self.name, f"connection lost: {exc.strerror or exc}")

    def _next_wake(self) -> float | None:
        """Seconds to the earliest request deadline (at most the idle wake); ``None``: a request timed out."""
        if not self._pending:
            return _IDLE_WAKE_S
        now = time.monotonic()
        with self._lock:
            oldest = min(self._pending.values(), key=lambda pending: pending.deadline, default=None)
        if oldest is None:
            return _IDLE_WAKE_S
        remaining = oldest.deadline - now
        if remaining <= 0:
            self._fail(
                RequestTimeoutError(
                    self.name,
                    f"no response to {ApiKey(oldest.api_key).title} v{oldest.api_version} request "
                    f"{oldest.correlation_id} within {self.request_timeout_s:g} s; closed the connection",
                )
            )
            return None
        return min(remaining, _IDLE_WAKE_S)

    def _dispatch(self, frame: bytes | bytearray) -> None:
        (correlation_id,) = _CORRELATION.unpack_from(frame, 0)
        with self._lock:
            pending = self._pending.pop(correlation_id, None)
        if pending is None:
            self._fail(
                BrokerConnectionError(
                    self.name, f"response with correlation id {correlation_id} matches no request in flight"
                )
            )
            return
        try:
            response = decode_response(pending.api_key, pending.api_version, frame)
        except ProtocolError as exc:
            pending._complete(
                None,
                BrokerConnectionError(
                    self.name,
                    f"cannot decode the {ApiKey(pending.api_key).title} v{pending.api_version} response "
                    f"to request {correlation_id}: {exc}",
                ),
            )
            return
        pending._complete(response.body, None)

    # ------------------------------------------------------------------------------------------- closing

    def _fail(self, error: ClientError, *, by_client: bool = False) -> None:
        """Close the connection because of ``error``, failing every request in flight with it
        (``by_client``: the owner closed it, a normal end that is logged at DEBUG only)."""
        with self._lock:
            if self._closed and not self._pending:
                return
            self._closed = True
            if self._close_error is None:
                self._close_error = error
            pending = list(self._pending.values())
            self._pending.clear()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # wakes the reader, which closes the socket on its way out
                sock.shutdown(socket.SHUT_RDWR)
        if pending:
            log.log(
                logging.DEBUG if by_client else logging.INFO,
                "%s: failing %d request(s) in flight: %s",
                self.name,
                len(pending),
                error,
            )
        for request in pending:
            request._complete(None, error)

    def close(self, reason: str = "closed by the client") -> None:
        """Close the connection; requests in flight fail with :class:`BrokerConnectionError`. Idempotent."""
        self._fail(BrokerConnectionError(self.name, reason), by_client=True)
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=5)
        if reader is None and self._sock is not None:
            self._sock.close()


def _unconnected(*_args: object) -> None:
    raise OSError("not connected")


def _nothing_more() -> bool:
    return False

"""Test helpers for the network layer: a real server with small handler threads, and blocking clients.

The handler threads here are the test's stand-in for the broker's request handlers: they take requests from
the real :class:`RequestChannel` and answer through it, so every test drives the real acceptor, processors
and sockets on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from broker.network.request_channel import NetworkRequest, NetworkResponse, RequestChannel
from broker.network.socket_server import SocketServer
from broker.protocol.frame import framed

Respond = Callable[[NetworkRequest], NetworkResponse | None]

_HEADER = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_server_names = itertools.count()

#: Command api keys understood by :func:`commands` (the first int16 of a test frame).
ECHO, EMPTY, ECHO_THEN_CLOSE, CLOSE, NO_ANSWER = 0, 1, 2, 3, 4


def request_frame(correlation_id: int, payload: bytes = b"", api_key: int = ECHO) -> bytes:
    """A frame (no size prefix) whose first 8 bytes look like a request header v0."""
    return _HEADER.pack(api_key, 0, correlation_id) + payload


def echo(request: NetworkRequest) -> NetworkResponse:
    """Answer with the request's own frame, size-prefixed."""
    return NetworkResponse(request, (framed(request.frame),))


def commands(request: NetworkRequest) -> NetworkResponse | None:
    """Answer by the frame's api key: echo, empty, echo then close, close at once, or never."""
    (api_key,) = struct.unpack_from(">h", request.frame, 0)
    if api_key == EMPTY:
        return NetworkResponse(request)
    if api_key == ECHO_THEN_CLOSE:
        return NetworkResponse(
            request, (framed(request.frame),), close_after=True, reason="asked by the test"
        )
    if api_key == CLOSE:
        return NetworkResponse(request, close_after=True, reason="closed at once by the test")
    if api_key == NO_ANSWER:
        return None
    return echo(request)


class HandlerThreads:
    """``count`` threads answering the channel's requests with ``respond`` (None: no answer)."""

    def __init__(self, channel: RequestChannel, respond: Respond, count: int = 2) -> None:
        self.channel = channel
        self.respond = respond
        self.errors: list[BaseException] = []
        self.handled: list[NetworkRequest] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, name=f"test-handler-{i}", daemon=True) for i in range(count)
        ]

    def start(self) -> HandlerThreads:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        assert not any(thread.is_alive() for thread in self._threads)

    def _run(self) -> None:
        while not self._stop.is_set() and not self.channel.closed:
            request = self.channel.receive_request(0.05)
            if request is None:
                continue
            self.handled.append(request)
            try:
                response = self.respond(request)
            except BaseException as exc:
                self.errors.append(exc)
                continue
            if response is not None:
                self.channel.send_response(response)


@dataclass
class Served:
    server: SocketServer
    channel: RequestChannel
    handlers: HandlerThreads
    name: str
    sockets: list[socket.socket] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.server.port

    def connect(self) -> socket.socket:
        sock = connect(self.port)
        self.sockets.append(sock)
        return sock

    def stats(self) -> dict[str, int]:
        return self.server.stats()

    def wait_stat(self, name: str, value: int, timeout_s: float = 5.0) -> None:
        wait_until(lambda: self.server.stats()[name] >= value, timeout_s, f"stats[{name!r}] >= {value}")
        assert self.server.stats()[name] == value, self.server.stats()

    def network_threads(self) -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith(f"{self.name}-network-")]


@contextlib.contextmanager
def serving(
    respond: Respond = commands, *, handlers: int = 2, queue_size: int = 500, **server_args: Any
) -> Iterator[Served]:
    """A started server with handler threads; shuts everything down (and checks it did) on exit."""
    name = f"test{next(_server_names)}"
    channel = RequestChannel(queue_size)
    server = SocketServer(channel, name=name, **server_args)
    handler_threads = HandlerThreads(channel, respond, handlers).start()
    served = Served(server, channel, handler_threads, name)
    server.start()
    try:
        yield served
    finally:
        for sock in served.sockets:
            sock.close()
        server.shutdown()
        handler_threads.stop()
        channel.close()
        assert served.network_threads() == []
    assert handler_threads.errors == []


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send_request(sock: socket.socket, frame: bytes) -> None:
    sock.sendall(framed(frame))


def recv_exact(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    got = 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise AssertionError(f"connection closed after {got} of {size} bytes")
        got += n
    return bytes(buffer)


def recv_frame(sock: socket.socket) -> bytes:
    (size,) = _SIZE.unpack(recv_exact(sock, 4))
    return recv_exact(sock, size)


def read_until_closed(sock: socket.socket, timeout_s: float = 5.0) -> bytes:
    """Everything the server sends until it closes the connection (fails if it does not close in time)."""
    sock.settimeout(timeout_s)
    parts = []
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            parts.append(data)
    except ConnectionResetError:
        pass
    return b"".join(parts)


def is_open(sock: socket.socket, wait_s: float = 0.1) -> bool:
    """Whether the server keeps ``sock`` open (nothing to read, no EOF) for ``wait_s``."""
    sock.settimeout(wait_s)
    try:
        data = sock.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(5)
    return bool(data)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.005)


#: The logger the socket server's processors log their connection closes to.
NETWORK_LOGGER = "broker.network"


def closing_log(caplog: pytest.LogCaptureFixture, text: str) -> str:
    """The processor's log line about closing a connection that contains ``text`` (waits for it)."""

    def lines() -> list[str]:
        return [r.getMessage() for r in list(caplog.records) if "closed connection" in r.getMessage()]

    wait_until(lambda: any(text in line for line in lines()), what=f"a closing log line with {text!r}")
    return next(line for line in lines() if text in line)


def ready(sock: socket.socket, timeout_s: float, *, write: bool = False) -> bool:
    """Whether ``sock`` is readable (``write``: writable) within ``timeout_s``: ``poll``, which takes a
    descriptor of any number (``select`` refuses one above 1023, and a pytest worker that ran many
    broker tests holds that many)."""
    poller = select.poll()
    poller.register(sock, select.POLLOUT if write else select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))

"""The socket server end to end: real sockets on 127.0.0.1, real acceptor and processor threads."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.log.file_handle import FileHandle
from broker.log.file_region import FileRegion
from broker.network.errors import ListenError, NetworkConfigError, SocketServerStateError
from broker.network.inline_serving import PIPELINED_MAX_BYTES
from broker.network.request_channel import InlineHandler, NetworkRequest, NetworkResponse, RequestChannel
from broker.network.socket_server import SocketServer
from broker.protocol.frame import framed
from tests.broker.network.helpers import (
    CLOSE,
    ECHO,
    ECHO_THEN_CLOSE,
    EMPTY,
    NO_ANSWER,
    commands,
    connect,
    echo,
    is_open,
    read_until_closed,
    recv_exact,
    recv_frame,
    request_frame,
    send_request,
    serving,
    wait_until,
)

_LOGGER = "broker.network"


def _closing_log(caplog: pytest.LogCaptureFixture, text: str) -> str:
    """The processor's log line about closing a connection that contains ``text`` (waits for it)."""

    def lines() -> list[str]:
        return [r.getMessage() for r in list(caplog.records) if "closed connection" in r.getMessage()]

    wait_until(lambda: any(text in line for line in lines()), what=f"a closing log line with {text!r}")
    return next(line for line in lines() if text in line)


# -- framing and request/response order -------------------------------------------------------------------


def test_echo_round_trip_is_byte_exact() -> None:
    with serving() as served:
        sock = served.connect()
        frame = request_frame(7, b"hello lumber")
        send_request(sock, frame)
        assert recv_frame(sock) == frame
        request = served.handlers.handled[0]
        assert request.frame == frame
        assert request.peer == f"127.0.0.1:{sock.getsockname()[1]}"
        assert request.connection_id.startswith(f"127.0.0.1:{served.port}-{request.peer}-")
        assert request.received_ns <= time.monotonic_ns()
        stats = served.stats()
        assert stats["requests"] == 1
        assert stats["request_bytes"] == 4 + len(frame)
        served.wait_stat("responses_sent", 1)
        stats = served.stats()
        assert stats["response_bytes"] == 4 + len(frame)
        assert stats["connections_open"] == 1


def test_a_request_sent_one_byte_at_a_time_is_framed_whole() -> None:
    with serving() as served:
        sock = served.connect()
        frame = request_frame(42, bytes(range(40)))
        for byte in framed(frame):
            sock.sendall(bytes([byte]))
            time.sleep(0.001)
        assert recv_frame(sock) == frame
        assert [r.frame for r in served.handlers.handled] == [frame]
        # a second request right after, again split, this time across the prefix and the header
        second = request_frame(43, b"xyz")
        wire = framed(second)
        for part in (wire[:1], wire[1:3], wire[3:5], wire[5:]):
            sock.sendall(part)
            time.sleep(0.005)
        assert recv_frame(sock) == second
        assert served.stats()["requests"] == 2


def test_pipelined_requests_are_answered_in_order_one_at_a_time() -> None:
    lock = threading.Lock()
    in_flight: dict[str, int] = {}
    most_in_flight = 0

    def respond(request: NetworkRequest) -> NetworkResponse:
        nonlocal most_in_flight
        with lock:
            in_flight[request.connection_id] = in_flight.get(request.connection_id, 0) + 1
            most_in_flight = max(most_in_flight, in_flight[request.connection_id])
        time.sleep(0.0002)
        with lock:
            in_flight[request.connection_id] -= 1
        return echo(request)

    with serving(respond, handlers=4) as served:
        sock = served.connect()
        frames = [request_frame(i, i.to_bytes(4, "big") * (i % 7)) for i in range(500)]
        sock.sendall(b"".join(framed(f) for f in frames))
        received = [recv_frame(sock) for _ in frames]
        assert received == frames
        assert most_in_flight == 1
        served.wait_stat("responses_sent", 500)
        assert served.stats()["requests"] == 500


def test_an_empty_response_unmutes_the_connection() -> None:
    with serving() as served:
        sock = served.connect()
        first = request_frame(1, b"no answer expected", api_key=EMPTY)
        second = request_frame(2, b"echo me")
        sock.sendall(framed(first) + framed(second))
        assert recv_frame(sock) == second
        assert [r.frame for r in served.handlers.handled] == [first, second]
        served.wait_stat("responses_sent", 1)
        stats = served.stats()
        assert stats["responses_empty"] == 1
        assert stats["requests"] == 2
        assert is_open(sock)


def test_close_after_sends_the_response_then_closes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_LOGGER)
    with serving() as served:
        sock = served.connect()
        other = served.connect()
        frame = request_frame(5, b"last words", api_key=ECHO_THEN_CLOSE)
        # the request after it is never read: the connection closes once the response is out
        sock.sendall(framed(frame) + framed(request_frame(6)))
        assert read_until_closed(sock) == framed(frame)
        assert "asked by the test" in _closing_log(caplog, "asked by the test")
        send_request(other, request_frame(7))
        assert recv_frame(other) == request_frame(7)
        served.wait_stat("response_closed", 1)
        stats = served.stats()
        assert stats["requests"] == 2
        assert stats["connections_open"] == 1


def test_close_after_without_chunks_closes_at_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_LOGGER)
    with serving() as served:
        sock = served.connect()
        send_request(sock, request_frame(1, api_key=CLOSE))
        assert read_until_closed(sock) == b""
        line = _closing_log(caplog, "closed at once by the test")
        assert sock.getsockname()[1] == int(line.split(" from 127.0.0.1:")[1].split(":")[0])
        served.wait_stat("response_closed", 1)
        assert served.stats()["responses_empty"] == 1


def test_a_peer_leaving_while_its_request_is_in_flight_is_cleaned_up() -> None:
    release = threading.Event()

    def respond(request: NetworkRequest) -> NetworkResponse:
        if request.frame[:2] == struct.pack(">h", NO_ANSWER):
            release.wait(5)
        return echo(request)

    with serving(respond) as served:
        gone = served.connect()
        send_request(gone, request_frame(1, api_key=NO_ANSWER, payload=b"x" * 100))
        wait_until(lambda: len(served.handlers.handled) == 1)
        gone.close()
        release.set()
        # the muted connection notices the peer is gone when it answers (or reads again) and closes it
        wait_until(lambda: served.stats()["connections_closed"] == 1, what="the server to close it")
        stats = served.stats()
        assert stats["peer_closed"] + stats["error_closed"] == 1
        sock = served.connect()
        send_request(sock, request_frame(2))
        assert recv_frame(sock) == request_frame(2)


def test_a_response_to_an_unknown_connection_is_dropped() -> None:
    with serving() as served:
        sock = served.connect()
        send_request(sock, request_frame(1))
        assert recv_frame(sock) == request_frame(1)
        known = served.handlers.handled[0]
        stranger = NetworkRequest(known.processor_id, "127.0.0.1:1-127.0.0.1:2-999", "127.0.0.1:2", b"", 0)
        served.channel.send_response(NetworkResponse(stranger, (b"to nobody",)))
        served.wait_stat("responses_dropped", 1)
        send_request(sock, request_frame(2))
        assert recv_frame(sock) == request_frame(2)


def test_a_second_response_to_the_same_request_is_dropped() -> None:
    def respond(request: NetworkRequest) -> NetworkResponse:
        return NetworkResponse(request, (framed(b"first-answer"),))

    with serving(respond) as served:
        sock = served.connect()
        send_request(sock, request_frame(1))
        assert recv_frame(sock) == b"first-answer"
        request = served.handlers.handled[0]
        served.channel.send_response(NetworkResponse(request, (framed(b"second-answer"),)))
        served.wait_stat("responses_dropped", 1)
        send_request(sock, request_frame(2))
        assert recv_frame(sock) == b"first-answer"
        assert is_open(sock)


# -- bad size prefixes and garbage ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "counter", "words"),
    [
        (1025, "oversized_closed", "exceeds the limit max_request_bytes=1024"),
        (2**31 - 1, "oversized_closed", "exceeds the limit max_request_bytes=1024"),
        (-1, "invalid_size_closed", "is negative"),
        (-(2**31), "invalid_size_closed", "is negative"),
        (0, "invalid_size_closed", "smaller than a request header (8 bytes"),
        (7, "invalid_size_closed", "smaller than a request header (8 bytes"),
    ],
)
def test_a_bad_size_prefix_closes_only_that_connection(
    caplog: pytest.LogCaptureFixture, size: int, counter: str, words: str
) -> None:
    caplog.set_level(logging.INFO, logger=_LOGGER)
    with serving(max_request_bytes=1024) as served:
        good = served.connect()
        bad = served.connect()
        send_request(good, request_frame(1))
        assert recv_frame(good) == request_frame(1)
        bad.sendall(struct.pack(">i", size) + b"\x00" * 8)
        assert read_until_closed(bad) == b""
        line = _closing_log(caplog, words)
        peer = f"127.0.0.1:{bad.getsockname()[1]}"
        assert f"from {peer}:" in line
        assert f"request size prefix {size} " in line
        assert "max_request_bytes=1024" in line
        served.wait_stat(counter, 1)
        for correlation_id in range(2, 12):
            send_request(good, request_frame(correlation_id))
            assert recv_frame(good) == request_frame(correlation_id)
        stats = served.stats()
        assert stats["connections_closed"] == 1
        assert stats["requests"] == 11
        assert len(served.handlers.handled) == 11


def test_a_request_of_exactly_max_request_bytes_is_served() -> None:
    with serving(max_request_bytes=64) as served:
        sock = served.connect()
        frame = request_frame(3, b"m" * 56)
        assert len(frame) == 64
        send_request(sock, frame)
        assert recv_frame(sock) == frame
        smallest = request_frame(4)
        assert len(smallest) == 8
        send_request(sock, smallest)
        assert recv_frame(sock) == smallest


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_huge_announced_size_allocates_nothing_and_the_server_keeps_serving() -> None:
    with serving(max_request_bytes=1 << 30) as served:
        good = served.connect()
        send_request(good, request_frame(1))
        assert recv_frame(good) == request_frame(1)
        before = _rss_bytes()
        huge = [served.connect() for _ in range(4)]
        for sock in huge:
            sock.sendall(struct.pack(">i", (1 << 30) - 1) + request_frame(0, b"only a little"))
        time.sleep(0.2)
        for correlation_id in range(2, 6):
            send_request(good, request_frame(correlation_id))
            assert recv_frame(good) == request_frame(correlation_id)
        grown = _rss_bytes() - before
        assert grown < 64 * 1024 * 1024, f"RSS grew by {grown} bytes"
        assert all(is_open(sock) for sock in huge)
        for sock in huge:
            sock.close()
        served.wait_stat("peer_closed", 4)
        assert served.stats()["requests"] == 5


def _expected_echo(stream: bytes, max_bytes: int) -> tuple[bytes, bool]:
    """What the echo server answers to ``stream``, and whether it closes the connection."""
    out: list[bytes] = []
    pos = 0
    while len(stream) - pos >= 4:
        (size,) = struct.unpack_from(">i", stream, pos)
        if size < 8 or size > max_bytes:
            return b"".join(out), True
        if len(stream) - pos - 4 < size:
            break
        out.append(stream[pos : pos + 4 + size])
        pos += 4 + size
    return b"".join(out), False


def test_random_garbage_gets_exactly_what_framing_allows() -> None:
    rng = random.Random(20111)
    max_bytes = 200
    streams = []
    for _ in range(40):
        parts = []
        for _ in range(rng.randrange(0, 6)):
            body = rng.randbytes(rng.randrange(8, max_bytes + 1))
            parts.append(framed(body))
        parts.append(rng.randbytes(rng.randrange(0, 40)))
        if rng.random() < 0.5:
            parts.append(struct.pack(">i", rng.choice([-5, 0, 3, max_bytes + 1, 2**31 - 1])))
        streams.append(b"".join(parts))
    with serving(echo, max_request_bytes=max_bytes) as served:
        good = served.connect()
        socks = [served.connect() for _ in streams]
        for sock, stream in zip(socks, streams, strict=True):
            sock.sendall(stream)
        closes = 0
        for sock, stream in zip(socks, streams, strict=True):
            expected, closes_it = _expected_echo(stream, max_bytes)
            if closes_it:
                closes += 1
                assert read_until_closed(sock) == expected
            else:
                assert recv_exact(sock, len(expected)) == expected
                assert is_open(sock, 0.05)
        assert closes > 5
        send_request(good, request_frame(99, b"still here"))
        assert recv_frame(good) == request_frame(99, b"still here")
        stats = served.stats()
        assert stats["oversized_closed"] + stats["invalid_size_closed"] == closes
        assert stats["connections_open"] == len(streams) + 1 - closes


# -- sendfile ---------------------------------------------------------------------------------------------


@pytest.fixture
def segment_file(tmp_path: Path) -> Iterator[tuple[FileHandle, bytes]]:
    data = random.Random(7).randbytes(3 * 1024 * 1024 + 123)
    handle = FileHandle.open(tmp_path / "00000000000000000000.log", create=True)
    handle.append(data)
    yield handle, data
    handle.close()


def test_file_regions_are_sent_with_sendfile_byte_exact(segment_file: tuple[FileHandle, bytes]) -> None:
    handle, data = segment_file
    first = FileRegion(handle, 1000, len(data) - 5000, base_offset=0, next_offset=10)
    second = FileRegion(handle, 17, 300, base_offset=0, next_offset=1)
    head, middle, tail = b"\x00\x00\x00\x07header", b"between", b"trailer"
    expected = head + data[1000 : len(data) - 4000] + middle + data[17:317] + tail

    def respond(request: NetworkRequest) -> NetworkResponse:
        if request.frame[:2] == struct.pack(">h", NO_ANSWER):
            return NetworkResponse(request, (head, first, middle, second, tail))
        return echo(request)

    with serving(respond) as served:
        sock = served.connect()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        send_request(sock, request_frame(1, api_key=NO_ANSWER))
        time.sleep(0.1)  # the server fills the socket buffers and waits until it can write again...
        other = served.connect()
        for correlation_id in range(3):  # ...while it keeps serving everyone else
            send_request(other, request_frame(correlation_id))
            assert recv_frame(other) == request_frame(correlation_id)
        assert recv_exact(sock, len(expected)) == expected
        # and the connection carries on with the next request
        send_request(sock, request_frame(2, api_key=NO_ANSWER))
        assert recv_exact(sock, len(expected)) == expected
        served.wait_stat("responses_sent", 5)
        assert served.stats()["response_bytes"] == 2 * len(expected) + 3 * (4 + 8)


def test_a_region_past_the_end_of_its_file_closes_only_that_connection(
    caplog: pytest.LogCaptureFixture, segment_file: tuple[FileHandle, bytes]
) -> None:
    caplog.set_level(logging.INFO, logger=_LOGGER)
    handle, data = segment_file
    broken = FileRegion(handle, len(data) - 10, 100, base_offset=0, next_offset=1)

    def respond(request: NetworkRequest) -> NetworkResponse:
        if request.frame[:2] == struct.pack(">h", NO_ANSWER):
            return NetworkResponse(request, (b"head", broken))
        return echo(request)

    with serving(respond) as served:
        good = served.connect()
        bad = served.connect()
        send_request(bad, request_frame(1, api_key=NO_ANSWER))
        assert read_until_closed(bad) == b"head" + data[-10:]
        assert "ended after 10 of its 100 bytes" in _closing_log(caplog, "ended after")
        send_request(good, request_frame(2))
        assert recv_frame(good) == request_frame(2)
        served.wait_stat("error_closed", 1)


def test_an_unsendable_chunk_closes_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_LOGGER)

    def respond(request: NetworkRequest) -> NetworkResponse:
        if request.frame[:2] == struct.pack(">h", NO_ANSWER):
            return NetworkResponse(request, (b"ok", 12345))  # type: ignore[arg-type]
        return echo(request)

    with serving(respond) as served:
        good = served.connect()
        bad = served.connect()
        send_request(bad, request_frame(1, api_key=NO_ANSWER))
        assert read_until_closed(bad) == b""
        assert "response chunk 1 is a int" in _closing_log(caplog, "response chunk 1")
        send_request(good, request_frame(2))
        assert recv_frame(good) == request_frame(2)


# -- idle connections, back-pressure, many connections ------------------------------------------------------


def test_idle_connections_are_closed_and_busy_ones_are_not() -> None:
    def respond(request: NetworkRequest) -> NetworkResponse:
        if request.frame[:2] == struct.pack(">h", NO_ANSWER):
            time.sleep(0.5)  # longer than the idle limit: a connection waiting for a response is not idle
        return echo(request)

    with serving(respond, connections_max_idle_ms=300) as served:
        idle = served.connect()
        busy = served.connect()
        slow = served.connect()
        send_request(slow, request_frame(0, api_key=NO_ANSWER))
        started = time.monotonic()
        for correlation_id in range(8):
            send_request(busy, request_frame(correlation_id))
            assert recv_frame(busy) == request_frame(correlation_id)
            time.sleep(0.1)
        assert is_open(busy, 0.05)
        assert read_until_closed(idle, 0.1) == b""
        assert time.monotonic() - started < 2.0
        # slow waited 500 ms for its response, longer than the limit, and got it: in flight is not idle
        assert read_until_closed(slow) == framed(request_frame(0, api_key=NO_ANSWER))
        assert read_until_closed(busy) == b""
        served.wait_stat("idle_closed", 3)
        assert served.stats()["connections_open"] == 0


def test_a_full_request_channel_holds_requests_back_until_handlers_take_them() -> None:
    channel = RequestChannel(queue_size=1)
    server = SocketServer(channel, num_processors=1, name="backpressure")
    server.start()
    socks = []
    try:
        socks = [connect(server.port) for _ in range(4)]
        for index, sock in enumerate(socks):
            send_request(sock, request_frame(index))
        wait_until(lambda: channel.pending_requests() == 1)
        time.sleep(0.1)
        assert channel.pending_requests() == 1
        # read (one request per connection, each connection muted), but not handed over: the processor waits
        assert server.stats()["requests"] <= len(socks)
        answered: list[bytes] = []
        while len(answered) < 4:
            request = channel.receive_request(5)
            assert request is not None
            channel.send_response(NetworkResponse(request, (framed(request.frame),)))
            answered.append(request.frame)
        assert sorted(answered) == sorted(request_frame(i) for i in range(4))
        for index, sock in enumerate(socks):
            assert recv_frame(sock) == request_frame(index)
        # a processor waiting for room in a full channel still shuts down promptly
        for sock in socks:
            send_request(sock, request_frame(9))
        wait_until(lambda: server.stats()["requests"] >= 2)
    finally:
        started = time.monotonic()
        server.shutdown()
        assert time.monotonic() - started < 2.0
        for sock in socks:
            sock.close()
        channel.close()
    assert [t for t in threading.enumerate() if t.name.startswith("backpressure-network-")] == []


def test_two_hundred_concurrent_connections() -> None:
    with serving(num_processors=3, handlers=3) as served:
        socks = [served.connect() for _ in range(200)]
        frames = {
            index: [request_frame(index * 10 + k, f"conn {index} request {k}".encode()) for k in range(5)]
            for index in range(200)
        }
        for index, sock in enumerate(socks):
            sock.sendall(b"".join(framed(f) for f in frames[index]))
        for index, sock in enumerate(socks):
            assert [recv_frame(sock) for _ in range(5)] == frames[index]
        served.wait_stat("responses_sent", 1000)
        stats = served.stats()
        assert stats["connections_accepted"] == 200
        assert stats["connections_open"] == 200
        assert stats["requests"] == 1000
        assert len({r.connection_id for r in served.handlers.handled}) == 200
        assert {r.processor_id for r in served.handlers.handled} == {0, 1, 2}
        for sock in socks[:100]:
            sock.close()
        served.wait_stat("peer_closed", 100)


def test_many_requests_per_second() -> None:
    with serving(echo, num_processors=1, handlers=1) as served:
        socks = [served.connect() for _ in range(20)]
        frame = request_frame(1, b"p" * 40)
        started = time.monotonic()
        for sock in socks:
            sock.sendall(framed(frame) * 250)
        for sock in socks:
            assert recv_exact(sock, 250 * (4 + len(frame))) == framed(frame) * 250
        elapsed = time.monotonic() - started
        assert served.stats()["requests"] == 5000
        # generous: the client, the handler and the processor share one interpreter here
        assert 5000 / elapsed > 2000, f"{5000 / elapsed:.0f} requests/s"


# -- life cycle -------------------------------------------------------------------------------------------


def test_shutdown_closes_every_socket_and_ends_every_thread() -> None:
    with serving() as served:
        socks = [served.connect() for _ in range(5)]
        for sock in socks:
            send_request(sock, request_frame(1))
            assert recv_frame(sock) == request_frame(1)
        port = served.port
        assert len(served.network_threads()) == 1 + 3
        served.server.shutdown()
        assert served.network_threads() == []
        for sock in socks:
            assert read_until_closed(sock) == b""
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        stats = served.stats()
        assert stats["shutdown_closed"] == 5
        assert stats["connections_open"] == 0
        served.server.shutdown()  # idempotent
        with pytest.raises(SocketServerStateError):
            served.server.start()
        # responses for connections of a stopped server are dropped without a word
        served.channel.send_response(NetworkResponse(served.handlers.handled[0], (b"late",)))


def test_life_cycle_errors() -> None:
    channel = RequestChannel()
    server = SocketServer(channel, name="lifecycle")
    with pytest.raises(SocketServerStateError):
        _ = server.port
    server.shutdown()  # before start: nothing to do, and no start afterwards
    with pytest.raises(SocketServerStateError):
        server.start()
    for bad in (
        {"num_processors": 0},
        {"max_request_bytes": 7},
        {"connections_max_idle_ms": 0},
        {"port": 70000},
    ):
        with pytest.raises(NetworkConfigError):
            SocketServer(channel, **bad)  # type: ignore[arg-type]
    with serving() as served:
        taken = SocketServer(channel, port=served.port, name="taken")
        with pytest.raises(ListenError) as failure:
            taken.start()
        assert f"127.0.0.1:{served.port}" in str(failure.value)
        assert failure.value.__cause__ is not None
        assert isinstance(failure.value.__cause__, OSError)
        assert failure.value.__cause__.errno == errno.EADDRINUSE
    channel.close()


def test_servers_sharing_a_channel_route_responses_to_their_own_connections() -> None:
    with serving(commands, num_processors=2) as first:
        second = SocketServer(first.channel, num_processors=2, name="second")
        second.start()
        try:
            with contextlib.closing(connect(second.port)) as sock:
                send_request(sock, request_frame(5, b"via the second server"))
                assert recv_frame(sock) == request_frame(5, b"via the second server")
            a = first.connect()
            send_request(a, request_frame(6))
            assert recv_frame(a) == request_frame(6)
            via_second, via_first = first.handlers.handled
            assert via_second.processor_id in {2, 3}
            assert via_second.connection_id.startswith(f"127.0.0.1:{second.port}-")
            assert via_first.processor_id in {0, 1}
        finally:
            second.shutdown()


# -- requests served on the processor thread (InlineHandler) ----------------------------------------------

#: Test api keys: echoed by a handler thread (not inline), answered later from another thread, and held
#: unanswered until the test releases them (:meth:`_Inline.release`).
_HANDED_OVER, _LATER, _HELD = 6, 7, 8


class _Inline:
    """An inline handler answering like :func:`commands`, recording the thread and order of each request."""

    def __init__(self, channel: RequestChannel) -> None:
        self.channel = channel
        self.served: list[tuple[int, str]] = []
        self.later: list[NetworkRequest] = []
        self.held: list[NetworkRequest] = []

    def release(self) -> None:
        """Answer the held requests (echo), from this (another) thread."""
        held, self.held = self.held, []
        for request in held:
            self.channel.send_response(echo(request))

    def handle(self, request: NetworkRequest) -> None:
        (api_key, _version, correlation_id) = struct.unpack_from(">hhi", request.frame, 0)
        self.served.append((correlation_id, threading.current_thread().name))
        if api_key == _LATER:
            self.later.append(request)
            threading.Timer(0.2, lambda: self.channel.send_response(echo(request))).start()
            return
        if api_key == _HELD:
            self.held.append(request)
            return
        if api_key == CLOSE + 100:
            raise RuntimeError("the inline handler failed")
        response = commands(request)
        if response is not None:
            self.channel.send_response(response)


@contextlib.contextmanager
def _serving_inline(keys: set[int], pipeline: frozenset[int] = frozenset()) -> Iterator[tuple[Any, _Inline]]:
    channel_box: list[_Inline] = []

    def handle(request: NetworkRequest) -> None:
        channel_box[0].handle(request)

    handler = InlineHandler(handle, frozenset(keys), pipeline_api_keys=pipeline)
    with serving(inline=handler, num_processors=1) as served:
        inline = _Inline(served.channel)
        channel_box.append(inline)
        yield served, inline


def test_inline_requests_are_served_by_the_processor_in_order_with_handed_over_ones() -> None:
    with _serving_inline({ECHO, EMPTY}) as (served, inline):
        sock = served.connect()
        kinds = [(ECHO, EMPTY, _HANDED_OVER)[i % 3] if i % 5 else ECHO for i in range(600)]
        frames = [request_frame(i, i.to_bytes(4, "big") * (i % 9), api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))
        answered = [f for f, k in zip(frames, kinds, strict=True) if k != EMPTY]
        assert [recv_frame(sock) for _ in answered] == answered
        inline_ids = [i for i, k in enumerate(kinds) if k in (ECHO, EMPTY)]
        assert [cid for cid, _ in inline.served] == inline_ids
        assert {name for _, name in inline.served} == {f"{served.name}-network-processor-0"}
        handed = [struct.unpack_from(">i", r.frame, 4)[0] for r in served.handlers.handled]
        assert handed == [i for i, k in enumerate(kinds) if k == _HANDED_OVER]
        served.wait_stat("responses_sent", len(answered))
        stats = served.stats()
        assert stats["requests"] == 600
        assert stats["responses_empty"] == kinds.count(EMPTY)
        assert stats["request_bytes"] == sum(4 + len(f) for f in frames)
        assert is_open(sock)


def test_an_inline_request_answered_later_holds_back_the_next_one() -> None:
    with _serving_inline({ECHO, _LATER}) as (served, inline):
        sock = served.connect()
        later = request_frame(1, b"answered from a timer", api_key=_LATER)
        after = request_frame(2, b"pipelined behind it")
        sock.sendall(framed(later) + framed(after))
        time.sleep(0.1)
        assert [cid for cid, _ in inline.served] == [1]  # muted: the second is not served yet
        assert recv_frame(sock) == later
        assert recv_frame(sock) == after
        assert [cid for cid, _ in inline.served] == [1, 2]
        # another connection is served meanwhile: the delay mutes only its own connection
        other = served.connect()
        sock.sendall(framed(request_frame(3, api_key=_LATER)))
        send_request(other, request_frame(4, b"not held back"))
        assert recv_frame(other) == request_frame(4, b"not held back")
        assert recv_frame(sock) == request_frame(3, api_key=_LATER)


def test_buffered_requests_are_pipelined_behind_one_answered_later_and_answered_in_order() -> None:
    """Read-ahead pipelining: the requests already buffered behind one that waits are served at once (an
    acks=-1 Produce waiting for its group commit: one fsync then answers them all), in request order."""
    with _serving_inline({ECHO, EMPTY, CLOSE, _LATER}, frozenset({ECHO, EMPTY, CLOSE, _LATER})) as (
        served,
        inline,
    ):
        sock = served.connect()
        kinds = [_LATER, ECHO, EMPTY, _LATER, ECHO]
        frames = [request_frame(i, b"p%d" % i, api_key=k) for i, k in enumerate(kinds, start=1)]
        sock.sendall(b"".join(framed(f) for f in frames))
        wait_until(lambda: len(inline.served) == 5, 5, "every buffered request to be served")
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4, 5]  # before the first one's answer
        assert [recv_frame(sock) for _ in range(4)] == [frames[0], frames[1], frames[3], frames[4]]
        send_request(sock, request_frame(6, b"after the pipeline"))
        assert recv_frame(sock) == request_frame(6, b"after the pipeline")
        served.wait_stat("responses_empty", 1)
        assert served.stats()["requests"] == 6
        # a request that closes the connection ends the pipeline: nothing after it is served
        other = served.connect()
        doomed = [request_frame(7, api_key=_LATER), request_frame(8, api_key=CLOSE), request_frame(9, b"no")]
        other.sendall(b"".join(framed(f) for f in doomed))
        assert recv_frame(other) == doomed[0]
        assert read_until_closed(other) == b""
        assert [cid for cid, _ in inline.served][6:] == [7, 8]


def test_requests_larger_than_the_read_ahead_buffer_are_read_and_pipelined_behind_a_waiting_one() -> None:
    """Reading ahead: behind a request that waits, pipeline requests larger than the 128 KiB read-ahead
    buffer (never whole in it) are read from the socket and served before its answer; a request of another
    api key behind them is not read until every one before it is answered; answers in request order."""
    with _serving_inline({ECHO, EMPTY, _HELD}, frozenset({ECHO, _HELD})) as (served, inline):
        sock = served.connect()
        big = [request_frame(i, bytes([i]) * (300 * 1024)) for i in (2, 3)]
        held = request_frame(1, b"held", api_key=_HELD)
        other = request_frame(4, b"not a pipeline request", api_key=EMPTY)
        after = request_frame(5, b"echoed after it")
        sock.sendall(b"".join(framed(f) for f in [held, *big, other, after]))
        wait_until(lambda: len(inline.served) == 3, 5, "both large requests to be served behind the held one")
        time.sleep(0.2)
        assert [cid for cid, _ in inline.served] == [1, 2, 3]
        assert served.stats()["requests_read_ahead"] == 2
        assert [r.frame for r in inline.held] == [held]
        inline.release()
        assert [recv_frame(sock) for _ in range(3)] == [held, *big]
        assert recv_frame(sock) == after
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4, 5]
        stats = served.stats()
        assert stats["requests"] == 5
        assert stats["requests_read_ahead"] == 2
        assert stats["responses_empty"] == 1
        assert stats["request_bytes"] == sum(4 + len(f) for f in [held, *big, other, after])


def test_reading_ahead_stops_at_the_pipelined_bytes_bound_per_connection() -> None:
    """Behind a waiting request, reading ahead serves requests until their frames hold
    PIPELINED_MAX_BYTES; the rest is read once the earlier answers are sent, still in order."""
    with _serving_inline({ECHO, _HELD}, frozenset({ECHO, _HELD})) as (served, inline):
        sock = served.connect()
        piece = PIPELINED_MAX_BYTES // 3 + 1  # three pieces reach the bound
        frames = [request_frame(1, b"held", api_key=_HELD)]
        frames += [request_frame(i, bytes([i]) * piece) for i in range(2, 7)]
        sender = threading.Thread(target=sock.sendall, args=(b"".join(framed(f) for f in frames),))
        sender.start()
        wait_until(lambda: len(inline.served) == 4, 10, "three requests to be served behind the held one")
        time.sleep(0.3)
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4]
        inline.release()
        assert [recv_frame(sock) for _ in frames] == frames
        sender.join(10)
        assert [cid for cid, _ in inline.served] == [1, 2, 3, 4, 5, 6]
        assert served.stats()["requests"] == 6


def test_an_answer_larger_than_the_socket_buffer_to_a_pipeline_request_is_sent_whole() -> None:
    """A pipeline request answered at once with more than the socket takes: the connection waits for
    writing (it does not read ahead while a response is being sent), and the next request is served after."""
    with _serving_inline({ECHO}, frozenset({ECHO})) as (served, _inline):
        sock = served.connect()
        big = request_frame(1, os.urandom(8 * 1024 * 1024))
        send_request(sock, big)
        time.sleep(0.2)  # the answer fills the socket buffers before the client reads
        assert recv_frame(sock) == big
        send_request(sock, request_frame(2, b"next"))
        assert recv_frame(sock) == request_frame(2, b"next")


def test_a_peer_closing_its_end_while_reading_ahead_still_gets_every_answer() -> None:
    """A client that sends its pipelined requests and shuts down its sending side: the end of stream is
    seen while the first request waits, and the connection is closed only after every answer is sent."""
    with _serving_inline({ECHO, _HELD}, frozenset({ECHO, _HELD})) as (served, inline):
        sock = served.connect()
        frames = [request_frame(1, api_key=_HELD), request_frame(2, b"x" * 200_000)]
        sock.sendall(b"".join(framed(f) for f in frames))
        sock.shutdown(socket.SHUT_WR)
        wait_until(lambda: len(inline.served) == 2, 5, "the request behind the held one to be served")
        inline.release()
        assert [recv_frame(sock) for _ in frames] == frames
        assert read_until_closed(sock) == b""
        served.wait_stat("peer_closed", 1)


def test_an_inline_handler_failing_closes_only_its_connection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_LOGGER)
    with _serving_inline({ECHO, CLOSE, CLOSE + 100}) as (served, _inline):
        failing, closing, fine = served.connect(), served.connect(), served.connect()
        send_request(failing, request_frame(1, api_key=CLOSE + 100))
        assert read_until_closed(failing) == b""
        wait_until(
            lambda: any(
                "serving a request from" in r.getMessage() and r.exc_info for r in list(caplog.records)
            ),
            what="the handler's failure logged with its traceback",
        )
        send_request(closing, request_frame(2, api_key=CLOSE))
        assert read_until_closed(closing) == b""
        send_request(fine, request_frame(3, b"still served"))
        assert recv_frame(fine) == request_frame(3, b"still served")
        served.wait_stat("connections_open", 1)


def test_runs_are_taken_one_request_at_a_time_and_the_rest_served_alone_in_order() -> None:
    """``handle_run`` gets a buffered run as an iterator and serves its leading requests that need no
    answer (EMPTY); the first it refuses (ECHO) is served alone by ``handle``, then the requests behind it
    are offered as a run again. Every request is served once, in order, and a run refused at its first
    request takes that request only (a producer's ``acks=1`` requests pipelined behind each other)."""
    taken: list[tuple[int, int]] = []  # (requests taken, requests served) per handle_run call
    order: list[int] = []
    box: list[RequestChannel] = []

    def handle(request: NetworkRequest) -> None:
        order.append(struct.unpack_from(">i", request.frame, 4)[0])
        response = commands(request)
        if response is not None:
            box[0].send_response(response)

    def handle_run(requests: Iterator[NetworkRequest]) -> int:
        assert not isinstance(requests, list | tuple)  # taken lazily, never cut all at once
        took = served = 0
        for request in requests:
            took += 1
            if struct.unpack_from(">h", request.frame, 0)[0] != EMPTY:
                break
            order.append(struct.unpack_from(">i", request.frame, 4)[0])
            served += 1
        taken.append((took, served))
        return served

    keys = frozenset({ECHO, EMPTY})
    handler = InlineHandler(handle, keys, handle_run, run_api_keys=keys)
    with serving(inline=handler, num_processors=1) as served_by:
        box.append(served_by.channel)
        sock = served_by.connect()
        kinds = [ECHO] * 300 + [EMPTY] * 40 + [ECHO] * 2 + [EMPTY] * 5 + [ECHO]
        frames = [request_frame(i, b"r%d" % i, api_key=k) for i, k in enumerate(kinds)]
        sock.sendall(b"".join(framed(f) for f in frames))
        echoed = [f for f, k in zip(frames, kinds, strict=True) if k == ECHO]
        assert [recv_frame(sock) for _ in echoed] == echoed
        served_by.wait_stat("requests", len(frames))
        assert order == list(range(len(frames)))
        assert all(took <= served + 1 for took, served in taken)
        assert sum(served for _, served in taken) == 45
        stats = served_by.stats()
        assert stats["responses_empty"] == 45
        assert stats["request_bytes"] == sum(4 + len(f) for f in frames)

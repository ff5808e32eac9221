"""The socket server end to end: real sockets on 127.0.0.1, real acceptor and processor threads: framing and
the order of requests and responses, sendfile regions, idle connections, back-pressure, many connections, and
the life cycle. Bad size prefixes and garbage: test_socket_server_bad_frames.py; requests served on the
processor thread: test_socket_server_inline.py."""

from __future__ import annotations

import contextlib
import errno
import logging
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log.file_handle import FileHandle
from broker.log.file_region import FileRegion
from broker.network.errors import ListenError, NetworkConfigError, SocketServerStateError
from broker.network.request_channel import NetworkRequest, NetworkResponse, RequestChannel
from broker.network.socket_server import SocketServer
from broker.protocol.frame import framed
from tests.broker.network.helpers import (
    CLOSE,
    ECHO_THEN_CLOSE,
    EMPTY,
    NETWORK_LOGGER,
    NO_ANSWER,
    closing_log,
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
    caplog.set_level(logging.INFO, logger=NETWORK_LOGGER)
    with serving() as served:
        sock = served.connect()
        other = served.connect()
        frame = request_frame(5, b"last words", api_key=ECHO_THEN_CLOSE)
        # the request after it is never read: the connection closes once the response is out
        sock.sendall(framed(frame) + framed(request_frame(6)))
        assert read_until_closed(sock) == framed(frame)
        assert "asked by the test" in closing_log(caplog, "asked by the test")
        send_request(other, request_frame(7))
        assert recv_frame(other) == request_frame(7)
        served.wait_stat("response_closed", 1)
        stats = served.stats()
        assert stats["requests"] == 2
        assert stats["connections_open"] == 1


def test_close_after_without_chunks_closes_at_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=NETWORK_LOGGER)
    with serving() as served:
        sock = served.connect()
        send_request(sock, request_frame(1, api_key=CLOSE))
        assert read_until_closed(sock) == b""
        line = closing_log(caplog, "closed at once by the test")
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
    caplog.set_level(logging.INFO, logger=NETWORK_LOGGER)
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
        assert "ended after 10 of its 100 bytes" in closing_log(caplog, "ended after")
        send_request(good, request_frame(2))
        assert recv_frame(good) == request_frame(2)
        served.wait_stat("error_closed", 1)


def test_an_unsendable_chunk_closes_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=NETWORK_LOGGER)

    def respond(request: NetworkRequest) -> NetworkResponse:
        if request.frame[:2] == struct.pack(">h", NO_ANSWER):
            return NetworkResponse(request, (b"ok", 12345))  # type: ignore[arg-type]
        return echo(request)

    with serving(respond) as served:
        good = served.connect()
        bad = served.connect()
        send_request(bad, request_frame(1, api_key=NO_ANSWER))
        assert read_until_closed(bad) == b""
        assert "response chunk 1 is a int" in closing_log(caplog, "response chunk 1")
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

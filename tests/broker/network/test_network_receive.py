"""Reading size-prefixed requests off a non-blocking socket: exact frames, size checks, bounded read-ahead."""

from __future__ import annotations

import random
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from broker.network.errors import InvalidRequestSizeError, PeerClosedError
from broker.network.network_receive import (
    MIN_REQUEST_BYTES,
    PREALLOCATE_MAX_BYTES,
    READ_AHEAD_BYTES,
    NetworkReceive,
)
from broker.protocol.frame import framed
from tests.broker.network.helpers import ready

_PEER = "127.0.0.1:4242"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    server.setblocking(False)
    yield server, client
    server.close()
    client.close()


def _read(receive: NetworkReceive, sock: socket.socket) -> bytes | None:
    """``read_from`` until it completes a frame or the socket has nothing more."""
    try:
        while True:
            frame = receive.read_from(sock)
            if frame is not None:
                return frame
    except BlockingIOError:
        return None


def _has_frame(receive: NetworkReceive) -> bool:
    return receive.has_frame


def test_partial_writes_make_one_frame(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 1024)
    wire = framed(b"\x00\x03\x00\x01\x00\x00\x00\x09" + b"payload")
    assert not receive.in_progress
    for byte in wire[:-1]:
        client.sendall(bytes([byte]))
        assert _read(receive, server) is None
        assert receive.in_progress
    client.sendall(wire[-1:])
    assert _read(receive, server) == wire[4:]
    assert not receive.in_progress


def test_pipelined_frames_come_out_of_one_recv_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 1024)
    frames = [bytes([65 + i]) * (8 + i) for i in range(20)]
    assert not receive.has_frame  # nothing read yet
    client.sendall(b"".join(framed(f) for f in frames))
    assert receive.read_from(server) == frames[0]
    # the other 19 were read by the same recv: the socket is empty, the receive serves them
    assert not ready(server, 0)
    got: list[bytes | None] = []
    while _has_frame(receive):
        got.append(receive.read_from(server))
    assert got == frames[1:]
    assert not receive.in_progress
    with pytest.raises(BlockingIOError):
        receive.read_from(server)


def test_read_ahead_is_bounded(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 1024)
    frame = b"F" * 1000
    wire = b"".join(framed(frame) for _ in range(2 * READ_AHEAD_BYTES // len(framed(frame))))
    writer = threading.Thread(target=lambda: client.sendall(wire))
    writer.start()
    assert ready(server, 5)
    assert receive.read_from(server) == frame
    writer_left = len(wire) - READ_AHEAD_BYTES
    assert writer_left > 0
    # whatever one recv took, no more than READ_AHEAD_BYTES left the socket
    buffered = 0
    while receive.has_frame:
        assert receive.read_from(server) == frame
        buffered += 1
    assert buffered <= READ_AHEAD_BYTES // len(framed(frame))
    got = 1 + buffered
    while got < len(wire) // len(framed(frame)):
        try:
            if receive.read_from(server) is not None:
                got += 1
        except BlockingIOError:
            assert ready(server, 5)
    writer.join()
    assert got == len(wire) // len(framed(frame))


def _send_and_read_all(
    receive: NetworkReceive, server: socket.socket, client: socket.socket, frames: list[bytes]
) -> list[bytes]:
    """Send ``frames`` from a thread (they may exceed the socket buffers) and read as many back."""
    writer = threading.Thread(target=lambda: client.sendall(b"".join(framed(f) for f in frames)))
    writer.start()
    got: list[bytes] = []
    while len(got) < len(frames):
        try:
            frame = receive.read_from(server)
        except BlockingIOError:
            assert ready(server, 5)
            continue
        if frame is not None:
            got.append(frame)
    writer.join()
    return got


def test_a_frame_split_across_the_read_ahead_buffer_arrives_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 2 * READ_AHEAD_BYTES)
    sizes = [READ_AHEAD_BYTES - 100, 500, READ_AHEAD_BYTES - 4, READ_AHEAD_BYTES - 3, 9]
    frames = [random.Random(i).randbytes(size) for i, size in enumerate(sizes)]
    got = _send_and_read_all(receive, server, client, frames)
    assert [len(f) for f in got] == sizes
    assert got == frames


def test_large_frames_arrive_whole(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 8 * 1024 * 1024)
    sizes = (PREALLOCATE_MAX_BYTES, 3 * PREALLOCATE_MAX_BYTES + 5)
    frames = [random.Random(size).randbytes(size) for size in sizes]
    got = _send_and_read_all(receive, server, client, frames)
    assert got == frames


@pytest.mark.parametrize(
    ("size", "oversized"),
    [
        (-1, False),
        (-(2**31), False),
        (0, False),
        (MIN_REQUEST_BYTES - 1, False),
        (1025, True),
        (2**31 - 1, True),
    ],
)
def test_sizes_out_of_bounds_are_refused_before_reading_the_frame(
    pair: tuple[socket.socket, socket.socket], size: int, oversized: bool
) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 1024)
    client.sendall(struct.pack(">i", size) + b"rest of it")
    with pytest.raises(InvalidRequestSizeError) as failure:
        receive.read_from(server)
    error = failure.value
    assert (error.size_bytes, error.max_bytes, error.oversized) == (size, 1024, oversized)
    assert str(error).startswith(f"{_PEER}: request size prefix {size} ")
    assert "max_request_bytes=1024" in str(error)
    # the receive never skips the bad prefix: the processor is told to read it, and it raises again
    assert receive.has_frame
    with pytest.raises(InvalidRequestSizeError):
        receive.read_from(server)


def test_end_of_stream(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 1024)
    client.sendall(framed(b"12345678")[:6])
    client.shutdown(socket.SHUT_WR)
    assert receive.read_from(server) is None
    with pytest.raises(PeerClosedError) as failure:
        receive.read_from(server)
    assert receive.in_progress
    assert str(failure.value) == f"{_PEER}: the peer closed the connection"
    fresh = NetworkReceive(_PEER, 1024)
    with pytest.raises(PeerClosedError):
        fresh.read_from(server)
    assert not fresh.in_progress


def test_next_api_key_peeks_and_push_back_replays_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    receive = NetworkReceive(_PEER, 1024)
    assert receive.next_api_key() == -1
    frames = [struct.pack(">hhi", key, 0, key) + b"x" * key for key in (0, 7, 300, 18)]
    client.sendall(b"".join(framed(f) for f in frames) + framed(frames[0])[:5])
    assert receive.read_from(server) == frames[0]
    assert receive.next_api_key() == 7
    taken = [receive.read_from(server), receive.read_from(server)]
    assert taken == frames[1:3]
    assert receive.next_api_key() == 18
    receive.push_back([f for f in taken if f is not None])
    assert receive.in_progress
    assert receive.next_api_key() == 7
    assert [receive.read_from(server) for _ in range(3)] == frames[1:]
    assert receive.next_api_key() == -1  # 5 bytes of the next frame: not complete
    with pytest.raises(BlockingIOError):
        receive.read_from(server)
    assert receive.in_progress

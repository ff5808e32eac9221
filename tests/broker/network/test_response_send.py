"""Sending a response's chunks in order: gathered bytes, file regions with sendfile, partial writes."""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.log.file_handle import FileHandle
from broker.log.file_region import FileRegion
from broker.network.errors import ResponseSendError
from broker.network.response_send import ResponseSend
from tests.broker.network.helpers import ready

_PEER = "127.0.0.1:4242"


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    server.setblocking(False)
    yield server, client
    server.close()
    client.close()


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[tuple[FileHandle, bytes]]:
    data = random.Random(11).randbytes(2 * 1024 * 1024 + 17)
    handle = FileHandle.open(tmp_path / "00000000000000000000.log", create=True)
    handle.append(data)
    yield handle, data
    handle.close()


def _drain(sock: socket.socket, size: int, into: list[bytes]) -> threading.Thread:
    def run() -> None:
        got = 0
        while got < size:
            data = sock.recv(65536)
            if not data:
                return
            into.append(data)
            got += len(data)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _send_all(send: ResponseSend, sock: socket.socket) -> int:
    calls = 0
    while not send.completed:
        send.write_to(sock)
        calls += 1
        if not send.completed:
            assert ready(sock, 5, write=True)
    return calls


def test_consecutive_byte_chunks_go_out_together(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    send = ResponseSend(_PEER, (b"abc", b"", bytearray(b"de"), memoryview(b"fgh")))  # type: ignore[arg-type]
    assert send.size_bytes == 8
    assert send.write_to(server) == 8
    assert send.completed
    assert send.written_bytes == 8
    assert client.recv(64) == b"abcdefgh"


def test_nothing_to_send_is_complete_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    server, _ = pair
    send = ResponseSend(_PEER, (b"", b""))
    assert send.completed
    assert send.write_to(server) == 0
    assert ResponseSend(_PEER, ()).completed


def test_bytes_and_regions_in_order_across_partial_writes(
    pair: tuple[socket.socket, socket.socket], log_file: tuple[FileHandle, bytes]
) -> None:
    server, client = pair
    server.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
    handle, data = log_file
    big = random.Random(3).randbytes(700_000)
    chunks = (
        b"\x00\x00\x00\x10head",
        FileRegion(handle, 5, len(data) - 5, base_offset=0, next_offset=1),
        big,
        b"mid",
        FileRegion(handle, 0, 0, base_offset=0, next_offset=0),
        FileRegion(handle, 100, 50, base_offset=0, next_offset=0),
        b"tail",
    )
    expected = b"\x00\x00\x00\x10head" + data[5:] + big + b"mid" + data[100:150] + b"tail"
    send = ResponseSend(_PEER, chunks)
    assert send.size_bytes == len(expected)
    received: list[bytes] = []
    reader = _drain(client, len(expected), received)
    calls = _send_all(send, server)
    reader.join(5)
    assert b"".join(received) == expected
    assert calls > 1  # the socket buffer filled up on the way
    assert send.written_bytes == len(expected)


def test_unsendable_chunks_are_refused() -> None:
    with pytest.raises(ResponseSendError, match="response chunk 1 is a str"):
        ResponseSend(_PEER, (b"ok", "text"))  # type: ignore[arg-type]


def test_a_region_is_recognised_by_its_members_whatever_regions_were_sent_before(
    log_file: tuple[FileHandle, bytes],
) -> None:
    """The types found to be regions are remembered; a type without ``transfer_to`` stays refused after
    them, and another class with a region's members is one."""
    handle, data = log_file

    class SizeOnly:  # a Region to the protocol layer, but nothing the server can send
        size_bytes = 3

    class Borrowed:  # another class with a region's members
        size_bytes = 3

        def transfer_to(self, out_fd: int, sent_bytes: int) -> int:
            return FileRegion(handle, 0, 3, base_offset=0, next_offset=1).transfer_to(out_fd, sent_bytes)

        def read_bytes(self) -> bytes:
            return data[:3]

    for _ in range(2):
        assert ResponseSend(_PEER, (FileRegion(handle, 0, 3, base_offset=0, next_offset=1),)).size_bytes == 3
        with pytest.raises(ResponseSendError, match="response chunk 1 is a SizeOnly"):
            ResponseSend(_PEER, (b"ok", SizeOnly()))
        assert ResponseSend(_PEER, (b"ok", Borrowed())).size_bytes == 5


def test_negative_region_size_is_refused(log_file: tuple[FileHandle, bytes]) -> None:
    handle, _ = log_file
    with pytest.raises(ResponseSendError, match="region of -1 bytes"):
        ResponseSend(_PEER, (FileRegion(handle, 0, -1, base_offset=0, next_offset=0),))


def test_a_region_whose_file_ends_early(
    pair: tuple[socket.socket, socket.socket], log_file: tuple[FileHandle, bytes]
) -> None:
    server, client = pair
    handle, data = log_file
    send = ResponseSend(_PEER, (FileRegion(handle, len(data) - 3, 10, base_offset=0, next_offset=0),))
    with pytest.raises(ResponseSendError, match="ended after 3 of its 10 bytes"):
        send.write_to(server)
    assert send.written_bytes == 3
    assert client.recv(64) == data[-3:]


def test_a_region_of_a_closed_file(
    pair: tuple[socket.socket, socket.socket], log_file: tuple[FileHandle, bytes]
) -> None:
    server, _ = pair
    handle, _ = log_file
    send = ResponseSend(_PEER, (FileRegion(handle, 0, 10, base_offset=0, next_offset=0),))
    handle.close()
    with pytest.raises(ResponseSendError, match="cannot send file region"):
        send.write_to(server)


def test_a_peer_that_went_away(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    client.close()
    send = ResponseSend(_PEER, (b"x" * 10,))
    with pytest.raises(BrokenPipeError):
        send.write_to(server)

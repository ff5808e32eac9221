"""The socket server's answer to bad bytes (real sockets on 127.0.0.1): bad size prefixes, a request of
exactly the limit, a huge announced size, and random garbage get exactly what framing allows, and close only
their own connection."""

from __future__ import annotations

import logging
import os
import random
import struct
import time
from pathlib import Path

import pytest

from broker.protocol.frame import framed
from tests.broker.network.helpers import (
    NETWORK_LOGGER,
    closing_log,
    echo,
    is_open,
    read_until_closed,
    recv_exact,
    recv_frame,
    request_frame,
    send_request,
    serving,
)

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
    caplog.set_level(logging.INFO, logger=NETWORK_LOGGER)
    with serving(max_request_bytes=1024) as served:
        good = served.connect()
        bad = served.connect()
        send_request(good, request_frame(1))
        assert recv_frame(good) == request_frame(1)
        bad.sendall(struct.pack(">i", size) + b"\x00" * 8)
        assert read_until_closed(bad) == b""
        line = closing_log(caplog, words)
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

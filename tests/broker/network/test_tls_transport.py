"""broker/network/tls_transport.py over a real TCP connection with a real TLS client (Python's ``ssl``): many
small records read by one call, would-block, and the end of the stream by close_notify."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.network.ssl_factory import server_ssl_context
from broker.network.tls_transport import TlsTransport
from lumber.dev.dev_certificates import CertificateAuthority

#: librdkafka's produce request over TLS: one record per buffer, 31 and 222 bytes in turn
PIECES = [b"h" * 31, b"v" * 222] * 39


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[TlsTransport, ssl.SSLSocket]]:
    """A server transport and a connected, handshaken client."""
    ca = CertificateAuthority(tmp_path / "ca")
    server = ca.issue("broker")
    context = server_ssl_context(certfile=str(server.certfile), keyfile=str(server.keyfile))
    listener = socket.create_server(("127.0.0.1", 0))
    client_context = ssl.create_default_context(cafile=str(ca.cafile))
    raw = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    listener.close()
    accepted.setblocking(False)
    transport = TlsTransport(context, accepted)
    raw.setblocking(False)
    client = client_context.wrap_socket(raw, server_hostname="127.0.0.1", do_handshake_on_connect=False)
    for _ in range(1000):
        done = 0
        for step in (client.do_handshake, transport.do_handshake):
            try:
                step()
                done += 1
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                pass
        if done == 2:
            break
        time.sleep(0.001)
    else:
        raise AssertionError("the handshake did not finish")
    client.setblocking(True)
    yield transport, client
    client.close()
    transport.close()


def _read(transport: TlsTransport, buffer: bytearray, at_least: int) -> int:
    """recv_into until ``at_least`` bytes came, within 5 s."""
    view = memoryview(buffer)
    filled = 0
    deadline = time.monotonic() + 5
    while filled < at_least:
        assert time.monotonic() < deadline, f"{filled} of {at_least} bytes within 5 s"
        try:
            n = transport.recv_into(view[filled:])
        except BlockingIOError:
            time.sleep(0.001)
            continue
        assert n > 0, f"end of stream after {filled} of {at_least} bytes"
        filled += n
    return filled


def test_every_small_record_buffered_is_decrypted_by_one_call(
    pair: tuple[TlsTransport, ssl.SSLSocket],
) -> None:
    transport, client = pair
    for piece in PIECES:  # one TLS record each
        client.sendall(piece)
    expected = b"".join(PIECES)
    buffer = bytearray(128 * 1024)
    assert _read(transport, buffer, len(expected)) == len(expected)
    assert bytes(buffer[: len(expected)]) == expected
    with pytest.raises(BlockingIOError):
        transport.recv_into(buffer)  # nothing more
    assert transport.pending() == 0


def test_a_smaller_buffer_leaves_the_rest_pending(pair: tuple[TlsTransport, ssl.SSLSocket]) -> None:
    transport, client = pair
    for piece in PIECES:
        client.sendall(piece)
    expected = b"".join(PIECES)
    buffer = bytearray(1000)
    first = _read(transport, buffer, 1000)
    assert first == 1000
    assert bytes(buffer) == expected[:1000]
    rest = bytearray(len(expected))
    assert _read(transport, rest, len(expected) - 1000) == len(expected) - 1000
    assert bytes(rest[: len(expected) - 1000]) == expected[1000:]


def test_close_notify_ends_the_stream(pair: tuple[TlsTransport, ssl.SSLSocket]) -> None:
    transport, client = pair
    client.sendall(b"last")
    buffer = bytearray(64)
    assert _read(transport, buffer, 4) == 4
    assert bytes(buffer[:4]) == b"last"
    client.setblocking(False)
    with contextlib.suppress(ssl.SSLWantReadError):
        client.unwrap()  # sends close_notify; the transport never answers it
    deadline = time.monotonic() + 5
    while True:
        assert time.monotonic() < deadline, "no end of stream within 5 s of close_notify"
        try:
            assert transport.recv_into(buffer) == 0
            break
        except BlockingIOError:
            time.sleep(0.001)
    assert transport.recv_into(buffer) == 0  # and again

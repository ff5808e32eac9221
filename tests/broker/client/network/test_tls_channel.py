"""The client's TLS channel (broker/client/network/tls_channel.py) against a real TLS peer: Python's own
``SSLSocket`` server on 127.0.0.1 with a certificate of a CA made for the test.

Many small TLS records arriving in one ``recv`` are all handed out (OpenSSL gives one record per read: the
channel must drain every whole record, or the reader waits on a socket that has nothing more); a full buffer
says there may be more without blocking on the socket; the peer's close_notify is the end of the stream
(CPython's read then returns 0 rather than raising: a reader that took it for "no data yet" would spin).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.client.network.tls_channel import TlsChannel
from lumber.dev.dev_certificates import CertificateAuthority


@pytest.fixture
def tls_pair(tmp_path: Path) -> Iterator[Callable[[Callable[[ssl.SSLSocket], None]], TlsChannel]]:
    """Starts a TLS server running ``serve`` on its one connection; returns the client's channel."""
    ca = CertificateAuthority(tmp_path / "ca")
    issued = ca.issue("peer")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(issued.certfile, issued.keyfile)
    client_context = ssl.create_default_context(cafile=str(ca.cafile))
    threads: list[threading.Thread] = []
    sockets: list[socket.socket] = []

    def start(serve: Callable[[ssl.SSLSocket], None]) -> TlsChannel:
        listener = socket.create_server(("127.0.0.1", 0))
        sockets.append(listener)

        def run() -> None:
            conn, _ = listener.accept()
            with server_context.wrap_socket(conn, server_side=True) as tls:
                serve(tls)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        sock = socket.create_connection(listener.getsockname(), timeout=10)
        sockets.append(sock)
        channel = TlsChannel(sock, client_context, "127.0.0.1")
        channel.handshake(10)
        return channel

    yield start
    for thread in threads:
        thread.join(10)
    for sock in sockets:
        sock.close()


def read_all(channel: TlsChannel, sock_ready: Callable[[], bool], size: int, total: int) -> bytes:
    """Read as the connection's reader does: select unless the channel has more; stop at ``total``."""
    out = bytearray()
    buffer = bytearray(size)
    while len(out) < total:
        if not channel.pending() and not sock_ready():
            continue
        got = channel.recv_into(memoryview(buffer))
        if got is None:
            continue
        if got == 0:
            break
        out += buffer[:got]
    return bytes(out)


def test_many_small_records_in_one_receive_are_all_handed_out(
    tls_pair: Callable[[Callable[[ssl.SSLSocket], None]], TlsChannel],
) -> None:
    chunks = [bytes([i % 251]) * 7 for i in range(500)]  # 500 TLS records of 7 bytes

    def serve(tls: ssl.SSLSocket) -> None:
        for chunk in chunks:
            tls.sendall(chunk)
        tls.recv(1)  # until the client is done

    channel = tls_pair(serve)
    selector = selectors.DefaultSelector()
    selector.register(channel._sock, selectors.EVENT_READ)

    def ready() -> bool:
        return bool(selector.select(5))

    received = read_all(channel, ready, 64 * 1024, 3500)
    assert received == b"".join(chunks)
    channel.sendall(b"x")  # written through the channel: the server, waiting for it, ends
    selector.close()


def test_a_full_buffer_says_more_and_the_peers_close_ends_the_stream(
    tls_pair: Callable[[Callable[[ssl.SSLSocket], None]], TlsChannel],
) -> None:
    def serve(tls: ssl.SSLSocket) -> None:
        tls.sendall(b"0123456789" * 3)
        with contextlib.suppress(OSError):  # the client closes without its own close_notify
            tls.unwrap()  # close_notify

    channel = tls_pair(serve)
    selector = selectors.DefaultSelector()
    selector.register(channel._sock, selectors.EVENT_READ)
    buffer = bytearray(10)
    seen: list[bytes] = []
    fills = 0
    while True:
        if not channel.pending():
            assert selector.select(5), f"the channel waits on the socket after {seen}"
        got = channel.recv_into(memoryview(buffer))
        if got == 0:
            break
        if got:
            seen.append(bytes(buffer[:got]))
            fills += got == len(buffer) and channel.pending()
    assert b"".join(seen) == b"0123456789" * 3
    assert fills >= 1  # a full buffer said there may be more
    selector.close()
    channel._sock.close()

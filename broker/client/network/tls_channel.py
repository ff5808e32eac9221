"""TLS on a client's connection: an :class:`ssl.SSLObject` over memory buffers, on a connected socket.

A :class:`~broker.client.network.connection.BrokerConnection` writes from any thread (under its send lock)
while one reader thread reads. OpenSSL forbids using one ``SSL`` from two threads at once, and an
``SSLSocket`` would do just that, so the connection's bytes go through :class:`TlsChannel` instead:

* ``_ssl_lock`` guards the ``SSLObject`` and its two buffers; it is held only while OpenSSL works on memory,
  never during a socket call;
* ``_write_lock`` serialises "take the encrypted bytes out of the outgoing buffer and send them", so that
  encrypted bytes reach the socket in the order OpenSSL made them;
* :meth:`TlsChannel.recv_into` (the reader thread) feeds what the socket has to OpenSSL and hands out the
  plaintext. A read may make OpenSSL write (a TLS 1.3 key update): the reader sends those bytes only if no
  writer is sending (it never waits for the write lock, which a writer stuck on a full socket may hold);
  otherwise the next write takes them along;
* :meth:`TlsChannel.pending` says a read may give plaintext without the socket (the last one filled the
  caller's buffer): the reader must not wait on the socket then.

The handshake (:meth:`TlsChannel.handshake`) runs before the reader starts, in the connecting thread, bounded
by the connect timeout. Errors are the ``ssl`` module's (:class:`ssl.SSLError`) and the socket's
(:class:`OSError`); the connection words them.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time

_RECV_BYTES = 256 * 1024


class TlsChannel:
    """TLS over ``sock`` (connected, blocking with a timeout) for one connection (see the module)."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, server_hostname: str) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_hostname=server_hostname)
        self._ssl_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._more = False

    def handshake(self, timeout_s: float) -> None:
        """Complete the TLS handshake within ``timeout_s``; raises :class:`ssl.SSLError`,
        :class:`TimeoutError` or :class:`OSError` (``ConnectionError`` when the broker closes)."""
        deadline = time.monotonic() + timeout_s
        sock = self._sock
        previous = sock.gettimeout()
        try:
            while True:
                try:
                    self._ssl.do_handshake()
                except ssl.SSLWantReadError:
                    self._flush_outgoing()
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"no TLS handshake within {timeout_s:g} s") from None
                    sock.settimeout(remaining)
                    data = sock.recv(_RECV_BYTES)
                    if not data:
                        raise ConnectionError(
                            "the broker closed the connection during the TLS handshake"
                        ) from None
                    self._incoming.write(data)
                    continue
                self._flush_outgoing()
                return
        finally:
            sock.settimeout(previous)

    def _flush_outgoing(self) -> None:
        data = self._outgoing.read()
        if data:
            self._sock.sendall(data)

    def sendall(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt ``data`` and send it all (raises :class:`OSError`, :class:`ssl.SSLError`)."""
        with self._write_lock:
            with self._ssl_lock:
                self._ssl.write(data)
                encrypted = self._outgoing.read()
            self._sock.sendall(encrypted)

    def pending(self) -> bool:
        """Whether plaintext may be there without reading the socket."""
        return self._more

    def recv_into(self, view: memoryview) -> int | None:
        """Plaintext into ``view``: its length, 0 at the end of the stream, ``None`` when the bytes received
        hold no whole TLS record yet. Reads the socket only when OpenSSL has nothing and the caller selected
        the socket readable (not when it came because :meth:`pending` said so)."""
        selected = not self._more  # with pending plaintext the caller did not select: never block here
        got = self._read(view)
        if got is not None or not selected:
            return got
        data = self._sock.recv(_RECV_BYTES)
        if not data:
            return 0
        with self._ssl_lock:
            self._incoming.write(data)
        got = self._read(view)
        if self._outgoing.pending and self._write_lock.acquire(blocking=False):
            try:
                with self._ssl_lock:
                    encrypted = self._outgoing.read()
                self._sock.sendall(encrypted)
            finally:
                self._write_lock.release()
        return got

    def _read(self, view: memoryview) -> int | None:
        """Decrypt into ``view`` every whole record there is (OpenSSL hands out one record per read)."""
        total, size, closed = 0, len(view), False
        with self._ssl_lock:
            while total < size:
                try:
                    got: int = self._ssl.read(size - total, view[total:])  # type: ignore[arg-type,assignment]
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    closed = True  # the broker's close_notify: 0 now, or from the next call
                    break
                if got == 0:  # what CPython's read gives once the close_notify was received
                    closed = True
                    break
                total += got
            self._more = total == size
        if total:
            return total
        return 0 if closed else None

"""One TLS connection's bytes, over a non-blocking socket, through OpenSSL memory buffers (Kafka's
SslTransportLayer over an SSLEngine).

A processor reads and writes a TLS connection through a :class:`TlsTransport` as it does a plain socket
(``recv_into``, ``recv``, ``send``, ``fileno``, ``close``), and drives its handshake with
:meth:`TlsTransport.do_handshake`. Underneath, an :class:`ssl.SSLObject` works on two
:class:`ssl.MemoryBIO`:

* **reading**: one ``recv`` of up to :data:`RAW_READ_BYTES` from the socket feeds the incoming buffer, and
  every complete TLS record in it is decrypted into the caller's buffer in the same call, without a syscall
  per record. (``SSLSocket`` hands out one record per call, two syscalls each: a client that writes many
  small records, as librdkafka does, cost the broker a turn of its read loop per record.)
  :meth:`TlsTransport.pending` says whether bytes are buffered here, which ``select`` cannot see;
* **writing**: :meth:`TlsTransport.send` encrypts into the outgoing buffer and writes what the socket takes;
  what it does not take stays in :attr:`TlsTransport.unsent` and goes first on the next call. Callers must
  call :meth:`TlsTransport.flush` until it returns True before they consider a response sent.

Would-block is :class:`BlockingIOError` both ways, end of stream a read of 0 bytes (a close_notify too), a
TLS error :class:`ssl.SSLError`. Not thread-safe: a transport belongs to its processor's thread.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Callable
from typing import Any, cast

#: The most raw bytes one ``recv`` takes from the socket (several TLS records).
RAW_READ_BYTES = 256 * 1024


class TlsTransport:
    """A TLS connection over ``sock`` (see the module docstring)."""

    __slots__ = ("_incoming", "_outgoing", "_read", "_sock", "_ssl", "unsent")

    def __init__(self, context: ssl.SSLContext, sock: socket.socket) -> None:
        self._sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        #: ``read(n, buffer)`` of the C object under the SSLObject (``_sslobj``, there since Python 3.5):
        #: ``SSLObject.read`` is a Python method around it, one frame more per TLS record, and librdkafka
        #: writes a produce request as dozens of records (see read_records). The wrapper where it is absent.
        self._read = cast(Callable[[int, memoryview], int], getattr(self._ssl, "_sslobj", self._ssl).read)
        #: Encrypted bytes the socket has not taken yet.
        self.unsent = b""

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()

    # -- handshake -------------------------------------------------------------------------------------

    def do_handshake(self) -> None:
        """One step of the handshake: raises :class:`ssl.SSLWantReadError` (wait for the socket to be
        readable), :class:`ssl.SSLWantWriteError` (wait for it to be writable), an SSL or OS error when it
        failed; returns once done."""
        if not self.flush():
            raise ssl.SSLWantWriteError("the handshake's bytes wait for the socket")
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                if not self.flush():
                    raise ssl.SSLWantWriteError("the handshake's bytes wait for the socket") from None
                try:
                    more = self._fill()
                except BlockingIOError:
                    raise ssl.SSLWantReadError("the handshake waits for the client") from None
                if not more:
                    raise ssl.SSLEOFError("the client closed the connection during the handshake") from None
                continue
            except ssl.SSLError:
                self.flush()  # the alert, so that the client learns why
                raise
            if not self.flush():
                raise ssl.SSLWantWriteError("the handshake's last bytes wait for the socket")
            return

    def getpeercert(self) -> dict[str, Any] | None:
        return self._ssl.getpeercert()

    def version(self) -> str | None:
        return self._ssl.version()

    def cipher(self) -> tuple[str, str, int] | None:
        return self._ssl.cipher()

    # -- reading ---------------------------------------------------------------------------------------

    def pending(self) -> int:
        """Bytes buffered here (decrypted, or raw not decrypted yet) that the socket will not announce."""
        return self._ssl.pending() + self._incoming.pending

    def recv_into(self, buffer: Any, nbytes: int = 0) -> int:
        """Decrypted bytes into ``buffer`` (up to ``nbytes``, else its size): every whole record buffered,
        after at most one ``recv`` from the socket; 0 at the end of the stream."""
        view = memoryview(buffer).cast("B")
        wanted = nbytes or view.nbytes
        filled = self._read_records(view, wanted)
        if filled:
            return max(filled, 0)  # -1: close_notify
        if not self._fill():
            return 0
        filled = self._read_records(view, wanted)
        if filled:
            return max(filled, 0)
        if self._incoming.eof:
            return 0
        raise BlockingIOError("no whole TLS record yet")

    def _read_records(self, view: memoryview, wanted: int) -> int:
        """Decrypt every whole record buffered into ``view`` (up to ``wanted`` bytes); the bytes written, or
        -1 if nothing was and the client's close_notify came (the end of the stream).

        One ``SSL_read`` a TLS record, however small: librdkafka writes each buffer of a request as a record
        of its own (a produce request of 50 values of 200 bytes is ~78 records of 31 and 222 bytes), so this
        loop runs per record and holds nothing but the call (~1.1 us a small record, most of it OpenSSL's)."""
        read = self._read
        filled = 0
        try:
            while filled < wanted:
                n = read(wanted - filled, view[filled:])
                if n == 0:  # close_notify (the C read answers it with 0, SSLObject.read too)
                    return filled or -1
                filled += n
        except ssl.SSLWantReadError:
            pass  # no whole record left
        except ssl.SSLZeroReturnError:
            return filled or -1  # close_notify: the end of the stream
        return filled

    def recv(self, size: int) -> bytes:
        buffer = bytearray(size)
        n = self.recv_into(buffer)
        return bytes(buffer[:n])

    def _fill(self) -> bool:
        """One ``recv`` into the incoming buffer; False at the end of the stream (raises BlockingIOError
        when the socket has nothing)."""
        data = self._sock.recv(RAW_READ_BYTES)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True

    # -- writing ---------------------------------------------------------------------------------------

    def send(self, data: Any) -> int:
        """Encrypt ``data`` and write what the socket takes; returns ``len(data)`` (encrypted bytes the socket
        did not take wait in :attr:`unsent`). Raises BlockingIOError, taking nothing, while earlier bytes
        still wait."""
        if not self.flush():
            raise BlockingIOError("earlier TLS bytes wait for the socket")
        n = self._ssl.write(data)
        self.flush()
        return n

    def flush(self) -> bool:
        """Write the waiting encrypted bytes; whether none wait any more."""
        if self._outgoing.pending:
            self.unsent += self._outgoing.read()
        while self.unsent:
            try:
                n = self._sock.send(self.unsent)
            except BlockingIOError:
                return False
            self.unsent = self.unsent[n:]
        return True

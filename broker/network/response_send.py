"""Sending one response's chunks, in order, on a non-blocking socket (Kafka's Send / MultiRecordsSend).

A response is a sequence of chunks that together are its bytes on the wire, size prefix included: byte
strings, and file regions (:class:`broker.log.file_region.FileRegion`) whose bytes go from the page cache
to the socket with ``os.sendfile`` and are never read into memory. Consecutive byte strings go out with one
``sendmsg`` (gather write); a region is sent by calling its ``transfer_to`` until ``size_bytes`` are out.

**TLS** (a connection of an SSL or SASL_SSL listener): ``sendfile`` would bypass the encryption, so the
bytes go through user space: a region is read into memory (``read_bytes``, one region at a time, when the
send reaches it) and every chunk is encrypted by the connection's
:class:`~broker.network.tls_transport.TlsTransport` in pieces of at most :data:`TLS_WRITE_BYTES`; the send
is complete only once the transport has written its last encrypted bytes (``flush``).

Invariants:

* bytes leave in chunk order, each chunk completely before the next one starts;
* the send keeps its regions (and so their open file descriptors) alive until they are sent, then drops
  every chunk it no longer needs;
* :meth:`ResponseSend.write_to` never blocks: it writes what the socket takes and returns; the caller
  selects the socket for writing and calls again until :attr:`ResponseSend.completed`.

Thread safety: none; a send belongs to one connection, used by its processor thread only.
"""

from __future__ import annotations

import socket
import ssl
from typing import Protocol, cast, runtime_checkable

from broker.errors import BrokerError
from broker.network.errors import ResponseSendError
from broker.protocol.region import Region

#: At most this many buffers go into one ``sendmsg`` (Linux's IOV_MAX is 1024).
_MAX_GATHER_BUFFERS = 1024
#: The largest piece one ``SSLSocket.send`` is given (16 TLS records).
TLS_WRITE_BYTES = 256 * 1024


@runtime_checkable
class TransferableRegion(Protocol):
    """A region the server can send: :class:`broker.log.file_region.FileRegion` is one."""

    @property
    def size_bytes(self) -> int: ...

    def transfer_to(self, out_fd: int, sent_bytes: int) -> int:
        """One non-blocking ``os.sendfile`` of the region after ``sent_bytes``; returns the bytes sent
        (0 only when the file ends early), raises :class:`BlockingIOError` if the socket would block."""
        ...

    def read_bytes(self) -> bytes:
        """The region's bytes, read into memory (a TLS connection's send)."""
        ...


#: The types found to be :class:`TransferableRegion`: ``isinstance`` against a runtime-checkable protocol
#: looks up each of its members on every call (several microseconds per Fetch response), a set lookup does
#: not. The protocol's members are the class's (methods and a property), so one instance answers for its type.
_REGION_TYPES: set[type] = set()


def _as_region(chunk: object) -> TransferableRegion | None:
    """``chunk`` if it is a :class:`TransferableRegion`, else ``None``."""
    if type(chunk) in _REGION_TYPES:
        return cast(TransferableRegion, chunk)
    if isinstance(chunk, TransferableRegion):
        _REGION_TYPES.add(type(chunk))
        return chunk
    return None


class ResponseSend:
    """The chunks of one response still to send, and how far the current one has gone."""

    __slots__ = (
        "_index",
        "_offset",
        "_parts",
        "_peer",
        "_tls",
        "_unflushed",
        "responses",
        "size_bytes",
        "written_bytes",
    )

    def __init__(self, peer: str, chunks: tuple[bytes | Region, ...], *, tls: bool = False) -> None:
        """Raises :class:`~broker.network.errors.ResponseSendError` for a chunk that cannot be sent."""
        self._peer = peer
        parts: list[memoryview | TransferableRegion] = []
        size = 0
        for position, chunk in enumerate(chunks):
            if isinstance(chunk, bytes | bytearray | memoryview):
                if len(chunk):
                    view = memoryview(chunk).cast("B")
                    parts.append(view)
                    size += view.nbytes
            elif (region := _as_region(chunk)) is not None:
                if region.size_bytes < 0:
                    raise ResponseSendError(
                        peer, f"response chunk {position} is a region of {region.size_bytes} bytes"
                    )
                if region.size_bytes:
                    parts.append(region)
                    size += region.size_bytes
            else:
                raise ResponseSendError(
                    peer,
                    f"response chunk {position} is a {type(chunk).__name__}: neither bytes nor a region "
                    "with transfer_to",
                )
        self._parts = parts
        self._tls = tls
        #: A TLS send whose last encrypted bytes still wait in the transport (not completed until they left).
        self._unflushed = False
        self._index = 0
        self._offset = 0
        #: The response's size on the wire.
        self.size_bytes = size
        self.written_bytes = 0
        #: How many responses (with bytes) the chunks are: several answered together go as one send.
        self.responses = 1

    @property
    def completed(self) -> bool:
        return self._index >= len(self._parts) and not self._unflushed

    def write_to(self, sock: socket.socket) -> int:
        """Send as much as ``sock`` takes now; returns the bytes written by this call.

        Raises :class:`~broker.network.errors.ResponseSendError` if a region's file ends early or cannot
        be read, and the socket's :class:`OSError` (other than would-block) as it comes.
        """
        if self._tls:
            return self._write_tls(sock)
        parts = self._parts
        count = len(parts)
        written = 0
        try:
            while self._index < count:
                part = parts[self._index]
                if isinstance(part, memoryview):
                    first = part[self._offset :] if self._offset else part
                    buffers = [first]
                    wanted = first.nbytes
                    end = self._index + 1
                    limit = min(count, self._index + _MAX_GATHER_BUFFERS)
                    while end < limit:
                        following = parts[end]
                        if not isinstance(following, memoryview):
                            break
                        buffers.append(following)
                        wanted += following.nbytes
                        end += 1
                    n = sock.send(first) if len(buffers) == 1 else sock.sendmsg(buffers)
                    written += n
                    self._advance(n)
                    if n < wanted:
                        break  # the socket buffer is full: wait until it is writable
                else:
                    n = self._transfer(part, sock)
                    written += n
                    self._offset += n
                    if self._offset >= part.size_bytes:
                        parts[self._index] = _SENT
                        self._index += 1
                        self._offset = 0
        except BlockingIOError:
            pass
        finally:
            self.written_bytes += written
        if self._index >= count:
            self._parts = []
        return written

    def _write_tls(self, sock: socket.socket) -> int:
        """:meth:`write_to` on a TLS socket: every byte through ``SSLSocket.send`` (see the module)."""
        parts = self._parts
        count = len(parts)
        written = 0
        try:
            while self._index < count:
                part = parts[self._index]
                if not isinstance(part, memoryview):
                    try:
                        data = part.read_bytes()
                    except BrokerError as exc:
                        raise ResponseSendError(
                            self._peer, f"cannot read file region {part!r}: {exc}"
                        ) from exc
                    if len(data) != part.size_bytes:
                        raise ResponseSendError(
                            self._peer,
                            f"file region {part!r} gave {len(data)} of its {part.size_bytes} bytes",
                        )
                    part = parts[self._index] = memoryview(data)
                piece = part[self._offset : self._offset + TLS_WRITE_BYTES]
                n = sock.send(piece)
                written += n
                self._offset += n
                if self._offset >= part.nbytes:
                    parts[self._index] = _SENT
                    self._index += 1
                    self._offset = 0
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            pass
        finally:
            self.written_bytes += written
        if self._index >= count:
            self._parts = []
            self._unflushed = not sock.flush()  # type: ignore[attr-defined]  # a TlsTransport
        return written

    def _transfer(self, region: TransferableRegion, sock: socket.socket) -> int:
        try:
            n = region.transfer_to(sock.fileno(), self._offset)
        except BlockingIOError:
            raise
        except BrokerError as exc:
            raise ResponseSendError(self._peer, f"cannot send file region {region!r}: {exc}") from exc
        if n <= 0:
            raise ResponseSendError(
                self._peer,
                f"file region {region!r} ended after {self._offset} of its {region.size_bytes} bytes",
            )
        return n

    def _advance(self, n: int) -> None:
        """Move past ``n`` bytes of consecutive byte chunks, dropping the chunks fully sent."""
        parts = self._parts
        while n > 0:
            remaining = _part_bytes(parts[self._index]) - self._offset
            if n < remaining:
                self._offset += n
                return
            n -= remaining
            parts[self._index] = _SENT
            self._index += 1
            self._offset = 0


def _part_bytes(part: memoryview | TransferableRegion) -> int:
    return part.nbytes if isinstance(part, memoryview) else part.size_bytes


#: What a fully sent chunk is replaced by, so that its memory (or file descriptor) can go.
_SENT = memoryview(b"")

"""Reading one size-prefixed request off a non-blocking socket (Kafka's NetworkReceive).

Wire format: an int32 big-endian size N (:data:`broker.protocol.frame.SIZE_PREFIX`), then N bytes, the
*frame*. A receive reads the 4 prefix bytes, checks N, then reads exactly N bytes, and never a byte more: the
next request stays in the socket, so muting a connection (not selecting it for reading) really stops it.

Invariants:

* N is checked the moment the prefix is complete, before any of the frame is buffered:
  ``MIN_REQUEST_BYTES <= N <= max_bytes``, else :class:`~broker.network.errors.InvalidRequestSizeError`.
* Memory follows the bytes that arrived, not the bytes announced: a frame up to
  :data:`PREALLOCATE_MAX_BYTES` is read into a buffer of its exact size; a larger one is read in pieces of
  at most that size and joined once complete. So a peer announcing a huge (but allowed) request and
  sending nothing costs nothing.
* :meth:`NetworkReceive.read_from` returns the frame as ``bytes`` when its last byte is read, then the
  receive is ready for the next prefix.

Thread safety: none; a receive belongs to one connection, used by its processor thread only.
"""

from __future__ import annotations

import socket

from broker.network.errors import InvalidRequestSizeError, PeerClosedError
from broker.protocol.errors import FrameSizeError
from broker.protocol.frame import SIZE_PREFIX_BYTES, frame_size

#: The smallest request: api_key int16, api_version int16, correlation_id int32 (header v0).
MIN_REQUEST_BYTES = 8
#: Frames up to this size are read into one buffer allocated when the prefix is read; larger ones in
#: pieces of this size, as they arrive.
PREALLOCATE_MAX_BYTES = 1024 * 1024


class NetworkReceive:
    """The receive state of one connection: prefix bytes so far, then the frame bytes so far."""

    __slots__ = (
        "_buffer",
        "_max_bytes",
        "_peer",
        "_pieces",
        "_prefix",
        "_prefix_read",
        "_prefix_view",
        "_read_bytes",
        "_size_bytes",
        "_view",
    )

    def __init__(self, peer: str, max_bytes: int) -> None:
        self._peer = peer
        self._max_bytes = max_bytes
        self._prefix = bytearray(SIZE_PREFIX_BYTES)
        self._prefix_view = memoryview(self._prefix)
        self._prefix_read = 0
        #: -1 while reading the prefix, else the frame size.
        self._size_bytes = -1
        self._read_bytes = 0
        self._buffer: bytearray | None = None
        self._view: memoryview | None = None
        self._pieces: list[bytes] = []

    @property
    def in_progress(self) -> bool:
        """Whether part of a request (prefix or frame) has been read."""
        return self._prefix_read > 0

    def read_from(self, sock: socket.socket) -> bytes | None:
        """Read what ``sock`` has of the current request; the frame once complete, else ``None``.

        Raises :class:`BlockingIOError` when the socket has nothing more now (the bytes read so far are
        kept), :class:`~broker.network.errors.PeerClosedError` on end of stream, and
        :class:`~broker.network.errors.InvalidRequestSizeError` for a size prefix out of bounds; other
        :class:`OSError` from the socket pass through.
        """
        if self._size_bytes < 0:
            n = sock.recv_into(self._prefix_view[self._prefix_read :])
            if n == 0:
                raise PeerClosedError(self._peer)
            self._prefix_read += n
            if self._prefix_read < SIZE_PREFIX_BYTES:
                return None
            self._start_frame()
        view = self._view
        if view is not None:
            return self._read_preallocated(sock, view)
        return self._read_pieces(sock)

    def _start_frame(self) -> None:
        try:
            size = frame_size(self._prefix, self._max_bytes)
        except FrameSizeError as exc:
            raise InvalidRequestSizeError(
                self._peer, exc.size_bytes, MIN_REQUEST_BYTES, self._max_bytes
            ) from None
        if size < MIN_REQUEST_BYTES:
            raise InvalidRequestSizeError(self._peer, size, MIN_REQUEST_BYTES, self._max_bytes)
        self._size_bytes = size
        self._read_bytes = 0
        if size <= PREALLOCATE_MAX_BYTES:
            self._buffer = bytearray(size)
            self._view = memoryview(self._buffer)

    def _read_preallocated(self, sock: socket.socket, view: memoryview) -> bytes | None:
        n = sock.recv_into(view[self._read_bytes :])
        if n == 0:
            raise PeerClosedError(self._peer)
        self._read_bytes += n
        if self._read_bytes < self._size_bytes:
            return None
        frame = bytes(view)
        self._reset()
        return frame

    def _read_pieces(self, sock: socket.socket) -> bytes | None:
        piece = sock.recv(min(self._size_bytes - self._read_bytes, PREALLOCATE_MAX_BYTES))
        if not piece:
            raise PeerClosedError(self._peer)
        self._pieces.append(piece)
        self._read_bytes += len(piece)
        if self._read_bytes < self._size_bytes:
            return None
        frame = b"".join(self._pieces)
        self._reset()
        return frame

    def _reset(self) -> None:
        self._prefix_read = 0
        self._size_bytes = -1
        self._read_bytes = 0
        if self._view is not None:
            self._view.release()
        self._view = None
        self._buffer = None
        self._pieces = []

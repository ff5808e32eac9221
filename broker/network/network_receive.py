"""Reading size-prefixed requests off a non-blocking socket (Kafka's NetworkReceive), with bounded read-ahead.

Wire format: an int32 big-endian size N (:data:`broker.protocol.frame.SIZE_PREFIX`), then N bytes, the
*frame*. A receive reads what the socket has, up to :data:`READ_AHEAD_BYTES` at a time, into one buffer,
and cuts frames out of it; a client that pipelines small requests (a producer with ``acks=0``) gets many
of them read by one ``recv``, not two syscalls per request.

Invariants:

* N is checked the moment its 4 prefix bytes are buffered, before a frame is cut or a frame buffer is
  allocated: ``MIN_REQUEST_BYTES <= N <= max_bytes``, else
  :class:`~broker.network.errors.InvalidRequestSizeError`.
* Memory follows the bytes that arrived, not the bytes announced. Read-ahead is bounded: at most
  :data:`READ_AHEAD_BYTES` are buffered beyond the frame being returned, so muting a connection (not
  selecting it for reading, not calling :meth:`NetworkReceive.read_from`) bounds what it holds, and the
  rest stays in the socket (TCP pushes back on the peer). A frame larger than the read-ahead buffer is
  read into a buffer of its exact size when that is at most :data:`PREALLOCATE_MAX_BYTES`, else in pieces
  of at most that size joined once complete; a peer announcing a huge (but allowed) request and sending
  nothing costs nothing.
* :meth:`NetworkReceive.read_from` returns one frame as ``bytes`` per call, in order; frames already
  buffered are returned without touching the socket (:attr:`NetworkReceive.has_frame` says whether one
  is), which the processor must remember because the socket will not select readable for them.

Thread safety: none; a receive belongs to one connection, used by its processor thread only.
"""

from __future__ import annotations

import socket

from broker.network.errors import InvalidRequestSizeError, PeerClosedError
from broker.protocol.frame import SIZE_PREFIX, SIZE_PREFIX_BYTES

#: The smallest request: api_key int16, api_version int16, correlation_id int32 (header v0).
MIN_REQUEST_BYTES = 8
#: The read-ahead buffer: what one ``recv`` may take from the socket, and so the most buffered beyond the
#: frame being returned.
READ_AHEAD_BYTES = 128 * 1024
#: Frames larger than the read-ahead buffer and up to this size are read into one buffer allocated when
#: the prefix is read; larger ones in pieces of this size, as they arrive.
PREALLOCATE_MAX_BYTES = 1024 * 1024

_unpack_size = SIZE_PREFIX.unpack_from


class NetworkReceive:
    """The receive state of one connection: the read-ahead buffer, and a large frame being assembled."""

    __slots__ = (
        "_buffer",
        "_end",
        "_large_read",
        "_large_size",
        "_large_view",
        "_max_bytes",
        "_peer",
        "_pieces",
        "_pushed_back",
        "_start",
        "_view",
    )

    def __init__(self, peer: str, max_bytes: int) -> None:
        self._peer = peer
        self._max_bytes = max_bytes
        #: The read-ahead buffer (allocated by the first read); bytes ``[_start, _end)`` are unconsumed.
        self._buffer: bytearray | None = None
        self._view: memoryview | None = None
        self._start = 0
        self._end = 0
        #: -1, or the size of a frame too large for the read-ahead buffer, being assembled.
        self._large_size = -1
        self._large_read = 0
        self._large_view: memoryview | None = None
        self._pieces: list[bytes] = []
        #: Frames handed back by :meth:`push_back`, next first (served before the buffer).
        self._pushed_back: list[bytes] = []

    @property
    def max_bytes(self) -> int:
        """The largest frame accepted (a SASL connection's is raised once it has authenticated)."""
        return self._max_bytes

    @max_bytes.setter
    def max_bytes(self, value: int) -> None:
        self._max_bytes = value

    @property
    def in_progress(self) -> bool:
        """Whether part of a request (or any buffered byte) has been read."""
        return self._end > self._start or self._large_size >= 0 or bool(self._pushed_back)

    @property
    def has_frame(self) -> bool:
        """Whether a complete frame is buffered: the next :meth:`read_from` returns it without a syscall."""
        if self._pushed_back:
            return True
        available = self._end - self._start
        if self._large_size >= 0 or available < SIZE_PREFIX_BYTES:
            return False
        assert self._buffer is not None
        (size,) = _unpack_size(self._buffer, self._start)
        # an out-of-bounds size counts: the next read raises for it
        out_of_bounds = size < MIN_REQUEST_BYTES or size > self._max_bytes
        return bool(out_of_bounds or available - SIZE_PREFIX_BYTES >= size)

    def next_api_key(self) -> int:
        """The api key (first int16) of the buffered frame :meth:`read_from` returns next; -1 if there is
        no complete frame buffered (or its size is out of bounds: reading it raises)."""
        if self._pushed_back:
            frame = self._pushed_back[-1]
            return (frame[0] << 8) | frame[1]
        if not self.has_frame:
            return -1
        assert self._buffer is not None
        (size,) = _unpack_size(self._buffer, self._start)
        if size < MIN_REQUEST_BYTES or size > self._max_bytes:
            return -1
        at = self._start + SIZE_PREFIX_BYTES
        return (self._buffer[at] << 8) | self._buffer[at + 1]

    def push_back(self, frames: list[bytes]) -> None:
        """Return ``frames`` (read from this receive, in order) to be read again, before anything else."""
        self._pushed_back.extend(reversed(frames))

    def read_from(self, sock: socket.socket) -> bytes | None:
        """The next frame: a buffered one, else what ``sock`` has; ``None`` if no frame is complete yet.

        Reads the socket at most once per call. Raises :class:`BlockingIOError` when the socket has
        nothing now (the bytes read so far are kept), :class:`~broker.network.errors.PeerClosedError` on
        end of stream, and :class:`~broker.network.errors.InvalidRequestSizeError` for a size prefix out
        of bounds; other :class:`OSError` from the socket pass through.
        """
        if self._pushed_back:
            return self._pushed_back.pop()
        if self._large_size >= 0:
            return self._read_large(sock)
        frame = self._cut()
        if frame is not None or self._large_size >= 0:
            return frame
        view = self._view
        if view is None:
            self._buffer = bytearray(READ_AHEAD_BYTES)
            view = self._view = memoryview(self._buffer)
        elif self._start:
            # move the partial frame to the front, so that a recv can complete it
            kept = self._end - self._start
            view[:kept] = view[self._start : self._end]
            self._start, self._end = 0, kept
        n = sock.recv_into(view[self._end :])
        if n == 0:
            raise PeerClosedError(self._peer)
        self._end += n
        return self._cut()

    def _cut(self) -> bytes | None:
        """The buffered frame at ``_start``, if complete; switches to large-frame mode for a big one."""
        start = self._start
        available = self._end - start
        if available < SIZE_PREFIX_BYTES:
            return None
        buffer = self._buffer
        assert buffer is not None
        (size,) = _unpack_size(buffer, start)
        if size < MIN_REQUEST_BYTES or size > self._max_bytes:
            raise InvalidRequestSizeError(self._peer, size, MIN_REQUEST_BYTES, self._max_bytes)
        begin = start + SIZE_PREFIX_BYTES
        if available - SIZE_PREFIX_BYTES >= size:
            end = begin + size
            frame = bytes(buffer[begin:end])
            if end == self._end:
                self._start = self._end = 0
            else:
                self._start = end
            return frame
        if size + SIZE_PREFIX_BYTES > READ_AHEAD_BYTES:
            self._start_large(size, bytes(buffer[begin : self._end]))
        return None

    def _start_large(self, size: int, head: bytes) -> None:
        """Assemble a frame of ``size`` bytes outside the read-ahead buffer, starting with ``head``."""
        self._large_size = size
        self._large_read = len(head)
        self._start = self._end = 0
        if size <= PREALLOCATE_MAX_BYTES:
            frame = bytearray(size)
            frame[: len(head)] = head
            self._large_view = memoryview(frame)
        else:
            self._pieces = [head] if head else []

    def _read_large(self, sock: socket.socket) -> bytes | None:
        view = self._large_view
        if view is not None:
            n = sock.recv_into(view[self._large_read :])
            if n == 0:
                raise PeerClosedError(self._peer)
            self._large_read += n
            if self._large_read < self._large_size:
                return None
            frame = bytes(view)
            view.release()
            self._large_view = None
        else:
            piece = sock.recv(min(self._large_size - self._large_read, PREALLOCATE_MAX_BYTES))
            if not piece:
                raise PeerClosedError(self._peer)
            self._pieces.append(piece)
            self._large_read += len(piece)
            if self._large_read < self._large_size:
                return None
            frame = b"".join(self._pieces)
            self._pieces = []
        self._large_size = -1
        self._large_read = 0
        return frame
